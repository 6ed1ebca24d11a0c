//! Weighted sums of rows of `f16` values in `f32`: the products of the
//! sparse kernel's first pass ([`super::sparse`]), where each stored value
//! of a row adds a multiple of one row of the transposed centres.
//!
//! `f16` rows halve the bytes read per stored value against `f32` ones. The
//! rows are read at random, so the kernel waits on memory: it asks for the
//! rows of the values [`AHEAD`] places on before it needs them. Each `f16`
//! value is widened to `f32` exactly and multiplied and added in `f32`, the
//! rows in the order given, so every lane is the same sequence of `f32`
//! operations on every path up to fusing (FMA): callers bound the error,
//! never the bits. Picked at run time: AVX-512F, AVX2 with F16C and FMA, or
//! a portable loop.

use crate::dtype::Real;

/// Values ahead whose rows are fetched early.
const AHEAD: usize = 8;

/// `g[j] = Σ_i fl₃₂(m · values[i]) · f32(rows[cols[i] · g.len() + j])` for
/// every `j` of `g`, `i` ascending (`m · values[i]` in `f64`).
///
/// # Panics
/// If `values` and `cols` differ in length, a row lies outside `rows`, or
/// `g.len()` is not a multiple of 16.
pub fn weighted_rows<T: Real>(rows: &[u16], cols: &[u32], values: &[T], m: f64, g: &mut [f32]) {
    let width = g.len();
    assert!(width.is_multiple_of(16) && values.len() == cols.len());
    let last = cols.iter().copied().max().map_or(0, |c| c as usize + 1);
    assert!(last.checked_mul(width).is_some_and(|e| e <= rows.len()));
    g.fill(0.0);
    let weight = |i: usize| (m * values[i].to_f64()) as f32;
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            // SAFETY: AVX-512F checked; every row lies in `rows` (asserted).
            Simd::Avx512 => return unsafe { x86::weighted_rows_avx512(rows, cols, weight, g) },
            // SAFETY: AVX2, F16C and FMA checked; as above.
            Simd::Avx2 => return unsafe { x86::weighted_rows_avx2(rows, cols, weight, g) },
            Simd::None => {}
        }
    }
    portable(rows, cols, weight, g);
}

/// [`weighted_rows`] one lane at a time (`g` zeroed).
fn portable(rows: &[u16], cols: &[u32], weight: impl Fn(usize) -> f32, g: &mut [f32]) {
    let width = g.len();
    for (i, &c) in cols.iter().enumerate() {
        let w = weight(i);
        let s = c as usize * width;
        for (gj, &h) in g.iter_mut().zip(&rows[s..s + width]) {
            *gj += w * half::f16::from_bits(h).to_f32();
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Simd {
    Avx512,
    Avx2,
    None,
}

/// The widest kernel this CPU runs (checked once).
#[cfg(target_arch = "x86_64")]
fn simd() -> Simd {
    static SIMD: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *SIMD.get_or_init(|| {
        if is_x86_feature_detected!("avx512f") {
            Simd::Avx512
        } else if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("f16c")
            && is_x86_feature_detected!("fma")
        {
            Simd::Avx2
        } else {
            Simd::None
        }
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::AHEAD;
    use std::arch::x86_64::*;

    /// Asks for the row `AHEAD` values on (every 64-byte line of it).
    #[inline(always)]
    fn fetch_ahead(rows: &[u16], cols: &[u32], i: usize, width: usize) {
        if let Some(&c) = cols.get(i + AHEAD) {
            let row = &rows[c as usize * width..(c as usize + 1) * width];
            for line in row.chunks(32) {
                // SAFETY: a prefetch is a hint; the address lies in `rows`.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast::<i8>()) };
            }
        }
    }

    /// [`super::weighted_rows`] in 16 lanes.
    ///
    /// # Safety
    /// AVX-512F; every row `cols[i] · g.len()..(cols[i] + 1) · g.len()` lies
    /// in `rows` and `g.len()` is a multiple of 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weighted_rows_avx512(
        rows: &[u16],
        cols: &[u32],
        weight: impl Fn(usize) -> f32,
        g: &mut [f32],
    ) {
        let (width, out) = (g.len(), g.as_mut_ptr());
        for (i, &c) in cols.iter().enumerate() {
            fetch_ahead(rows, cols, i, width);
            let a = _mm512_set1_ps(weight(i));
            let row = rows[c as usize * width..].as_ptr();
            for q in (0..width).step_by(16) {
                // SAFETY: `q + 16 <= width`: within the row and within `g`.
                unsafe {
                    let h = _mm512_cvtph_ps(_mm256_loadu_si256(row.add(q).cast::<__m256i>()));
                    _mm512_storeu_ps(out.add(q), _mm512_fmadd_ps(a, h, _mm512_loadu_ps(out.add(q))));
                }
            }
        }
    }

    /// [`super::weighted_rows`] in 8 lanes.
    ///
    /// # Safety
    /// AVX2, F16C and FMA; as [`weighted_rows_avx512`].
    #[target_feature(enable = "avx2,f16c,fma")]
    pub(super) unsafe fn weighted_rows_avx2(rows: &[u16], cols: &[u32], weight: impl Fn(usize) -> f32, g: &mut [f32]) {
        let (width, out) = (g.len(), g.as_mut_ptr());
        for (i, &c) in cols.iter().enumerate() {
            fetch_ahead(rows, cols, i, width);
            let a = _mm256_set1_ps(weight(i));
            let row = rows[c as usize * width..].as_ptr();
            for q in (0..width).step_by(8) {
                // SAFETY: as in `weighted_rows_avx512`.
                unsafe {
                    let h = _mm256_cvtph_ps(_mm_loadu_si128(row.add(q).cast::<__m128i>()));
                    _mm256_storeu_ps(out.add(q), _mm256_fmadd_ps(a, h, _mm256_loadu_ps(out.add(q))));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_sums_the_widened_rows() {
        let width = 48;
        let vals: Vec<f32> = (0..10 * width).map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0).collect();
        let rows: Vec<u16> = vals.iter().map(|&v| half::f16::from_f32(v).to_bits()).collect();
        let (cols, values) = (
            [3u32, 7, 0, 9, 3, 1, 2, 5, 8, 6, 4],
            [0.25f64, -0.625, 1.0, 0.375, 1.5, 2.0, 0.5, -1.0, 0.125, 3.0, -2.0],
        );
        let (mut g, mut p) = (vec![0.0f32; width], vec![0.0f32; width]);
        weighted_rows(&rows, &cols, &values, 2.0, &mut g);
        portable(&rows, &cols, |i| (2.0 * values[i]) as f32, &mut p);
        for (j, (&v, &q)) in g.iter().zip(&p).enumerate() {
            // Multiples of 1/512 below 2^10 in magnitude: every product and
            // sum is exact in f32, fused or not.
            let want: f32 =
                cols.iter().zip(&values).map(|(&c, &w)| (2.0 * w) as f32 * vals[c as usize * width + j]).sum();
            assert_eq!((v, q), (want, want), "lane {j}");
        }
    }
}
