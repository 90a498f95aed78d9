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

/* out[i] = b[i] * exp(min(w[i] * x[i], 700)) for i < n (the mu~ objective's data term; 0 where b = 0). */
static inline void grind_ln_bexp(int n, const double *restrict b, const double *restrict w,
                                 const double *restrict x, double *restrict out)
{
    for (int i = 0; i < n; i++) {
        double z = w[i] * x[i];
        out[i] = b[i] * grind_ln_exp(z < 700.0 ? z : 700.0);
    }
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

/* Cholesky factor (lower, in place) of an m x m SPD matrix; 0 ok, -1 if not positive definite. */
static inline int grind_ln_chol(int m, double *K)
{
    for (int j = 0; j < m; j++) {
        double d = K[j * m + j];
        for (int k = 0; k < j; k++)
            d -= K[j * m + k] * K[j * m + k];
        if (!(d > 0.0))
            return -1;
        d = sqrt(d);
        K[j * m + j] = d;
        for (int i = j + 1; i < m; i++) {
            double v = K[i * m + j];
            for (int k = 0; k < j; k++)
                v -= K[i * m + k] * K[j * m + k];
            K[i * m + j] = v / d;
        }
    }
    return 0;
}

/* Solve L L^T z = r in place (L from grind_ln_chol). */
static inline void grind_ln_cholsolve(int m, const double *L, double *z)
{
    for (int i = 0; i < m; i++) {
        double v = z[i];
        for (int k = 0; k < i; k++)
            v -= L[i * m + k] * z[k];
        z[i] = v / L[i * m + i];
    }
    for (int i = m - 1; i >= 0; i--) {
        double v = z[i];
        for (int k = i + 1; k < m; k++)
            v -= L[k * m + i] * z[k];
        z[i] = v / L[i * m + i];
    }
}

/* The inverse of an m x m symmetric positive definite K, in place (Gauss-Jordan without
 * pivoting, which SPD matrices do not need; each pivot step is one rank-1 update of the
 * whole matrix, so the loops vectorise).  0 ok, -1 if a pivot is not positive. */
static inline int grind_ln_spdinv(int m, double *restrict K)
{
    for (int k = 0; k < m; k++) {
        double piv = K[k * m + k];
        if (!(piv > 0.0))
            return -1;
        double r = 1.0 / piv;
        double *rowk = K + k * m;
        for (int j = 0; j < m; j++)
            rowk[j] *= r;
        rowk[k] = r;
        for (int i = 0; i < m; i++) {
            if (i == k)
                continue;
            double *row = K + i * m;
            double f = row[k];
            row[k] = 0.0;
            for (int j = 0; j < m; j++)
                row[j] -= f * rowk[j];
        }
    }
    return 0;
}

/* The mu~ block solve: maximise over x (n coordinates) the concave
 *     J(x) = sum_i [a_i x_i - b_i exp(w_i x_i)] - 1/2 (x - mu)^T Q (x - mu)
 * given Q and S = Q^-1 (row-major, leading dimension ld), carrying y = Q (x - mu)
 * with x (in: the start and its y; out: the maximiser and its y).
 *
 * Steps s = (Q + D)^-1 g, g = a - w e - y the gradient (e_i = b_i exp(w_i x_i)),
 * D = diag(h) on a set A of coordinates (h = w^2 e, the data's curvature), and then
 * Q s = g - D s, so that y moves without a product by Q.  n <= GRIND_LN_NSMALL: A is
 * every coordinate and (Q + D) is factored directly (exact Newton).  Otherwise by
 * Woodbury from S, with A the GRIND_LN_KMAX coordinates of largest h_i S_ii at the
 * first step:
 *     s = t - S_{.A} H (I + H S_AA H)^-1 H t_A,   t = S g,  H = diag(sqrt h_A),
 * Newton's step with the smallest curvatures left out (D <= the full curvature:
 * linear convergence at about the dropped part of S D); the factor of
 * I + H S_AA H is kept while the gradient falls at least fourfold a step.  Step
 * halving where J would fall (by more than 1e-12 |J|), as grind.infer.ln._newton;
 * stops when max |g| < gtol or a step moves no coordinate by more than 1e-14.
 * ``work``: 8 n + KMAX (KMAX + 3) doubles.  Returns the steps taken (-1: none
 * needed), or -2 if a matrix that should be positive definite was not. */
#ifndef GRIND_LN_KMAX
#define GRIND_LN_KMAX 12
#endif
#define GRIND_LN_NSMALL 4

static inline double grind_ln_dot(int n, const double *restrict a, const double *restrict b)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

static inline double grind_ln_sum(int n, const double *restrict a)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += a[i];
    return acc;
}

static inline double grind_ln_absmax(int n, const double *restrict a)
{
    double m = 0.0;
    for (int i = 0; i < n; i++) {
        double v = fabs(a[i]);
        m = v > m ? v : m;
    }
    return m;
}

static int grind_ln_mu(int n, const double *restrict a, const double *restrict b, const double *restrict w,
                       const double *restrict S, const double *restrict Q, int64_t ld, const double *restrict mu,
                       double *restrict x, double *restrict y, double gtol, int maxiter, double *restrict work)
{
    double *e = work, *g = work + n, *t = work + 2 * n, *s = work + 3 * n, *qs = work + 4 * n;
    double *xn = work + 5 * n, *en = work + 6 * n;
    double *K = work + 8 * n, *z = K + GRIND_LN_KMAX * GRIND_LN_KMAX, *hh = z + GRIND_LN_KMAX;
    int A[GRIND_LN_KMAX];
    int it, i, j, m = 0, small = n <= GRIND_LN_NSMALL, fresh = 1;
    double gprev = 0.0;
    grind_ln_bexp(n, b, w, x, e);
    for (i = 0; i < n; i++)
        g[i] = a[i] - w[i] * e[i] - y[i];
    double gmax = grind_ln_absmax(n, g);
    if (gmax < gtol)
        return -1;
    for (i = 0; i < n; i++)
        xn[i] = x[i] - mu[i];
    double J = grind_ln_dot(n, a, x) - grind_ln_sum(n, e) - 0.5 * grind_ln_dot(n, xn, y);
    if (!small) {                       /* the curvature set A, once: the KMAX largest h_i S_ii > 0 */
        double top[GRIND_LN_KMAX];
        for (i = 0; i < n; i++) {
            double v = w[i] * w[i] * e[i] * S[i * ld + i];
            if (!(v > 0.0) || (m == GRIND_LN_KMAX && v <= top[m - 1]))
                continue;
            j = m < GRIND_LN_KMAX ? m++ : m - 1;
            for (; j > 0 && top[j - 1] < v; j--) {
                top[j] = top[j - 1];
                A[j] = A[j - 1];
            }
            top[j] = v;
            A[j] = i;
        }
    }
    for (it = 0; it < maxiter; it++) {
        if (small) {                    /* exact Newton: (Q + diag(w^2 e)) s = g */
            for (i = 0; i < n; i++) {
                for (j = 0; j <= i; j++)
                    K[i * n + j] = Q[i * ld + j];
                hh[i] = w[i] * w[i] * e[i];
                K[i * n + i] += hh[i];
                s[i] = g[i];
            }
            if (grind_ln_chol(n, K) < 0)
                return -2;
            grind_ln_cholsolve(n, K, s);
            for (i = 0; i < n; i++)
                qs[i] = g[i] - hh[i] * s[i];
        } else {
            grind_ln_symv(n, S, ld, g, t);
            for (i = 0; i < n; i++)
                s[i] = t[i];
            if (m > 0) {
                if (fresh || gmax > 0.25 * gprev) {     /* K = (I + H S_AA H)^-1 */
                    for (i = 0; i < m; i++)
                        hh[i] = sqrt(w[A[i]] * w[A[i]] * e[A[i]]);
                    for (i = 0; i < m; i++) {
                        for (j = 0; j < m; j++)
                            K[i * m + j] = hh[i] * hh[j] * S[A[i] * ld + A[j]];
                        K[i * m + i] += 1.0;
                    }
                    if (grind_ln_spdinv(m, K) < 0)
                        return -2;
                    fresh = 0;
                }
                for (i = 0; i < m; i++)
                    z[i] = 0.0;
                for (j = 0; j < m; j++) {
                    double r = hh[j] * t[A[j]];
                    for (i = 0; i < m; i++)
                        z[i] += K[j * m + i] * r;
                }
                for (j = 0; j < m; j++) {
                    const double *row = S + A[j] * ld;
                    double zj = z[j] * hh[j];
                    for (i = 0; i < n; i++)
                        s[i] -= row[i] * zj;
                }
            }
            for (i = 0; i < n; i++)
                qs[i] = g[i];
            for (j = 0; j < m; j++)
                qs[A[j]] -= hh[j] * hh[j] * s[A[j]];
        }
        /* J(x + u s) = a.x + u a.s - sum e(x + u s) - 1/2 [d.y + u (s.y + d.qs) + u^2 s.qs], d = x - mu */
        double dy = grind_ln_dot(n, xn, y), as = grind_ln_dot(n, a, s);
        double lin = grind_ln_dot(n, s, y) + grind_ln_dot(n, xn, qs), sqs = grind_ln_dot(n, s, qs);
        double ax = grind_ln_dot(n, a, x), u = 1.0, Jn = 0.0;
        int ok = 0;
        for (int halve = 0; halve <= 40; halve++) {
            for (i = 0; i < n; i++)
                t[i] = x[i] + u * s[i];
            grind_ln_bexp(n, b, w, t, en);
            Jn = ax + u * as - grind_ln_sum(n, en) - 0.5 * (dy + u * lin + u * u * sqs);
            if (Jn >= J - 1e-12 * fabs(J)) {
                ok = 1;
                break;
            }
            u *= 0.5;
            fresh = 1;
        }
        if (!ok)
            return it;
        double smax = 0.0;
        for (i = 0; i < n; i++) {
            double d = u * s[i];
            x[i] += d;
            y[i] += u * qs[i];
            xn[i] += d;
            e[i] = en[i];
            d = fabs(d);
            smax = d > smax ? d : smax;
        }
        J = Jn;
        for (i = 0; i < n; i++)
            g[i] = a[i] - w[i] * e[i] - y[i];
        gprev = gmax;
        gmax = grind_ln_absmax(n, g);
        if (gmax < gtol || !(smax > 1e-14))
            return it + 1;
    }
    return maxiter;
}

/* The sigma~^2 coordinate solves: for each i < n, with s = log v,
 *     J(s) = -beta exp(w2 e^s / 2) - p e^s / 2 + s / 2     (concave),
 *     g(s) = J'(s) = -beta exp(w2 v/2) w2 v/2 - p v/2 + 1/2,
 * maximised by Newton's method on g from v (in: the start; out: the maximiser), steps
 * clipped to +-5 (grind.infer.ln.optimise_sigma).  g is decreasing and concave in s
 * (g' < 0, g'' < 0), so from the right of its root a Newton step lands at or right of
 * the root again, and from the left at most one step overshoots to the right: the
 * iteration converges from any start without the step halving of the numpy solver.
 * beta <= 0: the closed form v = 1/p.  Converged where |g| < tol or a step is below
 * 1e-13.  ``work``: 4 n doubles.  Returns the iterations of the slowest coordinate. */
static int grind_ln_sigma(int n, const double *restrict beta, const double *restrict w2, const double *restrict p,
                          double *restrict v, double tol, int iters, double *restrict work)
{
    double *s = work, *act = work + n;
    int i, it, live = 0;
    for (i = 0; i < n; i++) {
        int on = beta[i] > 0.0;
        s[i] = on ? log(v[i]) : 0.0;
        v[i] = on ? v[i] : 1.0 / p[i];
        act[i] = on;
        live += on;
    }
    for (it = 0; it < iters && live > 0; it++) {
        live = 0;
        for (i = 0; i < n; i++) {
            double vv = v[i], tt = 0.5 * w2[i] * vv;
            double aa = beta[i] * grind_ln_exp(tt < 700.0 ? tt : 700.0);
            double g = -aa * tt - 0.5 * p[i] * vv + 0.5;
            double h = -aa * (tt + tt * tt) - 0.5 * p[i] * vv;
            double step = -g / h;
            step = step > 5.0 ? 5.0 : step;
            step = step < -5.0 ? -5.0 : step;
            int on = (act[i] != 0.0) & (fabs(g) >= tol);
            step = on ? step : 0.0;
            double sn = s[i] + step;
            s[i] = sn;
            v[i] = on ? grind_ln_exp(sn) : vv;
            on &= fabs(step) >= 1e-13;
            act[i] = on;
            live += on;
        }
    }
    return it;
}

#endif
