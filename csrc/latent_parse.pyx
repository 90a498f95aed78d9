# Latent-annotation PCFG parsing kernel: charts over (span, base symbol) items
# whose values are vectors over the symbol's subtypes, with unary layers,
# coarse-to-fine pruning and max-rule / Viterbi decoding (the math is in the
# docstring of grind/kernels/latent_parse.py).  One nogil loop over a batch of
# sentences; every buffer is allocated per call.
#
# A chart item is a (span, base symbol) pair with a non-zero inside vector.  Its
# values live in one pool: item it of symbol A (H = nsub[A] subtypes) holds the
# layers x_0 .. x_U at pool[it_off[it] + L * H + a]; the outside adjoints gx_L
# are at the same places of gpool, the Viterbi back pointers of bpool.
#
# Scaling: every span (i, j) has an integer exponent s_ij and stores
# x~ = x 2^-s_ij with max x~_U in [0.5, 1).  Binary contributions of split k
# enter with the exact factor f_k = 2^(s_ik + s_kj - m_ij), m_ij = max_k
# (s_ik + s_kj) over the splits with items on both sides (so f_k <= 1), and
# s_ij = m_ij + e with e the exponent of the span's largest value.  The outside
# adjoints are stored as g~ = g 2^s_ij / Z (the root's is 1 / x~_U(root)), so
# g~ x~ products are posteriors directly, and pushes to children use
# f'_k = 2^(s_ik + s_kj - s_ij).
#
# Binary rules are sorted by (left child B, right child C, parent A); the
# distinct (B, C) pairs index them.  A split visits only the pairs whose two
# children are items of the two child cells (through the pairs of B or through
# the right cell's items, whichever list is shorter).  Inside accumulates, per
# span and pair, M = sum_k f_k outer(x~_ik(B), x~_kj(C)) and contracts it with
# each rule's block once: O(H^2) per split and pair, O(H^3) per rule and span.

from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memset, memcpy
from libc.math cimport log, frexp, ldexp, INFINITY
from libc.stdint cimport int64_t, uint8_t

import numpy as np

cdef double LN2 = 0.6931471805599453
cdef double NEG_INF = -INFINITY

# Viterbi back pointers (bpool): layer 0: -2 lexical, else
# ((rule * 65536 + split) * 4096 + b) * 4096 + c; layers > 0: -3 chain stops
# here (x_L = x_0), else unary * 4096 + b.  Max-rule back pointers: dbp
# -1 (the bottom rule at this layer) or a unary; bbp -2 lexical, else
# rule * 65536 + split.
cdef enum:
    SUBBITS = 4096
    SPLITS = 65536


cdef struct Gram:
    int S, T, root, maxsub, nun, npair, nbin, mtotal, gtotal
    const int *nsub           # S
    const int *soff           # S: offset of a symbol's subtypes in a dense T-vector
    const double *w           # weight buffer
    const int *pair_of        # S*S: pair of (B, C), -1 for none
    const int *pair_b         # npair
    const int *pair_c
    const int *pair_moff      # npair: offset of the pair's nB*nC scratch
    const int *left_ptr       # S+1: the pairs of left child B (sorted by C)
    const int *prule_ptr      # npair+1: the binary rules of a pair
    const int *bin_par        # nbin (sorted by B, C, A)
    const int *bin_b
    const int *bin_c
    const int64_t *bin_off
    const int *bin_goff       # nbin: offset of the rule's nB*nC scratch
    const int *un_ptr         # S+1: unary rules by parent
    const int *un_par
    const int *un_child
    const int64_t *un_off
    const int *lex_ptr        # nwords+1: lexical rules by word
    const int *lex_par
    const int64_t *lex_off


cdef struct Work:
    int U, S, T, maxsub
    int *slot                 # nsp*S: item of (span, A), -1 for none
    int *span_lo              # nsp: items span_lo..span_hi-1 are the span's
    int *span_hi
    int *sexp                 # nsp: the span's scale exponent
    int nit, it_cap
    int *it_sym
    int *it_i
    int *it_j
    int64_t *it_off
    double *dval              # it_cap*(U+1): max-rule D_L
    int64_t *dbp              # it_cap*(U+1): D_L's unary, -1: the bottom rule at layer L
    double *bval              # it_cap*(U+1): best bottom (lexical / binary) rule at layer L
    int64_t *bbp              # it_cap*(U+1): its back pointer
    int64_t npool, pool_cap
    double *pool
    double *gpool
    int64_t *bpool
    double *xs                # (U+1)*T dense scratch of the span being built
    int64_t *bs               # (U+1)*T
    double *gb                # T: g_b0 = sum_L gx_L of the span's items
    uint8_t *gbnz             # S
    int *glay                 # S: bit L set when gx_L of the span's item is non-zero
    int *touched              # S
    int ntouched
    int *sym_stamp            # S
    int stamp
    double *M                 # mtotal: per pair M (inside) or G (outside)
    int *pair_stamp           # npair
    uint8_t *pair_flag        # npair
    int *pair_chk             # npair
    int *pair_list            # npair
    int npl
    double *G                 # gtotal*(U+1): per rule and layer G_L (max-rule DP)
    double *O                 # maxsub^2: outer(x_B, x_C) (max-rule DP)
    int *rule_stamp           # nbin
    double *tmp               # maxsub
    uint8_t *keep             # nsp*S
    double *post              # nsp*S
    int64_t *stack            # 2 * max rows
    int oom


cdef inline int ridx(int n, int i, int j) noexcept nogil:
    """Row-packed span (i, j): rows i = 0..n-1, each j = i+1..n."""
    return i * n - (i * (i - 1)) // 2 + (j - i - 1)


cdef inline void vzero(double *x, int n) noexcept nogil:
    cdef int a
    for a in range(n):
        x[a] = 0.0


cdef inline void vcopy(double *dst, const double *src, int n) noexcept nogil:
    cdef int a
    for a in range(n):
        dst[a] = src[a]


cdef int work_new(Work *w, Gram *g, int U, int nmax) noexcept nogil:
    cdef int64_t nsp = <int64_t>nmax * (nmax + 1) // 2
    cdef int S = g.S, T = g.T
    w.U, w.S, w.T, w.maxsub = U, S, T, g.maxsub
    w.slot = <int *> malloc((nsp * S + 1) * sizeof(int))
    w.span_lo = <int *> malloc((nsp + 1) * sizeof(int))
    w.span_hi = <int *> malloc((nsp + 1) * sizeof(int))
    w.sexp = <int *> malloc((nsp + 1) * sizeof(int))
    w.nit = 0
    w.it_cap = 1024
    w.it_sym = <int *> malloc(w.it_cap * sizeof(int))
    w.it_i = <int *> malloc(w.it_cap * sizeof(int))
    w.it_j = <int *> malloc(w.it_cap * sizeof(int))
    w.it_off = <int64_t *> malloc(w.it_cap * sizeof(int64_t))
    w.dval = <double *> malloc(w.it_cap * (U + 1) * sizeof(double))
    w.dbp = <int64_t *> malloc(w.it_cap * (U + 1) * sizeof(int64_t))
    w.bval = <double *> malloc(w.it_cap * (U + 1) * sizeof(double))
    w.bbp = <int64_t *> malloc(w.it_cap * (U + 1) * sizeof(int64_t))
    w.npool = 0
    w.pool_cap = 1 << 16
    w.pool = <double *> malloc(w.pool_cap * sizeof(double))
    w.gpool = <double *> malloc(w.pool_cap * sizeof(double))
    w.bpool = <int64_t *> malloc(w.pool_cap * sizeof(int64_t))
    w.xs = <double *> calloc((U + 1) * T + 1, sizeof(double))
    w.bs = <int64_t *> calloc((U + 1) * T + 1, sizeof(int64_t))
    w.gb = <double *> calloc(T + 1, sizeof(double))
    w.gbnz = <uint8_t *> calloc(S + 1, sizeof(uint8_t))
    w.glay = <int *> calloc(S + 1, sizeof(int))
    w.touched = <int *> calloc(S + 1, sizeof(int))
    w.sym_stamp = <int *> calloc(S + 1, sizeof(int))
    w.stamp = 0
    w.M = <double *> calloc(g.mtotal + 1, sizeof(double))
    w.pair_stamp = <int *> calloc(g.npair + 1, sizeof(int))
    w.pair_flag = <uint8_t *> calloc(g.npair + 1, sizeof(uint8_t))
    w.pair_chk = <int *> calloc(g.npair + 1, sizeof(int))
    w.pair_list = <int *> calloc(g.npair + 1, sizeof(int))
    w.G = <double *> calloc(<int64_t>g.gtotal * (U + 1) + 1, sizeof(double))
    w.O = <double *> calloc(g.maxsub * g.maxsub + 1, sizeof(double))
    w.rule_stamp = <int *> calloc(g.nbin + 1, sizeof(int))
    w.tmp = <double *> calloc(g.maxsub + 1, sizeof(double))
    w.keep = <uint8_t *> malloc(nsp * S + 1)
    w.post = <double *> malloc((nsp * S + 1) * sizeof(double))
    w.stack = <int64_t *> malloc((4 * (2 * nmax + 1) * (U + 1) + 8) * sizeof(int64_t))
    w.oom = 0
    return (w.slot != NULL and w.span_lo != NULL and w.span_hi != NULL and w.sexp != NULL
            and w.it_sym != NULL and w.it_i != NULL and w.it_j != NULL and w.it_off != NULL
            and w.dval != NULL and w.dbp != NULL and w.bval != NULL and w.bbp != NULL and w.pool != NULL and w.gpool != NULL
            and w.bpool != NULL and w.xs != NULL and w.bs != NULL and w.gb != NULL and w.gbnz != NULL and w.glay != NULL
            and w.touched != NULL and w.sym_stamp != NULL and w.M != NULL and w.pair_stamp != NULL
            and w.pair_flag != NULL and w.pair_chk != NULL and w.pair_list != NULL and w.G != NULL and w.O != NULL
            and w.rule_stamp != NULL and w.tmp != NULL and w.keep != NULL and w.post != NULL
            and w.stack != NULL)


cdef void work_free(Work *w) noexcept nogil:
    free(w.slot); free(w.span_lo); free(w.span_hi); free(w.sexp)
    free(w.it_sym); free(w.it_i); free(w.it_j); free(w.it_off); free(w.dval); free(w.dbp)
    free(w.bval); free(w.bbp)
    free(w.pool); free(w.gpool); free(w.bpool); free(w.xs); free(w.bs); free(w.gb); free(w.gbnz); free(w.glay)
    free(w.touched); free(w.sym_stamp); free(w.M); free(w.pair_stamp); free(w.pair_flag)
    free(w.pair_chk); free(w.pair_list); free(w.G); free(w.O); free(w.rule_stamp); free(w.tmp)
    free(w.keep); free(w.post); free(w.stack)


cdef inline int grow(void **p, int64_t n, size_t size) noexcept nogil:
    """realloc ``*p`` to ``n`` elements of ``size`` bytes (0: out of memory, ``*p`` unchanged)."""
    cdef void *q = realloc(p[0], n * size)
    if q == NULL:
        return 0
    p[0] = q
    return 1


cdef int reserve(Work *w, int items, int64_t values) noexcept nogil:
    """Room for ``items`` more items and ``values`` more pool values (0: out of memory)."""
    cdef int cap
    cdef int64_t pcap
    if w.nit + items > w.it_cap:
        cap = w.it_cap * 2
        if cap < w.nit + items:
            cap = w.nit + items
        if not (grow(<void **> &w.it_sym, cap, sizeof(int)) and grow(<void **> &w.it_i, cap, sizeof(int))
                and grow(<void **> &w.it_j, cap, sizeof(int)) and grow(<void **> &w.it_off, cap, sizeof(int64_t))
                and grow(<void **> &w.dval, cap * (w.U + 1), sizeof(double))
                and grow(<void **> &w.dbp, cap * (w.U + 1), sizeof(int64_t))
                and grow(<void **> &w.bval, cap * (w.U + 1), sizeof(double))
                and grow(<void **> &w.bbp, cap * (w.U + 1), sizeof(int64_t))):
            return 0
        w.it_cap = cap
    if w.npool + values > w.pool_cap:
        pcap = w.pool_cap * 2
        if pcap < w.npool + values:
            pcap = w.npool + values
        if not (grow(<void **> &w.pool, pcap, sizeof(double)) and grow(<void **> &w.gpool, pcap, sizeof(double))
                and grow(<void **> &w.bpool, pcap, sizeof(int64_t))):
            return 0
        w.pool_cap = pcap
    return 1


cdef inline void touch(Work *w, Gram *g, int A, bint vit) noexcept nogil:
    """Add A to the span's touched symbols (its scratch values are 0)."""
    cdef int L, a, nA
    cdef int64_t *b
    if w.sym_stamp[A] == w.stamp:
        return
    w.sym_stamp[A] = w.stamp
    w.touched[w.ntouched] = A
    w.ntouched += 1
    if vit:
        nA = g.nsub[A]
        for L in range(w.U + 1):
            b = w.bs + L * g.T + g.soff[A]
            for a in range(nA):
                b[a] = -1 if L == 0 else -3


cdef inline void clear_touched(Work *w, Gram *g) noexcept nogil:
    cdef int t, L, A
    for t in range(w.ntouched):
        A = w.touched[t]
        for L in range(w.U + 1):
            vzero(w.xs + L * g.T + g.soff[A], g.nsub[A])
    w.ntouched = 0


cdef inline bint pair_alive(Gram *g, Work *w, int p, const uint8_t *kp) noexcept nogil:
    """Whether some binary rule of pair p has a parent kept in this span."""
    cdef int r
    if kp == NULL:
        return True
    if w.pair_chk[p] != w.stamp:
        w.pair_chk[p] = w.stamp
        w.pair_flag[p] = 0
        for r in range(g.prule_ptr[p], g.prule_ptr[p + 1]):
            if kp[g.bin_par[r]]:
                w.pair_flag[p] = 1
                break
    return w.pair_flag[p] != 0


cdef inline void bin_sum(Gram *g, Work *w, int p, double f, const double *xB, int nB,
                         const double *xC, int nC) noexcept nogil:
    """M_p += f outer(xB, xC)."""
    cdef double *Mp = w.M + g.pair_moff[p]
    cdef double *row
    cdef double fb
    cdef int b, c
    if w.pair_stamp[p] != w.stamp:
        w.pair_stamp[p] = w.stamp
        vzero(Mp, nB * nC)
        w.pair_list[w.npl] = p
        w.npl += 1
    if nB == 1 and nC == 1:
        Mp[0] += f * xB[0] * xC[0]
        return
    for b in range(nB):
        fb = f * xB[b]
        if fb == 0.0:
            continue
        row = Mp + b * nC
        for c in range(nC):
            row[c] += fb * xC[c]


cdef inline void bin_max(Gram *g, Work *w, int p, int k, double f, const double *xB, int nB,
                         const double *xC, int nC, const uint8_t *kp) noexcept nogil:
    """Max-product: x_0[A, a] = max(x_0[A, a], f W[a, b, c] xB[b] xC[c]) over the rules of p."""
    cdef int r, A, a, b, c, nA, bi, nBC = nB * nC
    cdef const double *Wa
    cdef double *xA
    cdef int64_t *bA
    cdef double best, fb, cand
    for r in range(g.prule_ptr[p], g.prule_ptr[p + 1]):
        A = g.bin_par[r]
        if kp != NULL and kp[A] == 0:
            continue
        touch(w, g, A, True)
        nA = g.nsub[A]
        xA = w.xs + g.soff[A]
        bA = w.bs + g.soff[A]
        for a in range(nA):
            Wa = g.w + g.bin_off[r] + a * nBC
            best = xA[a]
            bi = -1
            for b in range(nB):
                fb = f * xB[b]
                if fb == 0.0:
                    continue
                for c in range(nC):
                    cand = Wa[b * nC + c] * fb * xC[c]
                    if cand > best:
                        best = cand
                        bi = b * SUBBITS + c
            if bi >= 0:
                xA[a] = best
                bA[a] = ((<int64_t>r * SPLITS + k) * SUBBITS) * SUBBITS + bi


cdef int inside(Gram *g, Work *w, const int *sent, int n, const uint8_t *keep, bint vit) noexcept nogil:
    """Fill the chart bottom up (sums, or maxima with back pointers when vit):
    1 when the root is an item of (0, n), 0 when not, -1 out of memory."""
    cdef int U = w.U, S = g.S, T = g.T
    cdef int64_t nsp = <int64_t>n * (n + 1) // 2
    cdef int wd, i, j, k, sp, spl, spr, m, e, s, t, A, B, C, a, b, nA, nB, nC, nBC, p, r, l, u, q
    cdef int itB, itC, L, lo_l, hi_l, lo_r, hi_r, valid, it, nz, bc
    cdef const uint8_t *kp
    cdef double f, v, acc, cand, sc
    cdef const double *xB
    cdef const double *xC
    cdef const double *W
    cdef double *xA
    cdef double *Mp
    cdef int64_t *bA
    w.nit = 0
    w.npool = 0
    memset(w.slot, 0xff, <int64_t>nsp * S * sizeof(int))
    for wd in range(1, n + 1):
        for i in range(0, n - wd + 1):
            j = i + wd
            sp = ridx(n, i, j)
            w.span_lo[sp] = w.nit
            w.span_hi[sp] = w.nit
            w.sexp[sp] = 0
            w.stamp += 1
            w.ntouched = 0
            kp = keep + <int64_t>sp * S if keep != NULL else NULL
            m = 0
            if wd == 1:
                q = sent[i]
                for l in range(g.lex_ptr[q], g.lex_ptr[q + 1]):
                    A = g.lex_par[l]
                    if kp != NULL and kp[A] == 0:
                        continue
                    touch(w, g, A, vit)
                    nA = g.nsub[A]
                    W = g.w + g.lex_off[l]
                    xA = w.xs + g.soff[A]
                    for a in range(nA):
                        xA[a] += W[a]
                        if vit:
                            w.bs[g.soff[A] + a] = -2
            else:
                valid = 0
                for k in range(i + 1, j):
                    spl = ridx(n, i, k)
                    spr = ridx(n, k, j)
                    if w.span_hi[spl] > w.span_lo[spl] and w.span_hi[spr] > w.span_lo[spr]:
                        s = w.sexp[spl] + w.sexp[spr]
                        if not valid or s > m:
                            m = s
                            valid = 1
                if not valid:
                    continue
                w.npl = 0
                for k in range(i + 1, j):
                    spl = ridx(n, i, k)
                    spr = ridx(n, k, j)
                    lo_l, hi_l = w.span_lo[spl], w.span_hi[spl]
                    lo_r, hi_r = w.span_lo[spr], w.span_hi[spr]
                    if hi_l == lo_l or hi_r == lo_r:
                        continue
                    f = ldexp(1.0, w.sexp[spl] + w.sexp[spr] - m)
                    for itB in range(lo_l, hi_l):
                        B = w.it_sym[itB]
                        nB = g.nsub[B]
                        xB = w.pool + w.it_off[itB] + U * nB
                        if g.left_ptr[B + 1] - g.left_ptr[B] <= hi_r - lo_r:
                            for p in range(g.left_ptr[B], g.left_ptr[B + 1]):
                                itC = w.slot[<int64_t>spr * S + g.pair_c[p]]
                                if itC < 0 or not pair_alive(g, w, p, kp):
                                    continue
                                C = g.pair_c[p]
                                nC = g.nsub[C]
                                xC = w.pool + w.it_off[itC] + U * nC
                                if vit:
                                    bin_max(g, w, p, k, f, xB, nB, xC, nC, kp)
                                else:
                                    bin_sum(g, w, p, f, xB, nB, xC, nC)
                        else:
                            for itC in range(lo_r, hi_r):
                                C = w.it_sym[itC]
                                p = g.pair_of[<int64_t>B * S + C]
                                if p < 0 or not pair_alive(g, w, p, kp):
                                    continue
                                nC = g.nsub[C]
                                xC = w.pool + w.it_off[itC] + U * nC
                                if vit:
                                    bin_max(g, w, p, k, f, xB, nB, xC, nC, kp)
                                else:
                                    bin_sum(g, w, p, f, xB, nB, xC, nC)
                if not vit:
                    for t in range(w.npl):
                        p = w.pair_list[t]
                        Mp = w.M + g.pair_moff[p]
                        nBC = g.nsub[g.pair_b[p]] * g.nsub[g.pair_c[p]]
                        for r in range(g.prule_ptr[p], g.prule_ptr[p + 1]):
                            A = g.bin_par[r]
                            if kp != NULL and kp[A] == 0:
                                continue
                            touch(w, g, A, False)
                            nA = g.nsub[A]
                            xA = w.xs + g.soff[A]
                            W = g.w + g.bin_off[r]
                            for a in range(nA):
                                acc = 0.0
                                for bc in range(nBC):
                                    acc += W[a * nBC + bc] * Mp[bc]
                                xA[a] += acc
            # unary layers: x_L = x_0 + U x_{L-1}
            for L in range(1, U + 1):
                for t in range(w.ntouched):
                    A = w.touched[t]
                    vcopy(w.xs + L * T + g.soff[A], w.xs + g.soff[A], g.nsub[A])
                for u in range(g.nun):
                    B = g.un_child[u]
                    if w.sym_stamp[B] != w.stamp:
                        continue
                    A = g.un_par[u]
                    if kp != NULL and kp[A] == 0:
                        continue
                    touch(w, g, A, vit)
                    nA = g.nsub[A]
                    nB = g.nsub[B]
                    xB = w.xs + (L - 1) * T + g.soff[B]
                    xA = w.xs + L * T + g.soff[A]
                    W = g.w + g.un_off[u]
                    if vit:
                        bA = w.bs + L * T + g.soff[A]
                        for a in range(nA):
                            for b in range(nB):
                                cand = W[a * nB + b] * xB[b]
                                if cand > xA[a]:
                                    xA[a] = cand
                                    bA[a] = <int64_t>u * SUBBITS + b
                    else:
                        for a in range(nA):
                            acc = 0.0
                            for b in range(nB):
                                acc += W[a * nB + b] * xB[b]
                            xA[a] += acc
            # normalise the span by its largest value
            v = 0.0
            for t in range(w.ntouched):
                A = w.touched[t]
                xA = w.xs + U * T + g.soff[A]
                for a in range(g.nsub[A]):
                    if xA[a] > v:
                        v = xA[a]
            if not v > 0.0:
                clear_touched(w, g)
                continue
            frexp(v, &e)
            sc = ldexp(1.0, -e) if -1000 < e < 1000 else 0.0
            for t in range(w.ntouched):
                A = w.touched[t]
                for L in range(U + 1):
                    xA = w.xs + L * T + g.soff[A]
                    for a in range(g.nsub[A]):
                        xA[a] = xA[a] * sc if sc != 0.0 else ldexp(xA[a], -e)
            w.sexp[sp] = m + e
            # emit the items (sorted by symbol), clear the scratch
            for t in range(1, w.ntouched):
                A = w.touched[t]
                l = t - 1
                while l >= 0 and w.touched[l] > A:
                    w.touched[l + 1] = w.touched[l]
                    l -= 1
                w.touched[l + 1] = A
            if not reserve(w, w.ntouched, <int64_t>w.ntouched * (U + 1) * g.maxsub):
                w.oom = 1
                clear_touched(w, g)
                return -1
            for t in range(w.ntouched):
                A = w.touched[t]
                nA = g.nsub[A]
                xA = w.xs + U * T + g.soff[A]
                nz = 0
                for a in range(nA):
                    if xA[a] != 0.0:
                        nz = 1
                if not nz:
                    continue
                it = w.nit
                w.nit += 1
                w.it_sym[it] = A
                w.it_i[it] = i
                w.it_j[it] = j
                w.it_off[it] = w.npool
                for L in range(U + 1):
                    vcopy(w.pool + w.npool + L * nA, w.xs + L * T + g.soff[A], nA)
                    if vit:
                        memcpy(w.bpool + w.npool + L * nA, w.bs + L * T + g.soff[A], nA * sizeof(int64_t))
                w.npool += (U + 1) * nA
                w.slot[<int64_t>sp * S + A] = it
            w.span_hi[sp] = w.nit
            clear_touched(w, g)
    return 1 if w.slot[<int64_t>ridx(n, 0, n) * S + g.root] >= 0 else 0


cdef inline double root_log(Gram *g, Work *w, int n, bint vit) noexcept nogil:
    """log of the root's inside value (log Z, or the best derivation's log weight)."""
    cdef int sp = ridx(n, 0, n)
    cdef int it = w.slot[<int64_t>sp * g.S + g.root]
    return log(w.pool[w.it_off[it] + w.U * g.nsub[g.root]]) + w.sexp[sp] * LN2


cdef void fill_gb(Gram *g, Work *w, int lo, int hi) noexcept nogil:
    """gb[A] = sum_L gx_L[A] for the items lo..hi-1 of a span; gbnz[A] whether non-zero."""
    cdef int it, A, nA, L, a, nz, lay
    cdef double *gbA
    cdef const double *gL
    for it in range(lo, hi):
        A = w.it_sym[it]
        nA = g.nsub[A]
        gbA = w.gb + g.soff[A]
        vzero(gbA, nA)
        lay = 0
        for L in range(w.U + 1):
            gL = w.gpool + w.it_off[it] + L * nA
            for a in range(nA):
                gbA[a] += gL[a]
                if gL[a] != 0.0:
                    lay |= 1 << L
        nz = 0
        for a in range(nA):
            if gbA[a] != 0.0:
                nz = 1
        w.gbnz[A] = nz
        w.glay[A] = lay


cdef inline void pair_g(Gram *g, Work *w, int p, int sp) noexcept nogil:
    """G_p = sum over the rules A --> B C of p with A an item of span sp of sum_a gb[A, a] W[a]
    (in w.M; pair_flag[p]: non-zero), once per span."""
    cdef int r, A, a, nA, bc, nBC, S = g.S
    cdef double *Gp = w.M + g.pair_moff[p]
    cdef const double *Wa
    cdef double ga
    w.pair_stamp[p] = w.stamp
    nBC = g.nsub[g.pair_b[p]] * g.nsub[g.pair_c[p]]
    vzero(Gp, nBC)
    w.pair_flag[p] = 0
    for r in range(g.prule_ptr[p], g.prule_ptr[p + 1]):
        A = g.bin_par[r]
        if w.slot[<int64_t>sp * S + A] < 0 or not w.gbnz[A]:
            continue
        w.pair_flag[p] = 1
        nA = g.nsub[A]
        for a in range(nA):
            ga = w.gb[g.soff[A] + a]
            if ga == 0.0:
                continue
            Wa = g.w + g.bin_off[r] + a * nBC
            for bc in range(nBC):
                Gp[bc] += ga * Wa[bc]


cdef inline void push(Gram *g, Work *w, int p, double fp, int itB, int itC) noexcept nogil:
    """Outside of the children of pair p's rules: gB += fp G xC, gC += fp G^T xB."""
    cdef int B = g.pair_b[p], C = g.pair_c[p], U = w.U, b, c
    cdef int nB = g.nsub[B], nC = g.nsub[C]
    cdef const double *Gp = w.M + g.pair_moff[p]
    cdef const double *xB = w.pool + w.it_off[itB] + U * nB
    cdef const double *xC = w.pool + w.it_off[itC] + U * nC
    cdef double *gB = w.gpool + w.it_off[itB] + U * nB
    cdef double *gC = w.gpool + w.it_off[itC] + U * nC
    cdef double *tc = w.tmp
    cdef double xb, tb, gg
    if nB == 1 and nC == 1:
        gg = fp * Gp[0]
        gB[0] += gg * xC[0]
        gC[0] += gg * xB[0]
        return
    for c in range(nC):
        tc[c] = 0.0
    for b in range(nB):
        xb = xB[b]
        tb = 0.0
        for c in range(nC):
            gg = Gp[b * nC + c]
            tb += gg * xC[c]
            tc[c] += gg * xb
        gB[b] += fp * tb
    for c in range(nC):
        gC[c] += fp * tc[c]


cdef void outside(Gram *g, Work *w, int n, double *post) noexcept nogil:
    """Adjoints gx_L of every item, top down; with post, the item posteriors
    sum_L gx_L . x_L at post[span * S + A] (post must be zeroed by the caller)."""
    cdef int U = w.U, S = g.S, wd, i, j, k, sp, spl, spr, lo, hi, lo_l, hi_l, lo_r, hi_r
    cdef int it, itB, itC, A, B, C, nA, nB, L, a, b, u, p
    cdef double fp, ga, ps
    cdef const double *gA
    cdef double *gB
    cdef const double *W
    cdef const double *xL
    cdef int sp0 = ridx(n, 0, n)
    cdef int ir = w.slot[<int64_t>sp0 * S + g.root]
    memset(w.gpool, 0, w.npool * sizeof(double))
    w.gpool[w.it_off[ir] + U * g.nsub[g.root]] = 1.0 / w.pool[w.it_off[ir] + U * g.nsub[g.root]]
    for wd in range(n, 0, -1):
        for i in range(0, n - wd + 1):
            j = i + wd
            sp = ridx(n, i, j)
            lo, hi = w.span_lo[sp], w.span_hi[sp]
            if lo == hi:
                continue
            for L in range(U, 0, -1):
                for it in range(lo, hi):
                    A = w.it_sym[it]
                    nA = g.nsub[A]
                    gA = w.gpool + w.it_off[it] + L * nA
                    for u in range(g.un_ptr[A], g.un_ptr[A + 1]):
                        itB = w.slot[<int64_t>sp * S + g.un_child[u]]
                        if itB < 0:
                            continue
                        nB = g.nsub[g.un_child[u]]
                        gB = w.gpool + w.it_off[itB] + (L - 1) * nB
                        W = g.w + g.un_off[u]
                        for a in range(nA):
                            ga = gA[a]
                            if ga == 0.0:
                                continue
                            for b in range(nB):
                                gB[b] += ga * W[a * nB + b]
            fill_gb(g, w, lo, hi)
            if post != NULL:
                for it in range(lo, hi):
                    A = w.it_sym[it]
                    nA = g.nsub[A]
                    ps = 0.0
                    for L in range(U + 1):
                        gA = w.gpool + w.it_off[it] + L * nA
                        xL = w.pool + w.it_off[it] + L * nA
                        for a in range(nA):
                            ps += gA[a] * xL[a]
                    post[<int64_t>sp * S + A] = ps
            if wd == 1:
                continue
            w.stamp += 1
            for k in range(i + 1, j):
                spl = ridx(n, i, k)
                spr = ridx(n, k, j)
                lo_l, hi_l = w.span_lo[spl], w.span_hi[spl]
                lo_r, hi_r = w.span_lo[spr], w.span_hi[spr]
                if hi_l == lo_l or hi_r == lo_r:
                    continue
                fp = ldexp(1.0, w.sexp[spl] + w.sexp[spr] - w.sexp[sp])
                for itB in range(lo_l, hi_l):
                    B = w.it_sym[itB]
                    if g.left_ptr[B + 1] - g.left_ptr[B] <= hi_r - lo_r:
                        for p in range(g.left_ptr[B], g.left_ptr[B + 1]):
                            itC = w.slot[<int64_t>spr * S + g.pair_c[p]]
                            if itC < 0:
                                continue
                            if w.pair_stamp[p] != w.stamp:
                                pair_g(g, w, p, sp)
                            if w.pair_flag[p]:
                                push(g, w, p, fp, itB, itC)
                    else:
                        for itC in range(lo_r, hi_r):
                            p = g.pair_of[<int64_t>B * S + w.it_sym[itC]]
                            if p < 0:
                                continue
                            if w.pair_stamp[p] != w.stamp:
                                pair_g(g, w, p, sp)
                            if w.pair_flag[p]:
                                push(g, w, p, fp, itB, itC)


cdef inline double comb(double x, bint product) noexcept nogil:
    return log(x) if product else x


cdef inline void rule_dp(Gram *g, Work *w, int p, int k, double fp, int itB, int itC, int sp,
                         bint product) noexcept nogil:
    """Max-rule candidates of the rules of pair p at split k, one per layer L:
    r_L = fp sum_{a,b,c} gx_L[A, a] W[a, b, c] x~_B[b] x~_C[c]."""
    cdef int U = w.U, S = g.S, B = g.pair_b[p], C = g.pair_c[p], r, A, a, b, c, nA, itA, nBC, L
    cdef int nB = g.nsub[B], nC = g.nsub[C]
    cdef double dB = w.dval[<int64_t>itB * (U + 1) + U], dC = w.dval[<int64_t>itC * (U + 1) + U]
    cdef const double *xB = w.pool + w.it_off[itB] + U * nB
    cdef const double *xC = w.pool + w.it_off[itC] + U * nC
    cdef double *Gr
    cdef double *GL
    cdef double *O = w.O
    cdef const double *Wa
    cdef const double *gL
    cdef double ga, ps, cand, xb
    cdef int64_t d
    if dB == NEG_INF or dC == NEG_INF:
        return
    nBC = nB * nC
    for b in range(nB):
        xb = fp * xB[b]
        for c in range(nC):
            O[b * nC + c] = xb * xC[c]
    for r in range(g.prule_ptr[p], g.prule_ptr[p + 1]):
        A = g.bin_par[r]
        itA = w.slot[<int64_t>sp * S + A]
        if itA < 0 or not w.gbnz[A]:
            continue
        nA = g.nsub[A]
        Gr = w.G + <int64_t>g.bin_goff[r] * (U + 1)
        if w.rule_stamp[r] != w.stamp:
            w.rule_stamp[r] = w.stamp
            vzero(Gr, (U + 1) * nBC)
            for L in range(U + 1):
                if not (w.glay[A] >> L) & 1:
                    continue
                gL = w.gpool + w.it_off[itA] + L * nA
                GL = Gr + L * nBC
                for a in range(nA):
                    ga = gL[a]
                    if ga == 0.0:
                        continue
                    Wa = g.w + g.bin_off[r] + a * nBC
                    for c in range(nBC):
                        GL[c] += ga * Wa[c]
        d = <int64_t>itA * (U + 1)
        for L in range(U + 1):
            if not (w.glay[A] >> L) & 1:
                continue
            GL = Gr + L * nBC
            ps = 0.0
            for c in range(nBC):
                ps += GL[c] * O[c]
            if ps > 0.0:
                cand = comb(ps, product) + dB + dC
                if cand > w.bval[d + L]:
                    w.bval[d + L] = cand
                    w.bbp[d + L] = <int64_t>r * SPLITS + k


cdef double maxrule(Gram *g, Work *w, int n, bint product) noexcept nogil:
    """Bottom-up DP over items: the best sum (product: sum of logs) of the
    posteriors of the tree's rules anchored at their span and layer; returns
    the root's value (-inf when there is no tree)."""
    cdef int U = w.U, S = g.S, wd, i, j, k, sp, spl, spr, lo, hi, lo_l, hi_l, lo_r, hi_r
    cdef int it, itB, itC, A, B, nA, nB, L, a, b, u, p
    cdef int64_t d
    cdef double fp, ps, acc, cand, dprev
    cdef const double *gL
    cdef const double *xL
    cdef const double *W
    for wd in range(1, n + 1):
        for i in range(0, n - wd + 1):
            j = i + wd
            sp = ridx(n, i, j)
            lo, hi = w.span_lo[sp], w.span_hi[sp]
            if lo == hi:
                continue
            fill_gb(g, w, lo, hi)
            for it in range(lo, hi):
                d = <int64_t>it * (U + 1)
                for L in range(U + 1):
                    w.bval[d + L] = NEG_INF
                    w.bbp[d + L] = -1
            if wd == 1:
                for it in range(lo, hi):
                    A = w.it_sym[it]
                    nA = g.nsub[A]
                    xL = w.pool + w.it_off[it]
                    d = <int64_t>it * (U + 1)
                    for L in range(U + 1):
                        gL = w.gpool + w.it_off[it] + L * nA
                        ps = 0.0
                        for a in range(nA):
                            ps += gL[a] * xL[a]
                        if ps > 0.0:
                            w.bval[d + L] = comb(ps, product)
                            w.bbp[d + L] = -2
            else:
                w.stamp += 1
                for k in range(i + 1, j):
                    spl = ridx(n, i, k)
                    spr = ridx(n, k, j)
                    lo_l, hi_l = w.span_lo[spl], w.span_hi[spl]
                    lo_r, hi_r = w.span_lo[spr], w.span_hi[spr]
                    if hi_l == lo_l or hi_r == lo_r:
                        continue
                    fp = ldexp(1.0, w.sexp[spl] + w.sexp[spr] - w.sexp[sp])
                    for itB in range(lo_l, hi_l):
                        B = w.it_sym[itB]
                        if w.dval[<int64_t>itB * (U + 1) + U] == NEG_INF:
                            continue
                        if g.left_ptr[B + 1] - g.left_ptr[B] <= hi_r - lo_r:
                            for p in range(g.left_ptr[B], g.left_ptr[B + 1]):
                                itC = w.slot[<int64_t>spr * S + g.pair_c[p]]
                                if itC >= 0:
                                    rule_dp(g, w, p, k, fp, itB, itC, sp, product)
                        else:
                            for itC in range(lo_r, hi_r):
                                p = g.pair_of[<int64_t>B * S + w.it_sym[itC]]
                                if p >= 0:
                                    rule_dp(g, w, p, k, fp, itB, itC, sp, product)
            # D_L = max(bottom rule at layer L, max_B r_L(A --> B) + D_{L-1}(B))
            for L in range(U + 1):
                for it in range(lo, hi):
                    d = <int64_t>it * (U + 1) + L
                    w.dval[d] = w.bval[d]
                    w.dbp[d] = -1
                if L == 0:
                    continue
                for it in range(lo, hi):
                    A = w.it_sym[it]
                    nA = g.nsub[A]
                    gL = w.gpool + w.it_off[it] + L * nA
                    d = <int64_t>it * (U + 1) + L
                    for u in range(g.un_ptr[A], g.un_ptr[A + 1]):
                        itB = w.slot[<int64_t>sp * S + g.un_child[u]]
                        if itB < 0:
                            continue
                        dprev = w.dval[<int64_t>itB * (U + 1) + L - 1]
                        if dprev == NEG_INF:
                            continue
                        nB = g.nsub[g.un_child[u]]
                        xL = w.pool + w.it_off[itB] + (L - 1) * nB
                        W = g.w + g.un_off[u]
                        ps = 0.0
                        for a in range(nA):
                            if gL[a] == 0.0:
                                continue
                            acc = 0.0
                            for b in range(nB):
                                acc += W[a * nB + b] * xL[b]
                            ps += gL[a] * acc
                        if ps > 0.0:
                            cand = comb(ps, product) + dprev
                            if cand > w.dval[d]:
                                w.dval[d] = cand
                                w.dbp[d] = u
    sp = ridx(n, 0, n)
    it = w.slot[<int64_t>sp * S + g.root]
    return w.dval[<int64_t>it * (U + 1) + U]


cdef inline void emit_row(int *rows, int *nr, int A, int i, int j, int kids) noexcept nogil:
    rows[4 * nr[0]] = A
    rows[4 * nr[0] + 1] = i
    rows[4 * nr[0] + 2] = j
    rows[4 * nr[0] + 3] = kids
    nr[0] += 1


cdef int backtrack_rule(Gram *g, Work *w, int n, int *rows) noexcept nogil:
    """Pre-order rows (symbol, i, j, children) of the max-rule tree."""
    cdef int U = w.U, S = g.S, top = 0, nr = 0, it, L, A, i, j, k, r, u
    cdef int64_t d
    cdef int64_t *st = w.stack
    st[0] = w.slot[<int64_t>ridx(n, 0, n) * S + g.root]
    st[1] = U
    top = 1
    while top > 0:
        top -= 1
        it = <int>st[2 * top]
        L = <int>st[2 * top + 1]
        A, i, j = w.it_sym[it], w.it_i[it], w.it_j[it]
        d = w.dbp[<int64_t>it * (U + 1) + L]
        if d >= 0:
            u = <int>d
            emit_row(rows, &nr, A, i, j, 1)
            st[2 * top] = w.slot[<int64_t>ridx(n, i, j) * S + g.un_child[u]]
            st[2 * top + 1] = L - 1
            top += 1
            continue
        d = w.bbp[<int64_t>it * (U + 1) + L]
        if d == -2:
            emit_row(rows, &nr, A, i, j, 0)
            continue
        r = <int>(d // SPLITS)
        k = <int>(d % SPLITS)
        emit_row(rows, &nr, A, i, j, 2)
        st[2 * top] = w.slot[<int64_t>ridx(n, k, j) * S + g.bin_c[r]]
        st[2 * top + 1] = U
        st[2 * top + 2] = w.slot[<int64_t>ridx(n, i, k) * S + g.bin_b[r]]
        st[2 * top + 3] = U
        top += 2
    return nr


cdef int backtrack_vit(Gram *g, Work *w, int n, int *rows) noexcept nogil:
    """Pre-order rows of the best latent derivation, subtypes dropped."""
    cdef int U = w.U, S = g.S, top, nr = 0, it, L, A, a, i, j, k, r, b, c
    cdef int64_t d, q
    cdef int64_t *st = w.stack
    st[0] = w.slot[<int64_t>ridx(n, 0, n) * S + g.root]
    st[1] = 0
    st[2] = U
    top = 1
    while top > 0:
        top -= 1
        it = <int>st[3 * top]
        a = <int>st[3 * top + 1]
        L = <int>st[3 * top + 2]
        A, i, j = w.it_sym[it], w.it_i[it], w.it_j[it]
        d = w.bpool[w.it_off[it] + L * g.nsub[A] + a] if L > 0 else -3
        if L > 0 and d >= 0:
            emit_row(rows, &nr, A, i, j, 1)
            st[3 * top] = w.slot[<int64_t>ridx(n, i, j) * S + g.un_child[<int>(d // SUBBITS)]]
            st[3 * top + 1] = <int>(d % SUBBITS)
            st[3 * top + 2] = L - 1
            top += 1
            continue
        d = w.bpool[w.it_off[it] + a]
        if d == -2:
            emit_row(rows, &nr, A, i, j, 0)
            continue
        c = <int>(d % SUBBITS)
        q = d // SUBBITS
        b = <int>(q % SUBBITS)
        q = q // SUBBITS
        k = <int>(q % SPLITS)
        r = <int>(q // SPLITS)
        emit_row(rows, &nr, A, i, j, 2)
        st[3 * top] = w.slot[<int64_t>ridx(n, k, j) * S + g.bin_c[r]]
        st[3 * top + 1] = c
        st[3 * top + 2] = U
        st[3 * top + 3] = w.slot[<int64_t>ridx(n, i, k) * S + g.bin_b[r]]
        st[3 * top + 4] = b
        st[3 * top + 5] = U
        top += 2
    return nr


def run(dict fine, dict coarse, const int[::1] words, const int64_t[::1] offs, int U, int method,
        bint prune, double threshold, double[::1] score, double[::1] logz, int64_t[:, ::1] info,
        int[:, ::1] rows, const int64_t[::1] row_off, int64_t[::1] nrows):
    """Parse sentences q = 0..len(offs)-2 (words[offs[q]:offs[q+1]], word ids).

    method: 0 log Z only (exhaustive inside), 1 max-rule-sum, 2 max-rule-product,
    3 Viterbi.  prune: coarse-to-fine with ``coarse`` (posterior >= threshold kept),
    retrying without pruning when the pruned fine chart has no tree.  Outputs per
    sentence: score (the decoder's objective, -inf: no tree), logz (fine chart),
    info (coarse chart items, of them pruned, retried),
    nrows (-1: no tree) rows of (symbol, i, j, children) from row_off."""
    cdef Gram gf, gc
    cdef Work w
    cdef object keep1 = _gram(fine, &gf)
    cdef object keep2 = _gram(coarse, &gc)
    cdef Py_ssize_t Q = offs.shape[0] - 1, q
    cdef int n, nmax = 1, ok, S = gf.S, sp, A, nsp
    cdef int64_t x, items, pruned
    cdef const uint8_t *kp
    cdef double s, ps
    cdef bint vit = method == 3
    if U < 0 or U > 30:
        raise ValueError("max_unary must be in 0..30")
    if gc.S != gf.S or gc.T > gf.T or gc.mtotal > gf.mtotal or gc.gtotal > gf.gtotal or gc.maxsub > gf.maxsub:
        raise ValueError("the coarse grammar must be the fine grammar's projection")
    for q in range(Q):
        if offs[q + 1] - offs[q] > nmax:
            nmax = <int>(offs[q + 1] - offs[q])
    if nmax > 16383:
        raise ValueError(f"a sentence of {nmax} tokens: at most 16383")
    with nogil:
        if not work_new(&w, &gf, U, nmax):
            work_free(&w)
            with gil:
                raise MemoryError("latent parser: cannot allocate the chart")
        for q in range(Q):
            n = <int>(offs[q + 1] - offs[q])
            nrows[q] = -1
            score[q] = NEG_INF
            logz[q] = NEG_INF
            info[q, 0] = 0
            info[q, 1] = 0
            info[q, 2] = 0
            if n <= 0:
                continue
            nsp = n * (n + 1) // 2
            kp = NULL
            if prune and method != 0:
                ok = inside(&gc, &w, &words[offs[q]], n, NULL, False)
                if ok < 0:
                    break
                if ok > 0:
                    memset(w.post, 0, <int64_t>nsp * S * sizeof(double))
                    outside(&gc, &w, n, w.post)
                    for x in range(<int64_t>nsp * S):
                        w.keep[x] = w.post[x] >= threshold
                    items = w.nit               # the coarse chart's items: non-zero inside scores
                    pruned = 0
                    for x in range(w.nit):
                        if w.post[<int64_t>ridx(n, w.it_i[x], w.it_j[x]) * S + w.it_sym[x]] < threshold:
                            pruned += 1
                    info[q, 0] = items
                    info[q, 1] = pruned
                    kp = w.keep
                else:
                    continue                # no coarse tree: the fine grammar has none either
            while True:
                ok = inside(&gf, &w, &words[offs[q]], n, kp, vit)
                if ok < 0:
                    break
                if ok > 0:
                    s = root_log(&gf, &w, n, vit)
                    if method == 0:
                        logz[q] = s
                        break
                    if vit:
                        score[q] = s
                        nrows[q] = backtrack_vit(&gf, &w, n, &rows[row_off[q], 0])
                        break
                    logz[q] = s
                    outside(&gf, &w, n, NULL)
                    s = maxrule(&gf, &w, n, method == 2)
                    if s > NEG_INF:
                        score[q] = s
                        nrows[q] = backtrack_rule(&gf, &w, n, &rows[row_off[q], 0])
                        break
                if kp == NULL:
                    score[q] = NEG_INF
                    break
                kp = NULL
                info[q, 2] = 1
            if w.oom:
                break
        ok = w.oom
        work_free(&w)
    if ok:
        raise MemoryError("latent parser: cannot grow the chart")
    return keep1 is not None and keep2 is not None


cdef object _gram(dict d, Gram *g):
    """Point g at the arrays of d (returned, to keep them alive)."""
    cdef const int[::1] nsub = d["nsub"]
    cdef const int[::1] soff = d["soff"]
    cdef const double[::1] wt = d["w"]
    cdef const int[::1] pair_of = d["pair_of"]
    cdef const int[::1] pair_b = d["pair_b"]
    cdef const int[::1] pair_c = d["pair_c"]
    cdef const int[::1] pair_moff = d["pair_moff"]
    cdef const int[::1] left_ptr = d["left_ptr"]
    cdef const int[::1] prule_ptr = d["prule_ptr"]
    cdef const int[::1] bin_par = d["bin_par"]
    cdef const int[::1] bin_b = d["bin_b"]
    cdef const int[::1] bin_c = d["bin_c"]
    cdef const int64_t[::1] bin_off = d["bin_off"]
    cdef const int[::1] bin_goff = d["bin_goff"]
    cdef const int[::1] un_ptr = d["un_ptr"]
    cdef const int[::1] un_par = d["un_par"]
    cdef const int[::1] un_child = d["un_child"]
    cdef const int64_t[::1] un_off = d["un_off"]
    cdef const int[::1] lex_ptr = d["lex_ptr"]
    cdef const int[::1] lex_par = d["lex_par"]
    cdef const int64_t[::1] lex_off = d["lex_off"]
    g.S, g.T, g.root, g.maxsub = d["S"], d["T"], d["root"], d["maxsub"]
    g.nun, g.npair, g.nbin, g.mtotal, g.gtotal = d["nun"], d["npair"], d["nbin"], d["mtotal"], d["gtotal"]
    if wt.shape[0] == 0 or nsub.shape[0] != g.S or pair_of.shape[0] != g.S * g.S:
        raise ValueError("malformed latent grammar tables")
    g.nsub, g.soff, g.w = &nsub[0], &soff[0], &wt[0]
    g.pair_of = &pair_of[0]
    g.pair_b = &pair_b[0] if pair_b.shape[0] else NULL
    g.pair_c = &pair_c[0] if pair_c.shape[0] else NULL
    g.pair_moff = &pair_moff[0] if pair_moff.shape[0] else NULL
    g.left_ptr, g.prule_ptr = &left_ptr[0], &prule_ptr[0]
    g.bin_par = &bin_par[0] if bin_par.shape[0] else NULL
    g.bin_b = &bin_b[0] if bin_b.shape[0] else NULL
    g.bin_c = &bin_c[0] if bin_c.shape[0] else NULL
    g.bin_off = &bin_off[0] if bin_off.shape[0] else NULL
    g.bin_goff = &bin_goff[0] if bin_goff.shape[0] else NULL
    g.un_ptr = &un_ptr[0]
    g.un_par = &un_par[0] if un_par.shape[0] else NULL
    g.un_child = &un_child[0] if un_child.shape[0] else NULL
    g.un_off = &un_off[0] if un_off.shape[0] else NULL
    g.lex_ptr = &lex_ptr[0]
    g.lex_par = &lex_par[0] if lex_par.shape[0] else NULL
    g.lex_off = &lex_off[0] if lex_off.shape[0] else NULL
    return d
