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
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* A portable build (GRIND_NATIVE=0: no -march=native) compiles the 4-wide vectors below
   for SSE2, where GCC broadcasts scalars and keeps the accumulators through the stack: the
   N = 10 E-step ran ~16x slower.  There the products get a second, x86-64-v3 (AVX2 + FMA)
   body chosen when the module loads (GCC function multi-versioning); the default body runs
   on older CPUs. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__AVX2__)
#define GRIND_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GRIND_CLONES
#endif

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
#if defined(__AVX512F__)
/* The same rows with 8-wide AVX-512 vectors (a native build on such a CPU): a row of
   N <= 16 columns is ceil(N / 8) vectors, the last one masked, so N = 10 takes two
   multiply-adds per broadcast instead of three; RW up to 8 rows at once. */
static inline __attribute__((always_inline)) void
grind_rows_z(const int N, const int RW, int i, int K, const double *A, int64_t sak, int64_t sai,
             const double *B, int64_t ldb, const double *f, const double *g,
             double *C, int64_t ldc, int acc) {
    const int nz = (N + 7) / 8;
    const __mmask8 mk = (__mmask8)((1u << (N - 8 * (nz - 1))) - 1u);
    __m512d c[8][2];
    for (int r = 0; r < RW; r++) c[r][0] = c[r][1] = _mm512_setzero_pd();
    const double *a = A + i * sai, *b = B;
    for (int k = 0; k < K; k++, a += sak, b += ldb) {
        __m512d b0, b1 = _mm512_setzero_pd();
        if (nz == 2) {
            b0 = _mm512_loadu_pd(b);
            b1 = _mm512_maskz_loadu_pd(mk, b + 8);
        } else {
            b0 = _mm512_maskz_loadu_pd(mk, b);
        }
        for (int r = 0; r < RW; r++) {
            const __m512d ar = _mm512_set1_pd(f ? a[r * sai] * f[k] : a[r * sai]);
            c[r][0] = _mm512_fmadd_pd(ar, b0, c[r][0]);
            if (nz == 2) c[r][1] = _mm512_fmadd_pd(ar, b1, c[r][1]);
        }
    }
    for (int r = 0; r < RW; r++) {
        double *cp = C + (i + r) * ldc;
        const __m512d gr = _mm512_set1_pd(g ? g[i + r] : 1.0);
        if (nz == 2) {
            __m512d x = _mm512_mul_pd(gr, c[r][0]);
            _mm512_storeu_pd(cp, acc ? _mm512_add_pd(_mm512_loadu_pd(cp), x) : x);
            x = _mm512_mul_pd(gr, c[r][1]);
            _mm512_mask_storeu_pd(cp + 8, mk, acc ? _mm512_add_pd(_mm512_maskz_loadu_pd(mk, cp + 8), x) : x);
        } else {
            const __m512d x = _mm512_mul_pd(gr, c[r][0]);
            _mm512_mask_storeu_pd(cp, mk, acc ? _mm512_add_pd(_mm512_maskz_loadu_pd(mk, cp), x) : x);
        }
    }
}
#endif
static inline __attribute__((always_inline)) void
grind_atb_n(const int N, int K, int m, const double *A, int64_t sak, int64_t sai,
            const double *B, int64_t ldb, const double *f, const double *g,
            double *C, int64_t ldc, int acc) {
    int i = 0;
#if defined(__AVX512F__)
    for (; i + 8 <= m; i += 8) grind_rows_z(N, 8, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i + 4 <= m; i += 4) grind_rows_z(N, 4, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i + 2 <= m; i += 2) grind_rows_z(N, 2, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i < m; i++) grind_rows_z(N, 1, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    return;
#endif
    for (; i + 4 <= m; i += 4) grind_rows_n(N, 4, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i + 2 <= m; i += 2) grind_rows_n(N, 2, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
    for (; i < m; i++) grind_rows_n(N, 1, i, K, A, sak, sai, B, ldb, f, g, C, ldc, acc);
}
#define GRIND_CASE_N(N) case N: grind_atb_n(N, K, m, A, sak, sai, B, ldb, f, g, C, ldc, acc); return;

GRIND_CLONES static void grind_atb(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
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

/* dst[0..3] += fq * (sum of s[r]) for r = 0..3 */
static inline __attribute__((always_inline)) void
grind_hsum4_add(double *dst, double fq, const grind_v4 *s) {
    const grind_v4 s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
#if defined(__clang__)
    grind_v4 a = __builtin_shufflevector(s0, s1, 0, 4, 2, 6) + __builtin_shufflevector(s0, s1, 1, 5, 3, 7);
    grind_v4 b = __builtin_shufflevector(s2, s3, 0, 4, 2, 6) + __builtin_shufflevector(s2, s3, 1, 5, 3, 7);
    GRIND_ST(dst, GRIND_LD(dst) + fq * (__builtin_shufflevector(a, b, 0, 1, 4, 5) + __builtin_shufflevector(a, b, 2, 3, 6, 7)));
#else
    typedef int64_t grind_i4 __attribute__((vector_size(32)));
    const grind_i4 ev = {0, 4, 2, 6}, od = {1, 5, 3, 7}, lo = {0, 1, 4, 5}, hi = {2, 3, 6, 7};
    grind_v4 a = __builtin_shuffle(s0, s1, ev) + __builtin_shuffle(s0, s1, od);
    grind_v4 b = __builtin_shuffle(s2, s3, ev) + __builtin_shuffle(s2, s3, od);
    GRIND_ST(dst, GRIND_LD(dst) + fq * (__builtin_shuffle(a, b, lo) + __builtin_shuffle(a, b, hi)));
#endif
}
/* Outside pushes of one dense block, N = nr <= GRIND_NARROW columns (compile time), nl rows:
   for each split q < K (f[q] != 0; rows q of the children at stride ld),
     aL[q*ld + B] += f[q] sum_C A[B*N + C] bR[q*ld + C]    (left child, B < nl)
     aR[q*ld + C] += f[q] sum_B bL[q*ld + B] A[B*N + C]    (right child, C < N)
   in one pass over the rows of A per split (no transposed copy of A): the left sums
   are row dot products, reduced four rows at a time into one vector. */
static inline __attribute__((always_inline)) void
grind_push_n(const int N, int nl, int K, const double *A, const double *bL, const double *bR,
             int64_t ld, const double *f, double *aL, double *aR) {
    enum { NV = GRIND_NARROW / 4 };
    const int nv = N / 4, h2 = (N % 4) >= 2, h1 = N % 2;
    for (int q = 0; q < K; q++) {
        const double fq = f[q];
        if (fq == 0.0) continue;
        const double *bl = bL + q * ld, *br = bR + q * ld;
        double *al = aL + q * ld, *ar = aR + q * ld;
        grind_v4 r4[NV], c4[2][NV];
        grind_v2 r2 = {0}, c2[2] = {{0}, {0}};
        double r1 = 0.0, c1[2] = {0.0, 0.0};
        for (int v = 0; v < nv; v++) { r4[v] = GRIND_LD(br + 4 * v); c4[0][v] = c4[1][v] = (grind_v4){0}; }
        if (h2) r2 = *(const grind_v2 *)(br + 4 * nv);
        if (h1) r1 = br[N - 1];
        int B = 0;
        for (; B + 4 <= nl; B += 4) {
            grind_v4 s[4];
            for (int r = 0; r < 4; r++) {
                const double *a = A + (B + r) * N;
                const double x = bl[B + r];
                const int e = r & 1;
                grind_v4 sr = {0};
                for (int v = 0; v < nv; v++) {
                    grind_v4 av = GRIND_LD(a + 4 * v);
                    c4[e][v] += x * av;
                    sr += av * r4[v];
                }
                if (h2) {
                    grind_v2 av = *(const grind_v2 *)(a + 4 * nv), t = av * r2;
                    c2[e] += x * av;
                    sr += (grind_v4){t[0], t[1], 0.0, 0.0};
                }
                if (h1) {
                    c1[e] += x * a[N - 1];
                    sr += (grind_v4){a[N - 1] * r1, 0.0, 0.0, 0.0};
                }
                s[r] = sr;
            }
            grind_hsum4_add(al + B, fq, s);
        }
        for (; B < nl; B++) {
            const double *a = A + B * N;
            const double x = bl[B];
            double d = 0.0;
            for (int C = 0; C < N; C++) d += a[C] * br[C];
            for (int v = 0; v < nv; v++) c4[0][v] += x * GRIND_LD(a + 4 * v);
            if (h2) c2[0] += x * *(const grind_v2 *)(a + 4 * nv);
            if (h1) c1[0] += x * a[N - 1];
            al[B] += fq * d;
        }
        for (int v = 0; v < nv; v++) GRIND_ST(ar + 4 * v, GRIND_LD(ar + 4 * v) + fq * (c4[0][v] + c4[1][v]));
        if (h2) *(grind_v2 *)(ar + 4 * nv) += fq * (c2[0] + c2[1]);
        if (h1) ar[N - 1] += fq * (c1[0] + c1[1]);
    }
}
#if defined(__AVX512F__)
/* The same pushes with 8-wide AVX-512 vectors: a row of A (N <= 16) is ceil(N / 8)
   vectors, the last one masked; the left dot products are halved to four-wide vectors
   and reduced four rows at a time as above. */
static inline __attribute__((always_inline)) void
grind_push_z(const int N, int nl, int K, const double *A, const double *bL, const double *bR,
             int64_t ld, const double *f, double *aL, double *aR) {
    const int nz = (N + 7) / 8;
    const __mmask8 mk = (__mmask8)((1u << (N - 8 * (nz - 1))) - 1u);
    const __m512d zero = _mm512_setzero_pd();
    for (int q = 0; q < K; q++) {
        const double fq = f[q];
        if (fq == 0.0) continue;
        const double *bl = bL + q * ld, *br = bR + q * ld;
        double *al = aL + q * ld, *ar = aR + q * ld;
        const __m512d r0 = nz == 2 ? _mm512_loadu_pd(br) : _mm512_maskz_loadu_pd(mk, br);
        const __m512d r1 = nz == 2 ? _mm512_maskz_loadu_pd(mk, br + 8) : zero;
        __m512d c[2][2] = {{zero, zero}, {zero, zero}};
        int B = 0;
        for (; B + 4 <= nl; B += 4) {
            grind_v4 s[4];
            for (int r = 0; r < 4; r++) {
                const double *a = A + (B + r) * N;
                const __m512d x = _mm512_set1_pd(bl[B + r]);
                const int e = r & 1;
                const __m512d a0 = nz == 2 ? _mm512_loadu_pd(a) : _mm512_maskz_loadu_pd(mk, a);
                __m512d sr = _mm512_mul_pd(a0, r0);
                c[e][0] = _mm512_fmadd_pd(x, a0, c[e][0]);
                if (nz == 2) {
                    const __m512d a1 = _mm512_maskz_loadu_pd(mk, a + 8);
                    c[e][1] = _mm512_fmadd_pd(x, a1, c[e][1]);
                    sr = _mm512_fmadd_pd(a1, r1, sr);
                }
                s[r] = (grind_v4)_mm256_add_pd(_mm512_castpd512_pd256(sr), _mm512_extractf64x4_pd(sr, 1));
            }
            grind_hsum4_add(al + B, fq, s);
        }
        for (; B < nl; B++) {
            const double *a = A + B * N;
            const __m512d x = _mm512_set1_pd(bl[B]);
            const __m512d a0 = nz == 2 ? _mm512_loadu_pd(a) : _mm512_maskz_loadu_pd(mk, a);
            __m512d sr = _mm512_mul_pd(a0, r0);
            c[0][0] = _mm512_fmadd_pd(x, a0, c[0][0]);
            if (nz == 2) {
                const __m512d a1 = _mm512_maskz_loadu_pd(mk, a + 8);
                c[0][1] = _mm512_fmadd_pd(x, a1, c[0][1]);
                sr = _mm512_fmadd_pd(a1, r1, sr);
            }
            al[B] += fq * _mm512_reduce_add_pd(sr);
        }
        const __m512d fv = _mm512_set1_pd(fq);
        if (nz == 2) {
            _mm512_storeu_pd(ar, _mm512_fmadd_pd(fv, _mm512_add_pd(c[0][0], c[1][0]), _mm512_loadu_pd(ar)));
            _mm512_mask_storeu_pd(ar + 8, mk, _mm512_fmadd_pd(fv, _mm512_add_pd(c[0][1], c[1][1]),
                                                              _mm512_maskz_loadu_pd(mk, ar + 8)));
        } else {
            _mm512_mask_storeu_pd(ar, mk, _mm512_fmadd_pd(fv, _mm512_add_pd(c[0][0], c[1][0]),
                                                          _mm512_maskz_loadu_pd(mk, ar)));
        }
    }
}
#define GRIND_PUSH_N(N) case N: grind_push_z(N, nl, K, A, bL, bR, ld, f, aL, aR); return 1;
#else
#define GRIND_PUSH_N(N) case N: grind_push_n(N, nl, K, A, bL, bR, ld, f, aL, aR); return 1;
#endif
/* one case a narrow width 1..GRIND_NARROW, for the switches that call a compile-time-N kernel */
#define GRIND_NARROW_CASES(C) C(1) C(2) C(3) C(4) C(5) C(6) C(7) C(8) C(9) C(10) C(11) C(12)
/* returns 0 (nothing done) when nr or nl is not a narrow size */
GRIND_CLONES static int grind_push(int nl, int nr, int K, const double *A, const double *bL, const double *bR,
                      int64_t ld, const double *f, double *aL, double *aR) {
    if (nl > GRIND_NARROW) return 0;
    switch (nr) { GRIND_NARROW_CASES(GRIND_PUSH_N) default: return 0; }
}

/* vec(M) = sum_q f[q] outer(bL + q*ld, bR + q*ld) for the nl x N block of a split sum
   (N = nr <= GRIND_NARROW at compile time; one split: a scaled outer product). */
static inline __attribute__((always_inline)) void
grind_outer_n(const int N, int nl, int K, const double *bL, const double *bR, int64_t ld,
              const double *f, double *M) {
    enum { NV = GRIND_NARROW / 4 };
    const int nv = N / 4, h2 = (N % 4) >= 2, h1 = N % 2;
    if (K != 1) {
        grind_atb_n(N, K, nl, bL, ld, 1, bR, ld, f, NULL, M, N, 0);
        return;
    }
    grind_v4 r4[NV];
    grind_v2 r2 = {0};
    double r1 = 0.0;
    for (int v = 0; v < nv; v++) r4[v] = f[0] * GRIND_LD(bR + 4 * v);
    if (h2) r2 = f[0] * *(const grind_v2 *)(bR + 4 * nv);
    if (h1) r1 = f[0] * bR[N - 1];
    for (int B = 0; B < nl; B++, M += N) {
        const double x = bL[B];
        for (int v = 0; v < nv; v++) GRIND_ST(M + 4 * v, x * r4[v]);
        if (h2) *(grind_v2 *)(M + 4 * nv) = x * r2;
        if (h1) M[N - 1] = x * r1;
    }
}
#define GRIND_OUTER_N(N) case N: grind_outer_n(N, nl, K, bL, bR, ld, f, M); return 1;
/* returns 0 (nothing done) when nr or nl is not a narrow size */
GRIND_CLONES static int grind_outer(int nl, int nr, int K, const double *bL, const double *bR, int64_t ld,
                       const double *f, double *M) {
    if (nl > GRIND_NARROW) return 0;
    switch (nr) { GRIND_NARROW_CASES(GRIND_OUTER_N) default: return 0; }
}

/* Products with few rows (MR <= GRIND_NARROW, compile time) and long rows, for the batch
   products of the dense path with few rule rows (AVX-512 register file: up to 24 vector
   accumulators).  grind_atb_rows: C (+)= A^T B with all MR rows of C at once per strip of
   8 columns, so that B is read once;  grind_atb_kreg: C = A^T B for a short sum (KR terms)
   with the KR x 8 strip of B held in registers while the rows of C stream by (one 8-wide
   AVX-512 vector a strip; without AVX-512 the products take the general kernels). */
#if defined(__AVX512F__)
static inline __attribute__((always_inline)) void
grind_atb_rows_n(const int MR, int K, int n, const double *A, int64_t sak, int64_t sai,
                 const double *B, int64_t ldb, double *C, int64_t ldc, int acc) {
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m512d c[GRIND_NARROW];
        for (int r = 0; r < MR; r++) c[r] = _mm512_setzero_pd();
        const double *a = A, *b = B + j;
        for (int k = 0; k < K; k++, a += sak, b += ldb) {
            const __m512d bv = _mm512_loadu_pd(b);
            for (int r = 0; r < MR; r++) c[r] = _mm512_fmadd_pd(_mm512_set1_pd(a[r * sai]), bv, c[r]);
        }
        for (int r = 0; r < MR; r++) {
            double *cp = C + r * ldc + j;
            _mm512_storeu_pd(cp, acc ? _mm512_add_pd(_mm512_loadu_pd(cp), c[r]) : c[r]);
        }
    }
    for (; j < n; j++) {
        double c[GRIND_NARROW];
        for (int r = 0; r < MR; r++) c[r] = 0.0;
        const double *a = A, *b = B + j;
        for (int k = 0; k < K; k++, a += sak, b += ldb)
            for (int r = 0; r < MR; r++) c[r] += a[r * sai] * b[0];
        for (int r = 0; r < MR; r++) C[r * ldc + j] = acc ? C[r * ldc + j] + c[r] : c[r];
    }
}
static inline __attribute__((always_inline)) void
grind_atb_kreg_n(const int KR, int m, int n, const double *A, int64_t sak, int64_t sai,
                 const double *B, int64_t ldb, double *C, int64_t ldc) {
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m512d w[GRIND_NARROW];
        for (int k = 0; k < KR; k++) w[k] = _mm512_loadu_pd(B + k * ldb + j);
        const double *a = A;
        double *cp = C + j;
        for (int i = 0; i < m; i++, a += sai, cp += ldc) {
            __m512d c0 = _mm512_setzero_pd(), d0 = _mm512_setzero_pd();
            int k = 0;
            for (; k + 2 <= KR; k += 2) {
                c0 = _mm512_fmadd_pd(_mm512_set1_pd(a[k * sak]), w[k], c0);
                d0 = _mm512_fmadd_pd(_mm512_set1_pd(a[(k + 1) * sak]), w[k + 1], d0);
            }
            if (k < KR) c0 = _mm512_fmadd_pd(_mm512_set1_pd(a[k * sak]), w[k], c0);
            _mm512_storeu_pd(cp, _mm512_add_pd(c0, d0));
        }
    }
    for (; j < n; j++) {
        const double *a = A;
        for (int i = 0; i < m; i++, a += sai) {
            double c = 0.0;
            for (int k = 0; k < KR; k++) c += a[k * sak] * B[k * ldb + j];
            C[i * ldc + j] = c;
        }
    }
}
#endif
#if defined(__AVX512F__)
#define GRIND_ROWS_N(N) case N: grind_atb_rows_n(N, K, n, A, sak, sai, B, ldb, C, ldc, acc); return 1;
#define GRIND_KREG_N(N) case N: grind_atb_kreg_n(N, m, n, A, sak, sai, B, ldb, C, ldc); return 1;
#else
#define GRIND_ROWS_N(N)
#define GRIND_KREG_N(N)
#endif
/* C[i*ldc + j] (+)= sum_k A[k*sak + i*sai] B[k*ldb + j], i < m <= GRIND_NARROW; 0: not done */
static int grind_atb_rows(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
                          const double *B, int64_t ldb, double *C, int64_t ldc, int acc) {
    switch (m) {
        GRIND_ROWS_N(4) GRIND_ROWS_N(5) GRIND_ROWS_N(6) GRIND_ROWS_N(7) GRIND_ROWS_N(8)
        GRIND_ROWS_N(9) GRIND_ROWS_N(10) GRIND_ROWS_N(11) GRIND_ROWS_N(12)
        default: return 0;
    }
}
/* C[i*ldc + j] = sum_k A[k*sak + i*sai] B[k*ldb + j], K <= GRIND_NARROW terms; 0: not done */
static int grind_atb_kreg(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
                          const double *B, int64_t ldb, double *C, int64_t ldc) {
    switch (K) {
        GRIND_KREG_N(4) GRIND_KREG_N(5) GRIND_KREG_N(6) GRIND_KREG_N(7) GRIND_KREG_N(8)
        GRIND_KREG_N(9) GRIND_KREG_N(10) GRIND_KREG_N(11) GRIND_KREG_N(12)
        default: return 0;
    }
}

/* C[i*ldc + j] += g[i] sum_k A[i*lda + k] B[j*ldb + k] for i < m, j < n (dot products) */
GRIND_CLONES static void grind_abt(int K, int m, int n, const double *A, int64_t lda,
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
GRIND_CLONES static void grind_sparse_in(int S, int K, const int *ptr, const int *lhs, const int *right,
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
GRIND_CLONES static void grind_sparse_out(int S, int K, const int *ptr, const int *lhs, const int *right,
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
    int i = 0;
#if defined(__AVX__)
    /* max_pd(x, m) is (x > m ? x : m) lane by lane, as below (a NaN x is passed over) */
    if (n >= 4) {
        __m256d mv = _mm256_setzero_pd();
        for (; i + 4 <= n; i += 4) mv = _mm256_max_pd(_mm256_loadu_pd(x + i), mv);
        double t[4];
        _mm256_storeu_pd(t, mv);
        m0 = t[0]; m1 = t[1]; m2 = t[2]; m3 = t[3];
    }
#endif
    for (; i + 4 <= n; i += 4) {
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
