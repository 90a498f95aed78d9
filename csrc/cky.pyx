"""General CKY kernel: inside-outside, Viterbi and sampling for a binarised PCFG.

Charts hold, per span (i, j) and symbol A, the inside score beta_ij(A) and
the outside score alpha_ij(A):

    beta_ij(A)  = sum_{A->t_i..t_j-1} w  +  sum_{A->BC} w sum_k beta_ik(B) beta_kj(C)
                  + sum_{A->B} w beta_ij(B)                         (unary, after the rest)
    alpha_ij(B) = sum_{A->BC} w sum_{k>j} alpha_ik(A) beta_jk(C)
                  + sum_{A->CB} w sum_{k<i} alpha_kj(A) beta_ki(C)
                  + sum_{A->B} w alpha_ij(A)
    Z = beta_0n(start),   E[f_{A->BC}] = sum_{i<k<j} w alpha_ij(A) beta_ik(B) beta_kj(C) / Z.

Each span stores its inside vector normalised to max in [1, 2) with an
integer base-2 scale s_ij (beta_ij = 2^s_ij * stored vector; scaling by
powers of two is exact and needs no exp/log); the split sum is
M_ij = sum_k 2^(s_ik + s_kj - m_ij) outer(beta_ik, beta_kj) with
m_ij = max_k (s_ik + s_kj).  Outside vectors are stored per span at the fixed
scale 2^-s_ij, in units of 1/Z (alpha_0n(start) = 1/Z): since
alpha_ij(A) beta_ij(A) / Z <= 1, a stored outside entry is at most
1 / (stored inside entry), so nothing overflows, and a contribution that
underflows has posterior weight below 1e-300.  Products of stored values
times 2^(sum of scales) are posterior marginals directly.  A child collects
its outside score from its parents in two accumulators (as a left child,
row-packed; as a right child, column-packed) so that the pushes of one parent
write consecutive rows.

Dense path: beta_ij[r0:r1] = W vec(M_ij) with one GEMM per width over all
spans of that width in a chunk of sentences; outside A_ij = W^T alpha_ij
(GEMM) is pushed to the children by small products against the sibling inside
vectors, and the counts accumulate G += alpha_ij vec(M_ij)^T (GEMM; counts =
W * G, taken by the caller).  Split classes (child widths 1 or > 1) map to
blocks of W so that symbols that only occur over one token are not carried
through wide spans.  Sparse path: rules indexed by left child; LANES spans of
one width at a time, children transposed symbol-major so that each rule does
one vector operation per split over the LANES spans, and rules whose children
are zero in all of them are skipped.
"""
from cky cimport Gram, Corpus, Weights, Deriv, Chunk, Work
from cky cimport (grind_atb, grind_abt, grind_push, grind_outer, grind_atb_rows, grind_atb_kreg,
                  grind_vmax, grind_sparse_in, grind_sparse_out, grind_any, GRIND_LANES, grind_scatter, grind_pow2, grind_expo, grind_scal, grind_transpose)
from rng cimport grind_rng, grind_rng_seed, grind_uniform
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset
from libc.math cimport log, log1p, exp, pow, floor, INFINITY
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_GetName

ctypedef void (*dgemm_t)(char *transa, char *transb, int *m, int *n, int *k, double *alpha, double *a, int *lda,
                         double *b, int *ldb, double *beta, double *c, int *ldc) noexcept nogil

# BLAS dgemm from SciPy (scipy.linalg.cython_blas), fetched when the first kernel that needs it is
# built (need_blas): importing SciPy costs ~0.1-0.2 s that a DMV or segmentation run never needs.
cdef dgemm_t dgemm = NULL


def need_blas():
    """Make the dense path's dgemm available (imports scipy.linalg once)."""
    global dgemm
    if dgemm != NULL:
        return
    from scipy.linalg import cython_blas
    cap = cython_blas.__pyx_capi__["dgemm"]
    dgemm = <dgemm_t> PyCapsule_GetPointer(cap, PyCapsule_GetName(cap))

import numpy as np


cdef enum:
    SMALL_R = 12                # dense path: at most this many rule rows (GRIND_NARROW): products in C, not BLAS
    LANES = 4                   # spans per group on the sparse path (GRIND_LANES in C)
    SMALL_CAP_DOUBLES = 12288   # dense path, few rule rows: doubles of a batch's M (and of its A)
    SMALL_CHART_DOUBLES = 65536 # dense path, few rule rows: chunk budget (inside-outside charts)


cdef double NEG_INF = -INFINITY
cdef double LN2 = 0.6931471805599453


cdef inline double pow2(double d) noexcept nogil:
    return grind_pow2(d)


cdef inline void normalise(double *x, int n, double e) noexcept nogil:
    """x *= 2^-e for integer-valued e (in two steps when 2^-e is out of range)."""
    cdef double h
    if e > 1000.0 or e < -1000.0:
        h = floor(e / 2)
        vscale(x, n, pow2(-h))
        e -= h
    vscale(x, n, pow2(-e))


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

cdef inline int64_t ridx(int64_t base, int n, int i, int j) noexcept nogil:
    """Row-packed span (i, j): rows i = 0..n-1, each j = i+1..n."""
    return base + <int64_t>i * n - (<int64_t>i * (i - 1)) // 2 + (j - i - 1)


cdef inline int64_t cidx(int64_t base, int j, int i) noexcept nogil:
    """Column-packed span (i, j): columns j = 1..n, each i = 0..j-1."""
    return base + (<int64_t>(j - 1) * j) // 2 + i


cdef inline void gemm(char ta, char tb, int m, int n, int k, double alpha, double *a, int lda,
                      double *b, int ldb, double beta, double *c, int ldc) noexcept nogil:
    """Column-major C = alpha op(A) op(B) + beta C."""
    if m <= 0 or n <= 0:
        return
    cdef int j
    if k <= 0:
        if beta == 0.0:
            for j in range(n):
                memset(c + <int64_t>j * ldc, 0, m * sizeof(double))
        return
    dgemm(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc)


cdef void *xcalloc(size_t n, size_t size) except NULL nogil:
    cdef void *p = calloc(n if n > 0 else 1, size)
    if p == NULL:
        with gil:
            raise MemoryError(f"grind CKY kernel: cannot allocate {n * size} bytes")
    return p


cdef inline double vmax(double *x, int n) noexcept nogil:
    return grind_vmax(x, n)


cdef inline void vscale(double *x, int n, double f) noexcept nogil:
    grind_scal(n, f, x)


cdef inline void block_range(Gram *g, int b, int i, int j, int *k0, int *k1) noexcept nogil:
    """Splits k of span (i, j) whose class maps to block b (contiguous; empty if k0 > k1)."""
    cdef int w = j - i, cl, a, z
    k0[0] = j
    k1[0] = i
    for cl in range(4):
        if g.block_of[cl] != b:
            continue
        if cl == 0:
            if w != 2:
                continue
            a = i + 1
            z = i + 1
        elif cl == 1:
            if w < 3:
                continue
            a = i + 1
            z = i + 1
        elif cl == 2:
            if w < 3:
                continue
            a = j - 1
            z = j - 1
        else:
            if w < 4:
                continue
            a = i + 2
            z = j - 2
        if a < k0[0]:
            k0[0] = a
        if z > k1[0]:
            k1[0] = z


cdef inline bint block_live(Gram *g, int b, int width) noexcept nogil:
    cdef int k0, k1
    if g.coff[b + 1] == g.coff[b]:
        return False
    block_range(g, b, 0, width, &k0, &k1)
    return k0 <= k1


cdef void set_width(Gram *g, Work *wk, int width) noexcept nogil:
    """Per block b, whether spans of ``width`` use it and their splits i+dk0 .. j-dk1."""
    cdef int b, k0, k1
    for b in range(4):
        wk.live[b] = block_live(g, b, width)
        block_range(g, b, 0, width, &k0, &k1)
        wk.dk0[b] = k0
        wk.dk1[b] = width - k1


cdef inline int64_t live_cols(Gram *g, int width, int64_t *hi) noexcept nogil:
    """Columns [lo, hi) of W used by the spans of ``width`` (its live blocks are adjacent)."""
    cdef int64_t lo = g.coff[4]
    cdef int b
    hi[0] = 0
    for b in range(4):
        if block_live(g, b, width):
            lo = min(lo, g.coff[b])
            hi[0] = max(hi[0], g.coff[b + 1])
    return lo


cdef inline double split_max(Chunk *ch, int ci, int i, int j) noexcept nogil:
    """m_ij = max_k s_ik + s_kj (-inf when no split has two non-empty children)."""
    cdef int64_t base = ch.base[ci]
    cdef int n = ch.len[ci], k
    cdef int64_t rl = ridx(base, n, i, i + 1), rc = cidx(base, j, i + 1)
    cdef double m = NEG_INF, v
    for k in range(j - i - 1):
        v = ch.s[rl + k] + ch.sT[rc + k]
        if v > m:
            m = v
    return m


# ---------------------------------------------------------------------------
# chunks of sentences and work buffers
# ---------------------------------------------------------------------------

cdef int next_chunk(Gram *g, Corpus *c, int64_t *idx, int q0, int n_idx, int64_t budget,
                    int64_t *n_span) noexcept nogil:
    """End of the chunk starting at request q0: charts of at most ``budget`` doubles."""
    cdef int q = q0, n
    cdef int64_t spans = 0, sp
    while q < n_idx:
        n = c.length[idx[q]]
        sp = <int64_t>n * (n + 1) // 2
        if q > q0 and (spans + sp) * g.S * 4 > budget:
            break
        spans += sp
        q += 1
    n_span[0] = spans
    return q


cdef int alloc_chunk(Gram *g, Corpus *c, int64_t *idx, int n_idx, int64_t budget,
                     Chunk *ch) except -1 nogil:
    cdef int q0 = 0, q1, maxn = 1, q
    cdef int64_t sp, max_span = 1
    cdef int max_sent = 1
    while q0 < n_idx:
        q1 = next_chunk(g, c, idx, q0, n_idx, budget, &sp)
        if sp > max_span:
            max_span = sp
        if q1 - q0 > max_sent:
            max_sent = q1 - q0
        for q in range(q0, q1):
            if c.length[idx[q]] > maxn:
                maxn = c.length[idx[q]]
        q0 = q1
    ch.maxlen = maxn
    ch.sid = <int64_t *>xcalloc(max_sent, sizeof(int64_t))
    ch.q = <int *>xcalloc(max_sent, sizeof(int))
    ch.len = <int *>xcalloc(max_sent, sizeof(int))
    ch.base = <int64_t *>xcalloc(max_sent, sizeof(int64_t))
    ch.beta = <double *>xcalloc(max_span * g.S, sizeof(double))
    ch.betaT = <double *>xcalloc(max_span * g.S, sizeof(double))
    ch.alpha = <double *>xcalloc(max_span * g.S, sizeof(double))
    ch.alphaR = <double *>xcalloc(max_span * g.S, sizeof(double))
    ch.s = <double *>xcalloc(max_span, sizeof(double))
    ch.sT = <double *>xcalloc(max_span, sizeof(double))
    ch.m = <double *>xcalloc(max_span, sizeof(double))
    return 0


cdef void free_chunk(Chunk *ch) noexcept nogil:
    free(ch.sid); free(ch.q); free(ch.len); free(ch.base)
    free(ch.beta); free(ch.betaT); free(ch.alpha); free(ch.alphaR)
    free(ch.s); free(ch.sT); free(ch.m)


cdef void fill_chunk(Corpus *c, int64_t *idx, int q0, int q1, Chunk *ch) noexcept nogil:
    cdef int q, n
    cdef int64_t base = 0
    ch.n = q1 - q0
    ch.maxlen = 0
    for q in range(q0, q1):
        n = c.length[idx[q]]
        ch.sid[q - q0] = idx[q]
        ch.q[q - q0] = q
        ch.len[q - q0] = n
        ch.base[q - q0] = base
        base += <int64_t>n * (n + 1) // 2
        if n > ch.maxlen:
            ch.maxlen = n
    ch.n_span = base


cdef int alloc_work(Gram *g, Weights *w, int maxlen, Work *wk) except -1 nogil:
    cdef int b
    cdef int64_t tot = 0, sp
    cdef int64_t bsmax = 1
    wk.R = g.r1 - g.r0 if g.r1 > g.r0 else 0
    for b in range(4):
        bsmax = max(bsmax, g.coff[b + 1] - g.coff[b])
    tot = g.coff[4] if g.dense else 0
    if g.dense and 0 < wk.R <= SMALL_R:
        # products in C (no BLAS call to amortise): batches small enough that the split sums
        # and W^T alpha of a batch stay in the L2 cache with the chart rows they touch
        wk.cap = <int>min(64, max(16, SMALL_CAP_DOUBLES // (tot + wk.R + 1)))
    else:
        wk.cap = <int>min(1024, max(64, g.gemm_doubles // (tot + wk.R + 1)))
    wk.col_c = <int *>xcalloc(wk.cap, sizeof(int))
    wk.col_i = <int *>xcalloc(wk.cap, sizeof(int))
    wk.colt = <double *>xcalloc(wk.cap, sizeof(double))
    wk.M = <double *>xcalloc(wk.cap * tot, sizeof(double))
    wk.A = <double *>xcalloc(wk.cap * tot, sizeof(double))
    wk.out = <double *>xcalloc(wk.cap * wk.R, sizeof(double))
    wk.am = <double *>xcalloc(wk.cap * wk.R, sizeof(double))
    wk.ac = <double *>xcalloc(wk.cap * wk.R, sizeof(double))
    wk.scr = <double *>xcalloc(<int64_t>(maxlen + 1) * g.S, sizeof(double))
    wk.AT = <double *>xcalloc(bsmax if g.dense else 1, sizeof(double))
    sp = 1 if g.dense else <int64_t>g.S * maxlen * LANES
    wk.LT = <double *>xcalloc(sp, sizeof(double))
    if g.dense and 0 < wk.R <= SMALL_R:
        # dense path, few rule rows: RT holds W transposed (coff[4] x R) for the inside product
        wk.RT = <double *>xcalloc(tot * wk.R, sizeof(double))
        grind_transpose(wk.R, <int>tot, w.W, wk.RT)
    else:
        wk.RT = <double *>xcalloc(sp, sizeof(double))
    wk.PL = <double *>xcalloc(sp, sizeof(double))
    wk.PR = <double *>xcalloc(sp, sizeof(double))
    wk.fq = <double *>xcalloc(<int64_t>(maxlen + 1) * LANES, sizeof(double))
    wk.aT = <double *>xcalloc(<int64_t>(wk.R + 1) * LANES, sizeof(double))
    wk.outT = <double *>xcalloc(<int64_t>(wk.R + 1) * LANES, sizeof(double))
    wk.nzL = <char *>xcalloc(g.S, sizeof(char))
    wk.zero = <double *>xcalloc(g.S, sizeof(double))
    wk.nzR = <char *>xcalloc(g.S, sizeof(char))
    wk.nzA = <char *>xcalloc(wk.R + 1, sizeof(char))
    wk.binL = <double *>xcalloc(g.n_bin + 1, sizeof(double))
    wk.cntL = <double *>xcalloc(1 if g.dense else LANES * (g.n_bin + 1), sizeof(double))
    for b in range(g.n_bin):
        wk.binL[b] = w.bin[g.left_rule[b]]
    return 0


cdef void free_work(Work *wk) noexcept nogil:
    cdef int b
    free(wk.col_c); free(wk.col_i); free(wk.colt)
    free(wk.M); free(wk.A)
    free(wk.out); free(wk.am); free(wk.ac); free(wk.scr); free(wk.AT)
    free(wk.LT); free(wk.RT); free(wk.PL); free(wk.PR); free(wk.fq); free(wk.aT); free(wk.outT)
    free(wk.nzL); free(wk.nzR); free(wk.zero); free(wk.nzA); free(wk.binL); free(wk.cntL)


# ---------------------------------------------------------------------------
# inside
# ---------------------------------------------------------------------------

cdef void build_M(Gram *g, Chunk *ch, Work *wk, int b, int ci, int i, int j, double m,
                  double *M) noexcept nogil:
    """vec(M_ij^b) = sum_{k in block b} 2^(s_ik + s_kj - m) outer(beta_ik[L_b], beta_kj[R_b])."""
    cdef int S = g.S, n = ch.len[ci], k0, k1, K, q, x
    cdef int ll = g.lo_l[b], nl = g.hi_l[b] - g.lo_l[b], rl = g.lo_r[b], nr = g.hi_r[b] - g.lo_r[b]
    cdef int64_t base = ch.base[ci], r0 = ridx(base, n, i, 0), c0
    k0 = i + wk.dk0[b]
    k1 = j - wk.dk1[b]
    K = k1 - k0 + 1
    if K <= 0 or m == NEG_INF:
        memset(M, 0, <size_t>nl * nr * sizeof(double))
        return
    r0 = ridx(base, n, i, k0)
    c0 = cidx(base, j, k0)
    for q in range(K):
        wk.scr[q] = pow2(ch.s[r0 + q] + ch.sT[c0 + q] - m)
    if grind_outer(nl, nr, K, ch.beta + r0 * S + ll, ch.betaT + c0 * S + rl, S, wk.scr, M):
        return
    grind_atb(K, nl, nr, ch.beta + r0 * S + ll, S, 1, ch.betaT + c0 * S + rl, S, wk.scr, NULL, M, nr, 0)


cdef void sparse_children(Gram *g, Chunk *ch, Work *wk, int width, int col0, int nv,
                          double *scale) noexcept nogil:
    """Transpose the children of spans col0..col0+nv-1 into wk.LT (left, times 2^scale[v]
    * 2^(s_ik + s_kj)) and wk.RT (right), lanes >= nv zero; set the non-zero flags."""
    cdef int S = g.S, K = width - 1, v, q
    cdef int64_t KS = <int64_t>K * LANES
    cdef int64_t r0[LANES]
    cdef int64_t c0[LANES]
    cdef const double *srcL[LANES]
    cdef const double *srcR[LANES]
    cdef double one[LANES]
    cdef double *f
    memset(wk.nzL, 0, S)
    memset(wk.nzR, 0, S)
    for v in range(LANES):
        one[v] = 1.0
        if v < nv:
            ci = wk.col_c[col0 + v]
            r0[v] = ridx(ch.base[ci], ch.len[ci], wk.col_i[col0 + v], wk.col_i[col0 + v] + 1)
            c0[v] = cidx(ch.base[ci], wk.col_i[col0 + v] + width, wk.col_i[col0 + v] + 1)
    for q in range(K):
        f = wk.fq + LANES * q
        for v in range(LANES):
            if v < nv:
                f[v] = pow2(scale[v] + ch.s[r0[v] + q] + ch.sT[c0[v] + q])
                srcL[v] = ch.beta + (r0[v] + q) * S
                srcR[v] = ch.betaT + (c0[v] + q) * S
            else:
                f[v] = 0.0
                srcL[v] = srcR[v] = wk.zero
        grind_scatter(S, f, srcL, wk.LT + LANES * q, KS, wk.nzL)
        grind_scatter(S, one, srcR, wk.RT + LANES * q, KS, wk.nzR)


cdef void sparse_inside(Gram *g, Chunk *ch, Work *wk, int width, int ncol) noexcept nogil:
    """out[col] = sum_k 2^(s_ik + s_kj - m) sum_{A->BC} w beta_ik(B) beta_kj(C), LANES spans
    at a time, rules by left child, skipping children that are zero over all of them."""
    cdef int col0, v, A, R = wk.R, nv
    cdef double sc[LANES]
    cdef int64_t r
    col0 = 0
    while col0 < ncol:
        nv = min(LANES, ncol - col0)
        for v in range(nv):
            r = ridx(ch.base[wk.col_c[col0 + v]], ch.len[wk.col_c[col0 + v]], wk.col_i[col0 + v],
                     wk.col_i[col0 + v] + width)
            ch.m[r] = split_max(ch, wk.col_c[col0 + v], wk.col_i[col0 + v], wk.col_i[col0 + v] + width)
            sc[v] = -ch.m[r] if ch.m[r] != NEG_INF else NEG_INF
        sparse_children(g, ch, wk, width, col0, nv, sc)
        memset(wk.outT, 0, R * LANES * sizeof(double))
        grind_sparse_in(g.S, width - 1, g.left_ptr, g.left_lhs, g.left_right, wk.binL, g.r0,
                        wk.LT, wk.RT, wk.nzL, wk.nzR, wk.outT)
        for v in range(nv):
            for A in range(R):
                wk.out[<int64_t>(col0 + v) * R + A] = wk.outT[LANES * A + v]
        col0 += LANES


cdef void finish_inside(Gram *g, Corpus *c, Weights *w, Chunk *ch, int ci, int i, int j,
                        double *out, double m) noexcept nogil:
    """Add lexical matches and unary rules to the binary part, normalise, store both layouts."""
    cdef int S = g.S, n = ch.len[ci], x, p, l, k
    cdef int64_t base = ch.base[ci], r = ridx(base, n, i, j), rc = cidx(base, j, i)
    cdef int64_t pp = c.pos_off[ch.sid[ci]] + i
    cdef double *b = ch.beta + r * S
    cdef double sc = NEG_INF, v, mx
    memset(b, 0, S * sizeof(double))
    if out != NULL and m != NEG_INF and vmax(out, g.r1 - g.r0) > 0.0:
        memcpy(b + g.r0, out, (g.r1 - g.r0) * sizeof(double))
        sc = m
    for p in range(c.mptr[pp], c.mptr[pp + 1] if j - i <= g.max_lex else c.mptr[pp]):
        if c.m_end[p] != j:
            continue
        l = c.m_rule[p]
        v = w.lex[l]
        if not v > 0.0:
            continue
        if sc == NEG_INF:
            sc = 0.0
        elif sc < 0.0:
            vscale(b, S, pow2(sc))
            sc = 0.0
        b[g.lex_lhs[l]] += v * pow2(-sc)
    # unary rules in order, a run of rules with one parent summed in a register (the same
    # additions in the same order: a rule's child is never its parent)
    k = 0
    while k < g.n_un:
        x = g.un_parent[k]
        v = b[x]
        while k < g.n_un and g.un_parent[k] == x:
            v += w.un[k] * b[g.un_child[k]]
            k += 1
        b[x] = v
    mx = vmax(b, S)
    if mx > 0.0:
        normalise(b, S, grind_expo(mx))
        sc += grind_expo(mx)
    else:
        sc = NEG_INF
    ch.s[r] = sc
    ch.sT[rc] = sc
    memcpy(ch.betaT + rc * S, b, S * sizeof(double))


cdef void inside_cols(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk, int width,
                      int ncol) noexcept nogil:
    cdef int col, b, ci, i, R = wk.R
    cdef double m
    cdef int64_t r, lo, hi, wc = g.coff[4]
    if width >= 2 and R > 0:
        lo = live_cols(g, width, &hi)
        for col in range(ncol):
            ci = wk.col_c[col]
            i = wk.col_i[col]
            r = ridx(ch.base[ci], ch.len[ci], i, i + width)
            if g.dense:
                m = split_max(ch, ci, i, i + width)
                for b in range(4):
                    if wk.live[b]:
                        build_M(g, ch, wk, b, ci, i, i + width, m, wk.M + col * wc + g.coff[b])
                ch.m[r] = m
        if g.dense and R <= SMALL_R:
            # out[col, a] = sum_p M[col, p] W^T[p, a]
            grind_atb(<int>(hi - lo), ncol, R, wk.M + lo, 1, wc, wk.RT + lo * R, R, NULL, NULL,
                      wk.out, R, 0)
        elif g.dense:
            gemm(b'T', b'N', R, ncol, <int>(hi - lo), 1.0, w.W + lo, <int>wc, wk.M + lo, <int>wc,
                 0.0, wk.out, R)
        else:
            sparse_inside(g, ch, wk, width, ncol)
    for col in range(ncol):
        ci = wk.col_c[col]
        i = wk.col_i[col]
        if width >= 2 and R > 0:
            m = ch.m[ridx(ch.base[ci], ch.len[ci], i, i + width)]
            finish_inside(g, c, w, ch, ci, i, i + width, wk.out + <int64_t>col * R, m)
        else:
            finish_inside(g, c, w, ch, ci, i, i + width, NULL, NEG_INF)


ctypedef void (*cols_fn)(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk, int width, int ncol,
                         double *cnt_bin, double *cnt_un, double *cnt_lex, double *G) noexcept nogil


cdef void inside_cols_(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk, int width, int ncol,
                       double *cnt_bin, double *cnt_un, double *cnt_lex, double *G) noexcept nogil:
    inside_cols(g, c, w, ch, wk, width, ncol)


cdef void for_width(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk, int width, cols_fn fn,
                    double *cnt_bin, double *cnt_un, double *cnt_lex, double *G) noexcept nogil:
    """Run ``fn`` over all spans of ``width`` in the chunk, ``wk.cap`` spans at a time."""
    cdef int ncol = 0, ci, i
    set_width(g, wk, width)
    for ci in range(ch.n):
        for i in range(ch.len[ci] - width + 1):
            wk.col_c[ncol] = ci
            wk.col_i[ncol] = i
            ncol += 1
            if ncol == wk.cap:
                fn(g, c, w, ch, wk, width, ncol, cnt_bin, cnt_un, cnt_lex, G)
                ncol = 0
    if ncol > 0:
        fn(g, c, w, ch, wk, width, ncol, cnt_bin, cnt_un, cnt_lex, G)


cdef void inside_chunk(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk) noexcept nogil:
    cdef int width
    for width in range(1, ch.maxlen + 1):
        for_width(g, c, w, ch, wk, width, inside_cols_, NULL, NULL, NULL, NULL)


cdef inline double chunk_logz(Gram *g, Chunk *ch, int ci) noexcept nogil:
    cdef int64_t r = ridx(ch.base[ci], ch.len[ci], 0, ch.len[ci])
    cdef double v = ch.beta[r * g.S + g.start]
    return ch.s[r] * LN2 + log(v) if v > 0.0 else NEG_INF


# ---------------------------------------------------------------------------
# outside
# ---------------------------------------------------------------------------

cdef double finish_outside(Gram *g, Corpus *c, Weights *w, Chunk *ch, int ci, int i, int j,
                           double *cnt_un, double *cnt_lex) noexcept nogil:
    """Complete alpha_ij = (pushes as left child) + (pushes as right child), masked by
    beta > 0, with the unary rules applied downwards; count lexical and unary rules at
    (i, j).  Returns the scale t_ij = -s_ij (-inf when alpha_ij is zero)."""
    cdef int S = g.S, n = ch.len[ci], x, p, l, k
    cdef int64_t r = ridx(ch.base[ci], n, i, j), pp = c.pos_off[ch.sid[ci]] + i
    cdef double *a = ch.alpha + r * S
    cdef double *ar = ch.alphaR + cidx(ch.base[ci], j, i) * S
    cdef double *b = ch.beta + r * S
    cdef double e
    if ch.s[r] == NEG_INF:
        return NEG_INF
    for x in range(S):
        a[x] = a[x] + ar[x] if b[x] != 0.0 else 0.0
    if g.n_un:
        # downwards, a run of rules with one parent reading its alpha once (never a child)
        k = g.n_un - 1
        while k >= 0:
            x = g.un_parent[k]
            e = a[x]
            while k >= 0 and g.un_parent[k] == x:
                a[g.un_child[k]] += w.un[k] * e
                k -= 1
        for x in range(S):
            if b[x] == 0.0:
                a[x] = 0.0
    if not vmax(a, S) > 0.0:
        return NEG_INF
    if j - i <= g.max_lex:
        e = pow2(-ch.s[r])
        for p in range(c.mptr[pp], c.mptr[pp + 1]):
            if c.m_end[p] == j:
                l = c.m_rule[p]
                cnt_lex[l] += e * a[g.lex_lhs[l]] * w.lex[l]
    for k in range(g.n_un):
        cnt_un[k] += a[g.un_parent[k]] * w.un[k] * b[g.un_child[k]]
    return -ch.s[r]


cdef void push_children(Gram *g, Chunk *ch, Work *wk, int b, int ci, int i, int j, double t,
                        double *A) noexcept nogil:
    """alpha_ik += f_k A_ij beta_kj and alpha_kj += f_k A_ij^T beta_ik over the splits of
    block b, f_k = 2^(t_ij + s_ik + s_kj) (children keep the scale 2^-s of their inside)."""
    cdef int S = g.S, n = ch.len[ci], k0, k1, K, q
    cdef int ll = g.lo_l[b], nl = g.hi_l[b] - g.lo_l[b], rl = g.lo_r[b], nr = g.hi_r[b] - g.lo_r[b]
    cdef int64_t base = ch.base[ci], r0, c0
    cdef double *f = wk.scr
    k0 = i + wk.dk0[b]
    k1 = j - wk.dk1[b]
    K = k1 - k0 + 1
    if K <= 0:
        return
    r0 = ridx(base, n, i, k0)
    c0 = cidx(base, j, k0)
    for q in range(K):
        f[q] = pow2(t + ch.s[r0 + q] + ch.sT[c0 + q])
    if grind_push(nl, nr, K, A, ch.beta + r0 * S + ll, ch.betaT + c0 * S + rl, S, f,
                  ch.alpha + r0 * S + ll, ch.alphaR + c0 * S + rl):
        return
    if K <= 1:
        grind_abt(nr, K, nl, ch.betaT + c0 * S + rl, S, A, nr, f, ch.alpha + r0 * S + ll, S)
    else:
        grind_transpose(nl, nr, A, wk.AT)
        grind_atb(nr, K, nl, ch.betaT + c0 * S + rl, 1, S, wk.AT, nl, NULL, f,
                  ch.alpha + r0 * S + ll, S, 1)
    grind_atb(nl, K, nr, ch.beta + r0 * S + ll, 1, S, A, nr, NULL, f, ch.alphaR + c0 * S + rl, S, 1)


cdef void sparse_outside(Gram *g, Chunk *ch, Work *wk, int width, int ncol,
                         double *cnt_bin) noexcept nogil:
    """Push alpha_ij (scale t = wk.colt) to the children and count binary rules, LANES spans
    at a time: alpha_ik += f_k sum w alpha_ij(A) beta_kj(C), alpha_kj += f_k sum w alpha_ij(A)
    beta_ik(B), E[f] += f_k w alpha_ij(A) beta_ik(B) beta_kj(C), f_k = 2^(t + s_ik + s_kj)."""
    cdef int S = g.S, K = width - 1, R = wk.R, col0, v, q, B, A, ci, i, j, n, nv
    cdef int64_t r, r0, c0, KS = <int64_t>K * LANES
    cdef double *a
    cdef double *al
    cdef double *ar
    cdef double f
    col0 = 0
    while col0 < ncol:
        nv = min(LANES, ncol - col0)
        sparse_children(g, ch, wk, width, col0, nv, wk.colt + col0)
        for v in range(LANES):
            if v < nv and wk.colt[col0 + v] != NEG_INF:
                ci = wk.col_c[col0 + v]
                a = ch.alpha + ridx(ch.base[ci], ch.len[ci], wk.col_i[col0 + v], wk.col_i[col0 + v] + width) * S
                for A in range(R):
                    wk.aT[LANES * A + v] = a[g.r0 + A]
            else:
                for A in range(R):
                    wk.aT[LANES * A + v] = 0.0
        for A in range(R):
            wk.nzA[A] = grind_any(wk.aT + LANES * A, LANES)
        memset(wk.PL, 0, S * KS * sizeof(double))
        memset(wk.PR, 0, S * KS * sizeof(double))
        grind_sparse_out(S, K, g.left_ptr, g.left_lhs, g.left_right, wk.binL, g.r0,
                         wk.LT, wk.RT, wk.nzL, wk.nzR, wk.aT, wk.nzA, wk.PL, wk.PR, wk.cntL)
        for v in range(nv):
            if wk.colt[col0 + v] == NEG_INF:
                continue
            ci = wk.col_c[col0 + v]
            i = wk.col_i[col0 + v]
            j = i + width
            n = ch.len[ci]
            r0 = ridx(ch.base[ci], n, i, i + 1)
            c0 = cidx(ch.base[ci], j, i + 1)
            for q in range(K):
                f = wk.fq[LANES * q + v]
                if f == 0.0:
                    continue
                al = ch.alpha + (r0 + q) * S
                ar = ch.alphaR + (c0 + q) * S
                for B in range(S):
                    al[B] += f * wk.PL[B * KS + LANES * q + v]
                    ar[B] += wk.PR[B * KS + LANES * q + v]
        col0 += LANES


cdef void outside_cols(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk, int width, int ncol,
                       double *cnt_bin, double *cnt_un, double *cnt_lex, double *G) noexcept nogil:
    cdef int col, b, ci, i, x, R = wk.R
    cdef int64_t r, lo, hi, wc = g.coff[4]
    cdef double t, m, f
    cdef double *am
    cdef double *ac
    cdef double *al
    cdef bint dense = g.dense and width >= 2 and R > 0
    for col in range(ncol):
        ci = wk.col_c[col]
        i = wk.col_i[col]
        t = finish_outside(g, c, w, ch, ci, i, i + width, cnt_un, cnt_lex)
        wk.colt[col] = t
        if width < 2 or R == 0:
            continue
        r = ridx(ch.base[ci], ch.len[ci], i, i + width)
        if not dense:
            continue
        m = ch.m[r]
        am = wk.am + <int64_t>col * R
        ac = wk.ac + <int64_t>col * R
        if t == NEG_INF or m == NEG_INF:
            wk.colt[col] = NEG_INF
            memset(am, 0, R * sizeof(double))
            memset(ac, 0, R * sizeof(double))
            m = NEG_INF
        else:
            al = ch.alpha + r * g.S + g.r0
            f = pow2(t + m)
            for x in range(R):
                am[x] = al[x]
                ac[x] = f * al[x]
        for b in range(4):
            if wk.live[b]:
                build_M(g, ch, wk, b, ci, i, i + width, m, wk.M + col * wc + g.coff[b])
    if not dense:
        if width >= 2 and R > 0:
            sparse_outside(g, ch, wk, width, ncol, cnt_bin)
        return
    lo = live_cols(g, width, &hi)
    # G[a, p] += sum_col ac[col, a] M[col, p];  A[col, p] = sum_a am[col, a] W[a, p]
    if R <= SMALL_R:
        if not grind_atb_rows(ncol, R, <int>(hi - lo), wk.ac, R, 1, wk.M + lo, wc, G + lo, wc, 1):
            grind_atb(ncol, R, <int>(hi - lo), wk.ac, R, 1, wk.M + lo, wc, NULL, NULL, G + lo, wc, 1)
        if not grind_atb_kreg(R, ncol, <int>(hi - lo), wk.am, 1, R, w.W + lo, wc, wk.A + lo, wc):
            grind_atb(R, ncol, <int>(hi - lo), wk.am, 1, R, w.W + lo, wc, NULL, NULL, wk.A + lo, wc, 0)
    else:
        gemm(b'N', b'T', <int>(hi - lo), R, ncol, 1.0, wk.M + lo, <int>wc, wk.ac, R, 1.0, G + lo, <int>wc)
        gemm(b'N', b'N', <int>(hi - lo), ncol, R, 1.0, w.W + lo, <int>wc, wk.am, R, 0.0, wk.A + lo, <int>wc)
    for col in range(ncol):
        if wk.colt[col] == NEG_INF:
            continue
        for b in range(4):
            if wk.live[b]:
                push_children(g, ch, wk, b, wk.col_c[col], wk.col_i[col], wk.col_i[col] + width,
                              wk.colt[col], wk.A + col * wc + g.coff[b])


cdef void outside_chunk(Gram *g, Corpus *c, Weights *w, Chunk *ch, Work *wk, double *logz,
                        double *cnt_bin, double *cnt_un, double *cnt_lex, double *G) noexcept nogil:
    cdef int ci, width
    cdef int64_t r
    memset(ch.alpha, 0, ch.n_span * g.S * sizeof(double))
    memset(ch.alphaR, 0, ch.n_span * g.S * sizeof(double))
    for ci in range(ch.n):
        if logz[ch.q[ci]] != NEG_INF:
            r = ridx(ch.base[ci], ch.len[ci], 0, ch.len[ci])
            ch.alpha[r * g.S + g.start] = 1.0 / ch.beta[r * g.S + g.start]
    for width in range(ch.maxlen, 0, -1):
        for_width(g, c, w, ch, wk, width, outside_cols, cnt_bin, cnt_un, cnt_lex, G)


cdef int inside_outside(Gram *g, Corpus *c, Weights *w, int64_t *idx, int n_idx, int64_t budget,
                        double *cnt_bin, double *cnt_un, double *cnt_lex, double *G,
                        double *logz) except -1 nogil:
    """Expected internal rule counts (binary: G, to be multiplied by W, on the dense
    path) and log Z of sentences idx, in one pass over chunks of sentences."""
    cdef Chunk ch
    cdef Work wk
    cdef int q0 = 0, q1, ci, p, v
    cdef int64_t sp
    memset(&ch, 0, sizeof(Chunk))
    memset(&wk, 0, sizeof(Work))
    if g.dense and 0 < g.r1 - g.r0 <= SMALL_R:
        # few rule rows: the per-span work is small, so keep the charts of a chunk near the
        # L2 cache (every width sweeps them); a smaller budget is still within the caller's
        budget = min(budget, SMALL_CHART_DOUBLES)
    try:
        alloc_chunk(g, c, idx, n_idx, budget, &ch)
        alloc_work(g, w, ch.maxlen, &wk)
        while q0 < n_idx:
            q1 = next_chunk(g, c, idx, q0, n_idx, budget, &sp)
            fill_chunk(c, idx, q0, q1, &ch)
            inside_chunk(g, c, w, &ch, &wk)
            for ci in range(ch.n):
                logz[ch.q[ci]] = chunk_logz(g, &ch, ci)
            outside_chunk(g, c, w, &ch, &wk, logz, cnt_bin, cnt_un, cnt_lex, G)
            q0 = q1
        if not g.dense:
            for p in range(g.n_bin):
                for v in range(LANES):
                    cnt_bin[g.left_rule[p]] += wk.cntL[LANES * p + v]
    finally:
        free_chunk(&ch)
        free_work(&wk)
    return 0


# ---------------------------------------------------------------------------
# derivations: Viterbi and sampling
# ---------------------------------------------------------------------------

cdef inline bint emit(Deriv *out, int q, int64_t *nr, int orig, int i, int j) noexcept nogil:
    """Append row (orig, i, j) unless orig < 0 (a helper rule); False when out of room."""
    cdef int64_t p
    if orig < 0:
        return True
    if out.off[q] + nr[0] >= out.off[q + 1]:
        return False
    p = (out.off[q] + nr[0]) * 3
    out.rows[p] = orig
    out.rows[p + 1] = i
    out.rows[p + 2] = j
    nr[0] += 1
    return True


cdef inline int code_kind(Gram *g, int code, int *rule) noexcept nogil:
    """Backpointer code -> kind (2 binary, 1 unary, 0 lexical) and internal rule."""
    if code < g.n_bin:
        rule[0] = code
        return 2
    if code < g.n_bin + g.n_un:
        rule[0] = code - g.n_bin
        return 1
    rule[0] = code - g.n_bin - g.n_un
    return 0


cdef void sparse_vit_span(Gram *g, Weights *w, double *v, int64_t base, int n, int i, int j,
                          double *best, int *code, int *split) noexcept nogil:
    cdef int S = g.S, k, B, p, r, A
    cdef double *vl
    cdef double *vr
    cdef double x, val
    for k in range(i + 1, j):
        vl = v + ridx(base, n, i, k) * S
        vr = v + ridx(base, n, k, j) * S
        for B in range(S):
            x = vl[B]
            if x == NEG_INF:
                continue
            for p in range(g.left_ptr[B], g.left_ptr[B + 1]):
                r = g.left_rule[p]
                val = w.logbin[r] + x + vr[g.bin_right[r]]
                A = g.bin_lhs[r]
                if val > best[A]:
                    best[A] = val
                    code[A] = r
                    split[A] = k


cdef void dense_vit_span(Gram *g, Weights *w, double *v, int64_t base, int n, int i, int j,
                         double *best, int *code, int *split, double *Mx, int *arg) noexcept nogil:
    """Max-plus with the dense blocks: Mx[B,C] = max_k v_ik(B) + v_kj(C), then
    best(A) = max_{B,C} log W[A,B,C] + Mx[B,C]."""
    cdef int S = g.S, b, k0, k1, k, x, y, A, bpos
    cdef int ll, nl, rl, nr
    cdef int64_t bs, pos
    cdef double *vl
    cdef double *vr
    cdef double *lw
    cdef double a, val, bv
    for b in range(4):
        if g.coff[b + 1] == g.coff[b]:
            continue
        block_range(g, b, i, j, &k0, &k1)
        if k0 > k1:
            continue
        ll = g.lo_l[b]; nl = g.hi_l[b] - ll; rl = g.lo_r[b]; nr = g.hi_r[b] - rl
        bs = <int64_t>nl * nr
        for pos in range(bs):
            Mx[pos] = NEG_INF
        for k in range(k0, k1 + 1):
            vl = v + ridx(base, n, i, k) * S + ll
            vr = v + ridx(base, n, k, j) * S + rl
            for x in range(nl):
                a = vl[x]
                if a == NEG_INF:
                    continue
                for y in range(nr):
                    val = a + vr[y]
                    if val > Mx[x * nr + y]:
                        Mx[x * nr + y] = val
                        arg[x * nr + y] = k
        for A in range(g.r0, g.r1):
            lw = w.logW + (A - g.r0) * g.coff[4] + g.coff[b]
            bv = best[A]
            bpos = -1
            for pos in range(bs):
                val = lw[pos] + Mx[pos]
                if val > bv:
                    bv = val
                    bpos = <int>pos
            if bpos >= 0:
                best[A] = bv
                code[A] = g.rid[(A - g.r0) * g.coff[4] + g.coff[b] + bpos]
                split[A] = arg[bpos]


cdef void vit_chart(Gram *g, Corpus *c, Weights *w, int64_t sid, double *v, int *code,
                    int *split, double *Mx, int *arg) noexcept nogil:
    cdef int S = g.S, n = c.length[sid], width, i, j, p, l, k, A
    cdef int64_t r, pp
    cdef double *best
    cdef double val
    for width in range(1, n + 1):
        for i in range(n - width + 1):
            j = i + width
            r = ridx(0, n, i, j)
            best = v + r * S
            for A in range(S):
                best[A] = NEG_INF
                code[r * S + A] = -1
            if width >= 2:
                if g.dense:
                    dense_vit_span(g, w, v, 0, n, i, j, best, code + r * S, split + r * S, Mx, arg)
                else:
                    sparse_vit_span(g, w, v, 0, n, i, j, best, code + r * S, split + r * S)
            pp = c.pos_off[sid] + i
            for p in range(c.mptr[pp], c.mptr[pp + 1]):
                if c.m_end[p] != j:
                    continue
                l = c.m_rule[p]
                A = g.lex_lhs[l]
                if w.loglex[l] > best[A]:
                    best[A] = w.loglex[l]
                    code[r * S + A] = g.n_bin + g.n_un + l
            for k in range(g.n_un):
                val = w.logun[k] + best[g.un_child[k]]
                A = g.un_parent[k]
                if val > best[A]:
                    best[A] = val
                    code[r * S + A] = g.n_bin + k


cdef inline bint expand(Gram *g, int kind, int rule, int i, int j, int k, int *stack, int64_t *top,
                        Deriv *out, int q, int64_t *nr) noexcept nogil:
    """Emit the node's rule and push its children (binary: right then left, so
    the left child is expanded first: pre-order); False when out of room."""
    cdef int64_t t = top[0]
    if kind == 2:
        if not emit(out, q, nr, g.bin_orig[rule], i, j):
            return False
        stack[3 * t] = g.bin_right[rule]; stack[3 * t + 1] = k; stack[3 * t + 2] = j
        stack[3 * t + 3] = g.bin_left[rule]; stack[3 * t + 4] = i; stack[3 * t + 5] = k
        top[0] = t + 2
    elif kind == 1:
        if not emit(out, q, nr, g.un_orig[rule], i, j):
            return False
        stack[3 * t] = g.un_child[rule]; stack[3 * t + 1] = i; stack[3 * t + 2] = j
        top[0] = t + 1
    elif not emit(out, q, nr, g.lex_orig[rule], i, j):
        return False
    return True


cdef bint vit_trace(Gram *g, int n, int *code, int *split, int *stack, int64_t cap, Deriv *out,
                    int q) noexcept nogil:
    cdef int64_t top = 0, nr = 0, r
    cdef int A, i, j, kind, rule, k
    stack[0] = g.start; stack[1] = 0; stack[2] = n
    top = 1
    while top > 0:
        top -= 1
        A = stack[3 * top]; i = stack[3 * top + 1]; j = stack[3 * top + 2]
        r = ridx(0, n, i, j) * g.S + A
        kind = code_kind(g, code[r], &rule)
        if top + 2 > cap:
            return False
        k = split[r] if kind == 2 else 0
        if not expand(g, kind, rule, i, j, k, stack, &top, out, q, &nr):
            return False
    out.n_rows[q] = nr
    return True


cdef int viterbi(Gram *g, Corpus *c, Weights *w, int64_t *idx, int n_idx,
                 Deriv *out, double *logp) except -1 nogil:
    """Max-plus CKY in log space and the best derivation of each sentence idx[q]."""
    cdef int maxn = 1, q, n
    cdef int64_t spans, bsmax = 1, cap = 1, b
    cdef double *v = NULL
    cdef int *code = NULL
    cdef int *split = NULL
    cdef double *Mx = NULL
    cdef int *arg = NULL
    cdef int *stack = NULL
    for q in range(n_idx):
        if c.length[idx[q]] > maxn:
            maxn = c.length[idx[q]]
        if out.off[q + 1] - out.off[q] > cap:
            cap = out.off[q + 1] - out.off[q]
    for b in range(4):
        if g.coff[b + 1] - g.coff[b] > bsmax:
            bsmax = g.coff[b + 1] - g.coff[b]
    spans = <int64_t>maxn * (maxn + 1) // 2
    try:
        v = <double *>xcalloc(spans * g.S, sizeof(double))
        code = <int *>xcalloc(spans * g.S, sizeof(int))
        split = <int *>xcalloc(spans * g.S, sizeof(int))
        Mx = <double *>xcalloc(bsmax, sizeof(double))
        arg = <int *>xcalloc(bsmax, sizeof(int))
        stack = <int *>xcalloc(3 * (cap + 2), sizeof(int))
        for q in range(n_idx):
            n = c.length[idx[q]]
            out.n_rows[q] = -1
            vit_chart(g, c, w, idx[q], v, code, split, Mx, arg)
            logp[q] = v[ridx(0, n, 0, n) * g.S + g.start]
            if logp[q] != NEG_INF:
                if not vit_trace(g, n, code, split, stack, cap + 2, out, q):
                    with gil:
                        raise RuntimeError("grind CKY kernel: derivation buffer too small")
    finally:
        free(v); free(code); free(split); free(Mx); free(arg); free(stack)
    return 0


cdef int choose(Gram *g, Corpus *c, Weights *w, Chunk *ch, int ci, int A, int i, int j, double u,
                int *rule, int *split) noexcept nogil:
    """Draw how (A, i, j) rewrites, u ~ U[0, beta_ij(A)): 0 lexical, 1 unary, 2 binary (split)."""
    cdef int S = g.S, n = ch.len[ci], kind = -1, p, l, k, r
    cdef int64_t base = ch.base[ci], rs = ridx(base, n, i, j), rl, rr
    cdef int64_t pp = c.pos_off[ch.sid[ci]] + i
    cdef double sij = ch.s[rs], e, val
    cdef double *b = ch.beta + rs * S
    cdef double *bl
    cdef double *br
    e = pow2(-sij)
    for p in range(c.mptr[pp], c.mptr[pp + 1]):
        l = c.m_rule[p]
        if c.m_end[p] != j or g.lex_lhs[l] != A:
            continue
        val = w.lex[l] * e
        if val > 0.0:
            kind = 0
            rule[0] = l
            u -= val
            if u < 0.0:
                return kind
    for p in range(g.unp_ptr[A], g.unp_ptr[A + 1]):
        r = g.unp_rule[p]
        val = w.un[r] * b[g.un_child[r]]
        if val > 0.0:
            kind = 1
            rule[0] = r
            u -= val
            if u < 0.0:
                return kind
    for k in range(i + 1, j):
        rl = ridx(base, n, i, k)
        rr = ridx(base, n, k, j)
        if ch.s[rl] == NEG_INF or ch.s[rr] == NEG_INF:
            continue
        e = pow2(ch.s[rl] + ch.s[rr] - sij)
        bl = ch.beta + rl * S
        br = ch.beta + rr * S
        for p in range(g.lhs_ptr[A], g.lhs_ptr[A + 1]):
            r = g.lhs_rule[p]
            val = w.bin[r] * bl[g.bin_left[r]] * br[g.bin_right[r]] * e
            if val > 0.0:
                kind = 2
                rule[0] = r
                split[0] = k
                u -= val
                if u < 0.0:
                    return kind
    return kind


cdef bint sample_one(Gram *g, Corpus *c, Weights *w, Chunk *ch, int ci, grind_rng *rng,
                     int *stack, int64_t cap, Deriv *out, int q) noexcept nogil:
    cdef int n = ch.len[ci], A, i, j, kind, rule = 0, k = 0
    cdef int64_t top, nr = 0
    cdef double u
    stack[0] = g.start; stack[1] = 0; stack[2] = n
    top = 1
    while top > 0:
        top -= 1
        A = stack[3 * top]; i = stack[3 * top + 1]; j = stack[3 * top + 2]
        u = grind_uniform(rng) * ch.beta[ridx(ch.base[ci], n, i, j) * g.S + A]
        kind = choose(g, c, w, ch, ci, A, i, j, u, &rule, &k)
        if top + 2 > cap or kind < 0:
            return False
        if not expand(g, kind, rule, i, j, k, stack, &top, out, q, &nr):
            return False
    out.n_rows[q] = nr
    return True


cdef int sample(Gram *g, Corpus *c, Weights *w, int64_t *idx, int n_idx, int64_t budget,
                uint64_t *seeds, Deriv *out, double *logz) except -1 nogil:
    """Inside charts by chunk, then one top-down draw per sentence (Johnson et al. 2007)."""
    cdef Chunk ch
    cdef Work wk
    cdef grind_rng rng
    cdef int q0 = 0, q1, ci, q
    cdef int64_t sp, cap = 1
    cdef int *stack = NULL
    memset(&ch, 0, sizeof(Chunk))
    memset(&wk, 0, sizeof(Work))
    for q in range(n_idx):
        if out.off[q + 1] - out.off[q] > cap:
            cap = out.off[q + 1] - out.off[q]
    try:
        alloc_chunk(g, c, idx, n_idx, budget, &ch)
        alloc_work(g, w, ch.maxlen, &wk)
        stack = <int *>xcalloc(3 * (cap + 2), sizeof(int))
        while q0 < n_idx:
            q1 = next_chunk(g, c, idx, q0, n_idx, budget, &sp)
            fill_chunk(c, idx, q0, q1, &ch)
            inside_chunk(g, c, w, &ch, &wk)
            for ci in range(ch.n):
                q = ch.q[ci]
                logz[q] = chunk_logz(g, &ch, ci)
                out.n_rows[q] = -1
                if logz[q] == NEG_INF:
                    continue
                grind_rng_seed(&rng, seeds[q])
                if not sample_one(g, c, w, &ch, ci, &rng, stack, cap + 2, out, q):
                    with gil:
                        raise RuntimeError("grind CKY kernel: sampling failed (buffer too small)")
            q0 = q1
    finally:
        free_chunk(&ch)
        free_work(&wk)
        free(stack)
    return 0


# ---------------------------------------------------------------------------
# collapsed Metropolis-Hastings sweep (grind/infer/hastings.py)
# ---------------------------------------------------------------------------

cdef struct Slots:
    # where original rule r's weight lives in the kernel's arrays (-1: not there)
    const int64_t *bin          # w.bin (and wk.binL at binl[bin], W at W[r])
    const int64_t *un
    const int64_t *lex
    const int64_t *W            # the dense W
    const int64_t *binl         # binary rule -> its position in left-child order (wk.binL)
    int64_t tot                 # columns of W (coff[4])


cdef inline void set_weight(Gram *g, Weights *w, Work *wk, const Slots *sl, int64_t r, double x) noexcept nogil:
    """Rule r's proposal weight x into every array the inside pass reads (copies included)."""
    cdef int64_t b = sl.bin[r], p
    if x > 0.0 and x < 2.2250738585072014e-308:
        x = 0.0                 # subnormal: read as 0, as CKYParser._weights does
    if b >= 0:
        w.bin[b] = x
        wk.binL[sl.binl[b]] = x
    p = sl.W[r]
    if p >= 0:
        w.W[p] = x
        if g.dense and 0 < wk.R <= SMALL_R:
            wk.RT[(p % sl.tot) * wk.R + p // sl.tot] = x
    if sl.un[r] >= 0:
        w.un[sl.un[r]] = x
    if sl.lex[r] >= 0:
        w.lex[sl.lex[r]] = x


cdef inline double theta(const int64_t *cnt, const double *a, const int64_t *lhs_at, int64_t r,
                         double inv) noexcept nogil:
    """theta'_r^(1/T) = ((f_r + alpha_r) / (f_A + alpha_A))^inv."""
    cdef int64_t A = lhs_at[r]
    cdef double x = (cnt[r] + a[r]) / (cnt[A] + a[A])
    return x if inv == 1.0 else pow(x, inv)


cdef double tree_excess(const int64_t *rows, int64_t m, const int64_t *cnt, const double *a,
                        const int64_t *lhs_at, int *seen) noexcept nogil:
    """excess(t) of grind.infer.hastings (Hastings._excess) over the counts cnt of t_{-i}:
    sum over the tree's uses u (each node's rule, +, and its LHS, -) of log1p(j / (cnt_u + a_u)),
    j the equal uses before it.  ``seen`` (an int a use, all 0) is left all 0."""
    cdef int64_t k, u, j
    cdef int q
    cdef double ex = 0.0, t
    for k in range(m):
        u = rows[3 * k]
        for q in range(2):
            if q:
                u = lhs_at[u]
            j = seen[u]
            seen[u] = <int> (j + 1)
            if j:
                t = log1p(j / (cnt[u] + a[u]))
                ex += -t if q else t
    for k in range(m):
        u = rows[3 * k]
        seen[u] = 0
        seen[lhs_at[u]] = 0
    return ex


cdef inline void move_tree(const int64_t *rows, int64_t m, const int64_t *lhs_at, int64_t *cnt,
                           int64_t d) noexcept nogil:
    cdef int64_t k, r
    for k in range(m):
        r = rows[3 * k]
        cnt[r] += d
        cnt[lhs_at[r]] += d


cdef inline void touch_lhs(const int64_t *rows, int64_t m, const int64_t *lhs_at, int64_t R, char *mark,
                           int64_t *lst, int64_t *nl) noexcept nogil:
    """Append to lst the LHSs (R + A) of the tree's rules not yet marked."""
    cdef int64_t k, A
    for k in range(m):
        A = lhs_at[rows[3 * k]] - R
        if not mark[A]:
            mark[A] = 1
            lst[nl[0]] = A
            nl[0] += 1


# ---------------------------------------------------------------------------
# Python interface
# ---------------------------------------------------------------------------

cdef class Kernel:
    """Static grammar and corpus arrays (see grind/cky.py) bound to the C kernels."""
    cdef Gram g
    cdef Corpus c
    cdef dict keep

    def __init__(self, dict gram, dict corpus):
        cdef Gram *g = &self.g
        cdef Corpus *c = &self.c
        cdef int b
        assert LANES == GRIND_LANES
        self.keep = {}
        g.S = gram["S"]
        g.start = gram["start"]
        g.r0 = gram["r0"]
        g.r1 = gram["r1"]
        g.n_bin = len(gram["bin_lhs"])
        g.n_un = len(gram["un_parent"])
        g.n_lex = len(gram["lex_lhs"])
        g.dense = gram["dense"]
        if g.dense:
            need_blas()
        g.max_lex = gram["max_lex"]
        g.gemm_doubles = gram["gemm_doubles"]
        g.bin_lhs = self._int(gram, "bin_lhs")
        g.bin_left = self._int(gram, "bin_left")
        g.bin_right = self._int(gram, "bin_right")
        g.left_ptr = self._int(gram, "left_ptr")
        g.left_rule = self._int(gram, "left_rule")
        g.left_lhs = self._int(gram, "left_lhs")
        g.left_right = self._int(gram, "left_right")
        g.lhs_ptr = self._int(gram, "lhs_ptr")
        g.lhs_rule = self._int(gram, "lhs_rule")
        g.un_parent = self._int(gram, "un_parent")
        g.un_child = self._int(gram, "un_child")
        g.unp_ptr = self._int(gram, "unp_ptr")
        g.unp_rule = self._int(gram, "unp_rule")
        g.lex_lhs = self._int(gram, "lex_lhs")
        g.bin_orig = self._int(gram, "bin_orig")
        g.un_orig = self._int(gram, "un_orig")
        g.lex_orig = self._int(gram, "lex_orig")
        g.rid = self._int(gram, "rid")
        for b in range(4):
            g.block_of[b] = gram["block_of"][b]
            g.lo_l[b] = gram["left_range"][b][0]
            g.hi_l[b] = gram["left_range"][b][1]
            g.lo_r[b] = gram["right_range"][b][0]
            g.hi_r[b] = gram["right_range"][b][1]
        for b in range(5):
            g.coff[b] = gram["coff"][b]
        c.n_sent = len(corpus["length"])
        c.length = self._int(corpus, "length")
        c.pos_off = self._i64(corpus, "pos_off")
        c.mptr = self._int(corpus, "mptr")
        c.m_end = self._int(corpus, "m_end")
        c.m_rule = self._int(corpus, "m_rule")

    cdef int *_int(self, dict d, str name) except NULL:
        cdef int[::1] a = np.ascontiguousarray(d[name], dtype=np.intc)
        if a.shape[0] == 0:
            a = np.zeros(1, dtype=np.intc)
        self.keep[name] = a
        return &a[0]

    cdef int64_t *_i64(self, dict d, str name) except NULL:
        cdef int64_t[::1] a = np.ascontiguousarray(d[name], dtype=np.int64)
        if a.shape[0] == 0:
            a = np.zeros(1, dtype=np.int64)
        self.keep[name] = a
        return &a[0]

    cdef Weights _weights(self, list arrs):
        cdef Weights w
        cdef double *p[8]
        cdef double[::1] a
        for k in range(8):
            a = arrs[k]
            p[k] = &a[0]
        w.bin = p[0]
        w.un = p[1]
        w.lex = p[2]
        w.W = p[3]
        w.logbin = p[4]
        w.logun = p[5]
        w.loglex = p[6]
        w.logW = p[7]
        return w

    def inside_outside(self, list weights, idx, int64_t budget):
        """weights: [bin, un, lex, W, logbin, logun, loglex, logW] float64 arrays (length >= 1)."""
        cdef int64_t[::1] ix = np.ascontiguousarray(idx, dtype=np.int64)
        cdef int n_idx = ix.shape[0]
        cdef Weights w = self._weights(weights)
        cb = np.zeros(max(1, self.g.n_bin)); cu = np.zeros(max(1, self.g.n_un))
        cl = np.zeros(max(1, self.g.n_lex))
        G = np.zeros(max(1, (self.g.r1 - self.g.r0) * self.g.coff[4]) if self.g.dense else 1)
        lz = np.zeros(max(1, n_idx))
        cdef double[::1] vcb = cb, vcu = cu, vcl = cl, vG = G, vlz = lz
        if n_idx > 0:
            with nogil:
                inside_outside(&self.g, &self.c, &w, &ix[0], n_idx, budget,
                               &vcb[0], &vcu[0], &vcl[0], &vG[0], &vlz[0])
        return cb, cu, cl, G, lz[:n_idx]

    def hastings(self, list weights, int64_t[::1] cnt, const double[::1] a, const int64_t[::1] lhs_at,
                 const int64_t[::1] lhs_ptr, const int64_t[::1] lhs_rules, dict slots, const int64_t[::1] order,
                 double inv, int64_t[::1] rows, const int64_t[::1] row_off, int64_t[::1] lens,
                 const int64_t[::1] caps, uint64_t seed, int64_t budget):
        """One sweep of the collapsed Metropolis-Hastings sampler (grind.infer.hastings,
        --proposal-batch 1) over the sentences ``order``, in that order, in one nogil call.

        cnt (int64, modified): rule counts of the current trees at [r], per-LHS totals at
        lhs_at[r] = R + A (the sampler's joint index space); a: the hyperparameters there;
        inv = 1/T.  The rules of LHS A are lhs_rules[lhs_ptr[A]:lhs_ptr[A+1]]; ``slots``
        says where each rule's weight lives in ``weights`` (kernel_weights' arrays, which
        this changes).  rows (modified): the current tree of sentence s as lens[s] rows
        (rule, start, end) from row row_off[s], room for caps[s].  For each sentence:
        its tree is taken out of cnt, the weights of the rules of every LHS whose counts
        changed since they were computed are set to theta'^(1/T), a tree is drawn from
        the inside chart, accepted with probability min{1, exp((excess(t') - excess(t)) inv)},
        and the kept tree's counts go back.  One xoshiro256** stream seeded with ``seed``.
        Returns (accepted, failed): failed = -1, or the sentence whose chart was not finite
        (its counts restored, the sweep stopped there)."""
        cdef Weights w = self._weights(weights)
        cdef Gram *g = &self.g
        cdef Corpus *c = &self.c
        cdef Slots sl
        cdef int64_t[::1] sbin = np.ascontiguousarray(slots["bin"], dtype=np.int64)
        cdef int64_t[::1] sun = np.ascontiguousarray(slots["un"], dtype=np.int64)
        cdef int64_t[::1] slex = np.ascontiguousarray(slots["lex"], dtype=np.int64)
        cdef int64_t[::1] sW = np.ascontiguousarray(slots["W"], dtype=np.int64)
        cdef int64_t[::1] sbinl = np.ascontiguousarray(slots["binl"], dtype=np.int64)
        cdef int64_t K = order.shape[0], U = cnt.shape[0], R = lhs_at.shape[0], nA = lhs_ptr.shape[0] - 1
        cdef int64_t k, s, m, r, A, q, j, nd = 0, nn, cap = 1, acc = 0, fail = -1
        cdef int64_t one[1]
        cdef double logz, logr
        cdef Chunk ch
        cdef Work wk
        cdef Deriv d
        cdef grind_rng rng
        cdef int *stack = NULL
        cdef int *seen = NULL
        cdef char *mark = NULL
        cdef int64_t *dirty = NULL
        cdef int64_t *prop = NULL
        cdef int64_t doff[2]
        cdef int64_t dn[1]
        if a.shape[0] != U or U != R + nA or sbin.shape[0] != R or sW.shape[0] != R or sun.shape[0] != R \
                or slex.shape[0] != R or row_off.shape[0] != self.c.n_sent or lens.shape[0] != self.c.n_sent:
            raise ValueError("Kernel.hastings: inconsistent sizes")
        for k in range(K):
            s = order[k]
            if s < 0 or s >= self.c.n_sent or lens[s] < 0 or lens[s] > caps[s]:
                raise ValueError(f"Kernel.hastings: sentence {s} has no tree to update")
            cap = max(cap, caps[s])
        if K == 0:
            return 0, -1
        sl.bin, sl.un, sl.lex, sl.W, sl.binl = &sbin[0], &sun[0], &slex[0], &sW[0], &sbinl[0]
        sl.tot = g.coff[4]
        memset(&ch, 0, sizeof(Chunk))
        memset(&wk, 0, sizeof(Work))
        grind_rng_seed(&rng, seed)
        try:
            alloc_chunk(g, c, <int64_t *> &order[0], <int> K, budget, &ch)
            alloc_work(g, &w, ch.maxlen, &wk)
            stack = <int *> xcalloc(3 * (cap + 2), sizeof(int))
            seen = <int *> xcalloc(U, sizeof(int))
            mark = <char *> xcalloc(nA + 1, sizeof(char))
            dirty = <int64_t *> xcalloc(2 * nA + 1, sizeof(int64_t))
            prop = <int64_t *> xcalloc(3 * cap, sizeof(int64_t))
            d.off, d.rows, d.n_rows = doff, prop, dn
            doff[0], doff[1] = 0, cap
            with nogil:
                for r in range(R):                    # theta' of the counts as they are
                    set_weight(g, &w, &wk, &sl, r, theta(&cnt[0], &a[0], &lhs_at[0], r, inv))
                for k in range(K):
                    s = order[k]
                    m = lens[s]
                    cur = &rows[3 * row_off[s]]
                    move_tree(cur, m, &lhs_at[0], &cnt[0], -1)          # cnt = f(t_{-i})
                    touch_lhs(cur, m, &lhs_at[0], R, mark, dirty, &nd)
                    for q in range(nd):                                  # theta' where counts moved
                        A = dirty[q]
                        mark[A] = 0
                        for j in range(lhs_ptr[A], lhs_ptr[A + 1]):
                            r = lhs_rules[j]
                            set_weight(g, &w, &wk, &sl, r, theta(&cnt[0], &a[0], &lhs_at[0], r, inv))
                    nd = 0
                    one[0] = s
                    fill_chunk(c, one, 0, 1, &ch)
                    inside_chunk(g, c, &w, &ch, &wk)
                    logz = chunk_logz(g, &ch, 0)
                    if logz != logz:
                        move_tree(cur, m, &lhs_at[0], &cnt[0], 1)
                        fail = s
                        break
                    if logz > NEG_INF:
                        dn[0] = -1
                        if not sample_one(g, c, &w, &ch, 0, &rng, stack, cap + 2, &d, 0):
                            move_tree(cur, m, &lhs_at[0], &cnt[0], 1)
                            fail = s
                            break
                        nn = dn[0]
                        logr = (tree_excess(prop, nn, &cnt[0], &a[0], &lhs_at[0], seen)
                                - tree_excess(cur, m, &cnt[0], &a[0], &lhs_at[0], seen)) * inv
                        if logr >= 0.0 or grind_uniform(&rng) < exp(logr):
                            memcpy(cur, prop, 3 * nn * sizeof(int64_t))
                            lens[s] = m = nn
                            acc += 1
                    move_tree(cur, m, &lhs_at[0], &cnt[0], 1)
                    touch_lhs(cur, m, &lhs_at[0], R, mark, dirty, &nd)   # their theta' next time
        finally:
            free_chunk(&ch)
            free_work(&wk)
            free(stack); free(seen); free(mark); free(dirty); free(prop)
        return acc, fail

    def viterbi(self, list weights, idx, caps):
        return self._derive(weights, idx, caps, None, 0)

    def sample(self, list weights, idx, caps, seeds, int64_t budget):
        return self._derive(weights, idx, caps, seeds, budget)

    def _derive(self, list weights, idx, caps, seeds, int64_t budget):
        """Derivation rows of sentences idx (row capacity caps[q]): (rows, off, n_rows, score)."""
        cdef int64_t[::1] ix = np.ascontiguousarray(idx, dtype=np.int64)
        cdef int n_idx = ix.shape[0]
        cdef Weights w = self._weights(weights)
        off = np.zeros(n_idx + 1, dtype=np.int64)
        np.cumsum(np.asarray(caps, dtype=np.int64), out=off[1:])
        rows = np.zeros(max(1, int(off[n_idx])) * 3, dtype=np.int64)
        n_rows = np.full(max(1, n_idx), -1, dtype=np.int64)
        score = np.zeros(max(1, n_idx))
        cdef int64_t[::1] voff = off, vrows = rows, vn = n_rows
        cdef uint64_t[::1] vseed
        cdef double[::1] vs = score
        cdef Deriv d
        d.off = &voff[0]
        d.rows = &vrows[0]
        d.n_rows = &vn[0]
        if n_idx > 0:
            if seeds is None:
                with nogil:
                    viterbi(&self.g, &self.c, &w, &ix[0], n_idx, &d, &vs[0])
            else:
                vseed = np.ascontiguousarray(seeds, dtype=np.uint64)
                with nogil:
                    sample(&self.g, &self.c, &w, &ix[0], n_idx, budget, &vseed[0], &d, &vs[0])
        return rows.reshape((rows.shape[0] // 3, 3)), off, n_rows[:n_idx], score[:n_idx]
