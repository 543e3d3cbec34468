//! The local model's numeric kernels, on plain `f32` and `i8` slices: the Q8_0 matrix product
//! ([`q8`]) and the per-row operations of a llama-family transformer ([`ops`]).
//!
//! Why a crate of its own: these loops are the whole cost of running a model on the CPU and
//! are ~50× slower unoptimised, so the workspace builds this crate at `opt-level = 3` even in
//! the dev profile, while the server around it stays quick to compile.
//!
//! The invariant every kernel keeps: **each output row depends only on its own input row,
//! through the same floating-point operations in the same order, whatever the number of rows
//! and whichever instruction set runs it** (AVX-512 VNNI, AVX2 or portable code). Speculative
//! decoding verifies several tokens in one pass and must choose exactly the tokens one-at-a-time
//! decoding would; that holds only if a row's logits are bit-identical either way.

pub mod ops;
pub mod q8;

/// Runs `work(0..count)`, spread over rayon's threads when there is more than one (on one
/// thread, handing work to the pool would only add a hand-over and a wake-up per call).
pub(crate) fn for_each_index(count: usize, work: impl Fn(usize) + Sync + Send) {
    use rayon::prelude::*;
    if rayon::current_num_threads() <= 1 || count <= 1 {
        (0..count).for_each(work);
    } else {
        (0..count).into_par_iter().for_each(work);
    }
}

/// `x` rounded to the nearest integer, ties to even, for `|x| < 2²²`: adding and removing
/// 1.5 · 2²³ drops the fraction. Unlike `f32::round` (a library call per value) it vectorises.
#[inline(always)]
pub(crate) fn round_to_even(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0;
    (x + SHIFT) - SHIFT
}
