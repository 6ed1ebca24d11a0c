//! AVX-512 twins of the direct assignment kernel (see `assign.rs`), picked at
//! run time when the CPU has AVX-512F and AVX-512VL. The portable,
//! compiler-vectorised kernel in `assign.rs` is their reference twin: both
//! give each row's best centre under the GEMM identity and the gap to the
//! second best, which `assign.rs` checks against its error bound.

use std::arch::x86_64::*;

/// Whether this CPU can run the kernels of this module (checked once).
pub fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl"))
}

macro_rules! dispatch {
    ($name:ident, $kernel:ident, $t:ty; $($d:literal)*) => {
        /// Runs the AVX-512 kernel for `d` features when the CPU has AVX-512
        /// and `1 <= d <= 16`; returns whether it ran.
        pub fn $name(
            x: &[$t],
            d: usize,
            origin: &[$t],
            transposed: &[$t],
            norms: &[$t],
            labels: &mut [u32],
            gaps: &mut [$t],
        ) -> bool {
            if !available() {
                return false;
            }
            match d {
                // SAFETY: `available()` checked AVX-512F and AVX-512VL.
                $($d => unsafe { $kernel::<$d>(x, origin, transposed, norms, labels, gaps) },)*
                _ => return false,
            }
            true
        }
    };
}

dispatch!(run_f64, argmin_f64, f64; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
dispatch!(run_f32, argmin_f32, f32; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

macro_rules! argmin_kernel {
    ($name:ident, $rows:ident, $t:ty, $lanes:literal, $vec:ty, $idx:ty,
     $set1:ident, $loadu:ident, $fmadd:ident, $cmp:ident, $mov:ident, $min:ident, $max:ident, $reduce_min:ident,
     $iset1:ident, $iadd:ident, $imov:ident, $icmpeq:ident, $istore:ident, $iinit:expr) => {
        /// Best centre of each row of `x` (row-major, `D` features) among
        /// the transposed centres (`D` rows of `norms.len()` values) with
        /// squared norms `norms` (padded with `+inf`), by ‖c‖² − 2x̂·c with
        /// x̂ = x − `origin` and fused multiply-adds; ties go to the lowest
        /// index. `gaps[i]` receives the second-best value minus the best.
        /// Four rows go together so that their running minima form
        /// independent chains.
        ///
        /// # Safety
        /// The CPU must support AVX-512F and AVX-512VL ([`available`]).
        ///
        /// # Panics
        /// If `norms.len()` is not a multiple of the vector width or the
        /// slices are shorter than stated.
        #[target_feature(enable = "avx512f,avx512vl")]
        pub unsafe fn $name<const D: usize>(
            x: &[$t],
            origin: &[$t],
            transposed: &[$t],
            norms: &[$t],
            labels: &mut [u32],
            gaps: &mut [$t],
        ) {
            let kp = norms.len();
            assert!(
                kp % $lanes == 0
                    && transposed.len() >= D * kp
                    && x.len() >= labels.len() * D
                    && origin.len() >= D
                    && gaps.len() >= labels.len()
            );
            let full = labels.len() / 4 * 4;
            for r0 in (0..full).step_by(4) {
                // SAFETY: same CPU features; bounds asserted above.
                unsafe {
                    $rows::<D, 4>(
                        &x[r0 * D..],
                        origin,
                        transposed,
                        norms,
                        &mut labels[r0..r0 + 4],
                        &mut gaps[r0..r0 + 4],
                    )
                };
            }
            for r in full..labels.len() {
                // SAFETY: as above.
                unsafe { $rows::<D, 1>(&x[r * D..], origin, transposed, norms, &mut labels[r..=r], &mut gaps[r..=r]) };
            }
        }

        /// `R` rows of the kernel above.
        ///
        /// # Safety
        /// As above, and `x` holds `R * D` values, `labels` and `gaps` `R`.
        #[target_feature(enable = "avx512f,avx512vl")]
        #[inline]
        unsafe fn $rows<const D: usize, const R: usize>(
            x: &[$t],
            origin: &[$t],
            transposed: &[$t],
            norms: &[$t],
            labels: &mut [u32],
            gaps: &mut [$t],
        ) {
            let kp = norms.len();
            let mut best = [$set1(<$t>::INFINITY); R];
            let mut second = [$set1(<$t>::INFINITY); R];
            // Index 0 until a smaller value is seen: a row whose values are
            // all inf or NaN (overflow) still gets a valid label.
            let mut best_idx = [$iset1(0); R];
            let mut idx = $iinit;
            let step = $iset1($lanes);
            // The rows' shifted values, times −2.
            let mut xs = [[$set1(0.0); D]; R];
            for r in 0..R {
                for f in 0..D {
                    xs[r][f] = $set1(-2.0 * (x[r * D + f] - origin[f]));
                }
            }
            let mut c0 = 0;
            while c0 < kp {
                // SAFETY: c0 + lanes <= kp and f * kp + c0 + lanes <= D * kp
                // (asserted by the caller), so every load is in bounds.
                let n = unsafe { $loadu(norms.as_ptr().add(c0)) };
                let mut acc = [n; R];
                for f in 0..D {
                    let col = unsafe { $loadu(transposed.as_ptr().add(f * kp + c0)) };
                    for r in 0..R {
                        acc[r] = $fmadd(xs[r][f], col, acc[r]);
                    }
                }
                for r in 0..R {
                    let lt = $cmp::<_CMP_LT_OQ>(acc[r], best[r]);
                    second[r] = $min(second[r], $max(best[r], acc[r]));
                    best[r] = $mov(best[r], lt, acc[r]);
                    best_idx[r] = $imov(best_idx[r], lt, idx);
                }
                idx = $iadd(idx, step);
                c0 += $lanes;
            }
            for r in 0..R {
                let min = $reduce_min(best[r]);
                let at_min = $cmp::<_CMP_EQ_OQ>(best[r], $set1(min));
                let cand = $imov($iset1(-1), at_min, best_idx[r]);
                let mut lanes = [0u32; $lanes];
                // SAFETY: `lanes` holds exactly one vector of u32.
                unsafe { $istore(lanes.as_mut_ptr().cast(), cand) };
                let chosen = lanes.iter().copied().min().unwrap_or(0);
                // Second best: the winning lane's runner-up, or any other
                // lane's best (another lane at the minimum gives a gap of 0).
                let win = at_min & $icmpeq(best_idx[r], $iset1(chosen as i32));
                let runner_up = $reduce_min($mov(best[r], win, second[r]));
                labels[r] = chosen;
                gaps[r] = runner_up - min;
            }
        }
    };
}

argmin_kernel!(
    argmin_f64,
    rows_f64,
    f64,
    8,
    __m512d,
    __m256i,
    _mm512_set1_pd,
    _mm512_loadu_pd,
    _mm512_fmadd_pd,
    _mm512_cmp_pd_mask,
    _mm512_mask_mov_pd,
    _mm512_min_pd,
    _mm512_max_pd,
    _mm512_reduce_min_pd,
    _mm256_set1_epi32,
    _mm256_add_epi32,
    _mm256_mask_mov_epi32,
    _mm256_cmpeq_epi32_mask,
    _mm256_storeu_si256,
    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
);
argmin_kernel!(
    argmin_f32,
    rows_f32,
    f32,
    16,
    __m512,
    __m512i,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_fmadd_ps,
    _mm512_cmp_ps_mask,
    _mm512_mask_mov_ps,
    _mm512_min_ps,
    _mm512_max_ps,
    _mm512_reduce_min_ps,
    _mm512_set1_epi32,
    _mm512_add_epi32,
    _mm512_mask_mov_epi32,
    _mm512_cmpeq_epi32_mask,
    _mm512_storeu_si512,
    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
);
