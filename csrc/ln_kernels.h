/* Numerical core of the logistic-normal E-step (csrc/ln.pyx; the math is
 * grind/infer/ln.py's module docstring): a vectorisable exp, the mu~ block
 * solve and the sigma~^2 coordinate solves.  Plain C, no Python objects; the
 * loops run over contiguous float64 arrays so GCC vectorises them. */
#ifndef GRIND_LN_KERNELS_H
#define GRIND_LN_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(x) to about 1 ulp, branch-free so that loops calling it vectorise:
 * x = n ln2 + r (|r| <= ln2/2), exp(r) by its Taylor polynomial of degree 13
 * (truncation < 2e-17 relative), 2^n applied as two halves so that results
 * in the subnormal range and overflow to inf come out as exp's.  NaN gives NaN. */
static inline double grind_ln_exp(double x)
{
    const double shift = 6755399441055744.0;            /* 1.5 * 2^52: rounds to an integer */
    double xc = x < -746.0 ? -746.0 : x;
    xc = xc > 710.0 ? 710.0 : xc;
    double t = xc * 1.4426950408889634 + shift;
    double n = t - shift;
    double r = fma(-n, 0.6931471805599453, xc);
    r = fma(-n, 2.3190468138462996e-17, r);
    double p = 1.0 / 6227020800.0;
    p = fma(p, r, 1.0 / 479001600.0);
    p = fma(p, r, 1.0 / 39916800.0);
    p = fma(p, r, 1.0 / 3628800.0);
    p = fma(p, r, 1.0 / 362880.0);
    p = fma(p, r, 1.0 / 40320.0);
    p = fma(p, r, 1.0 / 5040.0);
    p = fma(p, r, 1.0 / 720.0);
    p = fma(p, r, 1.0 / 120.0);
    p = fma(p, r, 1.0 / 24.0);
    p = fma(p, r, 1.0 / 6.0);
    p = fma(p, r, 0.5);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    int64_t ni = (int64_t) n;
    int64_t h = ni >> 1;
    int64_t b1 = (h + 1023) << 52, b2 = (ni - h + 1023) << 52;
    double s1, s2;
    memcpy(&s1, &b1, 8);
    memcpy(&s2, &b2, 8);
    return (x != x) ? x : p * s1 * s2;
}

/* y = S x for a symmetric S, row-major n x n with leading dimension ld (summed as
 * sum_j x_j S[j, :]: whole rows, no horizontal sums). */
static inline void grind_ln_symv(int n, const double *restrict S, int64_t ld, const double *restrict x,
                                 double *restrict y)
{
    int j = 0;
    for (int i = 0; i < n; i++)
        y[i] = 0.0;
    for (; j + 4 <= n; j += 4) {
        const double *r0 = S + j * ld, *r1 = r0 + ld, *r2 = r1 + ld, *r3 = r2 + ld;
        double x0 = x[j], x1 = x[j + 1], x2 = x[j + 2], x3 = x[j + 3];
        for (int i = 0; i < n; i++)
            y[i] += (r0[i] * x0 + r1[i] * x1) + (r2[i] * x2 + r3[i] * x3);
    }
    for (; j < n; j++) {
        const double *row = S + j * ld;
        double xj = x[j];
        for (int i = 0; i < n; i++)
            y[i] += row[i] * xj;
    }
}

/* Eight lanes (blocks) at once: GCC vector extensions, compiled to AVX-512, AVX2 or SSE2
 * as the build allows.  A build without AVX2 (GRIND_NATIVE=0) carries a second, x86-64-v3
 * body of the solvers, chosen when the module loads (as csrc/cky_kernels.h's GRIND_CLONES);
 * the helpers taking lane vectors by value are inlined into each. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__AVX2__)
#define GRIND_LN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define GRIND_LN_CLONES
#endif
typedef double grind_v8d __attribute__((vector_size(64)));
typedef long long grind_v8l __attribute__((vector_size(64)));
#define LN_L 8

static inline grind_v8d ln_v(double a)
{
    return (grind_v8d) {a, a, a, a, a, a, a, a};
}

static inline grind_v8d ln_sel(grind_v8l m, grind_v8d a, grind_v8d b)  /* m ? a : b, lane by lane */
{
    return (grind_v8d) (((grind_v8l) a & m) | ((grind_v8l) b & ~m));
}

static inline grind_v8d ln_vabs(grind_v8d a)
{
    return (grind_v8d) ((grind_v8l) a & ~(grind_v8l) ln_v(-0.0));
}

/* the sum of the eight lanes (three shuffles, no loop over the lanes) */
static inline double ln_hsum(grind_v8d a)
{
    a += __builtin_shuffle(a, (grind_v8l) {4, 5, 6, 7, 0, 1, 2, 3});
    a += __builtin_shuffle(a, (grind_v8l) {2, 3, 0, 1, 6, 7, 4, 5});
    a += __builtin_shuffle(a, (grind_v8l) {1, 0, 3, 2, 5, 4, 7, 6});
    return a[0];
}

/* how many lanes of a mask (all ones or zero a lane) are set; whether any is */
static inline int ln_count(grind_v8l m)
{
    return (int) ln_hsum(ln_sel(m, ln_v(1.0), ln_v(0.0)));
}

static inline int ln_any(grind_v8l m)
{
    return ln_count(m) != 0;
}

static inline grind_v8d ln_vmax(grind_v8d a, grind_v8d b)
{
    return ln_sel(a > b, a, b);
}

/* The last seven Horner steps of exp's Taylor polynomial at z, from p (the sum of the terms of degree >= 7
 * over z^7), for lane vectors and doubles alike */
#define LN_EXP_TAIL(p, z) \
    ((((((((p) * (z) + 1.0 / 720.0) * (z) + 1.0 / 120.0) * (z) + 1.0 / 24.0) * (z) + 1.0 / 6.0) * (z) + 0.5) \
      * (z) + 1.0) * (z) + 1.0)

static inline grind_v8d ln_vexp_tail(grind_v8d p, grind_v8d z)
{
    return LN_EXP_TAIL(p, z);
}

/* grind_ln_exp lane by lane */
static inline grind_v8d ln_vexp(grind_v8d x)
{
    const grind_v8d shift = ln_v(6755399441055744.0);
    grind_v8d xc = ln_sel(x < ln_v(-746.0), ln_v(-746.0), x);
    xc = ln_sel(xc > ln_v(710.0), ln_v(710.0), xc);
    xc = ln_sel(x != x, ln_v(0.0), xc);
    grind_v8d t = xc * 1.4426950408889634 + shift;
    grind_v8d n = t - shift;
    grind_v8d r = xc - n * 0.6931471805599453;
    r = r - n * 2.3190468138462996e-17;
    grind_v8d p = ln_v(1.0 / 6227020800.0);
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = ln_vexp_tail(p, r);
    grind_v8l ni = __builtin_convertvector(n, grind_v8l);
    grind_v8l h = ni >> 1;
    grind_v8d s1 = (grind_v8d) ((h + 1023) << 52), s2 = (grind_v8d) ((ni - h + 1023) << 52);
    return ln_sel(x != x, x, p * s1 * s2);
}

/* b exp(min(w x, 700)) lane by lane */
static inline grind_v8d ln_vbexp(grind_v8d b, double w, grind_v8d x)
{
    grind_v8d z = x * w;
    z = ln_sel(z < ln_v(700.0), z, ln_v(700.0));
    return b * ln_vexp(z);
}

/* The mu~ block solve, for up to eight blocks of one pattern at once (the same n, S, Q, w,
 * mu), a block a lane: a, b, x, y hold n lane vectors (coordinate i of every lane at [i]).
 * Each lane maximises over x the concave
 *     J(x) = sum_i [a_i x_i - b_i exp(w_i x_i)] - 1/2 (x - mu)^T Q (x - mu)
 * given Q and S = Q^-1 (row-major, leading dimension ld), carrying y = Q (x - mu) with x
 * (in: the start and its y; out: the maximiser and its y).  Steps s = (Q + D)^-1 g, with
 * g = a - w e - y the gradient (e_i = b_i exp(w_i x_i)) and D = diag(h) over a set A of
 * coordinates (h = w^2 e, the data's curvature); then Q s = g - D s, so y moves without a
 * product by Q.  n <= NSMALL: A is every coordinate and Q + D is factored directly (exact
 * Newton).  Otherwise, by Woodbury from S,
 *     s = t - S_{.A} H (I + H S_AA H)^-1 H t_A,   t = S g,  H = diag(sqrt h_A),
 * with A the coordinates where the data's curvature is at least TAU of the prior's
 * precision along them, h_i S_ii >= TAU (mean over the lanes at the first step), the KMAX
 * largest of them: Newton's step with the small curvatures left out (D <= the full curvature:
 * linear convergence at about the dropped part of S D; A is often empty, the step S g: sentences
 * of a few words give each coordinate of a 45-tag multinomial a curvature well below its
 * prior's, and the Woodbury terms would cost more than the steps they save); I + H S_AA H is factored again for
 * every lane when one lane's gradient fell less than fourfold (or its step was halved); each
 * such step is taken at the length u = s.g / (s.Q s + s.D' s) (D' the full curvature: the
 * maximiser along s of J's quadratic model), which makes up for the curvature left out.
 * A lane's step is halved where J would fall (by more than 1e-12 |J|; as
 * grind.infer.ln._newton), and the lane stops when max |g| < gtol or a step moves no
 * coordinate by more than 1e-14 (or after 40 halvings).  The lanes run in lockstep.
 * ``act``: the lanes to solve (in), none (out).  ``work``: 8 n + KMAX (KMAX + 2) lane
 * vectors (64-byte aligned, as every lane vector).  ``e0``: b_i exp(w_i x_i) at the start where
 * the caller has it, or NULL.  ``m_out`` (or NULL) gets the size of A.  Returns the sum over
 * the lanes of the steps taken, or -2 if a matrix that should be positive definite was not. */
#ifndef GRIND_LN_KMAX
#define GRIND_LN_KMAX 12
#endif
#ifndef GRIND_LN_TAU
#define GRIND_LN_TAU 0.05
#endif
#define GRIND_LN_NSMALL 4

/* After a step of a mu~ solver: counts the lanes that stepped into ``its``, stops those whose
 * largest gradient is below gtol or whose step moved no coordinate by more than 1e-14;
 * returns whether any lane goes on. */
static inline int ln_go_on(grind_v8l *act, grind_v8d gmax, grind_v8d smax, double gtol, int *its)
{
    *its += ln_count(*act);
    *act &= (gmax >= ln_v(gtol)) & (smax > ln_v(1e-14));
    return ln_any(*act);
}

/* exp(z) for |z| <= 1/64, by its Taylor polynomial of degree 7 (truncation < 1e-19 relative) */
static inline grind_v8d ln_vexp_small(grind_v8d z)
{
    return ln_vexp_tail(ln_v(1.0 / 5040.0), z);
}

/* The line search of both mu~ solvers: the exps at x + u s (into en) and J there, as
 *     J(x + u s) = ax + u as - sum_i en_i - 1/2 (dy + u lin + u^2 sqs)
 * (ax = a.x, as = a.s, dy = d.y, lin = s.y + d.Qs, sqs = s.Qs); u is halved in the lanes where J
 * would fall by more than 1e-12 |J|, at most 40 times.  Where every active lane's step moves no
 * w x by more than 1/64 (zs: per lane, max |w_i s_i|), the exps are e exp(u w s) (e = b exp(w x)
 * at x) by ln_vexp_small: the late steps of a solve, at a third of the cost.  Returns the lanes
 * that could not step (u, en and *Jn as found; ``fresh``, if given, gets the lanes whose step was
 * halved). */
static inline grind_v8l ln_line_search(int n, const grind_v8d *restrict b, const double *restrict w,
                                       const grind_v8d *restrict x, const grind_v8d *restrict s,
                                       const grind_v8d *restrict e, grind_v8d zs,
                                       grind_v8d *restrict en, grind_v8d *u, grind_v8l act, grind_v8d J,
                                       grind_v8d ax, grind_v8d as, grind_v8d dy, grind_v8d lin, grind_v8d sqs,
                                       grind_v8d *Jn, grind_v8l *fresh)
{
    grind_v8l bad = act & 0;
    for (int halve = 0; halve <= 40; halve++) {
        grind_v8d sum = ln_v(0.0);
        grind_v8l big = act & (ln_vabs(*u) * zs > ln_v(1.0 / 64.0));
        if (ln_any(big))
            for (int i = 0; i < n; i++) {
                en[i] = ln_vbexp(b[i], w[i], x[i] + *u * s[i]);
                sum += en[i];
            }
        else
            for (int i = 0; i < n; i++) {
                en[i] = e[i] * ln_vexp_small((*u * w[i]) * s[i]);
                sum += en[i];
            }
        *Jn = ax + *u * as - sum - 0.5 * (dy + *u * lin + *u * *u * sqs);
        bad = act & ~(*Jn >= J - 1e-12 * ln_vabs(J));
        if (!ln_any(bad))
            break;
        *u = ln_sel(bad, *u * 0.5, *u);
        if (fresh != NULL)
            *fresh |= bad;
    }
    return bad;
}

/* grind_ln_mu_batch's steps for n > NSMALL, from the state it set up (e, g, d in ``work``;
 * J, gmax and the active lanes; A, its m coordinates): each step one product by S, then
 * one pass applying the Woodbury correction and taking the line search's sums (Q s =
 * g - D_A s: its A part added after), one taking the exps at the step length, and one
 * moving x, y, g.  The line search and stopping rules are grind_ln_mu_batch's. */
GRIND_LN_CLONES static int ln_mu_chord(int n, const grind_v8d *restrict a, const grind_v8d *restrict b,
                                       const double *restrict w, const double *restrict S, int64_t ld,
                                       grind_v8d *restrict x, grind_v8d *restrict y, grind_v8d *restrict actp,
                                       double gtol, int maxiter, grind_v8d *restrict work, grind_v8l act,
                                       grind_v8d J, grind_v8d gmax, const int *restrict A, int m)
{
    const int KM = GRIND_LN_KMAX;
    grind_v8d *restrict e = work, *restrict g = e + n, *restrict dlt = g + n, *restrict s = dlt + n;
    grind_v8d *restrict hz = s + n, *restrict d = hz + n, *restrict en = d + n;
    grind_v8d *restrict K = en + 2 * n;
    grind_v8d *restrict z = K + KM * KM, *restrict hh = z + KM;
    const grind_v8d zero = ln_v(0.0);
    grind_v8d gprev = zero, ax = zero, dy = zero;
    grind_v8l fresh = act;
    int i, j, k, its = 0;
    for (i = 0; i < n; i++) {
        ax += a[i] * x[i];
        dy += d[i] * y[i];
    }
    for (int it = 0; it < maxiter; it++) {
        /* s = S g, eight coordinates at a time, their sums kept in registers (S is symmetric: row j
         * of S read as its column); the last eight end at n (recomputing a few); one by one if n < 8 */
        for (int i0 = 0; n >= 8 && i0 < n; i0 += 8) {
            i = i0 + 8 <= n ? i0 : n - 8;
            grind_v8d c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero, c6 = zero, c7 = zero;
            for (j = 0; j < n; j++) {
                const double *row = S + j * ld + i;
                grind_v8d gj = g[j];
                c0 += row[0] * gj;
                c1 += row[1] * gj;
                c2 += row[2] * gj;
                c3 += row[3] * gj;
                c4 += row[4] * gj;
                c5 += row[5] * gj;
                c6 += row[6] * gj;
                c7 += row[7] * gj;
            }
            s[i] = c0;
            s[i + 1] = c1;
            s[i + 2] = c2;
            s[i + 3] = c3;
            s[i + 4] = c4;
            s[i + 5] = c5;
            s[i + 6] = c6;
            s[i + 7] = c7;
        }
        for (i = 0; n < 8 && i < n; i++) {
            grind_v8d c0 = zero;
            for (j = 0; j < n; j++)
                c0 += S[j * ld + i] * g[j];
            s[i] = c0;
        }
        if (m > 0) {
            grind_v8l need = act & (fresh | (gmax > gprev * 0.25));
            if (ln_any(need)) {                     /* Cholesky of I + H S_AA H, lane by lane */
                for (i = 0; i < m; i++) {
                    grind_v8d hv = e[A[i]] * (w[A[i]] * w[A[i]]);
                    for (int l = 0; l < LN_L; l++)
                        hv[l] = sqrt(hv[l]);
                    hh[i] = hv;
                }
                for (j = 0; j < m; j++) {
                    grind_v8d dd = hh[j] * hh[j] * S[A[j] * ld + A[j]] + 1.0;
                    for (k = 0; k < j; k++)
                        dd -= K[j * m + k] * K[j * m + k];
                    for (int l = 0; l < LN_L; l++)
                        dd[l] = sqrt(dd[l]);
                    K[j * m + j] = 1.0 / dd;           /* the inverse of the diagonal, kept */
                    for (i = j + 1; i < m; i++) {
                        grind_v8d v = hh[i] * hh[j] * S[A[i] * ld + A[j]];
                        for (k = 0; k < j; k++)
                            v -= K[i * m + k] * K[j * m + k];
                        K[i * m + j] = v * K[j * m + j];
                    }
                }
                fresh = act & 0;
            }
            /* z = (I + H S_AA H)^-1 H t_A: the two triangular solves column by column (each
             * solved entry updates the ones after it: independent products, no chain of sums) */
            for (i = 0; i < m; i++)
                z[i] = hh[i] * s[A[i]];
            for (i = 0; i < m; i++) {
                grind_v8d zi = z[i] * K[i * m + i];
                z[i] = zi;
                for (k = i + 1; k < m; k++)
                    z[k] -= K[k * m + i] * zi;
            }
            for (i = m - 1; i >= 0; i--) {
                grind_v8d zi = z[i] * K[i * m + i];
                z[i] = zi;
                for (k = 0; k < i; k++)
                    z[k] -= K[i * m + k] * zi;
            }
            for (j = 0; j < m; j++)
                hz[j] = hh[j] * z[j];
        }
        /* one pass: s -= S_{.A} H z; the line search's sums with Q s taken as g (its part on A,
         * -D_A s, after); s.g and s.D s for the step length */
        grind_v8d as = zero, lin = zero, sg = zero, sds = zero, zs = zero, Jn;
        for (i = 0; i < n; i++) {
            grind_v8d si = s[i], c0 = zero, c1 = zero;
            for (j = 0; j + 2 <= m; j += 2) {
                c0 += S[A[j] * ld + i] * hz[j];
                c1 += S[A[j + 1] * ld + i] * hz[j + 1];
            }
            if (j < m)
                c0 += S[A[j] * ld + i] * hz[j];
            si -= c0 + c1;
            s[i] = si;
            as += a[i] * si;
            lin += si * y[i] + d[i] * g[i];
            sg += si * g[i];
            sds += si * si * (e[i] * (w[i] * w[i]));
            zs = ln_vmax(zs, ln_vabs(si) * fabs(w[i]));
        }
        grind_v8d sqs = sg;                    /* s.Q s, with Q s = g - D_A s: its A part next */
        for (j = 0; j < m; j++) {
            grind_v8d dl = hh[j] * hh[j] * s[A[j]];
            dlt[j] = dl;
            lin -= d[A[j]] * dl;
            sqs -= s[A[j]] * dl;
        }
        /* the step length: the maximiser along s of J's quadratic model at x, s.g / (s.Q s + s.D s)
         * (1 where that is not positive and finite) */
        grind_v8d den = sqs + sds, u = sg / ln_sel(den > zero, den, ln_v(1.0));
        u = ln_sel((den > zero) & (u > zero) & (u < ln_v(1e300)), u, ln_v(1.0));
        u = ln_sel(act, u, zero);
        grind_v8l bad = ln_line_search(n, b, w, x, s, e, zs, en, &u, act, J, ax, as, dy, lin, sqs, &Jn, &fresh);
        act &= ~bad;                           /* a lane whose step could not be made stops there */
        u = ln_sel(act, u, zero);
        grind_v8d smax = zero;
        gprev = gmax;
        gmax = zero;
        for (j = 0; j < m; j++)                /* y += u Q s = u (g - D_A s) */
            y[A[j]] -= u * dlt[j];
        ax = zero;
        dy = zero;
        for (i = 0; i < n; i++) {
            grind_v8d st = u * s[i];
            x[i] += st;
            y[i] += u * g[i];
            d[i] += st;
            e[i] = ln_sel(act, en[i], e[i]);
            smax = ln_vmax(smax, ln_vabs(st));
            g[i] = a[i] - e[i] * w[i] - y[i];
            gmax = ln_vmax(gmax, ln_vabs(g[i]));
            ax += a[i] * x[i];
            dy += d[i] * y[i];
        }
        J = ln_sel(act, Jn, J);
        if (!ln_go_on(&act, gmax, smax, gtol, &its))
            break;
    }
    *actp = ln_sel(act, ln_v(1.0), zero);
    return its;
}

GRIND_LN_CLONES static int grind_ln_mu_batch(int n, const grind_v8d *restrict a, const grind_v8d *restrict b,
                             const double *restrict w, const double *restrict S, const double *restrict Q,
                             int64_t ld, const double *restrict mu, grind_v8d *restrict x, grind_v8d *restrict y,
                             grind_v8d *restrict actp, double gtol, int maxiter, grind_v8d *restrict work,
                             const grind_v8d *restrict e0, int *restrict m_out)
{
    const int KM = GRIND_LN_KMAX;
    grind_v8d *restrict e = work, *restrict g = e + n, *restrict s = g + 2 * n;     /* d at 5 n: ln_mu_chord's */
    grind_v8d *restrict qs = s + n, *restrict d = qs + n, *restrict en = d + n, *restrict hsq = en + n;
    grind_v8d *restrict K = hsq + n;            /* NSMALL^2 */
    int A[GRIND_LN_KMAX];
    int i, j, k, m = 0, its = 0, small = n <= GRIND_LN_NSMALL;
    const grind_v8d zero = ln_v(0.0);
    grind_v8l act = (grind_v8l) *actp != 0;     /* all ones where active */
    grind_v8d J = zero, gmax = zero;

    for (i = 0; i < n; i++) {
        e[i] = e0 != NULL ? e0[i] : ln_vbexp(b[i], w[i], x[i]);
        g[i] = a[i] - e[i] * w[i] - y[i];
        gmax = ln_vmax(gmax, ln_vabs(g[i]));
        d[i] = x[i] - mu[i];
        J += a[i] * x[i] - e[i] - 0.5 * d[i] * y[i];
    }
    act &= gmax >= gtol;
    if (m_out != NULL)
        *m_out = small ? n : 0;
    if (!ln_any(act)) {
        *actp = zero;
        return 0;
    }
    if (!small) {                              /* the curvature set A, once */
        double top[GRIND_LN_KMAX], lanes = ln_count(act);
        for (i = 0; i < n; i++) {
            double v = ln_hsum(ln_sel(act, e[i], zero)) * (w[i] * w[i] * S[i * ld + i]);
            if (!(v >= GRIND_LN_TAU * lanes) || (m == KM && v <= top[m - 1]))
                continue;
            j = m < KM ? m++ : m - 1;
            for (; j > 0 && top[j - 1] < v; j--) {
                top[j] = top[j - 1];
                A[j] = A[j - 1];
            }
            top[j] = v;
            A[j] = i;
        }
        if (m_out != NULL)
            *m_out = m;
        return ln_mu_chord(n, a, b, w, S, ld, x, y, actp, gtol, maxiter, work, act, J, gmax, A, m);
    }
    for (int it = 0; it < maxiter; it++) {
        for (i = 0; i < n; i++)
            hsq[i] = e[i] * (w[i] * w[i]);
        /* n <= NSMALL: exact Newton, (Q + diag(h)) s = g: two coordinates by the inverse's
         * closed form, more by Cholesky, lane by lane */
        if (n == 2) {
            grind_v8d m00 = ln_v(Q[0]) + hsq[0], m01 = ln_v(Q[1]), m11 = ln_v(Q[ld + 1]) + hsq[1];
            grind_v8d det = m00 * m11 - m01 * m01;
            grind_v8l okd = (m00 > zero) & (det > zero);
            if (ln_any(act & ~okd))
                return -2;
            grind_v8d r = 1.0 / ln_sel(okd, det, ln_v(1.0));
            s[0] = (m11 * g[0] - m01 * g[1]) * r;
            s[1] = (m00 * g[1] - m01 * g[0]) * r;
        } else {
            for (i = 0; i < n; i++)
                for (j = 0; j <= i; j++)
                    K[i * n + j] = ln_v(Q[i * ld + j]) + (i == j ? hsq[i] : zero);
            for (j = 0; j < n; j++) {
                grind_v8d dd = K[j * n + j];
                for (k = 0; k < j; k++)
                    dd -= K[j * n + k] * K[j * n + k];
                grind_v8l okd = dd > zero;
                if (ln_any(act & ~okd))
                    return -2;
                dd = ln_sel(okd, dd, ln_v(1.0));
                for (int l = 0; l < LN_L; l++)
                    dd[l] = sqrt(dd[l]);
                K[j * n + j] = dd;
                grind_v8d rd = 1.0 / dd;
                for (i = j + 1; i < n; i++) {
                    grind_v8d v = K[i * n + j];
                    for (k = 0; k < j; k++)
                        v -= K[i * n + k] * K[j * n + k];
                    K[i * n + j] = v * rd;
                }
            }
            for (i = 0; i < n; i++) {
                grind_v8d v = g[i];
                for (k = 0; k < i; k++)
                    v -= K[i * n + k] * s[k];
                s[i] = v / K[i * n + i];
            }
            for (i = n - 1; i >= 0; i--) {
                grind_v8d v = s[i];
                for (k = i + 1; k < n; k++)
                    v -= K[k * n + i] * s[k];
                s[i] = v / K[i * n + i];
            }
        }
        for (i = 0; i < n; i++)
            qs[i] = g[i] - hsq[i] * s[i];

        /* line search, lane by lane: J(x + u s) as in grind_ln_mu */
        grind_v8d dy = zero, as = zero, lin = zero, sqs = zero, ax = zero, zs = zero;
        for (i = 0; i < n; i++) {
            zs = ln_vmax(zs, ln_vabs(s[i]) * fabs(w[i]));
            dy += d[i] * y[i];
            as += a[i] * s[i];
            lin += s[i] * y[i] + d[i] * qs[i];
            sqs += s[i] * qs[i];
            ax += a[i] * x[i];
        }
        grind_v8d u = ln_sel(act, ln_v(1.0), zero), Jn = zero;
        grind_v8l bad = ln_line_search(n, b, w, x, s, e, zs, en, &u, act, J, ax, as, dy, lin, sqs, &Jn, NULL);
        act &= ~bad;                           /* a lane whose step could not be made stops there */
        u = ln_sel(act, u, zero);
        grind_v8d smax = zero;
        gmax = zero;
        for (i = 0; i < n; i++) {
            grind_v8d st = u * s[i];
            x[i] += st;
            y[i] += u * qs[i];
            d[i] += st;
            e[i] = ln_sel(act, en[i], e[i]);
            smax = ln_vmax(smax, ln_vabs(st));
            g[i] = a[i] - e[i] * w[i] - y[i];
            gmax = ln_vmax(gmax, ln_vabs(g[i]));
        }
        J = ln_sel(act, Jn, J);
        if (!ln_go_on(&act, gmax, smax, gtol, &its))
            break;
    }
    *actp = ln_sel(act, ln_v(1.0), zero);
    return its;
}

/* exp(z) for |z| <= 1/64, as ln_vexp_small, one value (loops over it vectorise) */
static inline __attribute__((always_inline)) double grind_ln_exp_small(double z)
{
    return LN_EXP_TAIL(1.0 / 5040.0, z);
}

/* One step of the sigma~^2 solve below at coordinate i, exp(min(w2 v/2, 700)) at v[i] by
 * ``how``: 0, ex[i] (v[i] is v0[i]); 1, exp; 2, ex[i] exp(w2 (v[i] - v0[i]) / 2) with the
 * second factor by its polynomial (|w2 (v[i] - v0[i]) / 2| <= 1/64).  Returns whether i goes on. */
static inline __attribute__((always_inline)) int ln_sigma_step(int i, const double *restrict beta, const double *restrict w2,
                                const double *restrict p, double *restrict v, double tol, int on,
                                const double *restrict ex, const double *restrict v0, int how)
{
    double vv = v[i], hw = 0.5 * w2[i], tt = hw * vv;
    double E = beta[i] * (how == 0 ? ex[i] : how == 2 ? ex[i] * grind_ln_exp_small(hw * (vv - v0[i]))
                                                     : grind_ln_exp(tt < 700.0 ? tt : 700.0));
    /* J', J'' and J''' times v, v^2 and v^3, so no division: G = v J', H = v^2 J'', T = v^3 J''' */
    double ev = tt * E;                                 /* (w2/2) v beta exp(w2 v/2) */
    double G = 0.5 - ev - 0.5 * p[i] * vv;
    double H = -0.5 - ev * tt;
    double T = 1.0 - ev * tt * tt;
    double F = H * H - 0.5 * G * T;                     /* Halley's step is Newton's over F / H^2 */
    int halley = F > 0.5 * H * H && F < 2.0 * H * H;
    double vn = vv - vv * (halley ? G * H : G) / (halley ? F : H);      /* one division a step */
    vn = vn > 148.4131591025766 * vv ? 148.4131591025766 * vv : vn;     /* e^5 */
    vn = vn < 0.006737946999085467 * vv ? 0.006737946999085467 * vv : vn;
    on &= fabs(G) >= tol;
    v[i] = on ? vn : vv;
    return on & (fabs(vn - vv) >= (halley ? 1e-7 : 1e-13) * vv);
}

/* The sigma~^2 coordinate solves: for each i < n, maximise over v = sigma~^2 > 0 the concave
 *     J(v) = -beta exp(w2 v / 2) - p v / 2 + (log v) / 2
 * (grind.infer.ln.optimise_sigma's objective, there in s = log v) by Halley's method on
 *     J'(v) = -(w2/2) beta exp(w2 v/2) - p/2 + 1/(2 v),   J''(v) = -(w2/2)^2 beta exp(w2 v/2) - 1/(2 v^2) < 0,
 *     J'''(v) = -(w2/2)^3 beta exp(w2 v/2) + 1/v^3
 * (the step -J'/J'' over f = 1 - J' J''' / (2 J''^2), Newton's where f is outside (1/2, 2)),
 * from v (in: the start; out: the maximiser), each step kept within a factor e^5 of v
 * (the +-5 of the numpy solver's steps in log v).  One exp (or polynomial, below) and one
 * division a step.  beta <= 0: the
 * closed form v = 1/p.  Converged where |v J'(v)| (= |dJ/d log v|) < tol, or after a step
 * that moved v by less than 1e-13 of itself (1e-7 for Halley's: its error is then of the
 * order of the cube of that).  Whole passes over the n coordinates (they
 * vectorise) while at least a quarter of them still move, then passes over those left
 * (the same steps: a coordinate's iterates depend on the others only through which of exp
 * and the polynomial a pass takes, a rounding).  ``ex0``:
 * exp(min(w2 v/2, 700)) at the start where the caller has it (the first step's exp; a later
 * step's is ex0 exp(w2 (v - v0)/2) where no coordinate has moved by more than 1/64 in w2 v/2,
 * the second factor by its polynomial), or NULL.  ``work``: 3 n doubles; with ``ex0``, the
 * start v0 (the v of ex0) is left in work[2n..3n).  Returns the passes. */
GRIND_LN_CLONES static int grind_ln_sigma(int n, const double *restrict beta, const double *restrict w2, const double *restrict p,
                          double *restrict v, double tol, int iters, double *restrict work,
                          const double *restrict ex0)
{
    double *restrict act = work, *restrict v0 = work + 2 * n;
    int *restrict live_i = (int *) (work + n);  /* the coordinates still going, once few are */
    int i, it, live = 0, capped = 0;
    int far = 0;                                /* coordinates going on with |w2 (v - v0)/2| > 1/64 */
    for (i = 0; i < n; i++) {
        int on = beta[i] > 0.0;
        if (ex0 != NULL) {
            v0[i] = v[i];
            capped += on & (0.5 * w2[i] * v[i] >= 699.0);      /* ex0 capped near: exps only */
        }
        v[i] = on ? v[i] : 1.0 / p[i];
        act[i] = on;
        live += on;
    }
    for (it = 0; it < iters && live > 0; it++) {
        if (4 * live < n) {                     /* few left: step only those (the same steps) */
            int m = 0;
            for (i = 0; i < n; i++)
                if (act[i] != 0.0)
                    live_i[m++] = i;
            for (; it < iters && m > 0; it++) {
                int k = 0;
                for (int j = 0; j < m; j++) {
                    int c = live_i[j], how = 1;
                    if (ex0 != NULL)
                        how = it == 0 ? 0 : capped == 0 && fabs(0.5 * w2[c] * (v[c] - v0[c])) <= 1.0 / 64.0 ? 2 : 1;
                    if (ln_sigma_step(c, beta, w2, p, v, tol, 1, ex0, v0, how))
                        live_i[k++] = c;
                }
                m = k;
            }
            return it;
        }
        live = 0;
        /* separate loops for the three exps: one loop choosing per coordinate does not vectorise */
        if (it == 0 && ex0 != NULL)
            for (i = 0; i < n; i++) {
                int on = ln_sigma_step(i, beta, w2, p, v, tol, act[i] != 0.0, ex0, v0, 0);
                far += on & (fabs(0.5 * w2[i] * (v[i] - v0[i])) > 1.0 / 64.0);  /* a count: the loop vectorises */
                act[i] = on;
                live += on;
            }
        else if (ex0 != NULL && far == 0 && capped == 0) {
            for (i = 0; i < n; i++) {
                int on = ln_sigma_step(i, beta, w2, p, v, tol, act[i] != 0.0, ex0, v0, 2);
                far += on & (fabs(0.5 * w2[i] * (v[i] - v0[i])) > 1.0 / 64.0);  /* a count: the loop vectorises */
                act[i] = on;
                live += on;
            }
        } else {
            far = 1;                            /* a pass of exps: the next ones too */
            for (i = 0; i < n; i++) {
                int on = ln_sigma_step(i, beta, w2, p, v, tol, act[i] != 0.0, ex0, v0, 1);
                act[i] = on;
                live += on;
            }
        }
    }
    return it;
}

#endif
