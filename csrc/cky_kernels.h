/* C helpers of the general CKY kernel (csrc/cky.pyx; declared for Cython in
 * csrc/cky.pxd): register-tiled small matrix products for the per-span
 * products of the dense path, the LANES-wide inner loops of the sparse path,
 * and exact power-of-two scaling.  Compiled with the flags of setup.py
 * (-O3 -ffp-contract=fast, -march=native unless GRIND_NATIVE=0).
 */
#ifndef GRIND_CKY_KERNELS_H
#define GRIND_CKY_KERNELS_H

#include <stdint.h>
#include <math.h>

/* C[i*ldc + j] = sum_k A[k*sak + i*sai] * B[k*ldb + j] for i < m, j < n:
   a register-tiled outer-product kernel for the small per-span products
   (4 x 8 tiles; B and C contiguous along j). */
typedef double grind_v4 __attribute__((vector_size(32), aligned(8)));
#define GRIND_LD(p) (*(const grind_v4 *)(p))
#define GRIND_ST(p, v) (*(grind_v4 *)(p) = (v))
typedef double grind_v2 __attribute__((vector_size(16), aligned(8)));
/* rows i0 <= i < i0 + R (R = 4, 2, 1) by columns j..j+W of C = A^T B: R x NV accumulators */
#define GRIND_TILE(T, W, NV, R, FK)                                                 \
    {                                                                               \
        T c[R][NV];                                                                 \
        for (int r = 0; r < R; r++) for (int v = 0; v < NV; v++) c[r][v] = (T){0}; \
        const double *a = A + i * sai, *b = B + j;                                  \
        for (k = 0; k < K; k++, a += sak, b += ldb) {                               \
            T bv[NV];                                                               \
            for (int v = 0; v < NV; v++) bv[v] = *(const T *)(b + v * (W / NV));    \
            for (int r = 0; r < R; r++) {                                           \
                double ar = FK ? a[r * sai] * f[k] : a[r * sai];                    \
                for (int v = 0; v < NV; v++) c[r][v] += ar * bv[v];                 \
            }                                                                       \
        }                                                                           \
        for (int r = 0; r < R; r++) for (int v = 0; v < NV; v++) {                 \
            T *cp = (T *)(C + (i + r) * ldc + j + v * (W / NV));                   \
            T cv = g ? g[i + r] * c[r][v] : c[r][v];                                \
            *cp = acc ? *cp + cv : cv;                                              \
        }                                                                           \
    }
#define GRIND_CHUNK(T, W, NV, FK)                                                   \
    for (; j + W <= n; j += W) {                                                    \
        for (i = 0; i + 4 <= m; i += 4) GRIND_TILE(T, W, NV, 4, FK)                 \
        for (; i + 2 <= m; i += 2) GRIND_TILE(T, W, NV, 2, FK)                      \
        for (; i < m; i++) GRIND_TILE(T, W, NV, 1, FK)                              \
    }
#define GRIND_CHUNKS(FK)                                                            \
    GRIND_CHUNK(grind_v4, 8, 2, FK)                                                 \
    GRIND_CHUNK(grind_v4, 4, 1, FK)                                                 \
    GRIND_CHUNK(grind_v2, 2, 1, FK)                                                 \
    GRIND_CHUNK(grind_v1, 1, 1, FK)
typedef double grind_v1;
/* C[i*ldc + j] (+)= g[i] sum_k f[k] A[k*sak + i*sai] B[k*ldb + j] for i < m, j < n
   (f, g NULL: 1; acc: add to C): a register-tiled outer-product kernel for the small
   per-span products (B and C contiguous along j, A read by broadcast, any strides). */
/* Narrow products (n <= GRIND_NARROW, e.g. the 10 x 10 blocks and 10 rule rows of a
   grammar with 10 nonterminals): rows i..i+RW-1 by all n columns of C at once (n / 4
   four-wide vectors, then a two-wide and a scalar column), so that each A value is
   broadcast once a row and no columns are left to a second, narrower pass.  Called
   with compile-time N and RW (always inlined), the accumulators are registers. */
#define GRIND_NARROW 12
static inline __attribute__((always_inline)) void
grind_rows_n(const int N, const int RW, int i, int K, const double *A, int64_t sak, int64_t sai,
             const double *B, int64_t ldb, const double *f, const double *g,
             double *C, int64_t ldc, int acc) {
    enum { NV = GRIND_NARROW / 4 };
    const int nv = N / 4, h2 = (N % 4) >= 2, h1 = N % 2;
    grind_v4 c4[4][NV];
    grind_v2 c2[4];
    double c1[4];
    for (int r = 0; r < RW; r++) {
        for (int v = 0; v < nv; v++) c4[r][v] = (grind_v4){0};
        c2[r] = (grind_v2){0};
        c1[r] = 0.0;
    }
    const double *a = A + i * sai, *b = B;
    for (int k = 0; k < K; k++, a += sak, b += ldb) {
        grind_v4 b4[NV];
        grind_v2 b2 = {0};
        double b1 = 0.0;
        for (int v = 0; v < nv; v++) b4[v] = GRIND_LD(b + 4 * v);
        if (h2) b2 = *(const grind_v2 *)(b + 4 * nv);
        if (h1) b1 = b[N - 1];
        for (int r = 0; r < RW; r++) {
            double ar = f ? a[r * sai] * f[k] : a[r * sai];
            for (int v = 0; v < nv; v++) c4[r][v] += ar * b4[v];
            if (h2) c2[r] += ar * b2;
            if (h1) c1[r] += ar * b1;
        }
    }
    for (int r = 0; r < RW; r++) {
        double *cp = C + (i + r) * ldc;
        double gr = g ? g[i + r] : 1.0;
        for (int v = 0; v < nv; v++) {
            grind_v4 x = gr * c4[r][v];
            GRIND_ST(cp + 4 * v, acc ? GRIND_LD(cp + 4 * v) + x : x);
        }
        if (h2) {
            grind_v2 *q = (grind_v2 *)(cp + 4 * nv), x = gr * c2[r];
            *q = acc ? *q + x : x;
        }
        if (h1) cp[N - 1] = acc ? cp[N - 1] + gr * c1[r] : gr * c1[r];
    }
}
static inline __attribute__((always_inline)) void
grind_atb_n(const int N, int K, int m, const double *A, int64_t sak, int64_t sai,
            const double *B, int64_t ldb, const double *f, const double *g,
            double *C, int64_t ldc, int acc) {
    int i = 0;
    for (; i + 4 <= m; i += 4) grind_rows_n(N, 4, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i + 2 <= m; i += 2) grind_rows_n(N, 2, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i < m; i++) grind_rows_n(N, 1, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
}
#define GRIND_CASE_N(N) case N: grind_atb_n(N, K, m, A, sak, sai, B, ldb, f, g, C, ldc, acc); return;

static void grind_atb(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
                      const double *B, int64_t ldb, const double *f, const double *g,
                      double *C, int64_t ldc, int acc) {
    int i, j = 0, k;
    switch (n) {
        GRIND_CASE_N(5) GRIND_CASE_N(6) GRIND_CASE_N(7) GRIND_CASE_N(9) GRIND_CASE_N(10)
        GRIND_CASE_N(11) GRIND_CASE_N(12)
        default: break;
    }
    if (f) { GRIND_CHUNKS(1) } else { GRIND_CHUNKS(0) }
}

/* C[i*ldc + j] += g[i] sum_k A[i*lda + k] B[j*ldb + k] for i < m, j < n (dot products) */
static void grind_abt(int K, int m, int n, const double *A, int64_t lda,
                      const double *B, int64_t ldb, const double *g, double *C, int64_t ldc) {
    for (int i = 0; i < m; i++) {
        const double *a = A + i * lda;
        double gi = g[i];
        int j = 0;
        for (; j + 4 <= n; j += 4) {
            const double *b0 = B + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            grind_v4 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            int k = 0;
            for (; k + 4 <= K; k += 4) {
                grind_v4 av = GRIND_LD(a + k);
                c0 += av * GRIND_LD(b0 + k); c1 += av * GRIND_LD(b1 + k);
                c2 += av * GRIND_LD(b2 + k); c3 += av * GRIND_LD(b3 + k);
            }
            double s0 = c0[0] + c0[1] + c0[2] + c0[3], s1 = c1[0] + c1[1] + c1[2] + c1[3];
            double s2 = c2[0] + c2[1] + c2[2] + c2[3], s3 = c3[0] + c3[1] + c3[2] + c3[3];
            for (; k < K; k++) {
                s0 += a[k] * b0[k]; s1 += a[k] * b1[k]; s2 += a[k] * b2[k]; s3 += a[k] * b3[k];
            }
            C[i * ldc + j] += gi * s0; C[i * ldc + j + 1] += gi * s1;
            C[i * ldc + j + 2] += gi * s2; C[i * ldc + j + 3] += gi * s3;
        }
        for (; j < n; j++) {
            const double *b0 = B + j * ldb;
            double s0 = 0.0;
            for (int k = 0; k < K; k++) s0 += a[k] * b0[k];
            C[i * ldc + j] += gi * s0;
        }
    }
}

/* Sparse path, GRIND_LANES spans of one width at a time (lanes v), K splits each;
   children transposed symbol-major: LT[(B*K + q)*LANES + v] = f_qv beta_{i, i+1+q}(B),
   RT[(C*K + q)*LANES + v] = beta_{i+1+q, j}(C).  Rules in left-child CSR order.
   Inside: outT[(A - r0)*LANES + v] += w sum_q LT[B][q][v] RT[C][q][v]. */
#define GRIND_LANES 4
#define GRIND_NV (GRIND_LANES / 4)
static void grind_sparse_in(int S, int K, const int *ptr, const int *lhs, const int *right,
                            const double *wl, int r0, const double *LT, const double *RT,
                            const char *nzL, const char *nzR, double *outT) {
    const int64_t KL = (int64_t)K * GRIND_LANES;
    for (int B = 0; B < S; B++) {
        if (!nzL[B]) continue;
        const double *lt = LT + B * KL;
        for (int p = ptr[B]; p < ptr[B + 1]; p++) {
            int C = right[p];
            if (!nzR[C]) continue;
            const double *rt = RT + C * KL;
            grind_v4 acc[GRIND_NV];
            for (int h = 0; h < GRIND_NV; h++) acc[h] = (grind_v4){0.0, 0.0, 0.0, 0.0};
            for (int q = 0; q < K; q++)
                for (int h = 0; h < GRIND_NV; h++)
                    acc[h] += GRIND_LD(lt + GRIND_LANES * q + 4 * h) * GRIND_LD(rt + GRIND_LANES * q + 4 * h);
            double *o = outT + (int64_t)(lhs[p] - r0) * GRIND_LANES;
            for (int h = 0; h < GRIND_NV; h++) GRIND_ST(o + 4 * h, GRIND_LD(o + 4 * h) + wl[p] * acc[h]);
        }
    }
}
/* Outside: z = w alpha_ij(A) per lane; cnt[p] += z sum_q LT RT (lanes summed later);
   PL[B] += z RT[C] (pushes to left children), PR[C] += z LT[B] (right children). */
static void grind_sparse_out(int S, int K, const int *ptr, const int *lhs, const int *right,
                             const double *wl, int r0, const double *LT,
                             const double *RT, const char *nzL, const char *nzR,
                             const double *aT, const char *nzA, double *PL, double *PR,
                             double *cnt) {
    const int64_t KL = (int64_t)K * GRIND_LANES;
    for (int B = 0; B < S; B++) {
        if (!nzL[B]) continue;
        const double *lt = LT + B * KL;
        double *pl = PL + B * KL;
        for (int p = ptr[B]; p < ptr[B + 1]; p++) {
            int C = right[p], A = lhs[p] - r0;
            if (!nzR[C] || !nzA[A]) continue;
            const double *rt = RT + C * KL;
            double *pr = PR + C * KL;
            grind_v4 z[GRIND_NV], acc[GRIND_NV];
            for (int h = 0; h < GRIND_NV; h++) {
                z[h] = wl[p] * GRIND_LD(aT + GRIND_LANES * A + 4 * h);
                acc[h] = (grind_v4){0.0, 0.0, 0.0, 0.0};
            }
            for (int q = 0; q < K; q++) {
                for (int h = 0; h < GRIND_NV; h++) {
                    int64_t o = GRIND_LANES * q + 4 * h;
                    grind_v4 l = GRIND_LD(lt + o), r = GRIND_LD(rt + o);
                    acc[h] += l * r;
                    GRIND_ST(pl + o, GRIND_LD(pl + o) + z[h] * r);
                    GRIND_ST(pr + o, GRIND_LD(pr + o) + z[h] * l);
                }
            }
            double *c = cnt + (int64_t)GRIND_LANES * p;
            for (int h = 0; h < GRIND_NV; h++) GRIND_ST(c + 4 * h, GRIND_LD(c + 4 * h) + z[h] * acc[h]);
        }
    }
}
/* dst[B * stride + v] = f[v] * src[v][B] for the GRIND_LANES lanes v; nz[B] |= any != 0 */
static inline void grind_scatter(int S, const double *f, const double *const *src,
                                 double *restrict dst, int64_t stride, char *restrict nz) {
    for (int B = 0; B < S; B++) {
        double x[GRIND_LANES];
        char any = 0;
        for (int v = 0; v < GRIND_LANES; v++) {
            x[v] = f[v] * src[v][B];
            any |= (x[v] != 0.0);
            dst[B * stride + v] = x[v];
        }
        nz[B] |= any;
    }
}
static inline char grind_any(const double *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) if (x[i] != 0.0) return 1;
    return 0;
}

/* 2^d for integer-valued d; 0 below the normal range (d = -inf included) */
static inline double grind_pow2(double d) {
    if (!(d >= -1022.0)) return 0.0;
    if (d > 1023.0) d = 1023.0;
    union { uint64_t u; double f; } v;
    v.u = (uint64_t)((int64_t)d + 1023) << 52;
    return v.f;
}
/* floor(log2 x) for x > 0 */
static inline double grind_expo(double x) {
    union { double f; uint64_t u; } v;
    v.f = x;
    int e = (int)((v.u >> 52) & 0x7ff);
    return e ? (double)(e - 1023) : (double)ilogb(x);
}
static inline double grind_vmax(const double *x, int n) {
    double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0;
    int i;
    for (i = 0; i + 4 <= n; i += 4) {
        m0 = x[i] > m0 ? x[i] : m0; m1 = x[i + 1] > m1 ? x[i + 1] : m1;
        m2 = x[i + 2] > m2 ? x[i + 2] : m2; m3 = x[i + 3] > m3 ? x[i + 3] : m3;
    }
    for (; i < n; i++) m0 = x[i] > m0 ? x[i] : m0;
    m0 = m1 > m0 ? m1 : m0; m2 = m3 > m2 ? m3 : m2;
    return m2 > m0 ? m2 : m0;
}
static inline void grind_scal(int n, double a, double *restrict x) {
    for (int i = 0; i < n; i++) x[i] *= a;
}
static inline void grind_transpose(int m, int n, const double *restrict a, double *restrict t) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) t[j * m + i] = a[i * n + j];
}

#endif /* GRIND_CKY_KERNELS_H */
