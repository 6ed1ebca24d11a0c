// memfit's k-means kernels for CUDA, compiled at run time by NVRTC with
// --fmad=false (no contraction of a * b + c), so every float64 operation
// rounds as the host's does and the results are the host's bits.
//
// assign_*: the label of each row is the lowest index j minimising
// exact_sq_dist(x, c_j), the host's `kernels::assign::exact_sq_dist`:
// sum over features of (x_f - c_jf)^2 in float64, as eight interleaved
// partial sums combined ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)),
// and for at most eight features the same tree without its +0 terms. The
// host certifies a fast GEMM candidate to get this same minimiser; the
// device computes the exact distances directly. The host sums the clusters
// from the labels (in row order, as on the CPU backend).

#define INF __longlong_as_double(0x7ff0000000000000LL)

#define DEFINE_EXACT(T)                                                              \
    __device__ double exact_sq_dist_##T(const T* x, const double* c, int d) {        \
        if (d <= 8) {                                                                \
            double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                  \
            for (int f = 0; f < d; ++f) {                                            \
                double t = (double)x[f] - c[f];                                      \
                a[f] = t * t;                                                        \
            }                                                                        \
            double p01 = d > 1 ? a[0] + a[1] : a[0];                                 \
            double p23 = d > 3 ? a[2] + a[3] : a[2];                                 \
            double p45 = d > 5 ? a[4] + a[5] : a[4];                                 \
            double p67 = d > 7 ? a[6] + a[7] : a[6];                                 \
            double q0 = d > 2 ? p01 + p23 : p01;                                     \
            double q1 = d > 6 ? p45 + p67 : p45;                                     \
            return d > 4 ? q0 + q1 : q0;                                             \
        }                                                                            \
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                    \
        int full = d - d % 8;                                                        \
        for (int f = 0; f < full; f += 8) {                                          \
            for (int l = 0; l < 8; ++l) {                                            \
                double t = (double)x[f + l] - c[f + l];                              \
                acc[l] += t * t;                                                     \
            }                                                                        \
        }                                                                            \
        for (int l = 0; full + l < d; ++l) {                                         \
            double t = (double)x[full + l] - c[full + l];                            \
            acc[l] += t * t;                                                         \
        }                                                                            \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); \
    }

#define DEFINE_ASSIGN(T)                                                             \
    extern "C" __global__ void assign_##T(const T* __restrict__ x, const double* __restrict__ c, \
                                         int rows, int d, int k,                     \
                                         unsigned int* __restrict__ labels,          \
                                         double* __restrict__ dist) {                \
        int r = blockIdx.x * blockDim.x + threadIdx.x;                               \
        if (r >= rows) return;                                                       \
        const T* xr = x + (size_t)r * d;                                             \
        double best = INF;                                                           \
        unsigned int label = 0;                                                      \
        for (int j = 0; j < k; ++j) {                                                \
            double s = exact_sq_dist_##T(xr, c + (size_t)j * d, d);                  \
            if (s < best) {                                                          \
                best = s;                                                            \
                label = (unsigned int)j;                                             \
            }                                                                        \
        }                                                                            \
        if (best == INF) {                                                           \
            /* Every distance overflows: label 0, as the host's scan gives. */       \
            label = 0;                                                               \
            best = exact_sq_dist_##T(xr, c, d);                                      \
        }                                                                            \
        labels[r] = label;                                                           \
        dist[r] = best;                                                              \
    }

DEFINE_EXACT(float)
DEFINE_EXACT(double)
DEFINE_ASSIGN(float)
DEFINE_ASSIGN(double)
