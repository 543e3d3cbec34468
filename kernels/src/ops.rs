//! The per-row operations of a llama-family transformer layer: RMS norm, the rotary
//! embedding, causal attention over a KV cache, SwiGLU, the residual add.
//!
//! Every reduction is written with a fixed number of partial sums combined in a fixed order,
//! so the compiler vectorises it without changing its result, and a row's result never
//! depends on what other rows are computed with it (the crate's invariant).

/// Partial sums per reduction: wide enough for 512-bit vectors of `f32`.
const LANES: usize = 16;

/// Σ a·b in a fixed order: `LANES` partial sums, then combined pairwise.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut partial = [0f32; LANES];
    let whole = a.len() / LANES * LANES;
    for (x, y) in a[..whole]
        .chunks_exact(LANES)
        .zip(b[..whole].chunks_exact(LANES))
    {
        for l in 0..LANES {
            partial[l] += x[l] * y[l];
        }
    }
    for (l, (x, y)) in a[whole..].iter().zip(&b[whole..]).enumerate() {
        partial[l] += x * y;
    }
    combine(partial)
}

#[inline(always)]
fn combine(mut partial: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            partial[l] += partial[l + width];
        }
        width /= 2;
    }
    partial[0]
}

/// `out = x / rms(x) · weight`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let mean_square = dot(x, x) / x.len() as f32;
    let factor = 1.0 / (mean_square + eps).sqrt();
    for ((o, v), w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * factor * w;
    }
}

/// The interleaved rotary embedding GGUF llama weights are laid out for: in each head, the
/// pair `(x[2i], x[2i+1])` turns by the angle whose cosine and sine are `cos[i]`, `sin[i]`.
pub fn rope(x: &mut [f32], head_dim: usize, cos: &[f32], sin: &[f32]) {
    for head in x.chunks_exact_mut(head_dim) {
        for (i, pair) in head.chunks_exact_mut(2).enumerate() {
            let (even, odd) = (pair[0], pair[1]);
            pair[0] = even * cos[i] - odd * sin[i];
            pair[1] = even * sin[i] + odd * cos[i];
        }
    }
}

/// Where one layer's keys and values are: keys transposed, `[kv_head][head_dim][capacity]`
/// (a query's scores for sixteen positions are then sixteen adjacent lanes), values
/// `[kv_head][capacity][head_dim]`.
pub struct KvView<'a> {
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub capacity: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// Causal softmax attention of consecutive rows of queries (`q`, `rows × heads × head_dim`):
/// row `i` attends over the first `first_len + i` positions of `kv` (its own included).
/// Query heads share key/value heads in consecutive groups. Every (row, head) runs on its
/// own, in parallel, and computes the same whatever the number of rows.
pub fn attention(q: &[f32], kv: &KvView<'_>, first_len: usize, heads: usize, out: &mut [f32]) {
    let hd = kv.head_dim;
    let group = heads / kv.kv_heads;
    let rows = q.len() / (heads * hd);
    assert!(
        kv.capacity.is_multiple_of(SPAN) && first_len + rows <= kv.capacity + 1,
        "the cache's stride {} must be a multiple of {SPAN} and hold {} positions",
        kv.capacity,
        first_len + rows - 1
    );
    assert_eq!(out.len(), q.len(), "one output per query value");
    let width = float_width();
    let shared = SharedOut(out.as_mut_ptr());
    let shared = &shared;
    crate::for_each_index(rows * heads, |task| {
        let (row, head) = (task / heads, task % heads);
        let len = first_len + row;
        let query = &q[task * hd..(task + 1) * hd];
        // SAFETY: each (row, head) writes its own `head_dim` values of `out`, which outlives
        // the calls.
        let out = unsafe { std::slice::from_raw_parts_mut(shared.0.add(task * hd), hd) };
        let base = head / group * kv.capacity * hd;
        let keys = &kv.keys[base..base + kv.capacity * hd];
        let values = &kv.values[base..base + len * hd];
        SCORES.with(|scores| {
            let mut scores = scores.borrow_mut();
            let room = len.next_multiple_of(SPAN);
            if scores.len() < room {
                scores.resize(room, 0.0);
            }
            let scores = &mut scores[..room];
            match width {
                // SAFETY: `float_width` checked the CPU has these features.
                #[cfg(target_arch = "x86_64")]
                Width::Avx512 => unsafe {
                    attend_head_avx512(query, keys, kv.capacity, values, len, scores, out)
                },
                #[cfg(target_arch = "x86_64")]
                Width::Avx2 => unsafe {
                    attend_head_avx2(query, keys, kv.capacity, values, len, scores, out)
                },
                _ => attend_head(query, keys, kv.capacity, values, len, scores, out),
            }
        });
    });
}

/// `out` shared by the heads, each writing its own part.
struct SharedOut(*mut f32);
// SAFETY: the heads write disjoint parts, and `attention` returns after all have finished.
unsafe impl Sync for SharedOut {}

thread_local! {
    /// Per-thread scratch for one head's scores.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Positions scored at once; the KV cache's stride must be a multiple of it.
pub const SPAN: usize = 4 * LANES;

/// Dimensions of the value vectors summed at once.
const DIMS: usize = 4 * LANES;

/// Folds `values` into `LANES` partial results (lane `i % LANES` takes value `i`), then those
/// in order: a reduction that vectorises and gives the same result every time.
#[inline(always)]
fn fold_lanes(values: &[f32], init: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut partial = [init; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        let chunk: &[f32; LANES] = chunk.try_into().expect("a chunk of sixteen");
        for l in 0..LANES {
            partial[l] = op(partial[l], chunk[l]);
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        partial[l] = op(partial[l], v);
    }
    partial.into_iter().fold(init, op)
}

/// The vector width the float loops are compiled for. Their results are the same on every
/// width (fused multiply-adds are exact to one rounding everywhere, `f32::mul_add`, and the
/// partial sums are the same), only the speed differs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Width {
    Avx512,
    Avx2,
    Portable,
}

fn float_width() -> Width {
    #[cfg(target_arch = "x86_64")]
    {
        static WIDTH: std::sync::OnceLock<Width> = std::sync::OnceLock::new();
        *WIDTH.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avx512f") {
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

/// `attend_head` compiled for a wider instruction set: the same body, vectorised wider.
macro_rules! attend_head_with {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(
            query: &[f32],
            keys: &[f32],
            capacity: usize,
            values: &[f32],
            len: usize,
            scores: &mut [f32],
            out: &mut [f32],
        ) {
            attend_head(query, keys, capacity, values, len, scores, out)
        }
    };
}

attend_head_with!(attend_head_avx2, "avx2,fma");
attend_head_with!(attend_head_avx512, "avx512f");

/// One head: `keys` is `[head_dim][capacity]`, `values` `[len][head_dim]`, `scores` scratch
/// of `len` rounded up to [`SPAN`].
#[inline(always)]
fn attend_head(
    query: &[f32],
    keys: &[f32],
    capacity: usize,
    values: &[f32],
    len: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = query.len();
    let scale = 1.0 / (hd as f32).sqrt();
    // Each score sums its head_dim products in order. A span of positions at a time in eight
    // independent registers of sixteen, so the multiply-adds' latency overlaps. The last span
    // reads past `len` into the cache's spare room (the stride is a multiple of 64) and those
    // lanes are dropped: lanes never mix.
    for start in (0..len).step_by(SPAN) {
        let mut acc = [[0f32; LANES]; SPAN / LANES];
        for (d, &q) in query.iter().enumerate() {
            let at = d * capacity + start;
            for (acc, keys) in acc.iter_mut().zip(keys[at..at + SPAN].chunks_exact(LANES)) {
                let keys: &[f32; LANES] = keys.try_into().expect("sixteen keys");
                for l in 0..LANES {
                    acc[l] = q.mul_add(keys[l], acc[l]);
                }
            }
        }
        let span: &mut [f32; SPAN] = (&mut scores[start..start + SPAN])
            .try_into()
            .expect("a span of scores");
        for (c, acc) in acc.iter().enumerate() {
            for l in 0..LANES {
                span[c * LANES + l] = acc[l] * scale;
            }
        }
    }
    let scores = &mut scores[..len];
    let max = fold_lanes(scores, f32::NEG_INFINITY, f32::max);
    for score in scores.iter_mut() {
        *score = exp(*score - max);
    }
    let total = fold_lanes(scores, 0.0, |a, b| a + b);
    for score in scores.iter_mut() {
        *score /= total;
    }
    // Σ weight · value over positions, in order, for up to sixty-four dimensions at once.
    for start in (0..hd).step_by(DIMS) {
        let width = (hd - start).min(DIMS);
        if width == DIMS {
            let mut acc = [[0f32; LANES]; DIMS / LANES];
            for (weight, value) in scores.iter().zip(values.chunks_exact(hd)) {
                for (c, acc) in acc.iter_mut().enumerate() {
                    let at = start + c * LANES;
                    let value: &[f32; LANES] =
                        value[at..at + LANES].try_into().expect("sixteen values");
                    for l in 0..LANES {
                        acc[l] = weight.mul_add(value[l], acc[l]);
                    }
                }
            }
            for (c, acc) in acc.iter().enumerate() {
                out[start + c * LANES..start + (c + 1) * LANES].copy_from_slice(acc);
            }
        } else {
            for (d, out) in out.iter_mut().enumerate().skip(start) {
                let mut acc = 0f32;
                for (weight, value) in scores.iter().zip(values.chunks_exact(hd)) {
                    acc = weight.mul_add(value[d], acc);
                }
                *out = acc;
            }
        }
    }
}

/// `e^x` for the softmax and SiLU, branch-free so it vectorises: `x = n·ln 2 + r` with
/// `|r| ≤ ln 2 / 2`, a degree-6 polynomial for `e^r`, and `2^n` put into the exponent bits.
/// Relative error under 2·10⁻⁷ (a few units in the last place); 0 below -87, ∞ above 88.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = crate::round_to_even(x * std::f32::consts::LOG2_E);
    // ln 2 in two parts, so `n · ln 2` is subtracted without losing r's low bits.
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (0.166_666_67
                    + r * (0.041_666_668 + r * (0.008_333_334 + r * 0.001_388_889)))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// SwiGLU: `gate = silu(gate) · up`.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + exp(-*g)) * u;
    }
}

/// `x += y`.
pub fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.01).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-3);
    }

    /// Keys transposed into a cache of stride [`SPAN`] for `kv_heads` heads.
    fn transposed(keys: &[Vec<f32>], kv_heads: usize, hd: usize) -> Vec<f32> {
        let positions = keys.len() / kv_heads;
        let mut out = vec![0.0; kv_heads * hd * SPAN];
        for head in 0..kv_heads {
            for p in 0..positions {
                for d in 0..hd {
                    out[(head * hd + d) * SPAN + p] = keys[head * positions + p][d];
                }
            }
        }
        out
    }

    #[test]
    fn attention_over_one_position_returns_its_value() {
        let keys = transposed(&[vec![1.0, 9.0]], 1, 2);
        let mut values = vec![0.0; 2 * SPAN];
        values[..2].copy_from_slice(&[3.0, 4.0]);
        let kv = KvView {
            keys: &keys,
            values: &values,
            capacity: SPAN,
            kv_heads: 1,
            head_dim: 2,
        };
        let mut out = [0.0; 2];
        attention(&[0.5, 0.5], &kv, 1, 1, &mut out);
        assert_eq!(out, [3.0, 4.0]);
    }

    #[test]
    fn attention_matches_the_textbook_formula_across_spans_and_shared_heads() {
        // Four query heads over two key/value heads, 70 positions: a whole span and a part.
        let (hd, kv_heads, heads, len) = (32, 2, 4, 70);
        let value = |i: usize| ((i * 37 % 101) as f32 / 50.0) - 1.0;
        let keys: Vec<Vec<f32>> = (0..kv_heads * len)
            .map(|p| (0..hd).map(|d| value(p * hd + d)).collect())
            .collect();
        let mut values = vec![0.0; kv_heads * 2 * SPAN * hd];
        for head in 0..kv_heads {
            for p in 0..len {
                for d in 0..hd {
                    values[(head * 2 * SPAN + p) * hd + d] = value(p * 7 + d * 3 + head);
                }
            }
        }
        let mut stride_keys = vec![0.0; kv_heads * hd * 2 * SPAN];
        for head in 0..kv_heads {
            for p in 0..len {
                for d in 0..hd {
                    stride_keys[(head * hd + d) * 2 * SPAN + p] = keys[head * len + p][d];
                }
            }
        }
        let kv = KvView {
            keys: &stride_keys,
            values: &values,
            capacity: 2 * SPAN,
            kv_heads,
            head_dim: hd,
        };
        let q: Vec<f32> = (0..heads * hd).map(|i| value(i + 5)).collect();
        let mut out = vec![0.0; heads * hd];
        attention(&q, &kv, len, heads, &mut out);
        for head in 0..heads {
            let kv_head = head / 2;
            let query = &q[head * hd..(head + 1) * hd];
            let scores: Vec<f64> = (0..len)
                .map(|p| {
                    let key = &keys[kv_head * len + p];
                    query
                        .iter()
                        .zip(key)
                        .map(|(a, b)| (a * b) as f64)
                        .sum::<f64>()
                        / (hd as f64).sqrt()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..hd {
                let want: f64 = (0..len)
                    .map(|p| weights[p] / total * values[(kv_head * 2 * SPAN + p) * hd + d] as f64)
                    .sum();
                let got = out[head * hd + d] as f64;
                assert!(
                    (got - want).abs() < 1e-5,
                    "head {head} dim {d}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn rows_attended_together_match_rows_attended_alone() {
        let (hd, kv_heads, heads, first, rows) = (16, 1, 2, 60, 5);
        let value = |i: usize| ((i * 29 % 97) as f32 / 40.0) - 1.0;
        let keys: Vec<f32> = (0..kv_heads * hd * SPAN).map(value).collect();
        let values: Vec<f32> = (0..kv_heads * SPAN * hd).map(|i| value(i + 11)).collect();
        let kv = KvView {
            keys: &keys,
            values: &values,
            capacity: SPAN,
            kv_heads,
            head_dim: hd,
        };
        let q: Vec<f32> = (0..rows * heads * hd).map(|i| value(i + 5)).collect();
        let mut together = vec![0.0; q.len()];
        attention(&q, &kv, first, heads, &mut together);
        for row in 0..rows {
            let span = row * heads * hd..(row + 1) * heads * hd;
            let mut alone = vec![0.0; heads * hd];
            attention(&q[span.clone()], &kv, first + row, heads, &mut alone);
            assert_eq!(
                alone.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                together[span]
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
                "row {row}"
            );
        }
    }

    #[test]
    fn every_vector_width_scores_and_sums_to_the_same_bits() {
        let (hd, len): (usize, usize) = (64, 150);
        let value = |i: usize| ((i * 53 % 211) as f32 / 100.0) - 1.0;
        let capacity = len.next_multiple_of(SPAN);
        let keys: Vec<f32> = (0..hd * capacity).map(value).collect();
        let values: Vec<f32> = (0..len * hd).map(|i| value(i + 7)).collect();
        let query: Vec<f32> = (0..hd).map(|i| value(i + 3)).collect();
        let run = |width: Width| {
            let (mut scores, mut out) = (vec![0.0; capacity], vec![0.0; hd]);
            let (q, k, v) = (&query, &keys, &values);
            match width {
                // SAFETY: only for widths the CPU has (checked below).
                #[cfg(target_arch = "x86_64")]
                Width::Avx512 => unsafe {
                    attend_head_avx512(q, k, capacity, v, len, &mut scores, &mut out)
                },
                #[cfg(target_arch = "x86_64")]
                Width::Avx2 => unsafe {
                    attend_head_avx2(q, k, capacity, v, len, &mut scores, &mut out)
                },
                _ => attend_head(q, k, capacity, v, len, &mut scores, &mut out),
            }
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let portable = run(Width::Portable);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                assert_eq!(run(Width::Avx512), portable);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                assert_eq!(run(Width::Avx2), portable);
            }
        }
    }

    #[test]
    fn exp_is_within_a_few_ulp_of_the_library_one() {
        for i in -1000..=1000 {
            let x = i as f32 * 0.087;
            let (got, want) = (exp(x), x.exp());
            assert!(((got - want) / want).abs() < 1e-6, "e^{x}: {got} vs {want}");
        }
        assert_eq!(exp(-200.0), 0.0f32.max(exp(-87.0)));
        assert!(exp(0.0) == 1.0);
    }

    #[test]
    fn rope_turns_pairs() {
        let mut x = [1.0, 0.0, 0.0, 1.0];
        rope(&mut x, 4, &[0.0, 1.0], &[1.0, 0.0]);
        assert_eq!(x, [0.0, 1.0, 0.0, 1.0]);
    }

    #[test]
    fn rms_norm_scales_to_unit_root_mean_square() {
        let mut out = [0.0; 2];
        rms_norm(&[3.0, 4.0], &[1.0, 2.0], 0.0, &mut out);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / rms).abs() < 1e-6 && (out[1] - 8.0 / rms).abs() < 1e-6);
    }
}
