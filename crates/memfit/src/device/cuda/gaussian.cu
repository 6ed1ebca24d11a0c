// memfit's Gaussian mixture kernel for CUDA, compiled at run time by NVRTC.
//
// log_prob_*: the weighted log-density ln pi_c + log N(x_r | mu_c, Sigma_c)
// of row r under component c, one thread per (row, component), as the
// host's `kernels::gaussian::log_prob_tile` defines it:
//   base_c - q / 2, with base_c = -d/2 ln(2 pi) + sum_j ln U_jj + ln pi_c,
// and q the squared norm of the whitened row, in float64:
// - full (kind 0): y = (x - mu_c) U_c, U_c upper triangular (factor c is
//   columns c*d .. (c+1)*d of the row-major (d, K*d) matrix `prec`);
// - tied (kind 1): the same with the one (d, d) factor;
// - diag (kind 2): y_j = (x_j - mu_cj) p_cj, `prec` row-major (K, d);
// - spherical (kind 3): q = p_c^2 sum_j (x_j - mu_cj)^2, `prec` (K,).
// The host computes y by GEMM tiles (x U - mu U for narrow full
// covariances), so the values agree to rounding, not bit for bit.

template <typename T>
__device__ void log_prob(const T* __restrict__ x, const double* __restrict__ means,
                         const double* __restrict__ prec, const double* __restrict__ base,
                         int rows, int d, int k, int kind, double* __restrict__ out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const T* xr = x + (size_t)r * d;
    // Components beyond the grid's height (65,535) are looped over.
    for (int c = blockIdx.y; c < k; c += gridDim.y) {
        const double* mu = means + (size_t)c * d;
        double q = 0.0;
        if (kind <= 1) {
            size_t stride = kind == 0 ? (size_t)k * d : (size_t)d;
            const double* u = prec + (kind == 0 ? (size_t)c * d : 0);
            for (int b = 0; b < d; ++b) {
                double y = 0.0;
                for (int a = 0; a <= b; ++a) {
                    y += ((double)xr[a] - mu[a]) * u[(size_t)a * stride + b];
                }
                q += y * y;
            }
        } else if (kind == 2) {
            const double* p = prec + (size_t)c * d;
            for (int a = 0; a < d; ++a) {
                double v = ((double)xr[a] - mu[a]) * p[a];
                q += v * v;
            }
        } else {
            for (int a = 0; a < d; ++a) {
                double v = (double)xr[a] - mu[a];
                q += v * v;
            }
            q *= prec[c] * prec[c];
        }
        out[(size_t)r * k + c] = base[c] - 0.5 * q;
    }
}

extern "C" __global__ void log_prob_float(const float* x, const double* means, const double* prec,
                                          const double* base, int rows, int d, int k, int kind,
                                          double* out) {
    log_prob(x, means, prec, base, rows, d, k, kind, out);
}

extern "C" __global__ void log_prob_double(const double* x, const double* means, const double* prec,
                                           const double* base, int rows, int d, int k, int kind,
                                           double* out) {
    log_prob(x, means, prec, base, rows, d, k, kind, out);
}
