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
/// Query heads share key/value heads in consecutive groups; the heads of a group (up to
/// [`MAX_SHARED`] at a time) attend together, so each key and value loaded feeds several
/// heads' multiply-adds (grouped-query attention reads the cache once per group, not once per
/// head). Every (row, heads) task runs in parallel, and each head computes exactly what it
/// would alone, whatever the number of rows.
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
    let chunks = group.div_ceil(MAX_SHARED);
    let shared = SharedOut(out.as_mut_ptr());
    let shared = &shared;
    // Tasks run key/value head by key/value head, so the rows a thread takes in turn find
    // that head's keys and values in its cache.
    crate::for_each_index(kv.kv_heads * rows * chunks, |task| {
        let (kv_head, row, chunk) = (task / (rows * chunks), task / chunks % rows, task % chunks);
        let first = kv_head * group + chunk * MAX_SHARED;
        let count = (group - chunk * MAX_SHARED).min(MAX_SHARED);
        let at = (row * heads + first) * hd;
        let len = first_len + row;
        let queries = &q[at..at + count * hd];
        // SAFETY: each task writes its own heads' `head_dim` values of `out`, which outlives
        // the calls.
        let out = unsafe { std::slice::from_raw_parts_mut(shared.0.add(at), count * hd) };
        let base = kv_head * kv.capacity * hd;
        let keys = &kv.keys[base..base + kv.capacity * hd];
        let values = &kv.values[base..base + len * hd];
        SCORES.with(|scores| {
            let mut scores = scores.borrow_mut();
            let room = len.next_multiple_of(SPAN);
            if scores.len() < count * room {
                scores.resize(count * room, 0.0);
            }
            let heads = Heads {
                head_dim: hd,
                queries,
                keys,
                capacity: kv.capacity,
                values,
                len,
                scores: &mut scores[..count * room],
                out,
            };
            match count {
                1 => attend_heads::<1>(width, heads),
                2 => attend_heads::<2>(width, heads),
                3 => attend_heads::<3>(width, heads),
                _ => attend_heads::<MAX_SHARED>(width, heads),
            }
        });
    });
}

/// Query heads of one group attended together at most: their score accumulators (four
/// registers each) and the four key vectors they share fit in AVX-512's 32 registers.
const MAX_SHARED: usize = 4;

/// `out` shared by the tasks, each writing its own part.
struct SharedOut(*mut f32);
// SAFETY: the tasks write disjoint parts, and `attention` returns after all have finished.
unsafe impl Sync for SharedOut {}

thread_local! {
    /// Per-thread scratch for the scores of the heads a task attends.
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

/// `G` query heads sharing one key/value head, for one row: `queries` and `out` are
/// `G × head_dim`, `keys` is `[head_dim][capacity]`, `values` `[len][head_dim]`, `scores`
/// scratch of `G ×` (`len` rounded up to [`SPAN`]).
struct Heads<'a> {
    head_dim: usize,
    queries: &'a [f32],
    keys: &'a [f32],
    capacity: usize,
    values: &'a [f32],
    len: usize,
    scores: &'a mut [f32],
    out: &'a mut [f32],
}

/// Runs the heads on the widest vectors the CPU has: on AVX-512 the heads share each key
/// and value loaded ([`x86::attend`]); elsewhere they run one after the other.
fn attend_heads<const G: usize>(width: Width, heads: Heads<'_>) {
    match width {
        // SAFETY: `float_width` checked the CPU has these features.
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => unsafe { x86::attend::<G>(heads) },
        #[cfg(target_arch = "x86_64")]
        Width::Avx2 => unsafe { attend_avx2(heads) },
        _ => attend_one_by_one(heads),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(heads: Heads<'_>) {
    attend_one_by_one(heads)
}

/// The heads one after the other, each through [`attend_head`].
#[inline(always)]
fn attend_one_by_one(heads: Heads<'_>) {
    let Heads {
        head_dim: hd,
        queries,
        keys,
        capacity,
        values,
        len,
        scores,
        out,
    } = heads;
    let room = scores.len() / (queries.len() / hd);
    for ((query, scores), out) in queries
        .chunks_exact(hd)
        .zip(scores.chunks_exact_mut(room))
        .zip(out.chunks_exact_mut(hd))
    {
        attend_head(query, keys, capacity, values, len, scores, out);
    }
}

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
    // Each score sums its head_dim products in order. A span of positions at a time in four
    // independent registers of sixteen, so the multiply-adds' latency overlaps. The last span
    // reads past `len` into the cache's spare room (the stride is a multiple of 64) and those
    // lanes are dropped: lanes never mix.
    for start in (0..len).step_by(SPAN) {
        let mut acc = [[0f32; LANES]; SPAN / LANES];
        for (d, &q) in query.iter().enumerate() {
            let at = d * capacity + start;
            for (acc, keys) in acc.iter_mut().zip(lanes_of(&keys[at..at + SPAN])) {
                multiply_add(acc, q, keys);
            }
        }
        for (c, acc) in acc.iter().enumerate() {
            for l in 0..LANES {
                scores[start + c * LANES + l] = acc[l] * scale;
            }
        }
    }
    softmax(&mut scores[..len]);
    // Σ weight · value over positions, in order, for up to sixty-four dimensions at once.
    for start in (0..hd).step_by(DIMS) {
        if hd - start >= DIMS {
            let mut acc = [[0f32; LANES]; DIMS / LANES];
            for (weight, value) in scores.iter().zip(values.chunks_exact(hd)) {
                for (acc, value) in acc.iter_mut().zip(lanes_of(&value[start..start + DIMS])) {
                    multiply_add(acc, *weight, value);
                }
            }
            for (c, acc) in acc.iter().enumerate() {
                out[start + c * LANES..start + (c + 1) * LANES].copy_from_slice(acc);
            }
        } else {
            weighted_sum_tail(&scores[..len], values, start, out);
        }
    }
}

/// Turns scores into softmax weights: `e^(s - max)`, normalised by their sum.
#[inline(always)]
fn softmax(scores: &mut [f32]) {
    let max = fold_lanes(scores, f32::NEG_INFINITY, f32::max);
    for score in scores.iter_mut() {
        *score = exp(*score - max);
    }
    let total = fold_lanes(scores, 0.0, |a, b| a + b);
    for score in scores.iter_mut() {
        *score /= total;
    }
}

/// Σ weight · value for the dimensions from `start` on, fewer than [`DIMS`], one at a time.
#[inline(always)]
fn weighted_sum_tail(weights: &[f32], values: &[f32], start: usize, out: &mut [f32]) {
    let hd = out.len();
    for (d, out) in out.iter_mut().enumerate().skip(start) {
        let mut acc = 0f32;
        for (weight, value) in weights.iter().zip(values.chunks_exact(hd)) {
            acc = weight.mul_add(value[d], acc);
        }
        *out = acc;
    }
}

/// Four vectors of sixteen lanes from sixty-four values.
#[inline(always)]
fn lanes_of(values: &[f32]) -> [&[f32; LANES]; 4] {
    std::array::from_fn(|c| {
        values[c * LANES..(c + 1) * LANES]
            .try_into()
            .expect("sixteen values")
    })
}

/// `acc += x · y`, lane by lane, each lane rounded once.
#[inline(always)]
fn multiply_add(acc: &mut [f32; LANES], x: f32, y: &[f32; LANES]) {
    for l in 0..LANES {
        acc[l] = x.mul_add(y[l], acc[l]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Grouped-query attention on AVX-512: the heads of a group score and sum together, each
    //! key and value vector loaded once for all of them. Written with intrinsics because the
    //! compiler does not keep `G × 4` accumulators in registers on its own. Each lane's
    //! operations are those of [`super::attend_head`], in the same order.

    use std::arch::x86_64::*;

    use super::{DIMS, Heads, LANES, SPAN, softmax, weighted_sum_tail};

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn attend<const G: usize>(heads: Heads<'_>) {
        let Heads {
            head_dim: hd,
            queries,
            keys,
            capacity,
            values,
            len,
            scores,
            out,
        } = heads;
        let room = scores.len() / G;
        let scale = 1.0 / (hd as f32).sqrt();
        assert!(keys.len() >= (hd - 1) * capacity + len.next_multiple_of(SPAN));
        assert!(values.len() >= len * hd && out.len() == G * hd && room >= len);
        for start in (0..len).step_by(SPAN) {
            let mut acc = [[_mm512_setzero_ps(); SPAN / LANES]; G];
            for d in 0..hd {
                // SAFETY: `start + SPAN ≤ capacity` (asserted above), so the span is in `keys`.
                let at = unsafe { keys.as_ptr().add(d * capacity + start) };
                let k: [__m512; SPAN / LANES] =
                    std::array::from_fn(|c| unsafe { _mm512_loadu_ps(at.add(c * LANES)) });
                for (h, acc) in acc.iter_mut().enumerate() {
                    let q = _mm512_set1_ps(queries[h * hd + d]);
                    for (acc, k) in acc.iter_mut().zip(k) {
                        *acc = _mm512_fmadd_ps(q, k, *acc);
                    }
                }
            }
            let scale = _mm512_set1_ps(scale);
            for (h, acc) in acc.iter().enumerate() {
                let span = &mut scores[h * room + start..h * room + start + SPAN];
                for (c, acc) in acc.iter().enumerate() {
                    // SAFETY: `span` holds `SPAN` values.
                    unsafe {
                        _mm512_storeu_ps(
                            span.as_mut_ptr().add(c * LANES),
                            _mm512_mul_ps(*acc, scale),
                        )
                    };
                }
            }
        }
        for h in 0..G {
            softmax(&mut scores[h * room..h * room + len]);
        }
        for start in (0..hd).step_by(DIMS) {
            if hd - start >= DIMS {
                let mut acc = [[_mm512_setzero_ps(); DIMS / LANES]; G];
                for p in 0..len {
                    // SAFETY: `p < len` and `start + DIMS ≤ hd`, so the row is in `values`.
                    let at = unsafe { values.as_ptr().add(p * hd + start) };
                    let v: [__m512; DIMS / LANES] =
                        std::array::from_fn(|c| unsafe { _mm512_loadu_ps(at.add(c * LANES)) });
                    for (h, acc) in acc.iter_mut().enumerate() {
                        let w = _mm512_set1_ps(scores[h * room + p]);
                        for (acc, v) in acc.iter_mut().zip(v) {
                            *acc = _mm512_fmadd_ps(w, v, *acc);
                        }
                    }
                }
                for (h, acc) in acc.iter().enumerate() {
                    for (c, acc) in acc.iter().enumerate() {
                        let at = h * hd + start + c * LANES;
                        // SAFETY: `at + LANES ≤ G × hd = out.len()`.
                        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(at), *acc) };
                    }
                }
            } else {
                for h in 0..G {
                    weighted_sum_tail(
                        &scores[h * room..h * room + len],
                        values,
                        start,
                        &mut out[h * hd..(h + 1) * hd],
                    );
                }
            }
        }
    }
}

/// The index of the largest value, the first one on ties (greedy decoding's choice over a
/// vocabulary of logits, once per row: here so it runs optimised in every build).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &value) in values.iter().enumerate() {
        if value > values[best] {
            best = i;
        }
    }
    best as u32
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
    fn every_vector_width_and_every_grouping_gives_each_head_the_same_bits() {
        let (hd, len): (usize, usize) = (64, 150);
        let value = |i: usize| ((i * 53 % 211) as f32 / 100.0) - 1.0;
        let capacity = len.next_multiple_of(SPAN);
        let keys: Vec<f32> = (0..hd * capacity).map(value).collect();
        let values: Vec<f32> = (0..len * hd).map(|i| value(i + 7)).collect();
        let queries: Vec<f32> = (0..3 * hd).map(|i| value(i + 3)).collect();
        // The three heads attended together, or the first `G` of them.
        fn run<const G: usize>(width: Width, queries: &[f32], kv: (&[f32], &[f32])) -> Vec<u32> {
            let (hd, capacity) = (queries.len() / G, kv.0.len() / (queries.len() / G));
            let len = kv.1.len() / hd;
            let (mut scores, mut out) = (vec![0.0; G * capacity], vec![0.0; G * hd]);
            let heads = Heads {
                head_dim: hd,
                queries,
                keys: kv.0,
                capacity,
                values: kv.1,
                len,
                scores: &mut scores,
                out: &mut out,
            };
            attend_heads::<G>(width, heads);
            out.iter().map(|v| v.to_bits()).collect()
        }
        let kv = (keys.as_slice(), values.as_slice());
        let together = run::<3>(Width::Portable, &queries, kv);
        for h in 0..3 {
            let alone = run::<1>(Width::Portable, &queries[h * hd..(h + 1) * hd], kv);
            assert_eq!(alone, together[h * hd..(h + 1) * hd], "head {h}");
        }
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                assert_eq!(run::<3>(Width::Avx512, &queries, kv), together);
                assert_eq!(run::<1>(Width::Avx512, &queries[..hd], kv), together[..hd]);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                assert_eq!(run::<3>(Width::Avx2, &queries, kv), together);
            }
        }
    }

    #[test]
    fn a_group_wider_than_the_heads_shared_at_once_is_split_exactly() {
        // Six query heads on one key/value head (chunks of four and two), against the same
        // six heads each given its own copy of the keys and values.
        let (hd, heads, len) = (16, 6, 40);
        let value = |i: usize| ((i * 41 % 89) as f32 / 30.0) - 1.0;
        let keys: Vec<f32> = (0..hd * SPAN).map(value).collect();
        let values: Vec<f32> = (0..SPAN * hd).map(|i| value(i + 13)).collect();
        let q: Vec<f32> = (0..heads * hd).map(|i| value(i + 2)).collect();
        let shared = KvView {
            keys: &keys,
            values: &values,
            capacity: SPAN,
            kv_heads: 1,
            head_dim: hd,
        };
        let (keys6, values6) = (keys.repeat(heads), values.repeat(heads));
        let own = KvView {
            keys: &keys6,
            values: &values6,
            capacity: SPAN,
            kv_heads: heads,
            head_dim: hd,
        };
        let (mut a, mut b) = (vec![0.0; q.len()], vec![0.0; q.len()]);
        attention(&q, &shared, len, heads, &mut a);
        attention(&q, &own, len, heads, &mut b);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
    }

    #[test]
    fn argmax_takes_the_first_of_equal_largest_values() {
        assert_eq!(argmax(&[1.0, 3.0, 2.0, 3.0]), 1);
        assert_eq!(argmax(&[-5.0]), 0);
        assert_eq!(argmax(&[0.0, f32::NAN, 1.0]), 2);
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
