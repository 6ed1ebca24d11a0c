//! Batched GEMM on packed panels with one fused-multiply-add chain per output
//! element, so that every element's bits are independent of the matrix
//! shapes, the blocking and the instruction set (cf. the GotoBLAS/BLIS
//! loop structure: a `KC`-deep slice of a row panel of `A` stays in L1
//! while it meets each column panel of a block of `B` held in L2).
//!
//! `C[i, j] = fma(A[i, k-1], B[k-1, j], … fma(A[i, 0], B[0, j], +0.0))`:
//! the accumulator is stored to `C` and reloaded between `KC` slices, which
//! is exact, and padding rows and columns of a panel only meet padding.

use std::mem::size_of;
use std::ops::Range;

/// Most depth of one slice of the packed panels (a `k` deeper is cut into
/// slices of equal depth).
const KC: usize = 384;
/// Bytes of a block of `B`'s column panels at one depth slice: the block
/// stays in L2 while each row panel of `A` (packed once per block) meets it.
const B_BLOCK_BYTES: usize = 768 << 10;

/// Register tile (rows `MR`, columns `NR`) of the kernel this CPU runs for
/// an `m × n` product: `(1, 1)` for batched dot products (`m == n == 1`);
/// one column (row) of [`VEC_TILE`] rows (columns) for matrix-vector
/// products (`n == 1` or `m == 1`), so that no lanes compute padding.
pub(super) fn tile(m: u64, n: u64) -> (usize, usize) {
    match (m == 1, n == 1) {
        (true, true) => (1, 1),
        (false, true) => (VEC_TILE, 1),
        (true, false) => (1, VEC_TILE),
        (false, false) => match isa() {
            Isa::Avx512 => (12, 16),
            Isa::Avx2 => (6, 8),
            Isa::Portable => (4, 4),
        },
    }
}

/// Rows (columns) of the matrix-vector kernel's tile: four 512-bit
/// accumulators (eight 256-bit), independent chains that hide the FMA
/// latency.
const VEC_TILE: usize = 32;

#[derive(Clone, Copy)]
enum Isa {
    Avx512,
    Avx2,
    Portable,
}

fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
            return Isa::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Portable
}

/// `A`'s row panels, copied where the kernel needs them (so that a panel
/// is in cache when it meets `B`, and `A` is never packed whole).
pub(super) trait RowPanels {
    /// Writes rows `panel · width ..` of product `t` at depths `depth`
    /// into `out` as `depth.len()` groups of `width` values (zero past the
    /// last row).
    fn fill(&self, t: usize, panel: usize, depth: Range<usize>, width: usize, out: &mut [f64]);
}

/// `C_b = A_b B_b` for each of `batch` products of `(m × k)` by `(k × n)`.
///
/// `a` gives `A`'s row panels of `MR` rows; `b` holds, per batch,
/// `⌈n/NR⌉` column panels, each `k` groups of `NR` values (zero past column
/// `n`); `c` is `batch` row-major `m × n` blocks, overwritten. `(MR, NR)`
/// is [`tile`]. Batched dot products (`m == n == 1`) go to [`dots`].
///
/// # Panics
/// If a slice is shorter than stated, or for `m == n == 1`.
pub(super) fn gemm(batch: usize, m: usize, n: usize, k: usize, a: &impl RowPanels, b: &[f64], c: &mut [f64]) {
    assert!(m != 1 || n != 1, "batched dot products go to dots");
    match (isa(), tile(m as u64, n as u64)) {
        // SAFETY: `isa()` checked the CPU features the target functions enable.
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, (VEC_TILE, 1)) => unsafe { gemm_avx512::<VEC_TILE, 1>(batch, m, n, k, a, b, c) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, (1, VEC_TILE)) => unsafe { gemm_avx512::<1, VEC_TILE>(batch, m, n, k, a, b, c) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, _) => unsafe { gemm_avx512::<12, 16>(batch, m, n, k, a, b, c) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, (VEC_TILE, 1)) => unsafe { gemm_avx2::<VEC_TILE, 1>(batch, m, n, k, a, b, c) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, (1, VEC_TILE)) => unsafe { gemm_avx2::<1, VEC_TILE>(batch, m, n, k, a, b, c) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, _) => unsafe { gemm_avx2::<6, 8>(batch, m, n, k, a, b, c) },
        (_, (VEC_TILE, 1)) => gemm_tiled::<VEC_TILE, 1>(batch, m, n, k, a, b, c),
        (_, (1, VEC_TILE)) => gemm_tiled::<1, VEC_TILE>(batch, m, n, k, a, b, c),
        _ => gemm_tiled::<4, 4>(batch, m, n, k, a, b, c),
    }
}

/// [`gemm_tiled`] compiled for AVX-512F and FMA.
///
/// # Safety
/// The CPU must support AVX-512F and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn gemm_avx512<const MR: usize, const NR: usize>(
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: &impl RowPanels,
    b: &[f64],
    c: &mut [f64],
) {
    gemm_tiled::<MR, NR>(batch, m, n, k, a, b, c)
}

/// [`gemm_tiled`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_avx2<const MR: usize, const NR: usize>(
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: &impl RowPanels,
    b: &[f64],
    c: &mut [f64],
) {
    gemm_tiled::<MR, NR>(batch, m, n, k, a, b, c)
}

/// `C_t = a_t b_tᵀ` for each of `batch` outer products of an `m`-vector
/// and an `n`-vector (`a`: `batch` rows of `m`, `b`: `batch` rows of `n`):
/// `C[t, i, j] = fma(a[t m + i], b[t n + j], +0.0)`, the bits [`gemm`]
/// gives at depth 1, without its packing.
pub(super) fn outer(batch: usize, m: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    match isa() {
        // SAFETY: `isa()` checked the CPU features the target function enables.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2 => unsafe { outer_fma(batch, m, n, a, b, c) },
        _ => outer_portable(batch, m, n, a, b, c),
    }
}

/// [`outer_portable`] compiled with FMA.
///
/// # Safety
/// The CPU must support FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn outer_fma(batch: usize, m: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    outer_portable(batch, m, n, a, b, c)
}

#[inline(always)]
fn outer_portable(batch: usize, m: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    if m * n == 0 {
        return;
    }
    for (t, ct) in c[..batch * m * n].chunks_exact_mut(m * n).enumerate() {
        let (at, bt) = (&a[t * m..][..m], &b[t * n..][..n]);
        for (row, &x) in ct.chunks_exact_mut(n).zip(at) {
            for (v, &y) in row.iter_mut().zip(bt) {
                *v = x.mul_add(y, 0.0);
            }
        }
    }
}

/// `c[t] = Σ_p a[t k + p] b[t k + p]`, one fused-multiply-add chain from +0.0 each
/// (`a`, `b`: `batch` rows of `k` values): [`gemm`]'s bits at `m == n == 1`.
pub(super) fn dots(batch: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    match isa() {
        // SAFETY: `isa()` checked the CPU features the target function enables.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2 => unsafe { dots_fma(batch, k, a, b, c) },
        _ => dots_portable(batch, k, a, b, c),
    }
}

/// [`dots_portable`] compiled with FMA.
///
/// # Safety
/// The CPU must support FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn dots_fma(batch: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    dots_portable(batch, k, a, b, c)
}

/// Dot products eight at a time: eight independent chains hide the FMA
/// latency; each is still one chain in ascending order.
#[inline(always)]
fn dots_portable(batch: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    const W: usize = 8;
    let full = batch / W * W;
    for t0 in (0..full).step_by(W) {
        let ra: [&[f64]; W] = std::array::from_fn(|u| &a[(t0 + u) * k..][..k]);
        let rb: [&[f64]; W] = std::array::from_fn(|u| &b[(t0 + u) * k..][..k]);
        let mut acc = [0.0f64; W];
        for p in 0..k {
            for u in 0..W {
                acc[u] = ra[u][p].mul_add(rb[u][p], acc[u]);
            }
        }
        c[t0..t0 + W].copy_from_slice(&acc);
    }
    for (t, ct) in c[..batch].iter_mut().enumerate().skip(full) {
        let (at, bt) = (&a[t * k..][..k], &b[t * k..][..k]);
        *ct = at.iter().zip(bt).fold(0.0, |acc, (&x, &y)| x.mul_add(y, acc));
    }
}

#[inline(always)]
fn gemm_tiled<const MR: usize, const NR: usize>(
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: &impl RowPanels,
    b: &[f64],
    c: &mut [f64],
) {
    let (row_panels, col_panels) = (m.div_ceil(MR), n.div_ceil(NR));
    let b_len = col_panels * NR * k;
    // Slices of equal depth, at most `KC` deep.
    let kc = k.div_ceil(k.div_ceil(KC).max(1)).max(1);
    let panels_per_block = (B_BLOCK_BYTES / (kc * NR * size_of::<f64>())).max(1);
    let mut ap = vec![0.0; kc * MR];
    for t in 0..batch {
        let b = &b[t * b_len..][..b_len];
        let c = &mut c[t * m * n..][..m * n];
        if k == 0 {
            c.fill(0.0);
            continue;
        }
        for pc in (0..k).step_by(kc) {
            let kc = kc.min(k - pc);
            for jc in (0..col_panels).step_by(panels_per_block) {
                for ir in 0..row_panels {
                    let ap = &mut ap[..kc * MR];
                    a.fill(t, ir, pc..pc + kc, MR, ap);
                    let ap = &*ap;
                    let rows = MR.min(m - ir * MR);
                    for jr in jc..col_panels.min(jc + panels_per_block) {
                        let bp = &b[(jr * k + pc) * NR..][..kc * NR];
                        let cols = NR.min(n - jr * NR);
                        let at = ir * MR * n + jr * NR;
                        if rows == MR && cols == NR {
                            kernel::<MR, NR>(ap, bp, &mut c[at..], n, pc > 0);
                        } else {
                            // An edge tile: through a full one.
                            let mut edge = [[0.0; NR]; MR];
                            for (r, row) in edge.iter_mut().enumerate().take(rows) {
                                row[..cols].copy_from_slice(&c[at + r * n..][..cols]);
                            }
                            kernel::<MR, NR>(ap, bp, edge.as_flattened_mut(), NR, pc > 0);
                            for (r, row) in edge.iter().enumerate().take(rows) {
                                c[at + r * n..][..cols].copy_from_slice(&row[..cols]);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `C[r, j] = fma(a_p[r], b_p[j], C[r, j])` for each `p` in order, on the
/// `MR × NR` tile of `c` at row stride `ldc`, starting from `C` (`load`)
/// or from +0.0; the accumulators stay in registers.
#[inline(always)]
fn kernel<const MR: usize, const NR: usize>(a: &[f64], b: &[f64], c: &mut [f64], ldc: usize, load: bool) {
    let c = &mut c[..(MR - 1) * ldc + NR];
    let mut acc = [[0.0; NR]; MR];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            row.copy_from_slice(&c[r * ldc..][..NR]);
        }
    }
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for r in 0..MR {
            let x = ap[r];
            for j in 0..NR {
                acc[r][j] = x.mul_add(bp[j], acc[r][j]);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        c[r * ldc..][..NR].copy_from_slice(row);
    }
}
