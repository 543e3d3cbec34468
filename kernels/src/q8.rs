//! Q8_0 matrices (blocks of 32 weights sharing one scale) and their product with rows of
//! activations quantized the same way.
//!
//! Weights are laid out for the product, not for the file: sixteen output rows at a time, and
//! within a 32-column block, four consecutive columns of one row side by side
//! (`[quad][row][4]`). That is the operand shape of AVX-512 VNNI's `vpdpbusd` (sixteen 32-bit
//! lanes, each the dot product of four byte pairs), so one load of weights serves sixteen
//! output columns, and one broadcast of four activation bytes serves all of them. Several
//! activation rows share each weight load (up to [`ROWS_AT_ONCE`]), which is what makes a
//! speculative verification pass over k tokens much cheaper than k single-token passes.
//!
//! Exactness: the integer dot product of a block is exact on every path (VNNI, AVX2, portable),
//! and each block then adds `isum · (weight scale · activation scale)` to its lane with one
//! fused multiply-add, blocks in order. So every output is bit-identical across paths and
//! batch sizes (the crate's invariant).

use std::fmt;
use std::sync::OnceLock;

/// Values per block (one scale each).
pub const BLOCK: usize = 32;
/// Output rows per tile: one 512-bit register of 32-bit lanes.
const TILE: usize = 16;
/// Groups of four columns per block.
const QUADS: usize = BLOCK / 4;
/// Activation rows computed against one load of weights.
pub const ROWS_AT_ONCE: usize = 4;

/// One block of sixteen rows: 32 columns of each.
#[repr(C, align(64))]
#[derive(Clone)]
struct Tile {
    /// `[quad][row][4]`.
    quants: [i8; BLOCK * TILE],
    scales: [f32; TILE],
    /// Each row's sum of its 32 quants: VNNI multiplies unsigned by signed bytes, so the
    /// activations go in offset by 128 and `128 · sum` comes back out.
    sums: [i32; TILE],
}

/// A shape the kernels cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

/// The instruction set a product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 with VNNI (Intel since Ice Lake, AMD since Zen 4).
    Avx512Vnni,
    /// AVX2 and FMA (x86-64 since 2013).
    Avx2,
    /// Plain Rust, any CPU.
    Portable,
}

impl Isa {
    /// The fastest this CPU runs, detected once.
    pub fn best() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| Isa::available().into_iter().next().unwrap_or(Isa::Portable))
    }

    /// Every path this CPU can run, fastest first.
    pub fn available() -> Vec<Isa> {
        let mut isas = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                isas.push(Isa::Avx512Vnni);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                isas.push(Isa::Avx2);
            }
        }
        isas.push(Isa::Portable);
        isas
    }
}

/// Quantizes 32 values: the scale maps the largest magnitude to 127. Written so it vectorises:
/// the largest magnitude is found lane by lane (the maximum does not depend on the order), and
/// the integer is read from the bits of the rounded value (see [`crate::ROUNDING_SHIFT`])
/// instead of through a saturating float-to-integer conversion, which does not vectorise.
#[inline(always)]
fn quantize_block(values: &[f32], quants: &mut [i8]) -> f32 {
    let values: &[f32; BLOCK] = values.try_into().expect("a block of values");
    let mut lanes = [0f32; 16];
    for chunk in values.chunks_exact(16) {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            let magnitude = v.abs();
            // Not `f32::max`, whose NaN rule keeps it from vectorising; a NaN is skipped
            // either way.
            if magnitude > *lane {
                *lane = magnitude;
            }
        }
    }
    let max = lanes.into_iter().fold(0f32, f32::max);
    let scale = max / 127.0;
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    for (q, v) in quants.iter_mut().zip(values) {
        // Clamped to ±127 first, then rounded: the same integer as rounding first.
        let shifted = (v * inverse).clamp(-127.0, 127.0) + crate::ROUNDING_SHIFT;
        *q = (shifted.to_bits() as i32 - crate::ROUNDING_SHIFT.to_bits() as i32) as i8;
    }
    scale
}

crate::vectorised! {
    /// Quantizes activations block by block, with the offset copy VNNI multiplies.
    fn quantize_rows(x: &[f32], quants: &mut [i8], offset: &mut [u8], scales: &mut [f32]) {
        for (((values, quants), offset), scale) in x
            .chunks_exact(BLOCK)
            .zip(quants.chunks_exact_mut(BLOCK))
            .zip(offset.chunks_exact_mut(BLOCK))
            .zip(scales.iter_mut())
        {
            *scale = quantize_block(values, quants);
            for (offset, &q) in offset.iter_mut().zip(quants.iter()) {
                *offset = q as u8 ^ 0x80;
            }
        }
    }
}

/// A `rows × cols` matrix of Q8_0 weights; the product computes `x · Wᵀ`.
#[derive(Clone)]
pub struct Q8Matrix {
    rows: usize,
    cols: usize,
    blocks: usize,
    /// `[row group of 16][block]`.
    tiles: Vec<Tile>,
}

impl Q8Matrix {
    /// Quantizes a row-major `rows × cols` matrix; `cols` must be a multiple of 32.
    pub fn quantize(data: &[f32], rows: usize, cols: usize) -> Result<Self, ShapeError> {
        if cols == 0 || !cols.is_multiple_of(BLOCK) || data.len() != rows * cols {
            return Err(ShapeError(format!(
                "a {rows}×{cols} matrix from {} values: the columns must be a non-zero multiple \
                 of {BLOCK}",
                data.len()
            )));
        }
        let blocks = cols / BLOCK;
        let groups = rows.div_ceil(TILE);
        let empty = Tile {
            quants: [0; BLOCK * TILE],
            scales: [0.0; TILE],
            sums: [0; TILE],
        };
        let mut tiles = vec![empty; groups * blocks];
        let mut quants = [0i8; BLOCK];
        for row in 0..rows {
            let (group, lane) = (row / TILE, row % TILE);
            for block in 0..blocks {
                let start = row * cols + block * BLOCK;
                let scale = quantize_block(&data[start..start + BLOCK], &mut quants);
                let tile = &mut tiles[group * blocks + block];
                tile.scales[lane] = scale;
                tile.sums[lane] = quants.iter().map(|&q| q as i32).sum();
                for quad in 0..QUADS {
                    let at = (quad * TILE + lane) * 4;
                    tile.quants[at..at + 4].copy_from_slice(&quants[quad * 4..quad * 4 + 4]);
                }
            }
        }
        Ok(Self {
            rows,
            cols,
            blocks,
            tiles,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held in memory.
    pub fn size_in_bytes(&self) -> usize {
        self.tiles.len() * std::mem::size_of::<Tile>()
    }

    /// Row `row` dequantized into `out` (an embedding lookup).
    pub fn row_into(&self, row: usize, out: &mut [f32]) {
        let (group, lane) = (row / TILE, row % TILE);
        for block in 0..self.blocks {
            let tile = &self.tiles[group * self.blocks + block];
            for quad in 0..QUADS {
                let at = (quad * TILE + lane) * 4;
                for j in 0..4 {
                    out[block * BLOCK + quad * 4 + j] =
                        tile.quants[at + j] as f32 * tile.scales[lane];
                }
            }
        }
    }

    /// `out = x · Wᵀ`: `x.rows() × self.rows()` values, row-major.
    pub fn matmul(&self, x: &Q8Rows, out: &mut [f32]) {
        self.matmul_on(Isa::best(), x, out)
    }

    /// [`Self::matmul`] on a chosen instruction set (one of [`Isa::available`]).
    pub fn matmul_on(&self, isa: Isa, x: &Q8Rows, out: &mut [f32]) {
        assert_eq!(x.cols, self.cols, "activation width against matrix columns");
        assert_eq!(out.len(), x.rows * self.rows, "output size");
        let groups = self.rows.div_ceil(TILE);
        // A few chunks per thread, so one slow core does not hold the product up; each chunk
        // writes only its own columns of `out`.
        let chunk = groups.div_ceil(rayon::current_num_threads() * 4).max(1);
        let out = SharedOut(out.as_mut_ptr());
        let out = &out;
        crate::for_each_index(groups.div_ceil(chunk), |c| {
            let end = ((c + 1) * chunk).min(groups);
            let mut group = c * chunk;
            while group < end {
                // Four groups for one or two rows, two for more: as many accumulators as the
                // registers hold, each weight load feeding every row.
                let want = if x.rows <= 2 { 4 } else { 2 };
                let count = match end - group {
                    left if left >= want => want,
                    left if left >= 2 => 2,
                    _ => 1,
                };
                let mut first = 0;
                while first < x.rows {
                    let n = (x.rows - first).min(ROWS_AT_ONCE);
                    let mut lanes = [[[0f32; TILE]; ROWS_AT_ONCE]; 4];
                    // The first pass over a panel also fetches the next one into the cache,
                    // so its weights arrive from memory while this one is computed.
                    let next = if first == 0 {
                        let from = ((group + count) * self.blocks).min(self.tiles.len());
                        &self.tiles[from..(from + count * self.blocks).min(self.tiles.len())]
                    } else {
                        &[]
                    };
                    let panel = Panel {
                        tiles: &self.tiles[group * self.blocks..(group + count) * self.blocks],
                        blocks: self.blocks,
                        next,
                    };
                    match (count, n) {
                        (4, 1) => panel_product::<4, 1>(isa, panel, x, first, &mut lanes),
                        (4, _) => panel_product::<4, 2>(isa, panel, x, first, &mut lanes),
                        (2, 1) => panel_product::<2, 1>(isa, panel, x, first, &mut lanes),
                        (2, 2) => panel_product::<2, 2>(isa, panel, x, first, &mut lanes),
                        (2, 3) => panel_product::<2, 3>(isa, panel, x, first, &mut lanes),
                        (2, _) => panel_product::<2, 4>(isa, panel, x, first, &mut lanes),
                        (_, 1) => panel_product::<1, 1>(isa, panel, x, first, &mut lanes),
                        (_, 2) => panel_product::<1, 2>(isa, panel, x, first, &mut lanes),
                        (_, 3) => panel_product::<1, 3>(isa, panel, x, first, &mut lanes),
                        (_, _) => panel_product::<1, 4>(isa, panel, x, first, &mut lanes),
                    }
                    for (g, rows) in lanes.iter().enumerate().take(count) {
                        let column = (group + g) * TILE;
                        let columns = (self.rows - column).min(TILE);
                        for (r, lane) in rows.iter().enumerate().take(n) {
                            let at = (first + r) * self.rows + column;
                            // SAFETY: `at..at + columns` lies in `out` (asserted sizes) and
                            // is written by this group's chunk alone.
                            unsafe {
                                std::ptr::copy_nonoverlapping(lane.as_ptr(), out.0.add(at), columns)
                            };
                        }
                    }
                    first += n;
                }
                group += count;
            }
        });
    }
}

/// The output pointer shared by the chunks of one product, each writing disjoint elements.
struct SharedOut(*mut f32);
// SAFETY: chunks write disjoint ranges, and the product returns only after all have finished.
unsafe impl Sync for SharedOut {}

/// Rows of activations quantized to Q8_0, reused between products to avoid allocations.
#[derive(Clone, Debug, Default)]
pub struct Q8Rows {
    rows: usize,
    cols: usize,
    quants: Vec<i8>,
    /// The quants offset by 128 (sign bit flipped): VNNI's unsigned operand.
    offset: Vec<u8>,
    scales: Vec<f32>,
}

impl Q8Rows {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Quantizes `rows × cols` values (`cols` a multiple of 32), each row on its own.
    pub fn quantize(&mut self, x: &[f32], rows: usize, cols: usize) {
        assert!(
            cols.is_multiple_of(BLOCK) && x.len() == rows * cols,
            "{rows}×{cols} activations from {} values",
            x.len()
        );
        self.rows = rows;
        self.cols = cols;
        self.quants.resize(rows * cols, 0);
        self.scales.resize(rows * cols / BLOCK, 0.0);
        self.offset.resize(rows * cols, 0);
        quantize_rows(x, &mut self.quants, &mut self.offset, &mut self.scales);
    }

    fn row(&self, row: usize) -> Row<'_> {
        let blocks = self.cols / BLOCK;
        let values = row * self.cols..(row + 1) * self.cols;
        Row {
            quants: &self.quants[values.clone()],
            offset: &self.offset[values],
            scales: &self.scales[row * blocks..(row + 1) * blocks],
        }
    }
}

/// One quantized activation row.
#[derive(Clone, Copy)]
struct Row<'a> {
    quants: &'a [i8],
    offset: &'a [u8],
    scales: &'a [f32],
}

/// `G` consecutive tile groups: `[group][block]` tiles.
#[derive(Clone, Copy)]
struct Panel<'a> {
    tiles: &'a [Tile],
    blocks: usize,
    /// Tiles to prefetch, `[group][block]` like `tiles` (possibly fewer groups, or none).
    next: &'a [Tile],
}

impl Panel<'_> {
    fn tile(&self, group: usize, block: usize) -> &Tile {
        &self.tiles[group * self.blocks + block]
    }
}

/// Output lanes of up to four groups for up to [`ROWS_AT_ONCE`] rows: `[group][row][lane]`.
type Lanes = [[[f32; TILE]; ROWS_AT_ONCE]; 4];

/// The outputs of `G` tile groups for `R` activation rows from `first`.
fn panel_product<const G: usize, const R: usize>(
    isa: Isa,
    panel: Panel<'_>,
    x: &Q8Rows,
    first: usize,
    out: &mut Lanes,
) {
    let rows: [Row<'_>; R] = std::array::from_fn(|r| x.row(first + r));
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx512Vnni` and `Isa::Avx2` come from `Isa::available`, which checked
        // the CPU has the features these functions are compiled for.
        Isa::Avx512Vnni => unsafe { x86::panel_vnni::<G, R>(panel, &rows, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: likewise.
        Isa::Avx2 => unsafe { x86::panel_avx2::<G, R>(panel, &rows, out) },
        _ => panel_portable::<G, R>(panel, &rows, out),
    }
}

fn panel_portable<const G: usize, const R: usize>(
    panel: Panel<'_>,
    rows: &[Row<'_>; R],
    out: &mut Lanes,
) {
    for block in 0..panel.blocks {
        for (g, out) in out.iter_mut().enumerate().take(G) {
            let tile = panel.tile(g, block);
            for (r, row) in rows.iter().enumerate() {
                let x = &row.quants[block * BLOCK..(block + 1) * BLOCK];
                let mut sums = [0i32; TILE];
                for quad in 0..QUADS {
                    for (lane, sum) in sums.iter_mut().enumerate() {
                        let at = (quad * TILE + lane) * 4;
                        for j in 0..4 {
                            *sum += tile.quants[at + j] as i32 * x[quad * 4 + j] as i32;
                        }
                    }
                }
                let acc = &mut out[r];
                for lane in 0..TILE {
                    acc[lane] = (sums[lane] as f32)
                        .mul_add(tile.scales[lane] * row.scales[block], acc[lane]);
                }
            }
        }
    }
}

// The kernels index several arrays by the same register position (group, row, half); a
// counted loop says that more plainly than zipped iterators.
#[cfg(target_arch = "x86_64")]
#[allow(
    clippy::needless_range_loop,
    reason = "several arrays are indexed by the same register position"
)]
mod x86 {
    use std::arch::x86_64::*;

    use super::{BLOCK, Lanes, Panel, QUADS, Row, TILE, Tile};

    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn panel_vnni<const G: usize, const R: usize>(
        panel: Panel<'_>,
        rows: &[Row<'_>; R],
        out: &mut Lanes,
    ) {
        let mut acc = [[_mm512_setzero_ps(); R]; G];
        let ahead = panel.next.len() / panel.blocks;
        for block in 0..panel.blocks {
            for g in 0..ahead.min(G) {
                let tile = (&panel.next[g * panel.blocks + block] as *const Tile).cast::<i8>();
                for line in 0..size_of::<Tile>() / 64 {
                    // SAFETY: a prefetch of bytes inside an in-bounds tile.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(tile.add(line * 64)) };
                }
            }
            let mut sums = [[_mm512_setzero_si512(); R]; G];
            for quad in 0..QUADS {
                // SAFETY (loads below): a quad of a tile is 64 in-bounds bytes; an activation
                // row has `blocks · 32` bytes, and `block · 32 + quad · 4 + 4` is within it.
                // SAFETY: see above.
                let weights: [__m512i; G] = std::array::from_fn(|g| unsafe {
                    _mm512_loadu_si512(
                        panel.tile(g, block).quants.as_ptr().add(quad * TILE * 4) as *const _
                    )
                });
                for r in 0..R {
                    // SAFETY: see above (the activation row).
                    let x = _mm512_set1_epi32(unsafe {
                        std::ptr::read_unaligned(
                            rows[r].offset.as_ptr().add(block * BLOCK + quad * 4) as *const i32,
                        )
                    });
                    for g in 0..G {
                        sums[g][r] = _mm512_dpbusd_epi32(sums[g][r], x, weights[g]);
                    }
                }
            }
            for g in 0..G {
                let tile = panel.tile(g, block);
                // SAFETY: sixteen in-bounds lanes each.
                let (offset, scales) = unsafe {
                    (
                        _mm512_slli_epi32::<7>(_mm512_loadu_si512(tile.sums.as_ptr() as *const _)),
                        _mm512_loadu_ps(tile.scales.as_ptr()),
                    )
                };
                for r in 0..R {
                    let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums[g][r], offset));
                    let scale = _mm512_mul_ps(scales, _mm512_set1_ps(rows[r].scales[block]));
                    acc[g][r] = _mm512_fmadd_ps(exact, scale, acc[g][r]);
                }
            }
        }
        for g in 0..G {
            for r in 0..R {
                // SAFETY: sixteen lanes into sixteen floats.
                unsafe { _mm512_storeu_ps(out[g][r].as_mut_ptr(), acc[g][r]) };
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel_avx2<const G: usize, const R: usize>(
        panel: Panel<'_>,
        rows: &[Row<'_>; R],
        out: &mut Lanes,
    ) {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[[_mm256_setzero_ps(); 2]; R]; G];
        for block in 0..panel.blocks {
            let mut sums = [[[_mm256_setzero_si256(); 2]; R]; G];
            for quad in 0..QUADS {
                let x: [__m256i; R] = std::array::from_fn(|r| {
                    // SAFETY: within the row, as in `panel_vnni`.
                    _mm256_set1_epi32(unsafe {
                        std::ptr::read_unaligned(
                            rows[r].quants.as_ptr().add(block * BLOCK + quad * 4) as *const i32,
                        )
                    })
                });
                for g in 0..G {
                    for half in 0..2 {
                        // SAFETY: eight rows of a quad are 32 in-bounds bytes.
                        let weights = unsafe {
                            _mm256_loadu_si256(
                                panel
                                    .tile(g, block)
                                    .quants
                                    .as_ptr()
                                    .add((quad * TILE + half * 8) * 4)
                                    as *const _,
                            )
                        };
                        // |w| · (x · sign w): unsigned by signed bytes whose pairwise sums
                        // stay within i16 (|w| ≤ 128, |x| ≤ 127), so the products are exact.
                        let magnitude = _mm256_abs_epi8(weights);
                        for r in 0..R {
                            let pairs =
                                _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[r], weights));
                            sums[g][r][half] =
                                _mm256_add_epi32(sums[g][r][half], _mm256_madd_epi16(pairs, ones));
                        }
                    }
                }
            }
            for g in 0..G {
                let tile = panel.tile(g, block);
                for half in 0..2 {
                    // SAFETY: eight in-bounds lanes.
                    let scales = unsafe { _mm256_loadu_ps(tile.scales.as_ptr().add(half * 8)) };
                    for r in 0..R {
                        let exact = _mm256_cvtepi32_ps(sums[g][r][half]);
                        let scale = _mm256_mul_ps(scales, _mm256_set1_ps(rows[r].scales[block]));
                        acc[g][r][half] = _mm256_fmadd_ps(exact, scale, acc[g][r][half]);
                    }
                }
            }
        }
        for g in 0..G {
            for r in 0..R {
                for half in 0..2 {
                    // SAFETY: eight lanes into eight floats.
                    unsafe {
                        _mm256_storeu_ps(out[g][r].as_mut_ptr().add(half * 8), acc[g][r][half])
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values with varied magnitudes and signs.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect()
    }

    fn reference(w: &[f32], x: &[f32], rows: usize, cols: usize, m: usize) -> Vec<f32> {
        (0..m)
            .flat_map(|i| {
                (0..rows).map(move |j| {
                    (0..cols)
                        .map(|c| w[j * cols + c] as f64 * x[i * cols + c] as f64)
                        .sum::<f64>() as f32
                })
            })
            .collect()
    }

    #[test]
    fn the_product_is_close_to_the_exact_one() {
        let (rows, cols, m) = (40, 96, 3);
        let w = values(rows * cols, 1);
        let x = values(m * cols, 2);
        let matrix = Q8Matrix::quantize(&w, rows, cols).unwrap();
        let mut q = Q8Rows::new();
        q.quantize(&x, m, cols);
        let mut out = vec![0.0; m * rows];
        matrix.matmul(&q, &mut out);
        // Each factor is off by up to half a quantization step (1/254 here), so the sum of
        // 96 products drifts by ~0.05; a misplaced lane or block would be off by ~1.
        for (got, want) in out.iter().zip(reference(&w, &x, rows, cols, m)) {
            assert!((got - want).abs() < 0.2, "{got} vs {want}");
        }
    }

    #[test]
    fn every_path_and_batch_size_gives_bit_identical_rows() {
        // 72 rows: four full tiles and a partial one (a panel of four and one of one for a
        // single row; two, two and one for more); 7 activation rows: a batch of four and a
        // remainder of three.
        let (rows, cols, m) = (72, 160, 7);
        let matrix = Q8Matrix::quantize(&values(rows * cols, 3), rows, cols).unwrap();
        let x = values(m * cols, 4);
        let mut all = Q8Rows::new();
        all.quantize(&x, m, cols);
        let mut expected = vec![0.0; m * rows];
        matrix.matmul_on(Isa::Portable, &all, &mut expected);
        for isa in Isa::available() {
            let mut batched = vec![0.0; m * rows];
            matrix.matmul_on(isa, &all, &mut batched);
            assert_eq!(
                batched.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{isa:?}, all rows at once"
            );
            for i in 0..m {
                let mut one = Q8Rows::new();
                one.quantize(&x[i * cols..(i + 1) * cols], 1, cols);
                let mut single = vec![0.0; rows];
                matrix.matmul_on(isa, &one, &mut single);
                assert_eq!(
                    single.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    expected[i * rows..(i + 1) * rows]
                        .iter()
                        .map(|v| v.to_bits())
                        .collect::<Vec<_>>(),
                    "{isa:?}, row {i} alone"
                );
            }
        }
    }

    #[test]
    fn extreme_weights_stay_exact() {
        // -128 cannot come out of the quantizer, but ±127 in every position with ±127
        // activations is the largest integer sum; the AVX2 pairs must not saturate.
        let (rows, cols) = (16, 32);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        let x: Vec<f32> = (0..cols)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let matrix = Q8Matrix::quantize(&w, rows, cols).unwrap();
        let mut q = Q8Rows::new();
        q.quantize(&x, 1, cols);
        for isa in Isa::available() {
            let mut out = vec![0.0; rows];
            matrix.matmul_on(isa, &q, &mut out);
            let want = reference(&w, &x, rows, cols, 1);
            for (got, want) in out.iter().zip(&want) {
                assert!((got - want).abs() < 1e-3, "{isa:?}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn a_row_dequantizes_to_its_values() {
        let (rows, cols) = (20, 64);
        let w = values(rows * cols, 5);
        let matrix = Q8Matrix::quantize(&w, rows, cols).unwrap();
        let mut row = vec![0.0; cols];
        matrix.row_into(17, &mut row);
        for (got, want) in row.iter().zip(&w[17 * cols..18 * cols]) {
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn columns_that_are_not_whole_blocks_are_refused() {
        assert!(Q8Matrix::quantize(&[0.0; 40], 2, 20).is_err());
    }
}
