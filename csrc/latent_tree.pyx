# Latent-annotation kernel: inside-outside over the hidden subtypes of the
# nodes of gold trees (see grind/kernels/latent_tree.py for the math), every
# requested tree in one nogil loop.
#
# Per tree (nodes in post-order, the root last), node i's vector over the
# subtypes of its symbol lives at voff[i] in the work buffers.  Inside (beta)
# and outside (alpha) vectors are stored divided by their maximum, the logs
# of the true scales kept per node (lb, la):
#   beta_i  = beta~_i  * exp(lb[i]),  lb[i] = log max + lb[children]
#   alpha_k = alpha~_k * exp(la[k]),  la[left] = la[i] + lb[right] + log max
# Blocks W of base rule r (offset off[r]) are dense, C order (a major):
# lexical W[a], unary W[a, b], binary W[a, b, c].  The H^3 loops are written
# as axpys over the contiguous last index (no reductions in the inner loop,
# so they vectorise without reassociation).

from rng cimport grind_rng, grind_rng_seed, grind_uniform
from libc.stdlib cimport malloc, free
from libc.math cimport log, exp, INFINITY
from libc.stdint cimport int64_t, uint64_t

import numpy as np

cdef enum:
    LEXICAL = 0               # the kinds of base rules (grind.grammars.latent)
    UNARY = 1
    BINARY = 2


cdef struct Model:
    const double *W           # block entries (gathered weights)
    const int64_t *kind       # per base rule
    const int64_t *off
    const int64_t *ha         # subtypes of A, B, C (1 where absent)
    const int64_t *hb
    const int64_t *hc
    const int64_t *roe        # grammar rule of each block entry (-1: none)
    const int64_t *rule       # per node (all trees concatenated)
    const int64_t *lk         # left / right child, local to the tree (-1: none)
    const int64_t *rk
    const int64_t *toff       # n_trees + 1 node offsets


cdef struct Work:
    int64_t *voff             # nmax + 1
    double *beta              # vmax
    double *alpha             # vmax
    double *lb                # nmax
    double *la                # nmax
    int64_t *bp               # vmax: Viterbi back pointers (b * HC + c)
    double *tmp               # wmax: H_B * H_C scratch
    int64_t *sub              # nmax: chosen subtype per node
    int64_t *start            # nmax: span of each node
    int64_t *end
    int64_t *stack            # nmax


cdef int work_new(Work *w, int64_t nmax, int64_t vmax, int64_t wmax) noexcept nogil:
    nmax += 1
    vmax += 1
    wmax += 1
    w.voff = <int64_t *> malloc(nmax * sizeof(int64_t))
    w.beta = <double *> malloc(vmax * sizeof(double))
    w.alpha = <double *> malloc(vmax * sizeof(double))
    w.lb = <double *> malloc(nmax * sizeof(double))
    w.la = <double *> malloc(nmax * sizeof(double))
    w.bp = <int64_t *> malloc(vmax * sizeof(int64_t))
    w.tmp = <double *> malloc(wmax * sizeof(double))
    w.sub = <int64_t *> malloc(nmax * sizeof(int64_t))
    w.start = <int64_t *> malloc(nmax * sizeof(int64_t))
    w.end = <int64_t *> malloc(nmax * sizeof(int64_t))
    w.stack = <int64_t *> malloc(nmax * sizeof(int64_t))
    return (w.voff != NULL and w.beta != NULL and w.alpha != NULL and w.lb != NULL and w.la != NULL
            and w.bp != NULL and w.tmp != NULL and w.sub != NULL and w.start != NULL and w.end != NULL
            and w.stack != NULL)


cdef void work_free(Work *w) noexcept nogil:
    free(w.voff); free(w.beta); free(w.alpha); free(w.lb); free(w.la); free(w.bp); free(w.tmp)
    free(w.sub); free(w.start); free(w.end); free(w.stack)


cdef inline double rescale(double *v, int64_t n) noexcept nogil:
    """Divide v[0:n] by its maximum; return log of it (-inf, v untouched, when all are 0)."""
    cdef int64_t a
    cdef double mx = 0.0
    for a in range(n):
        if v[a] > mx:
            mx = v[a]
    if not (mx > 0.0):
        return -INFINITY
    if mx != 1.0:
        for a in range(n):
            v[a] /= mx
    return log(mx)


cdef double inside(Model *m, Work *w, int64_t t, bint viterbi) noexcept nogil:
    """Scaled inside vectors of tree t (max-product with back pointers when
    ``viterbi``) and the spans of its nodes; returns log Z (the best log weight),
    -inf when some node's vector is all zero."""
    cdef int64_t g0 = m.toff[t], nn = m.toff[t + 1] - g0, i, r, HA, HB, HC, a, b, c, l, q, arg, pos = 0
    cdef const double *W
    cdef const double *row
    cdef double *bn
    cdef double *bl
    cdef double *br
    cdef double *tmp = w.tmp
    cdef double acc, y, v, best, ls, lm
    w.voff[0] = 0
    for i in range(nn):
        w.voff[i + 1] = w.voff[i] + m.ha[m.rule[g0 + i]]
    for i in range(nn):
        r = m.rule[g0 + i]
        HA, HB, HC = m.ha[r], m.hb[r], m.hc[r]
        W = m.W + m.off[r]
        bn = w.beta + w.voff[i]
        if m.kind[r] == LEXICAL:
            for a in range(HA):
                bn[a] = W[a]
            ls = 0.0
            w.start[i] = pos
            w.end[i] = pos + 1
            pos += 1
        elif m.kind[r] == UNARY:
            l = m.lk[g0 + i]
            bl = w.beta + w.voff[l]
            for a in range(HA):
                row = W + a * HB
                if viterbi:
                    best, arg = 0.0, -1
                    for b in range(HB):
                        v = row[b] * bl[b]
                        if v > best:
                            best, arg = v, b
                    bn[a] = best
                    w.bp[w.voff[i] + a] = arg
                else:
                    acc = 0.0
                    for b in range(HB):
                        acc += row[b] * bl[b]
                    bn[a] = acc
            ls = w.lb[l]
            w.start[i] = w.start[l]
            w.end[i] = w.end[l]
        else:
            l = m.lk[g0 + i]
            q = m.rk[g0 + i]
            bl = w.beta + w.voff[l]
            br = w.beta + w.voff[q]
            for a in range(HA):
                if viterbi:
                    best, arg = 0.0, -1
                    for b in range(HB):
                        y = bl[b]
                        row = W + (a * HB + b) * HC
                        for c in range(HC):
                            v = y * row[c] * br[c]
                            if v > best:
                                best, arg = v, b * HC + c
                    bn[a] = best
                    w.bp[w.voff[i] + a] = arg
                else:
                    # tmp[c] = sum_b beta_l[b] W[a, b, c]; beta[a] = tmp . beta_r
                    for c in range(HC):
                        tmp[c] = 0.0
                    for b in range(HB):
                        y = bl[b]
                        row = W + (a * HB + b) * HC
                        for c in range(HC):
                            tmp[c] += y * row[c]
                    acc = 0.0
                    for c in range(HC):
                        acc += tmp[c] * br[c]
                    bn[a] = acc
            ls = w.lb[l] + w.lb[q]
            w.start[i] = w.start[l]
            w.end[i] = w.end[q]
        lm = rescale(bn, HA)
        if lm == -INFINITY:
            return -INFINITY
        w.lb[i] = ls + lm
    # alpha of the root is 1 for each of its subtypes (the root is unsplit: one)
    bn = w.beta + w.voff[nn - 1]
    acc = 0.0
    for a in range(m.ha[m.rule[g0 + nn - 1]]):
        if viterbi:
            if bn[a] > acc:
                acc = bn[a]
        else:
            acc += bn[a]
    return w.lb[nn - 1] + log(acc)


cdef void outside(Model *m, Work *w, int64_t t, double lz, double *cnt) noexcept nogil:
    """Scaled outside vectors of tree t (after ``inside``) and its expected
    counts, added to ``cnt`` (one per block entry)."""
    cdef int64_t g0 = m.toff[t], nn = m.toff[t + 1] - g0, i, r, HA, HB, HC, a, b, c, l, q
    cdef const double *W
    cdef const double *row
    cdef double *an
    cdef double *al
    cdef double *ar
    cdef double *bl
    cdef double *br
    cdef double *cr
    cdef double *V = w.tmp
    cdef double f, x, fx, coef, acc
    an = w.alpha + w.voff[nn - 1]
    for a in range(m.ha[m.rule[g0 + nn - 1]]):
        an[a] = 1.0
    w.la[nn - 1] = 0.0
    for i in range(nn - 1, -1, -1):
        r = m.rule[g0 + i]
        HA, HB, HC = m.ha[r], m.hb[r], m.hc[r]
        W = m.W + m.off[r]
        cr = cnt + m.off[r]
        an = w.alpha + w.voff[i]
        if m.kind[r] == LEXICAL:
            f = exp(w.la[i] - lz)
            if f > 0.0:
                for a in range(HA):
                    cr[a] += f * an[a] * W[a]
        elif m.kind[r] == UNARY:
            l = m.lk[g0 + i]
            bl = w.beta + w.voff[l]
            al = w.alpha + w.voff[l]
            f = exp(w.la[i] + w.lb[l] - lz)
            for b in range(HB):
                al[b] = 0.0
            for a in range(HA):
                x = an[a]
                if x == 0.0:
                    continue
                fx = f * x
                row = W + a * HB
                for b in range(HB):
                    al[b] += x * row[b]
                    cr[a * HB + b] += fx * row[b] * bl[b]
            w.la[l] = w.la[i] + rescale(al, HB)
        else:
            l = m.lk[g0 + i]
            q = m.rk[g0 + i]
            bl = w.beta + w.voff[l]
            br = w.beta + w.voff[q]
            al = w.alpha + w.voff[l]
            ar = w.alpha + w.voff[q]
            f = exp(w.la[i] + w.lb[l] + w.lb[q] - lz)
            # V[b, c] = sum_a alpha[a] W[a, b, c]; counts alpha[a] W[a, b, c] beta_l[b] beta_r[c] f
            for b in range(HB * HC):
                V[b] = 0.0
            for a in range(HA):
                x = an[a]
                if x == 0.0:
                    continue
                row = W + a * HB * HC
                for b in range(HB * HC):
                    V[b] += x * row[b]
                fx = f * x
                for b in range(HB):
                    coef = fx * bl[b]
                    if coef == 0.0:
                        continue
                    row = W + (a * HB + b) * HC
                    for c in range(HC):
                        cr[(a * HB + b) * HC + c] += coef * row[c] * br[c]
            # alpha_l[b] = sum_c V[b, c] beta_r[c];  alpha_r[c] = sum_b beta_l[b] V[b, c]
            for c in range(HC):
                ar[c] = 0.0
            for b in range(HB):
                acc = 0.0
                x = bl[b]
                row = V + b * HC
                for c in range(HC):
                    acc += row[c] * br[c]
                    ar[c] += x * row[c]
                al[b] = acc
            w.la[l] = w.la[i] + w.lb[q] + rescale(al, HB)
            w.la[q] = w.la[i] + w.lb[l] + rescale(ar, HC)


cdef int64_t top_down(Model *m, Work *w, int64_t t, bint viterbi, grind_rng *rng,
                      int64_t *rows) noexcept nogil:
    """The Viterbi (back pointers) or a sampled subtype assignment of tree t
    (after ``inside``), written as derivation rows in pre-order; returns the
    number of rows."""
    cdef int64_t g0 = m.toff[t], nn = m.toff[t + 1] - g0, i, r, HA, HB, HC, a, b, c, l, q, e, sp = 0, o = 0
    cdef int64_t bt
    cdef const double *W
    cdef const double *row
    cdef double *bn
    cdef double *bl
    cdef double *br
    cdef double acc, u, x
    # the root's subtype (it has one: unsplit)
    i = nn - 1
    HA = m.ha[m.rule[g0 + i]]
    bn = w.beta + w.voff[i]
    bt = 0
    if viterbi:
        for a in range(HA):
            if bn[a] > bn[bt]:
                bt = a
    else:
        acc = 0.0
        for a in range(HA):
            acc += bn[a]
        u = grind_uniform(rng) * acc
        acc = 0.0
        for a in range(HA):
            if bn[a] > 0.0:
                bt = a
                acc += bn[a]
                if acc > u:
                    break
    w.sub[i] = bt
    w.stack[sp] = i
    sp += 1
    while sp > 0:
        sp -= 1
        i = w.stack[sp]
        r = m.rule[g0 + i]
        HA, HB, HC = m.ha[r], m.hb[r], m.hc[r]
        W = m.W + m.off[r]
        a = w.sub[i]
        if m.kind[r] == LEXICAL:
            e = a
        elif m.kind[r] == UNARY:
            l = m.lk[g0 + i]
            bl = w.beta + w.voff[l]
            row = W + a * HB
            if viterbi:
                bt = w.bp[w.voff[i] + a]
            else:
                acc = 0.0
                for b in range(HB):
                    acc += row[b] * bl[b]
                u = grind_uniform(rng) * acc
                acc = 0.0
                bt = 0
                for b in range(HB):
                    x = row[b] * bl[b]
                    if x > 0.0:
                        bt = b
                        acc += x
                        if acc > u:
                            break
            w.sub[l] = bt
            e = a * HB + bt
            w.stack[sp] = l
            sp += 1
        else:
            l = m.lk[g0 + i]
            q = m.rk[g0 + i]
            bl = w.beta + w.voff[l]
            br = w.beta + w.voff[q]
            if viterbi:
                bt = w.bp[w.voff[i] + a]
            else:
                acc = 0.0
                for b in range(HB):
                    row = W + (a * HB + b) * HC
                    for c in range(HC):
                        acc += bl[b] * row[c] * br[c]
                u = grind_uniform(rng) * acc
                acc = 0.0
                bt = 0
                for b in range(HB):
                    row = W + (a * HB + b) * HC
                    for c in range(HC):
                        x = bl[b] * row[c] * br[c]
                        if x > 0.0:
                            bt = b * HC + c
                            acc += x
                            if acc > u:
                                break
                    if acc > u:
                        break
            w.sub[l] = bt // HC
            w.sub[q] = bt % HC
            e = a * HB * HC + bt
            w.stack[sp] = q
            w.stack[sp + 1] = l
            sp += 2
        rows[3 * o] = m.roe[m.off[r] + e]
        rows[3 * o + 1] = w.start[i]
        rows[3 * o + 2] = w.end[i]
        o += 1
    return o


cdef class Kernel:
    """The encoded trees and the compiled grammar's block layout (read-only;
    every call allocates its own work buffers, so calls may run in threads)."""

    cdef const int64_t[::1] kind, off, ha, hb, hc, roe, rule, lk, rk, toff
    cdef readonly int64_t n_entries, nmax, vmax, wmax
    cdef object keep

    def __init__(self, dict d):
        self.keep = d
        self.kind, self.off, self.ha, self.hb, self.hc = d["kind"], d["offset"], d["ha"], d["hb"], d["hc"]
        self.roe, self.rule, self.lk, self.rk, self.toff = (d["rule_of_entry"], d["node_rule"], d["node_left"],
                                                           d["node_right"], d["tree_offset"])
        self.n_entries = self.roe.shape[0]
        self.nmax, self.vmax, self.wmax = d["nmax"], d["vmax"], d["wmax"]
        if self.kind.shape[0] == 0 or self.toff.shape[0] == 0:
            raise ValueError("empty grammar or no tree offsets")

    cdef void model(self, Model *m, const double[::1] W):
        m.W = &W[0]
        m.kind, m.off, m.ha, m.hb, m.hc = &self.kind[0], &self.off[0], &self.ha[0], &self.hb[0], &self.hc[0]
        m.roe, m.toff = &self.roe[0], &self.toff[0]
        # trees may have no nodes at all (every one failed): point at something valid
        m.rule = &self.rule[0] if self.rule.shape[0] else NULL
        m.lk = &self.lk[0] if self.lk.shape[0] else NULL
        m.rk = &self.rk[0] if self.rk.shape[0] else NULL

    def inside_outside(self, const double[::1] W, const int64_t[::1] idx, double[::1] counts,
                       double[::1] logz, bint want_counts=True):
        """Expected counts of the block entries (added to ``counts``) and log Z
        of each tree of ``idx`` (into ``logz``)."""
        cdef Model m
        cdef Work w
        cdef Py_ssize_t Q = idx.shape[0], qq
        cdef int64_t t
        cdef double lz
        if W.shape[0] != self.n_entries or counts.shape[0] != self.n_entries or logz.shape[0] != Q:
            raise ValueError("buffer sizes do not match the grammar / idx")
        if Q == 0:
            return
        self.model(&m, W)
        with nogil:
            if not work_new(&w, self.nmax, self.vmax, self.wmax):
                work_free(&w)
                with gil:
                    raise MemoryError()
            for qq in range(Q):
                t = idx[qq]
                lz = inside(&m, &w, t, False)
                logz[qq] = lz
                if want_counts and lz > -INFINITY:
                    outside(&m, &w, t, lz, &counts[0])
            work_free(&w)

    def decode(self, const double[::1] W, const int64_t[::1] idx, const uint64_t[::1] seeds, bint viterbi,
               int64_t[:, ::1] rows, const int64_t[::1] row_off, int64_t[::1] n_rows, double[::1] score):
        """Viterbi (``viterbi``) or sampled subtype assignment of each tree of
        ``idx`` as derivation rows (tree qq at row ``row_off[qq]``); ``n_rows``
        -1 where the tree has zero weight; ``score`` the best log weight
        (Viterbi) or log Z (sampling)."""
        cdef Model m
        cdef Work w
        cdef Py_ssize_t Q = idx.shape[0], qq
        cdef int64_t t
        cdef double lz
        cdef grind_rng rng
        cdef int64_t *out
        if W.shape[0] != self.n_entries or n_rows.shape[0] != Q or score.shape[0] != Q \
                or row_off.shape[0] != Q + 1 or (not viterbi and seeds.shape[0] != Q) \
                or rows.shape[0] < row_off[Q] or rows.shape[0] == 0:
            raise ValueError("buffer sizes do not match the grammar / idx")
        if Q == 0:
            return
        self.model(&m, W)
        out = &rows[0, 0]
        grind_rng_seed(&rng, 0)           # (unused by Viterbi; reseeded per tree when sampling)
        with nogil:
            if not work_new(&w, self.nmax, self.vmax, self.wmax):
                work_free(&w)
                with gil:
                    raise MemoryError()
            for qq in range(Q):
                t = idx[qq]
                n_rows[qq] = -1
                lz = inside(&m, &w, t, viterbi)
                score[qq] = lz
                if lz == -INFINITY:
                    continue
                if not viterbi:
                    grind_rng_seed(&rng, seeds[qq])
                n_rows[qq] = top_down(&m, &w, t, viterbi, &rng, out + 3 * row_off[qq])
            work_free(&w)
