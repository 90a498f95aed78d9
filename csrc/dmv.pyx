# Split-head DMV kernel: Eisner-style O(n^3) inside-outside, Viterbi and
# sampling for the split-head DMV grammar of grind/dmv.py, batched over a whole
# corpus in one nogil call; and a whole sweep of the collapsed
# Metropolis-Hastings sampler (grind/infer/hastings.py) in one call, the
# proposal weights computed from its integer rule counts (Corpus.hastings).
#
# Items (words 0..n-1, Eisner 1996 / Eisner & Satta 1999 split-head form):
#   CL_v(h, a)  L0_h (v=0) / L_h (v=1) over words a..h
#   CR_v(h, b)  R0_h / R_h over words h..b
#   I(h, d)     arc h -> d together with Y_d's inner half and h's half
# Inside recurrences (A = choose * Y_d, s/n = STOP/¬STOP):
#   CL_v(h, h) = sL_v(h);   CL_v(h, a) = nL_v(h) * sum_{d=a}^{h-1} CL0(d, a) I(h, d)
#   CR_v(h, h) = sR_v(h);   CR_v(h, b) = nR_v(h) * sum_{d=h+1}^{b} I(h, d) CR0(d, b)
#   I(h, d<h) = A(h,d) sum_{m=d}^{h-1} CR0(d, m) CL1(h, m+1)      (L'_h --> Y_d L_h)
#   I(h, d>h) = A(h,d) sum_{m=h}^{d-1} CR1(h, m) CL0(d, m+1)      (R'_h --> R_h Y_d)
#   Z = sum_r root(r) Y(r) CL0(r, 0) CR0(r, n-1)
# Outside = reverse-mode adjoints of these sums; the expected count of a rule
# is sum over its items of inside * outside / Z.
#
# Underflow: each token's two STOP weights are scaled by powers of two so
# that an upper bound on its factor in any tree is ~1 (exact, cancels in all
# posteriors, added back to log Z).  If Z still leaves [1e-280, 1e280], the
# log-space Viterbi score re-centres the scaling so the best tree weighs ~1.

from dmv cimport Work, Theta, i64, u64
from rng cimport grind_rng, grind_rng_seed, grind_uniform
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memcpy, memset
from libc.math cimport log, log1p, exp, pow, frexp, ldexp, llround, INFINITY, NAN

import numpy as np

cdef double LN2 = 0.6931471805599453
cdef double ZLO = 1e-280
cdef double ZHI = 1e280
cdef double DBLMIN = 2.2250738585072014e-308
cdef double FLUSH = 1e-200          # = grind.kernels.dmv.FLUSH


# ---------------------------------------------------------------- workspace

cdef Work *work_new(Py_ssize_t nmax) noexcept nogil:
    """The work buffers of sentences of up to ``nmax`` words (NULL: out of memory, nothing left allocated)."""
    cdef Work *w = <Work *> calloc(1, sizeof(Work))
    cdef Py_ssize_t N = nmax * nmax + 1, k = nmax + 1
    if w == NULL:
        return NULL
    w.nmax = nmax
    w.A = <double *> malloc(N * sizeof(double))
    w.R = <double *> malloc(k * sizeof(double))
    w.st = <double *> malloc(8 * k * sizeof(double))
    w.tmp = <double *> malloc(2 * k * sizeof(double))
    w.CL0 = <double *> malloc(N * sizeof(double))
    w.CL1 = <double *> malloc(N * sizeof(double))
    w.CR0 = <double *> malloc(N * sizeof(double))
    w.CR1 = <double *> malloc(N * sizeof(double))
    w.CL0s = <double *> malloc(N * sizeof(double))
    w.CR0e = <double *> malloc(N * sizeof(double))
    w.I = <double *> malloc(N * sizeof(double))
    w.oCL0 = <double *> malloc(N * sizeof(double))
    w.oCL1 = <double *> malloc(N * sizeof(double))
    w.oCR0 = <double *> malloc(N * sizeof(double))
    w.oCR1 = <double *> malloc(N * sizeof(double))
    w.oCL0s = <double *> malloc(N * sizeof(double))
    w.oCR0e = <double *> malloc(N * sizeof(double))
    w.oI = <double *> malloc(N * sizeof(double))
    w.cst = <double *> malloc(8 * k * sizeof(double))
    w.bpC = <int *> malloc(N * sizeof(int))
    w.bpI = <int *> malloc(N * sizeof(int))
    w.heads = <int *> malloc(k * sizeof(int))
    w.lo = <int *> malloc(k * sizeof(int))
    w.hi = <int *> malloc(k * sizeof(int))
    w.chs = <int *> malloc((k + 1) * sizeof(int))
    w.ch = <int *> malloc(k * sizeof(int))
    w.stack = <int *> malloc(3 * (4 * k + 8) * sizeof(int))
    w.trb = <int *> malloc(10 * k * sizeof(int))
    w.arb = <int *> malloc(N * sizeof(int))
    if (w.A == NULL or w.R == NULL or w.st == NULL or w.tmp == NULL or w.CL0 == NULL or w.CL1 == NULL or
            w.CR0 == NULL or w.CR1 == NULL or w.CL0s == NULL or w.CR0e == NULL or w.I == NULL or
            w.oCL0 == NULL or w.oCL1 == NULL or w.oCR0 == NULL or w.oCR1 == NULL or w.oCL0s == NULL or
            w.oCR0e == NULL or w.oI == NULL or w.cst == NULL or w.bpC == NULL or w.bpI == NULL or
            w.heads == NULL or w.lo == NULL or w.hi == NULL or w.chs == NULL or w.ch == NULL or
            w.stack == NULL or w.trb == NULL or w.arb == NULL):
        work_free(w)
        return NULL
    return w


cdef Work *work_or_raise(Py_ssize_t nmax) except NULL:
    """:func:`work_new`, or MemoryError naming the sentence length and the size asked for."""
    cdef Work *w = work_new(nmax)
    if w == NULL:
        raise MemoryError(f"the DMV kernel cannot allocate its work buffers for a {nmax}-word sentence "
                          f"(about {work_bytes(nmax) / 2.0 ** 20:.0f} MB)")
    return w


cpdef double work_bytes(Py_ssize_t nmax):
    """Bytes :func:`work_new` asks for (sentences of up to ``nmax`` words)."""
    cdef double N = <double> nmax * nmax + 1, k = nmax + 1
    return 8.0 * (15 * N + 19 * k) + 4.0 * (3 * N + 27 * k + 25)


cdef void work_free(Work *w) noexcept nogil:
    if w == NULL:
        return
    free(w.A); free(w.R); free(w.st); free(w.tmp)
    free(w.CL0); free(w.CL1); free(w.CR0); free(w.CR1); free(w.CL0s); free(w.CR0e); free(w.I)
    free(w.oCL0); free(w.oCL1); free(w.oCR0); free(w.oCR1); free(w.oCL0s); free(w.oCR0e)
    free(w.oI); free(w.cst); free(w.bpC); free(w.bpI); free(w.heads); free(w.lo); free(w.hi)
    free(w.chs); free(w.ch); free(w.stack); free(w.trb); free(w.arb)
    free(w)


# ---------------------------------------------------------------- rule tables

cdef const int *tables(Work *w, const int *ty, const int *type_rules, const int *dense, i64 T,
                       const int *tab, Py_ssize_t n) noexcept nogil:
    """The static rule tables of one sentence of type ids ``ty``: its 10 rules a
    token into w.trb (type_rules[10 t + q]); returns its n*n arc rules (h n + d:
    choose rule of arc h -> d, -1 if none), either ``tab`` (stored, followed by
    the n root rules that replace slot 0) or looked up in ``dense`` (index
    (ty[h] T + ty[d]) 2 + [d > h], as DMVIndex) into w.arb."""
    cdef Py_ssize_t i, q, h, d
    cdef const int *src
    cdef const int *row
    cdef int *out
    for i in range(n):
        src = type_rules + 10 * ty[i]
        for q in range(10):
            w.trb[i * 10 + q] = src[q]
    if tab != NULL:
        for i in range(n):
            w.trb[i * 10] = tab[n * n + i]
        return tab
    for h in range(n):
        row = dense + 2 * T * ty[h]
        out = w.arb + h * n
        for d in range(h):
            out[d] = row[2 * ty[d]]
        out[h] = -1
        for d in range(h + 1, n):
            out[d] = row[2 * ty[d] + 1]
    return w.arb


# ---------------------------------------------------------------- weights

cdef inline double rw(const double *wt, int r) noexcept nogil:
    """Weight of rule r (0 for none); weights in (0, FLUSH) read as 0 (DMVParser._weights)."""
    cdef double x
    if r < 0:
        return 0.0
    x = wt[r]
    return 0.0 if (x > 0.0 and x < FLUSH) else x


cdef void gather(Work *w, const int *tr, const int *ar, const double *wt, Py_ssize_t n) noexcept nogil:
    """Rule weights -> A, R, st for one sentence (tr: 10 rules a token, ar: n*n arcs)."""
    cdef Py_ssize_t i, q, h, d
    cdef double *y = w.tmp
    for i in range(n):
        y[i] = rw(wt, tr[i * 10 + 1])
        w.R[i] = rw(wt, tr[i * 10]) * y[i]
        for q in range(8):
            w.st[q * n + i] = rw(wt, tr[i * 10 + 2 + q])
    for h in range(n):
        for d in range(n):
            w.A[h * n + d] = rw(wt, ar[h * n + d]) * y[d]


cdef inline double powc(const Theta *th, i64 u) noexcept nogil:
    """(cnt[u] + a[u])^inv, from the cache th.pw when it was computed at the current cnt[u]."""
    cdef double x
    if th.pwn[u] == th.cnt[u]:
        return th.pw[u]
    x = pow(th.cnt[u] + th.a[u], th.inv)
    th.pw[u] = x
    th.pwn[u] = th.cnt[u]
    return x


cdef inline double theta(const Theta *th, int r) noexcept nogil:
    """theta_r^inv, theta_r = (cnt[r] + a[r]) / (cnt[A] + a[A]) with A = lhs_at[r],
    as powc(r) / powc(A) when inv != 1; 0 for r < 0, and below FLUSH
    flushed to 0, as DMVParser._weights does (NaN stays NaN)."""
    cdef i64 A
    cdef double x
    if r < 0:
        return 0.0
    A = th.lhs_at[r]
    if th.pw == NULL:
        x = (th.cnt[r] + th.a[r]) / (th.cnt[A] + th.a[A])
    else:
        x = powc(th, r) / powc(th, A)
    return 0.0 if x < FLUSH else x


cdef void gather_theta(Work *w, const int *tr, const int *ar, const Theta *th, Py_ssize_t n) noexcept nogil:
    """``gather`` with the weights computed from counts (see Theta) instead of read."""
    cdef Py_ssize_t i, q, h, d
    cdef double *y = w.tmp
    for i in range(n):
        y[i] = theta(th, tr[i * 10 + 1])
        w.R[i] = theta(th, tr[i * 10]) * y[i]
        for q in range(8):
            w.st[q * n + i] = theta(th, tr[i * 10 + 2 + q])
    for h in range(n):
        for d in range(n):
            w.A[h * n + d] = theta(th, ar[h * n + d]) * y[d]


cdef inline void regather(Work *w, const int *tr, const int *ar, const double *wt, const Theta *th,
                          Py_ssize_t n) noexcept nogil:
    if th == NULL:
        gather(w, tr, ar, wt, n)
    else:
        gather_theta(w, tr, ar, th, n)


cdef inline double dmax(double a, double b) noexcept nogil:
    return a if a > b else b


cdef int scale(Work *w, Py_ssize_t n, double target, i64 *E) noexcept nogil:
    """Scale each token's STOP weights by powers of two so that an upper bound
    on any tree's weight is < 1: token i contributes at most
    a_i * max sL(i) * max sR(i) with a_i = max_h A(h,i) max ¬STOP(h, dir), and
    the one root at most a further max_i R_i / a_i.  With a finite ``target``
    (log2 of the best tree's weight) shift instead so the best tree weighs ~1.
    Returns 0 if Z = 0 for sure, -1 on NaN/inf."""
    cdef Py_ssize_t i, h
    cdef double *st = w.st
    cdef double *nmL = w.tmp
    cdef double *nmR = w.tmp + n
    cdef double a, b, rho = 0.0
    cdef int e
    cdef i64 tot = 0, x, q, r, t, eL
    cdef int *ex = w.lo
    for h in range(n):
        nmL[h] = dmax(st[n + h], st[3 * n + h])
        nmR[h] = dmax(st[5 * n + h], st[7 * n + h])
    for i in range(n):
        a = 0.0
        for h in range(i):
            a = dmax(a, w.A[h * n + i] * nmR[h])
        for h in range(i + 1, n):
            a = dmax(a, w.A[h * n + i] * nmL[h])
        if a > 0.0:
            rho = dmax(rho, w.R[i] / a)
        else:
            a = w.R[i]                       # i can only be the root
        b = a * dmax(st[i], st[2 * n + i]) * dmax(st[4 * n + i], st[6 * n + i])
        if not (b < INFINITY and rho < INFINITY):
            return -1
        if b <= 0.0:
            return 0
        frexp(b, &e)
        ex[i] = e
        tot += e
    x = 0
    if target == target:
        x = llround(target) - tot
    elif rho > 0.0:
        frexp(rho, &e)
        x = e
    q = x // n if x >= 0 else -((-x + n - 1) // n)
    r = x - q * n
    E[0] = 0
    for i in range(n):
        t = ex[i] + q + (1 if i < r else 0)
        eL = t // 2
        st[i] = ldexp(st[i], <int> -eL)
        st[2 * n + i] = ldexp(st[2 * n + i], <int> -eL)
        st[4 * n + i] = ldexp(st[4 * n + i], <int> (eL - t))
        st[6 * n + i] = ldexp(st[6 * n + i], <int> (eL - t))
        E[0] += t
    return 1


cdef int prepare(Work *w, const int *tr, const int *ar, const double *wt, const Theta *th, Py_ssize_t n,
                 double *Z, i64 *E) noexcept nogil:
    """Gather (the weights wt, or computed by th if not NULL), scale and run the
    inside pass; 1 ok, 0 if Z = 0, -1 on failure.  log Z = log(Z) + E log 2."""
    cdef int ok, root
    cdef double V
    regather(w, tr, ar, wt, th, n)
    ok = scale(w, n, NAN, E)
    if ok <= 0:
        return ok
    Z[0] = inside(w, n)
    if Z[0] >= ZLO and Z[0] <= ZHI:
        return 1
    regather(w, tr, ar, wt, th, n)             # rare: re-centre on the best tree
    logify(w, n)
    V = viterbi(w, n, &root)
    if V == -INFINITY:
        return 0
    if not (V < INFINITY):
        return -1
    regather(w, tr, ar, wt, th, n)
    ok = scale(w, n, V / LN2, E)
    if ok <= 0:
        return ok
    Z[0] = inside(w, n)
    return 1 if (Z[0] >= DBLMIN and Z[0] < INFINITY) else -1


cdef void logify(Work *w, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n * n):
        w.A[i] = log(w.A[i])
    for i in range(n):
        w.R[i] = log(w.R[i])
    for i in range(8 * n):
        w.st[i] = log(w.st[i])


# ---------------------------------------------------------------- inside

cdef void init_width0(Work *w, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t h, x
    cdef double *st = w.st
    for h in range(n):
        x = h * n + h
        w.CL0[x] = st[h]
        w.CL1[x] = st[2 * n + h]
        w.CR0[x] = st[4 * n + h]
        w.CR1[x] = st[6 * n + h]
        w.CL0s[x] = st[h]
        w.CR0e[x] = st[4 * n + h]


cdef double inside(Work *w, Py_ssize_t n) noexcept nogil:
    """Inside pass over the (scaled) weights; returns Z."""
    cdef double *A = w.A
    cdef double *st = w.st
    cdef double *CL0 = w.CL0
    cdef double *CL1 = w.CL1
    cdef double *CR0 = w.CR0
    cdef double *CR1 = w.CR1
    cdef double *CL0s = w.CL0s
    cdef double *CR0e = w.CR0e
    cdef double *I = w.I
    cdef Py_ssize_t wd, a, b, d, m
    cdef double sl, sr, Z
    init_width0(w, n)
    for wd in range(1, n):
        for d in range(n - wd):
            b = d + wd
            sl = 0.0
            sr = 0.0
            for m in range(d, b):
                sl = sl + CR0[d * n + m] * CL1[b * n + m + 1]
                sr = sr + CR1[d * n + m] * CL0[b * n + m + 1]
            I[b * n + d] = A[b * n + d] * sl
            I[d * n + b] = A[d * n + b] * sr
        for a in range(n - wd):
            b = a + wd
            sl = 0.0
            sr = 0.0
            for d in range(a, b):
                sl = sl + CL0s[a * n + d] * I[b * n + d]
            for d in range(a + 1, b + 1):
                sr = sr + I[a * n + d] * CR0e[b * n + d]
            CL0[b * n + a] = st[n + b] * sl
            CL1[b * n + a] = st[3 * n + b] * sl
            CL0s[a * n + b] = CL0[b * n + a]
            CR0[a * n + b] = st[5 * n + a] * sr
            CR1[a * n + b] = st[7 * n + a] * sr
            CR0e[b * n + a] = CR0[a * n + b]
    Z = 0.0
    for a in range(n):
        Z = Z + w.R[a] * CL0[a * n] * CR0[a * n + n - 1]
    return Z


# ---------------------------------------------------------------- outside

cdef void outside(Work *w, Py_ssize_t n) noexcept nogil:
    """Adjoints dZ/d(item) of every item; STOP/¬STOP inside*outside into cst."""
    cdef double *A = w.A
    cdef double *st = w.st
    cdef double *CL0 = w.CL0
    cdef double *CL1 = w.CL1
    cdef double *CR0 = w.CR0
    cdef double *CR1 = w.CR1
    cdef double *CL0s = w.CL0s
    cdef double *CR0e = w.CR0e
    cdef double *I = w.I
    cdef double *oCL0 = w.oCL0
    cdef double *oCL1 = w.oCL1
    cdef double *oCR0 = w.oCR0
    cdef double *oCR1 = w.oCR1
    cdef double *oCL0s = w.oCL0s
    cdef double *oCR0e = w.oCR0e
    cdef double *oI = w.oI
    cdef double *cst = w.cst
    cdef Py_ssize_t wd, a, b, d, m, x, N = n * n
    cdef double g, g0, g1, tl, tr
    memset(oCL0, 0, N * sizeof(double))
    memset(oCL1, 0, N * sizeof(double))
    memset(oCR0, 0, N * sizeof(double))
    memset(oCR1, 0, N * sizeof(double))
    memset(oCL0s, 0, N * sizeof(double))
    memset(oCR0e, 0, N * sizeof(double))
    memset(oI, 0, N * sizeof(double))
    memset(cst, 0, 8 * n * sizeof(double))
    for a in range(n):
        oCL0[a * n] += w.R[a] * CR0[a * n + n - 1]
        oCR0[a * n + n - 1] += w.R[a] * CL0[a * n]
    for wd in range(n - 1, 0, -1):
        for a in range(n - wd):
            b = a + wd
            # left half of head b over a..b
            g0 = oCL0[b * n + a] + oCL0s[a * n + b]
            g1 = oCL1[b * n + a]
            cst[n + b] += g0 * CL0[b * n + a]
            cst[3 * n + b] += g1 * CL1[b * n + a]
            g = st[n + b] * g0 + st[3 * n + b] * g1
            for d in range(a, b):
                oCL0s[a * n + d] += g * I[b * n + d]
                oI[b * n + d] += g * CL0s[a * n + d]
            # right half of head a over a..b
            g0 = oCR0[a * n + b] + oCR0e[b * n + a]
            g1 = oCR1[a * n + b]
            cst[5 * n + a] += g0 * CR0[a * n + b]
            cst[7 * n + a] += g1 * CR1[a * n + b]
            g = st[5 * n + a] * g0 + st[7 * n + a] * g1
            for d in range(a + 1, b + 1):
                oI[a * n + d] += g * CR0e[b * n + d]
                oCR0e[b * n + d] += g * I[a * n + d]
        for d in range(n - wd):
            b = d + wd
            tl = oI[b * n + d] * A[b * n + d]
            tr = oI[d * n + b] * A[d * n + b]
            for m in range(d, b):
                oCR0[d * n + m] += tl * CL1[b * n + m + 1]
                oCL1[b * n + m + 1] += tl * CR0[d * n + m]
                oCR1[d * n + m] += tr * CL0[b * n + m + 1]
                oCL0[b * n + m + 1] += tr * CR1[d * n + m]
    for a in range(n):
        x = a * n + a
        cst[a] = (oCL0[x] + oCL0s[x]) * CL0[x]
        cst[2 * n + a] = oCL1[x] * CL1[x]
        cst[4 * n + a] = (oCR0[x] + oCR0e[x]) * CR0[x]
        cst[6 * n + a] = oCR1[x] * CR1[x]


cdef void scatter(Work *w, const int *tr, const int *ar, Py_ssize_t n, double iz,
                  double *counts) noexcept nogil:
    """Expected rule counts of one sentence (inside * outside / Z) into counts."""
    cdef Py_ssize_t i, q, x
    cdef int r
    for i in range(n):
        r = tr[i * 10]
        if r >= 0:
            counts[r] += w.R[i] * w.CL0[i * n] * w.CR0[i * n + n - 1] * iz
        r = tr[i * 10 + 1]
        if r >= 0:
            counts[r] += 1.0
        for q in range(8):
            r = tr[i * 10 + 2 + q]
            if r >= 0:
                counts[r] += w.cst[q * n + i] * iz
    for x in range(n * n):
        r = ar[x]
        if r >= 0:
            counts[r] += w.I[x] * w.oI[x] * iz


cdef void posteriors(Work *w, Py_ssize_t n, double iz, double *out) noexcept nogil:
    """out[(h+1)*n + d] = P(head of d = h), out[d] = P(d is the root)."""
    cdef Py_ssize_t h, d
    for d in range(n):
        out[d] = w.R[d] * w.CL0[d * n] * w.CR0[d * n + n - 1] * iz
    for h in range(n):
        for d in range(n):
            out[(h + 1) * n + d] = 0.0 if h == d else w.I[h * n + d] * w.oI[h * n + d] * iz


# ---------------------------------------------------------------- Viterbi

cdef double viterbi(Work *w, Py_ssize_t n, int *root) noexcept nogil:
    """Max-sum version of ``inside`` over log weights, with back-pointers."""
    cdef double *A = w.A
    cdef double *st = w.st
    cdef double *CL0 = w.CL0
    cdef double *CL1 = w.CL1
    cdef double *CR0 = w.CR0
    cdef double *CR1 = w.CR1
    cdef double *CL0s = w.CL0s
    cdef double *CR0e = w.CR0e
    cdef double *I = w.I
    cdef Py_ssize_t wd, a, b, d, m
    cdef double bl, br, v
    cdef int il, ir
    init_width0(w, n)
    for wd in range(1, n):
        for d in range(n - wd):
            b = d + wd
            bl = -INFINITY
            br = -INFINITY
            il = ir = <int> d
            for m in range(d, b):
                v = CR0[d * n + m] + CL1[b * n + m + 1]
                if v > bl:
                    bl = v
                    il = <int> m
                v = CR1[d * n + m] + CL0[b * n + m + 1]
                if v > br:
                    br = v
                    ir = <int> m
            I[b * n + d] = A[b * n + d] + bl
            w.bpI[b * n + d] = il
            I[d * n + b] = A[d * n + b] + br
            w.bpI[d * n + b] = ir
        for a in range(n - wd):
            b = a + wd
            bl = -INFINITY
            br = -INFINITY
            il = <int> a
            ir = <int> b
            for d in range(a, b):
                v = CL0s[a * n + d] + I[b * n + d]
                if v > bl:
                    bl = v
                    il = <int> d
            for d in range(a + 1, b + 1):
                v = I[a * n + d] + CR0e[b * n + d]
                if v > br:
                    br = v
                    ir = <int> d
            CL0[b * n + a] = st[n + b] + bl
            CL1[b * n + a] = st[3 * n + b] + bl
            CL0s[a * n + b] = CL0[b * n + a]
            w.bpC[b * n + a] = il
            CR0[a * n + b] = st[5 * n + a] + br
            CR1[a * n + b] = st[7 * n + a] + br
            CR0e[b * n + a] = CR0[a * n + b]
            w.bpC[a * n + b] = ir
    bl = -INFINITY
    root[0] = 0
    for a in range(n):
        v = w.R[a] + CL0[a * n] + CR0[a * n + n - 1]
        if v > bl:
            bl = v
            root[0] = <int> a
    return bl


# ---------------------------------------------------------------- trees

cdef Py_ssize_t draw(const double *x, const double *y, Py_ssize_t k, double u) noexcept nogil:
    """j in [0, k) with probability x[j] y[j] / sum."""
    cdef Py_ssize_t j, last = 0
    cdef double tot = 0.0, p
    for j in range(k):
        tot += x[j] * y[j]
    u *= tot
    for j in range(k):
        p = x[j] * y[j]
        if p > 0.0:
            last = j
            u -= p
            if u < 0.0:
                return j
    return last


cdef inline Py_ssize_t push(int *s, Py_ssize_t sp, int kind, Py_ssize_t h, Py_ssize_t x) noexcept nogil:
    s[sp] = kind
    s[sp + 1] = <int> h
    s[sp + 2] = <int> x
    return sp + 3


cdef void traverse(Work *w, Py_ssize_t n, int root, grind_rng *g) noexcept nogil:
    """Heads of the Viterbi tree (g = NULL: back-pointers, root given) or of a
    tree sampled top-down from the inside chart (root < 0: drawn)."""
    cdef int *s = w.stack
    cdef Py_ssize_t sp = 0, h, x, d, m
    cdef int kind
    if root < 0:
        for h in range(n):
            w.tmp[h] = w.CL0[h * n] * w.CR0[h * n + n - 1]
        root = <int> draw(w.R, w.tmp, n, grind_uniform(g))
    w.heads[root] = 0
    sp = push(s, sp, 0, root, 0)
    sp = push(s, sp, 1, root, n - 1)
    while sp > 0:
        sp -= 3
        kind = s[sp]
        h = s[sp + 1]
        x = s[sp + 2]
        if kind == 0 and x < h:              # left half of h over x..h
            d = bp_or_draw(w.bpC[h * n + x], x, w.CL0s + x * n + x, w.I + h * n + x, h - x, g)
            w.heads[d] = <int> h + 1
            sp = push(s, sp, 0, d, x)
            sp = push(s, sp, 2, h, d)
        elif kind == 1 and x > h:            # right half of h over h..x
            d = bp_or_draw(w.bpC[h * n + x], h + 1, w.I + h * n + h + 1,
                           w.CR0e + x * n + h + 1, x - h, g)
            w.heads[d] = <int> h + 1
            sp = push(s, sp, 2, h, d)
            sp = push(s, sp, 1, d, x)
        elif kind == 2 and x < h:            # arc h -> x, x left of h
            m = bp_or_draw(w.bpI[h * n + x], x, w.CR0 + x * n + x, w.CL1 + h * n + x + 1, h - x, g)
            sp = push(s, sp, 1, x, m)
            sp = push(s, sp, 0, h, m + 1)
        elif kind == 2:                      # arc h -> x, x right of h
            m = bp_or_draw(w.bpI[h * n + x], h, w.CR1 + h * n + h, w.CL0 + x * n + h + 1, x - h, g)
            sp = push(s, sp, 1, h, m)
            sp = push(s, sp, 0, x, m + 1)


cdef inline Py_ssize_t bp_or_draw(int bp, Py_ssize_t base, const double *x, const double *y,
                                  Py_ssize_t k, grind_rng *g) noexcept nogil:
    if g == NULL:
        return bp
    return base + draw(x, y, k, grind_uniform(g))


cdef inline Py_ssize_t row(i64 *rows, Py_ssize_t k, int r, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    rows[3 * k] = r
    rows[3 * k + 1] = a
    rows[3 * k + 2] = b
    return k + 1


cdef Py_ssize_t emit_y(Work *w, const int *tr, const int *ar, Py_ssize_t n, Py_ssize_t h,
                       i64 *rows, Py_ssize_t k) noexcept nogil:
    """Pre-order rows of Y_h's subtree (see grind.dmv.heads_derivation)."""
    cdef Py_ssize_t c = w.chs[h], c1 = w.chs[h + 1], cr, d, pos
    cdef int v = 0
    k = row(rows, k, tr[h * 10 + 1], 2 * w.lo[h], 2 * w.hi[h] + 2)
    pos = 2 * w.lo[h]
    while c < c1 and w.ch[c] < h:            # left dependents, farthest first
        d = w.ch[c]
        k = row(rows, k, tr[h * 10 + 3 + 2 * v], pos, 2 * h + 1)
        k = row(rows, k, ar[h * n + d], pos, 2 * h + 1)
        k = emit_y(w, tr, ar, n, d, rows, k)
        pos = 2 * w.hi[d] + 2
        v = 1
        c += 1
    k = row(rows, k, tr[h * 10 + 2 + 2 * v], pos, 2 * h + 1)
    cr = c
    v = 0
    pos = 2 * w.hi[h] + 2
    for c in range(c1 - 1, cr - 1, -1):      # right dependents, farthest first
        d = w.ch[c]
        k = row(rows, k, tr[h * 10 + 7 + 2 * v], 2 * h + 1, pos)
        k = row(rows, k, ar[h * n + d], 2 * h + 1, pos)
        pos = 2 * w.lo[d]
        v = 1
    k = row(rows, k, tr[h * 10 + 6 + 2 * v], 2 * h + 1, pos)
    for c in range(cr, c1):                  # then their subtrees, nearest first
        k = emit_y(w, tr, ar, n, w.ch[c], rows, k)
    return k


cdef Py_ssize_t derivation(Work *w, const int *tr, const int *ar, Py_ssize_t n, i64 *rows) noexcept nogil:
    """The split-head derivation (5n-1 rows) of the tree in w.heads."""
    cdef Py_ssize_t i, j, root = 0
    cdef int *cnt = w.stack
    for i in range(n):
        w.lo[i] = w.hi[i] = <int> i
        cnt[i] = 0
    for i in range(n + 1):
        w.chs[i] = 0
    for i in range(n):
        j = w.heads[i] - 1
        if j < 0:
            root = i
        else:
            w.chs[j + 1] += 1
        while j >= 0:
            if i < w.lo[j]:
                w.lo[j] = <int> i
            if i > w.hi[j]:
                w.hi[j] = <int> i
            j = w.heads[j] - 1
    for i in range(n):
        w.chs[i + 1] += w.chs[i]
    for i in range(n):
        j = w.heads[i] - 1
        if j >= 0:
            w.ch[w.chs[j] + cnt[j]] = <int> i
            cnt[j] += 1
    i = row(rows, 0, tr[root * 10], 0, 2 * n)
    return emit_y(w, tr, ar, n, root, rows, i)


# ---------------------------------------------------------------- collapsed Metropolis-Hastings

cdef inline void move(const i64 *rows, Py_ssize_t m, const i64 *lhs_at, i64 *to, i64 d) noexcept nogil:
    """to[r] += d and to[lhs_at[r]] += d for the rule r of each of the m rows."""
    cdef Py_ssize_t k
    cdef i64 r
    for k in range(m):
        r = rows[3 * k]
        to[r] += d
        to[lhs_at[r]] += d


cdef double excess(const i64 *rows, Py_ssize_t m, const Theta *th, const i64 *inb, int *seen) noexcept nogil:
    """excess_B(t) of grind.infer.hastings for the tree of the m rows: over its
    uses u (each node's rule, sign +1, and that rule's LHS, sign -1), with j the
    number of equal uses before it, c_u = cnt[u] + a[u] (cnt = the counts of
    t_{-i}) and b_u = cnt[u] - inb[u] + a[u] (the counts the proposal was drawn
    from; inb NULL: b = c),

        sum_u sign_u log((c_u + j) / b_u),

    a term being 0 when j = 0 and b = c (for b = c the terms are log1p(j / c_u)).
    ``seen`` (one int a use, all 0) is left all 0."""
    cdef Py_ssize_t k
    cdef int q
    cdef i64 u, j, mb
    cdef double ex = 0.0, t
    for k in range(m):
        u = rows[3 * k]
        for q in range(2):
            if q:
                u = th.lhs_at[u]
            j = seen[u]
            seen[u] = <int> (j + 1)
            mb = inb[u] if inb != NULL else 0
            if mb == 0:
                if j == 0:
                    continue
                t = log1p(j / (th.cnt[u] + th.a[u]))
            else:
                t = log(((th.cnt[u] + j) + th.a[u]) / ((th.cnt[u] - mb) + th.a[u]))
            ex += -t if q else t
    for k in range(m):
        u = rows[3 * k]
        seen[u] = 0
        seen[th.lhs_at[u]] = 0
    return ex


cdef inline int metropolis(i64 *cur, const i64 *prop, Py_ssize_t m, const Theta *th, const i64 *inb, int *seen,
                           grind_rng *g) noexcept nogil:
    """Accept the proposal ``prop`` for the tree ``cur`` (m rows each) with
    probability min{1, exp((excess(prop) - excess(cur)) inv)}, counts = t_{-i};
    on acceptance it is copied over cur.  Returns 1 if accepted."""
    cdef double logr = (excess(prop, m, th, inb, seen) - excess(cur, m, th, inb, seen)) * th.inv
    if logr >= 0.0 or grind_uniform(g) < exp(logr):
        memcpy(cur, prop, 3 * m * sizeof(i64))
        return 1
    return 0


# ---------------------------------------------------------------- corpus

cdef class Corpus:
    """Static rule tables of a corpus (CSR over sentences), a few bytes a token.

    sent_off[s]..sent_off[s+1]: the tokens of sentence s; types[k]: the head
    type id of token k; type_rules[10 t + q]: rule of slot q (root, Y, sL0,
    nL0, sL1, nL1, sR0, nR0, sR1, nR1) of type t; dense[(h T + d) 2 + right]:
    choose rule of an arc from type h to type d (-1: none; T = ntypes).  A
    sentence's arc rules are looked up in dense at every call unless
    tab_off[s] >= 0: then pool[tab_off[s]:] holds its n*n arc rules and n root
    rules (masked sentences, or grammars too large for a dense table).
    bad[s] != 0: skip (failure known in advance).
    """
    cdef const i64[::1] sent_off
    cdef const int[::1] types
    cdef const int[::1] type_rules
    cdef const int[::1] dense
    cdef i64 ntypes
    cdef const i64[::1] tab_off
    cdef const int[::1] pool
    cdef const unsigned char[::1] bad
    # one sentence at a time (collapsed VB: ``local`` / ``sparse``), kept between calls:
    cdef Work *w1                  # work for sentences of up to cap1 words
    cdef Py_ssize_t cap1
    cdef i64 *key                  # (rule, table position) sort keys, 10n + n*n
    cdef int *ltab                 # the sentence's tables as local rule indices (-1: none): 10n token, n*n arc
    cdef i64 *loc                  # its distinct rules, sorted
    cdef double *lw                # their weights (flushed as DMVParser._weights does)
    cdef double *lc                # their expected counts
    cdef Py_ssize_t loc_s, loc_k   # the sentence ``loc`` / ``ltab`` describe (-1: none), how many rules

    def __init__(self, sent_off, types, type_rules, dense, ntypes, tab_off, pool, bad):
        self.loc_s = -1
        self.sent_off = np.ascontiguousarray(sent_off, dtype=np.int64)
        self.types = _nonempty(types, np.int32)
        self.type_rules = _nonempty(type_rules, np.int32)
        self.dense = _nonempty(dense, np.int32)
        self.ntypes = ntypes
        self.tab_off = np.ascontiguousarray(tab_off, dtype=np.int64)
        self.pool = _nonempty(pool, np.int32)
        self.bad = np.ascontiguousarray(bad, dtype=np.uint8)
        n = self.sent_off.shape[0] - 1
        if self.tab_off.shape[0] != n or self.bad.shape[0] != n:
            raise ValueError("Corpus: tab_off and bad need one entry a sentence")

    def __dealloc__(self):
        self._free1()

    cdef void _free1(self) noexcept:
        if self.w1 != NULL:
            work_free(self.w1)
        free(self.key); free(self.ltab); free(self.loc); free(self.lw); free(self.lc)
        self.w1 = NULL
        self.key = self.loc = NULL
        self.ltab = NULL
        self.lw = self.lc = NULL
        self.cap1 = 0
        self.loc_s = -1

    cdef Py_ssize_t _one(self, Py_ssize_t s) except -1:
        """Check sentence index s, make the one-sentence buffers fit it; returns its length (0: skip)."""
        cdef Py_ssize_t n, M
        if s < 0 or s >= self.sent_off.shape[0] - 1:
            raise IndexError(f"sentence index out of range 0..{self.sent_off.shape[0] - 2}")
        n = self.sent_off[s + 1] - self.sent_off[s]
        if self.bad[s] or n == 0:
            return 0
        if n > self.cap1:
            self._free1()
            M = 10 * n + n * n
            self.w1 = work_or_raise(n)
            self.key = <i64 *> malloc(M * sizeof(i64))
            self.ltab = <int *> malloc(M * sizeof(int))
            self.loc = <i64 *> malloc(M * sizeof(i64))
            self.lw = <double *> malloc(M * sizeof(double))
            self.lc = <double *> malloc(M * sizeof(double))
            if self.key == NULL or self.ltab == NULL or self.loc == NULL or self.lw == NULL or self.lc == NULL:
                self._free1()
                raise MemoryError(f"the DMV kernel cannot allocate the rule tables of a {n}-word sentence")
            self.cap1 = n
        return n

    cdef Py_ssize_t _local(self, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
        """The distinct rules sentence s (n words) reads, sorted, into ``loc``, and its
        tables rewritten as indices into ``loc`` into ``ltab`` (kept for the next
        call on the same sentence: CVB asks for the rules, then the counts);
        returns how many.  Positions: token i's slot q at 10 i + q, arc x = h n + d
        at 10 n + x -- the order in which ``scatter`` adds counts."""
        cdef Py_ssize_t T = 10 * n, M = T + n * n, p, m = 0, k = 0, x
        cdef const int *ar
        cdef const int *tr = self.w1.trb
        cdef i64 r
        if s == self.loc_s:
            return self.loc_k
        ar = self.rules(self.w1, s, n)
        for p in range(T):
            if tr[p] >= 0:
                self.key[m] = <i64> tr[p] * M + p
                m += 1
        for x in range(n * n):
            if ar[x] >= 0:
                self.key[m] = <i64> ar[x] * M + T + x
                m += 1
        qsort(self.key, m, sizeof(i64), _cmp_key)
        for p in range(M):
            self.ltab[p] = -1
        for x in range(m):
            r = self.key[x] // M
            if k == 0 or self.loc[k - 1] != r:
                self.loc[k] = r
                k += 1
            self.ltab[self.key[x] - r * M] = <int> (k - 1)
        self.loc_s, self.loc_k = s, k
        return k

    def local(self, Py_ssize_t s):
        """The rules sentence s's parses can read (int64, sorted): its 10 token
        rules a token and its n*n arc rules, without -1 (none, or forbidden by a
        mask).  Empty for a skipped sentence."""
        cdef Py_ssize_t n = self._one(s), k
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        k = self._local(s, n)
        out = np.empty(k, dtype=np.int64)
        cdef i64[::1] ov = out
        if k:
            memcpy(&ov[0], self.loc, k * sizeof(i64))
        return out

    def sparse(self, const double[::1] wt, Py_ssize_t s):
        """One sentence's expected counts from the weights of ``local(s)`` only:
        ``(status, rules, values, log Z)`` with the nonzero counts by rule; status
        0 ok (log Z = -inf: no tree, no counts), 1 numerical failure (log Z NaN),
        2 a weight of a local rule negative or not finite.  The same loops and
        the same order of additions as ``inside_outside`` on [s]: bit-identical."""
        cdef Py_ssize_t n = self._one(s), k, j, c = 0
        cdef double Z, x, logz = -INFINITY
        cdef i64 E
        cdef int ok = 0, status = 0
        cdef const int *lt
        if n == 0:
            return 0, np.zeros(0, dtype=np.int64), np.zeros(0), -INFINITY
        if wt.shape[0] == 0:
            raise ValueError("no weights")
        k = self._local(s, n)
        lt = self.ltab
        with nogil:
            for j in range(k):
                x = wt[self.loc[j]]
                if not (x >= 0.0 and x < INFINITY):
                    status = 2
                    break
                self.lw[j] = 0.0 if (x > 0.0 and x < FLUSH) else x
            if status == 0:
                ok = prepare(self.w1, lt, lt + 10 * n, self.lw, NULL, n, &Z, &E)
                if ok < 0:
                    status = 1
                elif ok > 0:
                    logz = log(Z) + E * LN2
                    outside(self.w1, n)
                    memset(self.lc, 0, k * sizeof(double))
                    scatter(self.w1, lt, lt + 10 * n, n, 1.0 / Z, self.lc)
                    for j in range(k):
                        if self.lc[j] != 0.0:
                            c += 1
        if status:
            return status, np.zeros(0, dtype=np.int64), np.zeros(0), NAN
        rules = np.empty(c, dtype=np.int64)
        vals = np.empty(c, dtype=np.float64)
        cdef i64[::1] rv = rules
        cdef double[::1] vv = vals
        c = 0
        if ok > 0:
            for j in range(k):
                if self.lc[j] != 0.0:
                    rv[c] = self.loc[j]
                    vv[c] = self.lc[j]
                    c += 1
        return 0, rules, vals, logz

    def local_tables(self, const i64[::1] idx):
        """For the sentences ``idx``: ``(rule_off, rules, tab_off, tabs)``, the rules sentence
        idx[k] reads (``local``) at rules[rule_off[k]:rule_off[k+1]] and its tables as indices
        into them at tabs[tab_off[k]:] (10 n token entries, then n*n arc entries; -1: none),
        for ``inside_outside_local``.  Empty for a skipped sentence."""
        cdef Py_ssize_t K = idx.shape[0], k, s, n, c
        rule_off = np.zeros(K + 1, dtype=np.int64)
        tab_off = np.zeros(K + 1, dtype=np.int64)
        rules, tabs = [], []
        for k in range(K):
            s = idx[k]
            n = self._one(s)
            c = self._local(s, n) if n else 0
            rule_off[k + 1] = rule_off[k] + c
            tab_off[k + 1] = tab_off[k] + (10 * n + n * n if n else 0)
            if n:
                rules.append(np.asarray(<i64[:c]> self.loc).copy() if c else np.zeros(0, np.int64))
                tabs.append(np.asarray(<int[:10 * n + n * n]> self.ltab).copy())
        cat = lambda xs, t: np.concatenate(xs).astype(t) if xs else np.zeros(0, t)   # noqa: E731
        return rule_off, cat(rules, np.int64), tab_off, cat(tabs, np.int32)

    def inside_outside_local(self, const i64[::1] idx, const i64[::1] rule_off, const double[::1] lw,
                             const i64[::1] tab_off, const int[::1] tabs, double[::1] lc, double[::1] logz):
        """Sentence idx[k] under the weights lw[rule_off[k]:rule_off[k+1]] of its local rules
        (``local_tables``): its expected counts into lc at the same places (overwritten) and
        log Z into logz[k] (-inf: no tree, NaN: numerical failure).  Weights below FLUSH are
        read as 0.  The same loops and additions as ``inside_outside`` on [idx[k]] with
        those weights: bit-identical.  Returns -1, or the first k with a local weight
        negative or not finite (nothing computed from there on)."""
        cdef Py_ssize_t K = idx.shape[0], k, s, n, j, top = 1, bad = -1
        cdef Work *w
        cdef double *scr
        cdef double Z, x
        cdef i64 E
        cdef int ok
        cdef const int *lt
        if rule_off.shape[0] != K + 1 or tab_off.shape[0] != K + 1 or logz.shape[0] != K \
                or lw.shape[0] < rule_off[K] or lc.shape[0] < rule_off[K]:
            raise ValueError("inside_outside_local: inconsistent sizes")
        for k in range(K):
            top = max(top, rule_off[k + 1] - rule_off[k])
        w = work_new(self.nmax(idx))
        scr = <double *> malloc(top * sizeof(double))
        if scr == NULL:
            work_free(w)
            raise MemoryError()
        with nogil:
            for k in range(K):
                s = idx[k]
                n = self.sent_off[s + 1] - self.sent_off[s]
                for j in range(rule_off[k], rule_off[k + 1]):
                    lc[j] = 0.0
                if self.bad[s] or n == 0 or tab_off[k + 1] - tab_off[k] != 10 * n + n * n:
                    logz[k] = -INFINITY
                    continue
                for j in range(rule_off[k + 1] - rule_off[k]):
                    x = lw[rule_off[k] + j]
                    if not (x >= 0.0 and x < INFINITY):
                        bad = k
                        break
                    scr[j] = 0.0 if (x > 0.0 and x < FLUSH) else x
                if bad >= 0:
                    break
                lt = &tabs[tab_off[k]]
                ok = prepare(w, lt, lt + 10 * n, scr, NULL, n, &Z, &E)
                if ok <= 0:
                    logz[k] = -INFINITY if ok == 0 else NAN
                    continue
                logz[k] = log(Z) + E * LN2
                outside(w, n)
                scatter(w, lt, lt + 10 * n, n, 1.0 / Z, &lc[rule_off[k]])
        work_free(w)
        free(scr)
        return bad

    cdef Py_ssize_t nmax(self, const i64[::1] idx):
        cdef Py_ssize_t k, s, m = 1
        for k in range(idx.shape[0]):
            s = idx[k]
            m = max(m, self.sent_off[s + 1] - self.sent_off[s])
        return m

    cdef const int *rules(self, Work *w, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
        """Sentence s's tables: token rules in w.trb, returns its arc rules."""
        cdef i64 o = self.tab_off[s]
        return tables(w, &self.types[self.sent_off[s]], &self.type_rules[0], &self.dense[0], self.ntypes,
                      &self.pool[o] if o >= 0 else NULL, n)

    def inside_outside(self, const double[::1] wt, const i64[::1] idx, double[::1] counts,
                       double[::1] logz, double[::1] post=None, const i64[::1] post_off=None,
                       unsigned char[::1] mark=None, i64[::1] touched=None):
        """Expected counts (added to counts, if not None), log Z into logz[k] for
        sentence idx[k] (NaN: numerical failure) and, if post is given, arc
        posteriors ((n+1) x n, row 0 = root) at post[post_off[k]:].

        With ``mark`` and ``touched`` (sparse shards): every rule a counted
        sentence's tables name is appended once to ``touched`` (``mark[r]`` set
        when it is; ``touched`` must hold ``min(#rules, sum 10 n + n^2)``);
        returns how many were appended.  Only those entries of ``counts`` change."""
        cdef Py_ssize_t k, s, n, p, K = idx.shape[0], c = 0
        cdef Work *w
        cdef double Z
        cdef i64 E
        cdef int ok, r
        cdef const int *tr
        cdef const int *ar
        cdef double *cp = &counts[0] if counts is not None else NULL
        cdef double *pp = &post[0] if post is not None else NULL
        cdef unsigned char *mk = &mark[0] if mark is not None else NULL
        cdef i64 *tp = &touched[0] if touched is not None else NULL
        if mk != NULL and (cp == NULL or tp == NULL or mark.shape[0] != counts.shape[0]):
            raise ValueError("mark needs counts and touched, and one entry a rule")
        w = work_or_raise(self.nmax(idx))
        tr = w.trb
        with nogil:
            for k in range(K):
                s = idx[k]
                n = self.sent_off[s + 1] - self.sent_off[s]
                if self.bad[s] or n == 0:
                    logz[k] = -INFINITY
                    continue
                ar = self.rules(w, s, n)
                ok = prepare(w, tr, ar, &wt[0], NULL, n, &Z, &E)
                if ok <= 0:
                    logz[k] = -INFINITY if ok == 0 else NAN
                    continue
                logz[k] = log(Z) + E * LN2
                outside(w, n)
                if cp != NULL:
                    scatter(w, tr, ar, n, 1.0 / Z, cp)
                if mk != NULL:
                    for p in range(10 * n + n * n):
                        r = tr[p] if p < 10 * n else ar[p - 10 * n]
                        if r >= 0 and mk[r] == 0:
                            mk[r] = 1
                            tp[c] = r
                            c += 1
                if pp != NULL:
                    posteriors(w, n, 1.0 / Z, pp + post_off[k])
        work_free(w)
        return c

    def trees(self, const double[::1] wt, const i64[::1] idx, i64[::1] rows, const i64[::1] row_off,
              double[::1] score, int[::1] heads, const i64[::1] head_off,
              const u64[::1] seeds=None):
        """Viterbi trees (seeds None; score = log weight) or sampled trees (score =
        log Z): heads at heads[head_off[k]:], derivation rows (5n-1 each, flat
        (rule, start, end)) at rows[3 row_off[k]:].  score -inf: no tree."""
        cdef Py_ssize_t k, s, n, i, K = idx.shape[0]
        cdef Work *w = work_or_raise(self.nmax(idx))
        cdef double Z
        cdef i64 E
        cdef int ok, root
        cdef grind_rng g
        cdef const int *tr = w.trb
        cdef const int *ar
        cdef bint sampling = seeds is not None
        with nogil:
            for k in range(K):
                s = idx[k]
                n = self.sent_off[s + 1] - self.sent_off[s]
                score[k] = -INFINITY
                if self.bad[s] or n == 0:
                    continue
                ar = self.rules(w, s, n)
                if sampling:
                    ok = prepare(w, tr, ar, &wt[0], NULL, n, &Z, &E)
                    if ok <= 0:
                        score[k] = -INFINITY if ok == 0 else NAN
                        continue
                    score[k] = log(Z) + E * LN2
                    grind_rng_seed(&g, seeds[k])
                    traverse(w, n, -1, &g)
                else:
                    gather(w, tr, ar, &wt[0], n)
                    logify(w, n)
                    score[k] = viterbi(w, n, &root)
                    if not (score[k] > -INFINITY and score[k] < INFINITY):
                        continue
                    traverse(w, n, root, NULL)
                for i in range(n):
                    heads[head_off[k] + i] = w.heads[i]
                derivation(w, tr, ar, n, &rows[3 * row_off[k]])
        work_free(w)


    def hastings(self, i64[::1] cnt, const double[::1] a, const i64[::1] lhs_at, const i64[::1] order,
                 Py_ssize_t batch, double inv, i64[::1] rows, const i64[::1] row_off, u64 seed):
        """One sweep of the collapsed Metropolis-Hastings sampler (grind.infer.hastings)
        over the sentences ``order``, in that order, in batches of ``batch``.

        cnt (int64, modified): rule counts of the current trees at [r], per-LHS
        totals at lhs_at[r] (joint index space, see grind.infer.hastings); a:
        the hyperparameters in the same layout; inv = 1/T.  rows (modified):
        the current tree of sentence s as 5n-1 derivation rows (rule, start,
        end) at rows[3 row_off[s]:].  For each batch B: the trees of B are taken
        out of cnt, a proposal is drawn for every sentence of B from theta^B =
        ((cnt + a) / per-LHS total)^inv, the trees are put back, and each tree is
        then updated in order (counts = t_{-i}) with the MH acceptance
        min{1, exp((excess_B(t') - excess_B(t_i)) inv)}; batch = 1 is the
        per-sentence sampler (theta' from the counts of t_{-i}).  One
        xoshiro256** stream seeded with ``seed`` draws the trees and the
        acceptance uniforms.  Returns (accepted, failed): failed = -1, or the
        sentence whose chart left floating-point range (counts are then
        restored to those of the current trees and the sweep stops there).
        """
        cdef Py_ssize_t K = order.shape[0], U = cnt.shape[0], k, s
        cdef Py_ssize_t nmax, L, B = max(1, min(batch, K)), acc = 0, fail
        cdef Work *w
        cdef int *seen
        cdef i64 *inb = NULL
        cdef i64 *prop
        cdef char *pok
        cdef Theta th
        cdef grind_rng g
        if a.shape[0] != U or lhs_at.shape[0] > U or row_off.shape[0] != self.sent_off.shape[0] - 1:
            raise ValueError("Corpus.hastings: inconsistent array sizes")
        if K == 0:
            return 0, -1
        for k in range(K):
            s = order[k]
            if s < 0 or s >= row_off.shape[0] or self.bad[s] or self.sent_off[s + 1] == self.sent_off[s]:
                raise ValueError(f"Corpus.hastings: sentence {s} cannot have a tree")
            if 3 * (row_off[s] + 5 * (self.sent_off[s + 1] - self.sent_off[s]) - 1) > rows.shape[0]:
                raise ValueError("Corpus.hastings: rows too short")
        nmax = self.nmax(order)
        L = 5 * nmax - 1
        th.cnt = &cnt[0]
        th.a = &a[0]
        th.lhs_at = &lhs_at[0]
        th.inv = inv
        th.pw = NULL
        th.pwn = NULL
        grind_rng_seed(&g, seed)
        w = work_or_raise(nmax)
        seen = <int *> calloc(U, sizeof(int))
        if B > 1:
            inb = <i64 *> calloc(U, sizeof(i64))
        prop = <i64 *> malloc(3 * L * B * sizeof(i64))
        pok = <char *> malloc(B)
        if inv != 1.0:
            th.pw = <double *> malloc(U * sizeof(double))
            th.pwn = <i64 *> malloc(U * sizeof(i64))
        if (seen == NULL or prop == NULL or pok == NULL or (B > 1 and inb == NULL)
                or (inv != 1.0 and (th.pw == NULL or th.pwn == NULL))):
            work_free(w); free(seen); free(inb); free(prop); free(pok); free(th.pw); free(th.pwn)
            raise MemoryError()
        for k in range(U if th.pwn != NULL else 0):
            th.pwn[k] = -1                           # counts are >= 0: nothing cached yet
        with nogil:
            fail = self._hastings(w, &th, &cnt[0], &order[0], K, B, &rows[0], &row_off[0], inb, seen,
                                  prop, pok, L, &g, &acc)
        work_free(w)
        free(seen); free(inb); free(prop); free(pok); free(th.pw); free(th.pwn)
        return acc, fail

    cdef Py_ssize_t _hastings(self, Work *w, const Theta *th, i64 *cnt, const i64 *order, Py_ssize_t K,
                              Py_ssize_t B, i64 *rows, const i64 *row_off, i64 *inb, int *seen, i64 *prop,
                              char *pok, Py_ssize_t L, grind_rng *g, Py_ssize_t *acc) noexcept nogil:
        """The sweep of ``hastings`` (inb: NULL for B = 1, else all 0: the uses of
        the trees of the batch other than the one being updated)."""
        cdef Py_ssize_t k0 = 0, k1, k, s, n, m
        cdef const i64 *lhs_at = th.lhs_at
        cdef const int *ar
        cdef i64 *cur
        cdef i64 *P
        cdef double Z
        cdef i64 E
        cdef int ok
        while k0 < K:
            k1 = min(k0 + B, K)
            if inb != NULL:                          # cnt = f(t_{-B}), inb = f(t_B)
                for k in range(k0, k1):
                    s = order[k]
                    m = 5 * (self.sent_off[s + 1] - self.sent_off[s]) - 1
                    move(rows + 3 * row_off[s], m, lhs_at, cnt, -1)
                    move(rows + 3 * row_off[s], m, lhs_at, inb, 1)
            for k in range(k0, k1):                  # proposals (B = 1: and the update)
                s = order[k]
                n = self.sent_off[s + 1] - self.sent_off[s]
                m = 5 * n - 1
                cur = rows + 3 * row_off[s]
                P = prop + 3 * L * (k - k0)
                if inb == NULL:
                    move(cur, m, lhs_at, cnt, -1)    # cnt = f(t_{-i})
                ar = self.rules(w, s, n)
                ok = prepare(w, w.trb, ar, NULL, th, n, &Z, &E)
                if ok < 0:                           # restore cnt = f(t), inb = 0
                    if inb == NULL:
                        move(cur, m, lhs_at, cnt, 1)
                        return s
                    for k in range(k0, k1):
                        m = 5 * (self.sent_off[order[k] + 1] - self.sent_off[order[k]]) - 1
                        move(rows + 3 * row_off[order[k]], m, lhs_at, cnt, 1)
                        move(rows + 3 * row_off[order[k]], m, lhs_at, inb, -1)
                    return s
                pok[k - k0] = ok > 0                 # Z = 0: no proposal, t_i is kept
                if ok > 0:
                    traverse(w, n, -1, g)
                    derivation(w, w.trb, ar, n, P)
                if inb == NULL:
                    if ok > 0:
                        acc[0] += metropolis(cur, P, m, th, NULL, seen, g)
                    move(cur, m, lhs_at, cnt, 1)
            if inb != NULL:
                for k in range(k0, k1):              # cnt = f(t)
                    s = order[k]
                    m = 5 * (self.sent_off[s + 1] - self.sent_off[s]) - 1
                    move(rows + 3 * row_off[s], m, lhs_at, cnt, 1)
                for k in range(k0, k1):              # the updates, in order
                    s = order[k]
                    m = 5 * (self.sent_off[s + 1] - self.sent_off[s]) - 1
                    cur = rows + 3 * row_off[s]
                    move(cur, m, lhs_at, cnt, -1)
                    move(cur, m, lhs_at, inb, -1)
                    if pok[k - k0]:
                        acc[0] += metropolis(cur, prop + 3 * L * (k - k0), m, th, inb, seen, g)
                    move(cur, m, lhs_at, cnt, 1)
                    move(cur, m, lhs_at, inb, 1)
                for k in range(k0, k1):              # inb = 0
                    s = order[k]
                    m = 5 * (self.sent_off[s + 1] - self.sent_off[s]) - 1
                    move(rows + 3 * row_off[s], m, lhs_at, inb, -1)
            k0 = k1
        return -1


cdef int _cmp_key(const void *x, const void *y) noexcept nogil:
    cdef i64 a = (<const i64 *> x)[0]
    cdef i64 b = (<const i64 *> y)[0]
    return (a > b) - (a < b)


def _nonempty(a, dtype):
    """``a`` as a contiguous array of ``dtype``, one -1 if empty (so &a[0] is valid)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.size else np.full(1, -1, dtype=dtype)


def eisner(const double[:, ::1] scores):
    """Heads (1-based, 0 = root) of the projective tree with one root maximising
    sum of scores[head, dep] (row 0 = root, row h+1 = word h, column d = word d).
    Eisner (1996)'s algorithm: the Viterbi pass above with log STOP weights 0."""
    cdef Py_ssize_t n = scores.shape[1], h, d
    cdef int root
    cdef Work *w
    heads = np.zeros(n, dtype=np.int32)
    cdef int[::1] hv = heads
    if n == 0:
        return heads.astype(np.int64)
    if scores.shape[0] != n + 1:
        raise ValueError("scores must have shape (n+1, n)")
    w = work_or_raise(n)
    with nogil:
        for d in range(n):
            w.R[d] = scores[0, d]
            for h in range(n):
                w.A[h * n + d] = scores[h + 1, d] if h != d else -INFINITY
        memset(w.st, 0, 8 * n * sizeof(double))
        viterbi(w, n, &root)
        traverse(w, n, root, NULL)
        for d in range(n):
            hv[d] = w.heads[d]
    work_free(w)
    return heads.astype(np.int64)
