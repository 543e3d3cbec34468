//! The local model's numeric kernels, on plain `f32` and `i8` slices: the Q8_0 matrix product
//! ([`q8`]), the per-row operations of a llama-family transformer ([`ops`]) and the choice of
//! the next token from a row of logits ([`choice`]).
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

/// Runs `work` on one of rayon's threads, so the kernels it calls share their work from there:
/// the calling thread then works alongside the others instead of handing every product over
/// and sleeping until it is done. A forward pass makes a few hundred parallel calls; from
/// outside the pool each one costs the caller a wake-up.
pub fn on_workers<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    let mut result = None;
    rayon::scope(|_| result = Some(work()));
    result.expect("the scope ran its closure")
}

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

/// The vector width the float loops are compiled for. Their results are the same on every
/// width (fused multiply-adds are exact to one rounding everywhere, `f32::mul_add`, Rust never
/// fuses a multiply and an add on its own, and the partial sums are the same), only the speed
/// differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    Avx512,
    Avx2,
    Portable,
}

pub(crate) fn vector_width() -> Width {
    #[cfg(target_arch = "x86_64")]
    {
        static WIDTH: std::sync::OnceLock<Width> = std::sync::OnceLock::new();
        *WIDTH.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
            {
                Width::Avx512
            } else if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                Width::Avx2
            } else {
                Width::Portable
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    Width::Portable
}

/// Defines a function whose body is compiled for each vector width and run on the widest
/// the CPU has. The crate is built for baseline x86-64 (SSE2), where a plain loop vectorises
/// four floats wide; the same loop inlined into a `target_feature` function vectorises for
/// AVX-512 or AVX2 instead, with the same results (see [`Width`]).
macro_rules! vectorised {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                match $crate::vector_width() {
                    // SAFETY: `vector_width` checked the CPU has these features.
                    $crate::Width::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: likewise.
                    $crate::Width::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::Width::Portable => {}
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use vectorised;

pub mod choice;
pub mod ops;
pub mod q8;

/// 1.5 · 2²³: floats from 2²³ on are one apart, so `x + ROUNDING_SHIFT` rounds `x` to an
/// integer, ties to even, for `|x| < 2²²`; subtracting it again gives the rounded float, and
/// the sum's bits minus the shift's bits give the integer itself. Unlike `f32::round` (a
/// library call per value) or a saturating `as i32`, both vectorise.
pub(crate) const ROUNDING_SHIFT: f32 = 12_582_912.0;
