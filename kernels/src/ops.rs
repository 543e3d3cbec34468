//! The per-row operations of a llama-family transformer layer: RMS norm, the rotary
//! embedding, causal attention over a KV cache, SwiGLU, the residual add.
//!
//! Every reduction is written with a fixed number of partial sums combined in a fixed order,
//! so the compiler vectorises it without changing its result, and a row's result never
//! depends on what other rows are computed with it (the crate's invariant).

use crate::Width;

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

crate::vectorised! {
    /// `out = x / rms(x) · weight`.
    pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
        let mean_square = dot(x, x) / x.len() as f32;
        let factor = 1.0 / (mean_square + eps).sqrt();
        for ((o, v), w) in out.iter_mut().zip(x).zip(weight) {
            *o = v * factor * w;
        }
    }
}

crate::vectorised! {
    /// The interleaved rotary embedding GGUF llama weights are laid out for: in each head,
    /// the pair `(x[2i], x[2i+1])` turns by the angle whose cosine and sine are `cos[i]`,
    /// `sin[i]`.
    pub fn rope(x: &mut [f32], head_dim: usize, cos: &[f32], sin: &[f32]) {
        for head in x.chunks_exact_mut(head_dim) {
            for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                let (even, odd) = (pair[0], pair[1]);
                pair[0] = even * cos[i] - odd * sin[i];
                pair[1] = even * sin[i] + odd * cos[i];
            }
        }
    }
}

/// [`rms_norm`] of each row of `x` (rows of `weight.len()` values) into the same row of `out`.
pub fn rms_norm_rows(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let dim = weight.len();
    for (x, out) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
        rms_norm(x, weight, eps, out);
    }
}

/// The rotary embedding of rows of queries and keys at consecutive positions from `first`
/// (`cos` and `sin` hold `head_dim / 2` values per position), then each row's key and value
/// written into one layer's cache at its position. The cache's layouts are [`KvView`]'s.
pub fn rotate_and_cache(rows: RowsToCache<'_>, cache: KvViewMut<'_>) {
    let RowsToCache {
        q,
        k,
        v,
        first,
        cos,
        sin,
    } = rows;
    let hd = cache.head_dim;
    let half = hd / 2;
    let kv_dim = cache.kv_heads * hd;
    let count = k.len() / kv_dim;
    if count == 0 {
        return;
    }
    let dim = q.len() / count;
    for i in 0..count {
        let position = first + i;
        let (cos, sin) = (
            &cos[position * half..(position + 1) * half],
            &sin[position * half..(position + 1) * half],
        );
        rope(&mut q[i * dim..(i + 1) * dim], hd, cos, sin);
        let k = &mut k[i * kv_dim..(i + 1) * kv_dim];
        rope(k, hd, cos, sin);
        for head in 0..cache.kv_heads {
            let from = i * kv_dim + head * hd;
            for (d, &key) in k[head * hd..(head + 1) * hd].iter().enumerate() {
                cache.keys[(head * hd + d) * cache.capacity + position] = key;
            }
            let at = (head * cache.capacity + position) * hd;
            cache.values[at..at + hd].copy_from_slice(&v[from..from + hd]);
        }
    }
}

/// The rows [`rotate_and_cache`] takes: `q` (`rows × heads × head_dim`), `k` and `v`
/// (`rows × kv_heads × head_dim`), at positions from `first`, with the rotary tables.
pub struct RowsToCache<'a> {
    pub q: &'a mut [f32],
    pub k: &'a mut [f32],
    pub v: &'a [f32],
    pub first: usize,
    pub cos: &'a [f32],
    pub sin: &'a [f32],
}

/// [`KvView`], writable.
pub struct KvViewMut<'a> {
    pub keys: &'a mut [f32],
    pub values: &'a mut [f32],
    pub capacity: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
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
/// Query heads share key/value heads in consecutive groups. The queries of one key/value
/// head, over every row, attend together up to [`MAX_QUERIES`] at a time (the heads of a group,
/// and of the next rows when the group is small), so each key and value loaded feeds several
/// queries' multiply-adds: the cache is read once per task, not once per query. Tasks run in
/// parallel, and each query computes exactly what it would alone, whatever the number of rows.
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
    let width = crate::vector_width();
    // The queries of one key/value head, row by row, cut into tasks.
    let per_kv_head = rows * group;
    let tasks = per_kv_head.div_ceil(MAX_QUERIES);
    let shared = SharedOut(out.as_mut_ptr());
    let shared = &shared;
    // Tasks run key/value head by key/value head, so the tasks a thread takes in turn find
    // that head's keys and values in its cache.
    crate::for_each_index(kv.kv_heads * tasks, |task| {
        let (kv_head, first) = (task / tasks, task % tasks * MAX_QUERIES);
        let count = (per_kv_head - first).min(MAX_QUERIES);
        let queries: [Query; MAX_QUERIES] = std::array::from_fn(|i| {
            let n = first + i.min(count - 1);
            let (row, head) = (n / group, kv_head * group + n % group);
            Query {
                at: (row * heads + head) * hd,
                len: first_len + row,
            }
        });
        let queries = &queries[..count];
        // Rows come in order, so the last query attends furthest.
        let len = queries[count - 1].len;
        let base = kv_head * kv.capacity * hd;
        SCORES.with(|scores| {
            let mut scores = scores.borrow_mut();
            let room = len.next_multiple_of(SPAN);
            if scores.len() < count * room {
                scores.resize(count * room, 0.0);
            }
            let task = Task {
                head_dim: hd,
                q,
                out: shared.0,
                queries,
                keys: &kv.keys[base..base + kv.capacity * hd],
                capacity: kv.capacity,
                values: &kv.values[base..base + len * hd],
                scores: &mut scores[..count * room],
            };
            // SAFETY: each query's `head_dim` outputs belong to this task alone, and `out`
            // outlives the calls.
            unsafe {
                match count {
                    1 => attend_queries::<1>(width, task),
                    2 => attend_queries::<2>(width, task),
                    3 => attend_queries::<3>(width, task),
                    4 => attend_queries::<4>(width, task),
                    5 => attend_queries::<5>(width, task),
                    _ => attend_queries::<MAX_QUERIES>(width, task),
                }
            }
        });
    });
}

/// Queries attended together at most: their score accumulators (four registers each) and the
/// four key vectors they share fit in AVX-512's 32 registers.
const MAX_QUERIES: usize = 6;

/// `out` shared by the tasks, each writing its own part.
struct SharedOut(*mut f32);
// SAFETY: the tasks write disjoint parts, and `attention` returns after all have finished.
unsafe impl Sync for SharedOut {}

thread_local! {
    /// Per-thread scratch for the scores of the queries a task attends.
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

/// One query: where its `head_dim` values are in the queries (and its outputs in `out`, laid
/// out the same), and how many positions it attends over.
#[derive(Clone, Copy)]
struct Query {
    at: usize,
    len: usize,
}

/// Queries sharing one key/value head, in order of `len`: `keys` is `[head_dim][capacity]`,
/// `values` `[len][head_dim]` up to the longest `len`, `scores` scratch of one `room` (the
/// longest `len` rounded up to [`SPAN`]) per query.
struct Task<'a> {
    head_dim: usize,
    q: &'a [f32],
    out: *mut f32,
    queries: &'a [Query],
    keys: &'a [f32],
    capacity: usize,
    values: &'a [f32],
    scores: &'a mut [f32],
}

/// A query's outputs.
///
/// # Safety
/// `out` must hold `query.at + head_dim` values, and no other live reference may reach these
/// (each query belongs to one task).
unsafe fn output<'a>(out: *mut f32, query: Query, head_dim: usize) -> &'a mut [f32] {
    // SAFETY: this function's contract: the values are in `out`, and only this slice reaches them.
    unsafe { std::slice::from_raw_parts_mut(out.add(query.at), head_dim) }
}

/// Runs `Q` queries on the widest vectors the CPU has: on AVX-512 they share each key and
/// value loaded ([`x86::attend`]); elsewhere they run one after the other.
///
/// # Safety
/// As [`output`], for every query of `task`.
unsafe fn attend_queries<const Q: usize>(width: Width, task: Task<'_>) {
    assert_eq!(task.queries.len(), Q, "the task's query count");
    for query in task.queries {
        assert!(query.at + task.head_dim <= task.q.len(), "a query in range");
    }
    match width {
        // SAFETY: `vector_width` checked the CPU has these features.
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => unsafe { x86::attend::<Q>(task) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: likewise; and `task`'s queries meet `output`'s contract (this function's).
        Width::Avx2 => unsafe { attend_avx2(task) },
        // SAFETY: `task`'s queries meet `output`'s contract (this function's).
        _ => unsafe { attend_one_by_one(task) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(task: Task<'_>) {
    // SAFETY: the caller keeps `output`'s contract for `task`, as `attend_one_by_one` asks.
    unsafe { attend_one_by_one(task) }
}

/// The queries one after the other, each through [`attend_head`].
#[inline(always)]
unsafe fn attend_one_by_one(task: Task<'_>) {
    let Task {
        head_dim: hd,
        q,
        out,
        queries,
        keys,
        capacity,
        values,
        scores,
    } = task;
    let room = scores.len() / queries.len();
    for (&query, scores) in queries.iter().zip(scores.chunks_exact_mut(room)) {
        let Query { at, len } = query;
        // SAFETY: as the caller's.
        let out = unsafe { output(out, query, hd) };
        attend_head(
            &q[at..at + hd],
            keys,
            capacity,
            &values[..len * hd],
            len,
            scores,
            out,
        );
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
    //! Attention on AVX-512 for the queries sharing a key/value head (the heads of a group,
    //! over one or more rows): they score and sum together, each key and value vector loaded
    //! once for all of them. Written with intrinsics because the compiler does not keep
    //! `Q × 4` accumulators in registers on its own. Each lane's operations are those of
    //! [`super::attend_head`], in the same order.

    use std::arch::x86_64::*;

    use super::{DIMS, LANES, Query, SPAN, Task, output, softmax, weighted_sum_tail};

    /// # Safety
    /// The CPU must have AVX-512F, and the task's outputs be as [`super::output`] requires.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn attend<const Q: usize>(task: Task<'_>) {
        let Task {
            head_dim: hd,
            q,
            out,
            queries,
            keys,
            capacity,
            values,
            scores,
        } = task;
        let queries: &[Query; Q] = queries.try_into().expect("Q queries");
        let room = scores.len() / Q;
        let scale = 1.0 / (hd as f32).sqrt();
        let longest = queries.iter().map(|q| q.len).max().unwrap_or(0);
        let shortest = queries.iter().map(|q| q.len).min().unwrap_or(0);
        assert!(keys.len() >= (hd - 1) * capacity + longest.next_multiple_of(SPAN));
        assert!(values.len() >= longest * hd && room >= longest);
        // The scores of every query over the longest span; each query's own stop at its
        // `len` and the rest of its room is never read.
        for start in (0..longest).step_by(SPAN) {
            let mut acc = [[_mm512_setzero_ps(); SPAN / LANES]; Q];
            for d in 0..hd {
                // SAFETY: `start + SPAN ≤ capacity` (asserted above), so the span is in `keys`.
                let at = unsafe { keys.as_ptr().add(d * capacity + start) };
                let k: [__m512; SPAN / LANES] =
                    // SAFETY: `c · LANES < SPAN`: within the span just checked.
                    std::array::from_fn(|c| unsafe { _mm512_loadu_ps(at.add(c * LANES)) });
                for (query, acc) in queries.iter().zip(&mut acc) {
                    let q = _mm512_set1_ps(q[query.at + d]);
                    for (acc, k) in acc.iter_mut().zip(k) {
                        *acc = _mm512_fmadd_ps(q, k, *acc);
                    }
                }
            }
            let scale = _mm512_set1_ps(scale);
            for (i, acc) in acc.iter().enumerate() {
                let span = &mut scores[i * room + start..i * room + start + SPAN];
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
        for (i, query) in queries.iter().enumerate() {
            softmax(&mut scores[i * room..i * room + query.len]);
        }
        for start in (0..hd).step_by(DIMS) {
            if hd - start >= DIMS {
                let mut acc = [[_mm512_setzero_ps(); DIMS / LANES]; Q];
                // Adds position `p`'s value, weighted, for the queries `attends` picks.
                macro_rules! add_position {
                    ($p:expr, $attends:expr) => {{
                        let p = $p;
                        // SAFETY: `p < longest` and `start + DIMS ≤ hd`, so the row is in
                        // `values`.
                        let at = unsafe { values.as_ptr().add(p * hd + start) };
                        let v: [__m512; DIMS / LANES] =
                            // SAFETY: `c · LANES < DIMS`: within the row just checked.
                            std::array::from_fn(|c| unsafe { _mm512_loadu_ps(at.add(c * LANES)) });
                        for (i, (query, acc)) in queries.iter().zip(&mut acc).enumerate() {
                            if $attends(query) {
                                let w = _mm512_set1_ps(scores[i * room + p]);
                                for (acc, v) in acc.iter_mut().zip(v) {
                                    *acc = _mm512_fmadd_ps(w, v, *acc);
                                }
                            }
                        }
                    }};
                }
                // The positions every query attends, then those only the later rows do: each
                // query still adds its positions in order.
                for p in 0..shortest {
                    add_position!(p, |_: &Query| true);
                }
                for p in shortest..longest {
                    add_position!(p, |query: &Query| p < query.len);
                }
                for (query, acc) in queries.iter().zip(&acc) {
                    // SAFETY: as the caller's.
                    let out = unsafe { output(out, *query, hd) };
                    for (c, acc) in acc.iter().enumerate() {
                        let at = start + c * LANES;
                        // SAFETY: `at + LANES ≤ hd = out.len()`.
                        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(at), *acc) };
                    }
                }
            } else {
                for (i, query) in queries.iter().enumerate() {
                    weighted_sum_tail(
                        &scores[i * room..i * room + query.len],
                        values,
                        start,
                        // SAFETY: as the caller's.
                        unsafe { output(out, *query, hd) },
                    );
                }
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
    // `n` rounded to even, and as an integer from the shifted float's bits (a saturating
    // `as i32` would not vectorise).
    let shifted = x * std::f32::consts::LOG2_E + crate::ROUNDING_SHIFT;
    let n = shifted - crate::ROUNDING_SHIFT;
    let whole = (shifted.to_bits() as i32).wrapping_sub(crate::ROUNDING_SHIFT.to_bits() as i32);
    // ln 2 in two parts, so `n · ln 2` is subtracted without losing r's low bits.
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (0.166_666_67
                    + r * (0.041_666_668 + r * (0.008_333_334 + r * 0.001_388_889)))));
    p * f32::from_bits(((whole + 127) as u32) << 23)
}

crate::vectorised! {
    /// SwiGLU: `gate = silu(gate) · up`.
    pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
        for (g, u) in gate.iter_mut().zip(up) {
            *g = *g / (1.0 + exp(-*g)) * u;
        }
    }
}

crate::vectorised! {
    /// `x += y`.
    pub fn add(x: &mut [f32], y: &[f32]) {
        for (a, b) in x.iter_mut().zip(y) {
            *a += b;
        }
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
    fn every_vector_width_and_every_grouping_gives_each_query_the_same_bits() {
        let (hd, longest): (usize, usize) = (64, 150);
        let value = |i: usize| ((i * 53 % 211) as f32 / 100.0) - 1.0;
        let capacity = longest.next_multiple_of(SPAN);
        let keys: Vec<f32> = (0..hd * capacity).map(value).collect();
        let values: Vec<f32> = (0..longest * hd).map(|i| value(i + 7)).collect();
        // Six queries over one key/value head, attending over different lengths as the rows
        // of a verification pass do (three heads of two rows).
        let q: Vec<f32> = (0..6 * hd).map(|i| value(i + 3)).collect();
        let lens = [
            longest - 1,
            longest - 1,
            longest - 1,
            longest,
            longest,
            longest,
        ];
        let run = |width: Width, picked: &[usize]| -> Vec<u32> {
            let queries: Vec<Query> = picked
                .iter()
                .map(|&i| Query {
                    at: i * hd,
                    len: lens[i],
                })
                .collect();
            let len = queries.iter().map(|q| q.len).max().unwrap();
            let mut scores = vec![0.0; picked.len() * capacity];
            let mut out = vec![0.0; q.len()];
            let task = Task {
                head_dim: hd,
                q: &q,
                out: out.as_mut_ptr(),
                queries: &queries,
                keys: &keys,
                capacity,
                values: &values[..len * hd],
                scores: &mut scores,
            };
            // SAFETY: `out` holds every query's outputs and nothing else refers to it.
            unsafe {
                match picked.len() {
                    1 => attend_queries::<1>(width, task),
                    3 => attend_queries::<3>(width, task),
                    _ => attend_queries::<6>(width, task),
                }
            }
            picked
                .iter()
                .flat_map(|&i| out[i * hd..(i + 1) * hd].iter().map(|v| v.to_bits()))
                .collect()
        };
        let all = [0, 1, 2, 3, 4, 5];
        let together = run(Width::Portable, &all);
        for i in all {
            let alone = run(Width::Portable, &[i]);
            assert_eq!(alone, together[i * hd..(i + 1) * hd], "query {i}");
        }
        let mut widths = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                widths.push(Width::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                widths.push(Width::Avx2);
            }
        }
        for width in widths {
            assert_eq!(run(width, &all), together, "{width:?}, six at once");
            assert_eq!(
                run(width, &[2, 3, 4]),
                together[2 * hd..5 * hd],
                "{width:?}, three"
            );
            assert_eq!(run(width, &[5]), together[5 * hd..], "{width:?}, alone");
        }
    }

    #[test]
    fn a_group_wider_than_the_queries_shared_at_once_is_split_exactly() {
        // Eight query heads on one key/value head (tasks of six and two), against the same
        // eight heads each given its own copy of the keys and values.
        let (hd, heads, len) = (16, 8, 40);
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
