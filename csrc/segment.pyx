# Segmentation kernel: forward-backward over positions x (template, slot index)
# for template (morphology) grammars, one word at a time, a whole batch of
# words in one nogil call (see grind/kernels/segment.py for the math).
#
# States: template t with slots s_1..s_k owns alpha/beta rows st(t)+0..st(t)+k,
# st(t) = toff[t] + t.  Per word, L_s(i, j) = wlex[kid(i, j), s] / max_s where
# max_s is slot s's largest weight over the word's spans (added back in log Z);
# wlex[k, s] = w[table[k, s]] (0 for -1) is read straight from the rule weights.
#   alpha_m(j) = sum_i alpha_m-1(i) L_{s_m}(i, j),  alpha_0 = [1, 0, ..]
#   beta_m-1(i) = sum_j L_{s_m}(i, j) beta_m(j),     beta_k = [.., 0, 1]
#   log w_t Z_t = log w_t + sum_m log max_{s_m} + log alpha_k(n)
# Every alpha and beta row is stored divided by its largest entry, whose log
# is kept (aofs / bofs, summed along the row's chain), so a word whose
# derivations all have probabilities far below the smallest double (a product
# of many small weights) keeps its log Z, counts and posteriors.  A word where a
# value still leaves the double range inside a row (an entry below DBL_MIN times
# its row's largest, or a product below DBL_MIN), or whose posteriors would need
# a factor above e^LINEAR_MAX, is redone in log space (forward_log,
# backward_pass(logspace), add_counts_log; w.logmode), so no derivation is ever
# lost to underflow.
# WordKernel runs the same forward/backward/count loops for one word, reading
# only the weights of the rules that word reads (collapsed VB).

from rng cimport grind_rng, grind_rng_seed, grind_uniform
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.math cimport log, exp, INFINITY
from libc.float cimport DBL_MIN
from libc.stdint cimport int64_t, uint64_t

import numpy as np


cdef struct Gram:
    int S, T, maxlex, nmax, nstates
    const double *w           # rule weights
    const int *table          # (K+1) x S lexical rule ids (-1: none)
    const double *logw        # T template log weights
    const int *trule          # T template rule ids
    const int *toff           # T+1 offsets into tslot
    const int *tslot          # slots of every template
    const int *kid            # per word (n+1)^2 substring ids
    const int64_t *koff       # offset of each word in kid
    const int *length         # length of each word


cdef struct Work:
    double *L                 # S x (n+1)^2
    double *logmx             # S
    double *alpha             # nstates x (n+1)
    double *beta
    double *logt              # T
    double *base              # T: log w_t + sum_m log max_{s_m}
    double *aofs              # nstates: log of what alpha row was divided by (cumulative)
    double *bofs              # nstates: the same for beta rows
    double *scale             # T: 1 for a template with a derivation, else 0
    int *bp                   # nstates x (n+1)
    bint logmode              # this word's L, alpha, beta hold logs (the slow path)
    bint lost                 # a value left the double range in the linear pass


cdef int work_new(Work *w, Gram *g) noexcept nogil:
    cdef Py_ssize_t n1 = g.nmax + 1
    w.L = <double *> malloc(g.S * n1 * n1 * sizeof(double))
    w.logmx = <double *> malloc(g.S * sizeof(double))
    w.alpha = <double *> malloc(g.nstates * n1 * sizeof(double))
    w.beta = <double *> malloc(g.nstates * n1 * sizeof(double))
    w.logt = <double *> malloc(g.T * sizeof(double))
    w.base = <double *> malloc(g.T * sizeof(double))
    w.aofs = <double *> malloc(g.nstates * sizeof(double))
    w.bofs = <double *> malloc(g.nstates * sizeof(double))
    w.scale = <double *> malloc(g.T * sizeof(double))
    w.bp = <int *> malloc(g.nstates * n1 * sizeof(int))
    return (w.L != NULL and w.logmx != NULL and w.alpha != NULL and w.beta != NULL and w.logt != NULL
            and w.base != NULL and w.aofs != NULL and w.bofs != NULL and w.scale != NULL and w.bp != NULL)


cdef void work_free(Work *w) noexcept nogil:
    free(w.L); free(w.logmx); free(w.alpha); free(w.beta); free(w.logt); free(w.base); free(w.aofs)
    free(w.bofs); free(w.scale); free(w.bp)


#: A word whose posteriors need a factor above e^LINEAR_MAX is counted in log space: below it, a product of
#: stored values of at least e^-LINEAR_MAX times a posterior is still a normal double.
DEF LINEAR_MAX = 600.0


cdef double normalise(Work *w, double *row, int lo, int hi) noexcept nogil:
    """Divide row[lo..hi] by its largest entry; return that entry's log (-inf, row left as is, when all are 0).
    An entry that falls below DBL_MIN sets w.lost."""
    cdef int j
    cdef double mx = 0.0, v
    for j in range(lo, hi + 1):
        if row[j] > mx:
            mx = row[j]
    if mx == 0.0:
        return -INFINITY
    for j in range(lo, hi + 1):
        v = row[j]
        row[j] = v / mx
        if v > 0.0 and row[j] < DBL_MIN:
            w.lost = True
    return log(mx)


cdef void gather_lexical(Gram *g, Work *w, int q, bint logs) noexcept nogil:
    """L_s(i, j) = the weight of slot s's lexical rule for the word's span [i, j) (0 if none), or its log."""
    cdef int n = g.length[q], n1 = n + 1, S = g.S, s, i, j, jmax, r
    cdef const int *kid = g.kid + g.koff[q]
    cdef double *Ls
    cdef double x
    for s in range(S):
        Ls = w.L + s * n1 * n1
        for i in range(n):
            jmax = i + g.maxlex
            if jmax > n:
                jmax = n
            for j in range(i + 1, jmax + 1):
                r = g.table[kid[i * n1 + j] * S + s]
                x = g.w[r] if r >= 0 else 0.0
                Ls[i * n1 + j] = (log(x) if x > 0.0 else -INFINITY) if logs else x


cdef double forward(Gram *g, Work *w, int q, bint viterbi) noexcept nogil:
    """Fill L, alpha (or max-product alpha and bp), logt; return log Z
    (viterbi: the best log weight).  Linear (scaled) unless a value leaves the
    double range there; then in log space."""
    cdef double lz
    w.lost = False
    w.logmode = False
    lz = forward_lin(g, w, q, viterbi)
    if w.lost:
        lz = forward_log(g, w, q, viterbi)
    return lz


cdef double forward_lin(Gram *g, Work *w, int q, bint viterbi) noexcept nogil:
    """:func:`forward` with scaled linear values (sets w.lost where that fails)."""
    cdef int n = g.length[q], n1 = n + 1, S = g.S, s, i, j, t, m, k, st, jmax, bi
    cdef double *L = w.L
    cdef double *a0
    cdef double *a1
    cdef double *Ls
    cdef double mx, x, acc, best, top, lz
    gather_lexical(g, w, q, False)
    for s in range(S):
        Ls = L + s * n1 * n1
        mx = 0.0
        for i in range(n):
            jmax = i + g.maxlex
            if jmax > n:
                jmax = n
            for j in range(i + 1, jmax + 1):
                if Ls[i * n1 + j] > mx:
                    mx = Ls[i * n1 + j]
        if mx > 0.0:
            w.logmx[s] = log(mx)
            for i in range(n):
                jmax = i + g.maxlex
                if jmax > n:
                    jmax = n
                for j in range(i + 1, jmax + 1):
                    x = Ls[i * n1 + j]
                    Ls[i * n1 + j] = x / mx
                    if x > 0.0 and Ls[i * n1 + j] < DBL_MIN:
                        w.lost = True
        else:
            w.logmx[s] = -INFINITY
    top = -INFINITY
    for t in range(g.T):
        st = g.toff[t] + t
        k = g.toff[t + 1] - g.toff[t]
        a0 = w.alpha + st * n1
        for i in range(n1):
            a0[i] = 0.0
        a0[0] = 1.0
        w.aofs[st] = 0.0
        lz = g.logw[t]
        for m in range(k):
            s = g.tslot[g.toff[t] + m]
            lz += w.logmx[s]
        w.base[t] = lz
        for m in range(k):
            s = g.tslot[g.toff[t] + m]
            Ls = L + s * n1 * n1
            a0 = w.alpha + (st + m) * n1
            a1 = a0 + n1
            a1[0] = 0.0
            for j in range(1, n1):
                acc = 0.0
                bi = -1
                i = j - g.maxlex
                if i < 0:
                    i = 0
                while i < j:
                    x = a0[i] * Ls[i * n1 + j]
                    if x < DBL_MIN and a0[i] > 0.0 and Ls[i * n1 + j] > 0.0:
                        w.lost = True
                    if viterbi:
                        if x > acc:
                            acc = x
                            bi = i
                    else:
                        acc += x
                    i += 1
                a1[j] = acc
                if viterbi:
                    w.bp[(st + m + 1) * n1 + j] = bi
            w.aofs[st + m + 1] = w.aofs[st + m] + normalise(w, a1, 1, n)
        x = (w.alpha + (st + k) * n1)[n]
        if x > 0.0 and lz > -INFINITY and w.aofs[st + k] > -INFINITY:
            w.logt[t] = lz + w.aofs[st + k] + log(x)
        else:
            w.logt[t] = -INFINITY
        if w.logt[t] > top:
            top = w.logt[t]
    return log_total(g, w, top, viterbi)


cdef double log_total(Gram *g, Work *w, double top, bint viterbi) noexcept nogil:
    """log Z = log sum_t exp(logt[t]) (``top``: the largest logt; viterbi: ``top`` itself); marks in
    w.scale the templates with a derivation."""
    cdef int t
    cdef double acc = 0.0
    if top == -INFINITY or viterbi:
        return top
    for t in range(g.T):
        acc += exp(w.logt[t] - top)
    for t in range(g.T):
        w.scale[t] = 1.0 if w.logt[t] > -INFINITY else 0.0
    return top + log(acc)


cdef double forward_log(Gram *g, Work *w, int q, bint viterbi) noexcept nogil:
    """:func:`forward` in log space: L, alpha hold logs (-inf for 0), logmx = 0, aofs = 0."""
    cdef int n = g.length[q], n1 = n + 1, S = g.S, s, i, j, t, m, k, st, bi, lo
    cdef double *a0
    cdef double *a1
    cdef double *Ls
    cdef double x, acc, best, top
    w.logmode = True
    gather_lexical(g, w, q, True)
    for s in range(S):
        w.logmx[s] = 0.0
    top = -INFINITY
    for t in range(g.T):
        st = g.toff[t] + t
        k = g.toff[t + 1] - g.toff[t]
        a0 = w.alpha + st * n1
        for i in range(n1):
            a0[i] = -INFINITY
        a0[0] = 0.0
        w.base[t] = g.logw[t]
        for m in range(k):
            w.aofs[st + m] = 0.0
            s = g.tslot[g.toff[t] + m]
            Ls = w.L + s * n1 * n1
            a0 = w.alpha + (st + m) * n1
            a1 = a0 + n1
            a1[0] = -INFINITY
            for j in range(1, n1):
                lo = j - g.maxlex
                if lo < 0:
                    lo = 0
                best = -INFINITY
                bi = -1
                for i in range(lo, j):
                    x = a0[i] + Ls[i * n1 + j]
                    if x > best:
                        best = x
                        bi = i
                if viterbi or best == -INFINITY:
                    a1[j] = best
                else:
                    acc = 0.0
                    for i in range(lo, j):
                        acc += exp(a0[i] + Ls[i * n1 + j] - best)
                    a1[j] = best + log(acc)
                if viterbi:
                    w.bp[(st + m + 1) * n1 + j] = bi
        w.aofs[st + k] = 0.0
        x = (w.alpha + (st + k) * n1)[n]
        w.logt[t] = w.base[t] + x if x > -INFINITY and w.base[t] > -INFINITY else -INFINITY
        if w.logt[t] > top:
            top = w.logt[t]
    return log_total(g, w, top, viterbi)


cdef void backward(Gram *g, Work *w, int q) noexcept nogil:
    """Fill beta (after :func:`forward`), in the forward pass's mode; a linear
    pass that leaves the double range redoes the word in log space."""
    if not w.logmode:
        w.lost = False
        backward_pass(g, w, q, False)
        if not w.lost:
            return
        forward_log(g, w, q, False)
    backward_pass(g, w, q, True)


cdef void backward_pass(Gram *g, Work *w, int q, bint logspace) noexcept nogil:
    """beta rows: linear, each divided by its largest entry (bofs; sets w.lost
    where a value leaves the double range), or logs (``logspace``)."""
    cdef int n = g.length[q], n1 = n + 1, i, j, t, m, k, st, s, jmax
    cdef double *b0
    cdef double *b1
    cdef double *Ls
    cdef double acc, x, best
    cdef double zero = -INFINITY if logspace else 0.0
    for t in range(g.T):
        if w.scale[t] == 0.0:
            continue
        st = g.toff[t] + t
        k = g.toff[t + 1] - g.toff[t]
        b1 = w.beta + (st + k) * n1
        for i in range(n1):
            b1[i] = zero
        b1[n] = 0.0 if logspace else 1.0
        w.bofs[st + k] = 0.0
        for m in range(k, 0, -1):
            s = g.tslot[g.toff[t] + m - 1]
            Ls = w.L + s * n1 * n1
            b1 = w.beta + (st + m) * n1
            b0 = b1 - n1
            b0[n] = zero
            for i in range(n):
                jmax = i + g.maxlex
                if jmax > n:
                    jmax = n
                if logspace:
                    best = -INFINITY
                    for j in range(i + 1, jmax + 1):
                        if Ls[i * n1 + j] + b1[j] > best:
                            best = Ls[i * n1 + j] + b1[j]
                    if best == -INFINITY:
                        b0[i] = best
                        continue
                    acc = 0.0
                    for j in range(i + 1, jmax + 1):
                        acc += exp(Ls[i * n1 + j] + b1[j] - best)
                    b0[i] = best + log(acc)
                else:
                    acc = 0.0
                    for j in range(i + 1, jmax + 1):
                        x = Ls[i * n1 + j] * b1[j]
                        if x < DBL_MIN and Ls[i * n1 + j] > 0.0 and b1[j] > 0.0:
                            w.lost = True
                        acc += x
                    b0[i] = acc
            w.bofs[st + m - 1] = 0.0 if logspace else w.bofs[st + m] + normalise(w, b0, 0, n - 1)


cdef bint linear_factors_fit(Gram *g, Work *w, double lz, bint bounds) noexcept nogil:
    """Every factor a linear posterior is formed with (exp(base + aofs + bofs - lz) for a (template,
    slot) pair) is at most e^LINEAR_MAX, so a product of stored values that matters is a normal double."""
    cdef int t, st, k, m
    for t in range(g.T):
        if w.scale[t] == 0.0:
            continue
        st = g.toff[t] + t
        k = g.toff[t + 1] - g.toff[t]
        for m in range(k):
            if w.base[t] + w.aofs[st + m] + w.bofs[st + m + 1] - lz > LINEAR_MAX:
                return False
            if bounds and m > 0 and w.base[t] + w.aofs[st + m] + w.bofs[st + m] - lz > LINEAR_MAX:
                return False
    return True


cdef void add_counts(Gram *g, Work *w, int q, double lz, double *counts, double *bounds) noexcept nogil:
    """Add word q's expected rule counts to ``counts`` and, unless ``bounds``
    is NULL, P(a slot ends at i) for 0 < i < n to ``bounds[i]`` (after
    forward, with log Z ``lz`` finite, and backward; ``counts`` may be NULL).
    A posterior is alpha x L x beta times exp(lf) (the row scales' logs and
    the template's base less log Z): a product in linear mode, a sum of logs
    in log mode (where the row scales are 0)."""
    cdef int n = g.length[q], n1 = n + 1, t, st, k, m, s, i, j, jmax, r
    cdef const int *kid = g.kid + g.koff[q]
    cdef double sc, c, lf
    cdef double *a
    cdef double *b
    cdef double *Ls
    cdef bint lg
    if not w.logmode and not linear_factors_fit(g, w, lz, bounds != NULL):
        forward_log(g, w, q, False)              # a posterior's factor is too large to form in linear space
        backward_pass(g, w, q, True)
    lg = w.logmode
    for t in range(g.T):
        if w.scale[t] == 0.0:
            continue
        st = g.toff[t] + t
        k = g.toff[t + 1] - g.toff[t]
        if counts != NULL:
            counts[g.trule[t]] += exp(w.logt[t] - lz)
        for m in range(k):
            a = w.alpha + (st + m) * n1
            if bounds != NULL and m > 0:
                lf = w.base[t] + w.aofs[st + m] + w.bofs[st + m] - lz
                sc = exp(lf)
                b = w.beta + (st + m) * n1
                for i in range(1, n):
                    bounds[i] += exp(a[i] + b[i] + lf) if lg else a[i] * b[i] * sc
            if counts == NULL:
                continue
            lf = w.base[t] + w.aofs[st + m] + w.bofs[st + m + 1] - lz
            sc = exp(lf)
            if sc == 0.0 and not lg:
                continue
            b = w.beta + (st + m + 1) * n1
            s = g.tslot[g.toff[t] + m]
            Ls = w.L + s * n1 * n1
            for i in range(n):
                if a[i] == (-INFINITY if lg else 0.0):
                    continue
                jmax = i + g.maxlex
                if jmax > n:
                    jmax = n
                for j in range(i + 1, jmax + 1):
                    c = exp(a[i] + Ls[i * n1 + j] + b[j] + lf) if lg else a[i] * Ls[i * n1 + j] * b[j] * sc
                    if c > 0.0:
                        r = g.table[kid[i * n1 + j] * g.S + s]
                        counts[r] += c


def inside_outside(dict gram, const int[::1] idx, double[::1] counts, double[::1] logz,
                   double[:, ::1] bounds, bint want_counts):
    """Counts (added to ``counts``), log Z per word of idx; with a non-empty
    ``bounds`` (len(idx) x (nmax+1)) also P(a slot ends at i)."""
    cdef Gram g
    cdef Work w
    cdef object keep = _gram(gram, &g)
    cdef Py_ssize_t Q = idx.shape[0], qq
    cdef int q
    cdef double lz
    cdef double *cnt = &counts[0] if counts.shape[0] > 0 else NULL
    cdef bint want_bounds = bounds.shape[0] > 0
    with nogil:
        if not work_new(&w, &g):
            work_free(&w)
            with gil:
                raise MemoryError()
        for qq in range(Q):
            q = idx[qq]
            lz = forward(&g, &w, q, False)
            logz[qq] = lz
            if lz == -INFINITY:
                continue
            backward(&g, &w, q)
            add_counts(&g, &w, q, lz, cnt if want_counts else NULL, &bounds[qq, 0] if want_bounds else NULL)
        work_free(&w)
    return keep is not None


cdef int _cmp_i64(const void *x, const void *y) noexcept nogil:
    cdef int64_t a = (<const int64_t *> x)[0], b = (<const int64_t *> y)[0]
    return (a > b) - (a < b)


cdef class WordKernel:
    """One word at a time, touching only the rules that word reads (collapsed
    VB: a call costs O(the word's chart), never O(#rules)).

    The rules word q *reads* are every template rule and, for every span
    [i, j) of at most ``maxlex`` characters and every slot s, the lexical rule
    ``table[kid(i, j), s]`` when there is one: exactly the weights
    :func:`forward` looks at (including those that only set the scale), so
    the word's counts and log Z depend on those weights only.  Work buffers,
    a per-rule count scratch (zero between calls) and a per-rule mark are
    allocated once: not for concurrent calls.
    """

    cdef Gram g
    cdef Work w
    cdef dict static
    cdef double *cnt
    cdef unsigned char *seen
    cdef int64_t *loc
    cdef int loc_q                # the word whose rules ``loc`` holds (-1: none)
    cdef Py_ssize_t loc_k
    cdef double *logw
    cdef readonly Py_ssize_t n_rules, capacity

    def __cinit__(self, dict static, Py_ssize_t n_rules):
        self.static = static
        _gram_static(static, &self.g)
        self.n_rules = n_rules
        self.capacity = self.g.T + <Py_ssize_t> self.g.S * self.g.nmax * min(self.g.nmax, self.g.maxlex)
        self.cnt = <double *> calloc(max(1, n_rules), sizeof(double))
        self.seen = <unsigned char *> calloc(max(1, n_rules), 1)
        self.loc = <int64_t *> malloc(max(1, self.capacity) * sizeof(int64_t))
        self.loc_q = -1
        self.logw = <double *> malloc(max(1, self.g.T) * sizeof(double))
        if (self.cnt == NULL or self.seen == NULL or self.loc == NULL or self.logw == NULL
                or not work_new(&self.w, &self.g)):
            raise MemoryError()

    def __dealloc__(self):
        free(self.cnt)
        free(self.seen)
        free(self.loc)
        free(self.logw)
        work_free(&self.w)

    cdef Py_ssize_t _local(self, int q) noexcept nogil:
        """The distinct rules word q reads into ``loc``, sorted; returns how many
        (kept for the next call on the same word: CVB asks for the rules, then the counts)."""
        cdef Gram *g = &self.g
        cdef int n = g.length[q], n1 = n + 1, S = g.S, t, i, j, s, jmax, r
        cdef const int *kid = g.kid + g.koff[q]
        cdef const int *row
        cdef Py_ssize_t k = 0, x
        if q == self.loc_q:
            return self.loc_k
        for t in range(g.T):
            r = g.trule[t]
            if not self.seen[r]:
                self.seen[r] = 1
                self.loc[k] = r
                k += 1
        for i in range(n):
            jmax = i + g.maxlex
            if jmax > n:
                jmax = n
            for j in range(i + 1, jmax + 1):
                row = g.table + kid[i * n1 + j] * S
                for s in range(S):
                    r = row[s]
                    if r >= 0 and not self.seen[r]:
                        self.seen[r] = 1
                        self.loc[k] = r
                        k += 1
        for x in range(k):
            self.seen[self.loc[x]] = 0
        qsort(self.loc, k, sizeof(int64_t), _cmp_i64)
        self.loc_q, self.loc_k = q, k
        return k

    def local(self, int q, int64_t[::1] out):
        """Write the rules word q reads (sorted) to ``out`` (at least ``capacity``); returns how many."""
        cdef Py_ssize_t k, x
        with nogil:
            k = self._local(q)
            for x in range(k):
                out[x] = self.loc[x]
        return k

    def counts(self, const double[::1] w, int q, int64_t[::1] rules, double[::1] vals):
        """Word q's nonzero expected counts (``rules`` sorted, ``vals``; both at
        least ``capacity``) and log Z under weights ``w`` (``n_rules`` of them,
        read only at the rules word q reads).  Returns ``(how many, log Z)``;
        how many = -1 when a weight read is negative or not finite (nothing
        computed)."""
        cdef Py_ssize_t k, x, nnz = 0
        cdef int64_t r
        cdef double v, lz = -INFINITY
        with nogil:
            k = self._local(q)
            for x in range(k):
                v = w[self.loc[x]]
                if not (v >= 0.0 and v < INFINITY):      # NaN fails the first test
                    nnz = -1
                    break
            if nnz == 0:
                self.g.w = &w[0]
                log_templates(&self.g, self.logw)
                self.g.logw = self.logw
                lz = forward(&self.g, &self.w, q, False)
                if lz > -INFINITY:
                    backward(&self.g, &self.w, q)
                    add_counts(&self.g, &self.w, q, lz, self.cnt, NULL)
                    for x in range(k):
                        r = self.loc[x]
                        v = self.cnt[r]
                        if v != 0.0:
                            rules[nnz] = r
                            vals[nnz] = v
                            nnz += 1
                            self.cnt[r] = 0.0
                self.g.w = NULL
                self.g.logw = NULL
        return nnz, lz


cdef int emit(Gram *g, Work *w, int q, int t, int *ends, int64_t *rows) noexcept nogil:
    """Write the derivation of template t with slot boundaries ends[0..k] as rows."""
    cdef int k = g.toff[t + 1] - g.toff[t], m, s, n1 = g.length[q] + 1
    cdef const int *kid = g.kid + g.koff[q]
    rows[0] = g.trule[t]
    rows[1] = 0
    rows[2] = g.length[q]
    for m in range(k):
        s = g.tslot[g.toff[t] + m]
        rows[3 * (m + 1)] = g.table[kid[ends[m] * n1 + ends[m + 1]] * g.S + s]
        rows[3 * (m + 1) + 1] = ends[m]
        rows[3 * (m + 1) + 2] = ends[m + 1]
    return k + 1


def decode(dict gram, const int[::1] idx, const uint64_t[::1] seeds, bint viterbi,
           int64_t[:, ::1] rows, int64_t[::1] n_rows, double[::1] score):
    """Viterbi (``viterbi``) or sampled derivation of each word of idx: rows
    (len(idx) * (kmax+1) x 3, word qq at qq * (kmax+1)), n_rows (-1: none), score."""
    cdef Gram g
    cdef Work w
    cdef object keep = _gram(gram, &g)
    cdef Py_ssize_t Q = idx.shape[0], qq
    cdef int q, n, n1, t, st, k, m, s, i, j, jlo, bt, kmax = 0
    cdef double lz, u, acc, x, mxl
    cdef double *a
    cdef double *Ls
    cdef int ends[256]
    cdef grind_rng rng
    for t in range(g.T):
        if g.toff[t + 1] - g.toff[t] > kmax:
            kmax = g.toff[t + 1] - g.toff[t]
    if kmax > 255:
        raise ValueError("templates of more than 255 slots")
    with nogil:
        if not work_new(&w, &g):
            work_free(&w)
            with gil:
                raise MemoryError()
        for qq in range(Q):
            q = idx[qq]
            n_rows[qq] = -1
            lz = forward(&g, &w, q, viterbi)
            score[qq] = lz
            if lz == -INFINITY:
                continue
            n = g.length[q]
            n1 = n + 1
            bt = -1
            if viterbi:
                for t in range(g.T):
                    if w.logt[t] == lz:
                        bt = t
                        break
            else:
                grind_rng_seed(&rng, seeds[qq])
                u = grind_uniform(&rng)
                acc = 0.0
                for t in range(g.T):
                    x = exp(w.logt[t] - lz)
                    if x > 0.0:
                        bt = t
                        acc += x
                        if acc > u:
                            break
            t = bt
            st = g.toff[t] + t
            k = g.toff[t + 1] - g.toff[t]
            ends[k] = n
            j = n
            for m in range(k, 0, -1):
                if viterbi:
                    i = w.bp[(st + m) * n1 + j]
                else:
                    s = g.tslot[g.toff[t] + m - 1]
                    Ls = w.L + s * n1 * n1
                    a = w.alpha + (st + m - 1) * n1
                    jlo = j - g.maxlex
                    if jlo < 0:
                        jlo = 0
                    mxl = -INFINITY                 # log mode: weights exp(a + L - their largest)
                    if w.logmode:
                        for i in range(jlo, j):
                            if a[i] + Ls[i * n1 + j] > mxl:
                                mxl = a[i] + Ls[i * n1 + j]
                    acc = 0.0
                    for i in range(jlo, j):
                        acc += exp(a[i] + Ls[i * n1 + j] - mxl) if w.logmode else a[i] * Ls[i * n1 + j]
                    u = grind_uniform(&rng) * acc
                    acc = 0.0
                    bt = -1
                    for i in range(jlo, j):
                        x = exp(a[i] + Ls[i * n1 + j] - mxl) if w.logmode else a[i] * Ls[i * n1 + j]
                        if x > 0.0:
                            bt = i
                            acc += x
                            if acc > u:
                                break
                    i = bt
                ends[m - 1] = i
                j = i
            n_rows[qq] = emit(&g, &w, q, t, ends, &rows[qq * (kmax + 1), 0])
        work_free(&w)
    return keep is not None


cdef object _gram_static(dict d, Gram *g):
    """Point g at the corpus arrays of d (not ``w``/``logw``); returns d (keep it alive)."""
    cdef const int[::1] table = d["table"]
    cdef const int[::1] trule = d["trule"]
    cdef const int[::1] toff = d["toff"]
    cdef const int[::1] tslot = d["tslot"]
    cdef const int[::1] kid = d["kid"]
    cdef const int64_t[::1] koff = d["koff"]
    cdef const int[::1] length = d["length"]
    g.S, g.T, g.maxlex, g.nmax = d["S"], d["T"], d["maxlex"], d["nmax"]
    g.nstates = toff[g.T] + g.T
    g.table, g.trule = &table[0], &trule[0]
    g.toff, g.tslot, g.kid, g.koff, g.length = &toff[0], &tslot[0], &kid[0], &koff[0], &length[0]
    return d


cdef object _gram(dict d, Gram *g):
    """Point g at the arrays of d and its template log weights (computed here);
    returns what must stay alive while g is used."""
    cdef const double[::1] w = d["w"]
    cdef double[::1] logw = np.empty(max(1, <int> d["T"]))
    _gram_static(d, g)
    g.w = &w[0]
    log_templates(g, &logw[0])
    g.logw = &logw[0]
    return (d, logw)


cdef void log_templates(Gram *g, double *out) noexcept nogil:
    """out[t] = log w[trule[t]] (-inf for a zero weight): one definition for every entry point."""
    cdef int t
    for t in range(g.T):
        out[t] = log(g.w[g.trule[t]])
