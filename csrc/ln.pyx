"""The logistic-normal model I E-step over the sentences of a shard, compiled
(grind.infer.ln builds the arrays; the math is that module's docstring).

Only what a sentence's parses can read is held: its *instances* (the
multinomials with >= 2 rules some rule of which it can read, each with its
mean m~, variance v~, zeta~ and expected counts F) and its *blocks* (the
experts that cover an instance), each over its coordinates U in that expert
-- the segments of the instances it covers.  Every other expert of a sentence
sits at the prior's closed form (mu~ = mu, sigma~^2 = 1 / (Sigma^-1)_ii),
which this file never touches.  A block is solved in U alone with the
marginal prior of U (covariance S = Sigma_UU, precision Q = S^-1), its
uncovered coordinates R following as x_R = mu_R + Sigma_RU y with
y = Q (x_U - mu_U) kept beside x_U (the KL's quadratic term is
(x_U - mu_U) . y).  The blocks of one coverage pattern (expert, U) share
S, Q, mu_U, the precision diagonal p_U and the weights w = 1 / |J_k|.

Per sentence and round (csrc/ln_kernels.h does the solves):
    c_t = N_t / zeta~_t  (N_t = sum of F_t; 0 for an unused instance),
    for each group of experts in order, for each block of the group:
        a = w F,  b = c exp(min(m~ - w x + v~/2, 700))   ->  x, y   (mu~ step)
        beta = c exp(min(m~ + (v~ - w^2 s)/2, 700))      ->  s      (sigma~^2 step)
    then m~, v~ and zeta~ = sum exp(m~ + v~/2) afresh.
"""
from libc.math cimport log, exp, fabs, INFINITY, NAN
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, calloc, free
from scipy.linalg.cython_blas cimport dgemm
from scipy.linalg.cython_lapack cimport dpotrf, dpotri

import numpy as np

cdef extern from "<stdlib.h>" nogil:
    void *aligned_alloc(size_t alignment, size_t size)

cdef extern from "ln_kernels.h" nogil:
    ctypedef struct grind_v8d:
        pass
    double grind_ln_exp(double x)
    double grind_ln_exp_small(double z)
    int grind_ln_mu_batch(int n, const grind_v8d *a, const grind_v8d *b, const double *w, const double *S,
                          const double *Q, int64_t ld, const double *mu, grind_v8d *x, grind_v8d *y, grind_v8d *act,
                          double gtol, int maxiter, grind_v8d *work, const grind_v8d *e0, int *m_out)
    int grind_ln_sigma(int n, const double *beta, const double *w2, const double *p, double *v, double tol,
                       int iters, double *work, const double *ex0)
    void grind_ln_symv(int n, const double *S, int64_t ld, const double *x, double *y)
    enum: GRIND_LN_KMAX

ctypedef int64_t i64

cdef double EXP_MAX = 700.0
#: mu~ solves stop at max |gradient| < GTOL; sigma~^2 solves at |J'| < STOL
cdef double GTOL = 1e-11
cdef int MAXITER = 400
cdef double STOL = 1e-13
cdef int SITERS = 60
#: Shard.accumulate hands BLAS this many blocks' outer products at once (OpenBLAS stays on one thread)
cdef i64 ACC_BATCH = 128


cdef int _bases(list pools, const double **base, i64 *size) except -1:
    """The data pointers and lengths of ``pools`` (C-contiguous float64 arrays)."""
    cdef const double[::1] v
    cdef Py_ssize_t i
    for i in range(len(pools)):
        v = pools[i]
        size[i] = v.shape[0]
        base[i] = &v[0] if v.shape[0] else NULL
    return 0


def _lanes(i64 n, double fill):
    """n doubles filled with ``fill``, starting on a 64-byte boundary (the solvers read eight
    lanes as one vector)."""
    raw = np.full(n + 8, fill)
    off = int(raw.ctypes.data) % 64
    skip = ((64 - off) % 64) // 8
    return raw[skip:skip + n]


cdef class Shard:
    """The layout and state of one shard's variational posteriors (module docstring).

    Layout (int64 arrays of the dict ``layout``): ``inst_off`` (B+1) the instances of
    sentence b, ``inst_c0`` (T+1) the coordinates of instance t, ``c_inst`` (C) the
    instance of each coordinate; ``blk_off`` (B+1) the blocks of sentence b in group
    order, ``blk_pat`` (NB) their pattern, ``blk_c0`` (NB+1) their coordinates,
    ``bc_f`` (NBC) the instance coordinate of each block coordinate; ``loc_off`` (B+1)
    and ``loc_f`` (NL): for each rule a sentence reads, its instance coordinate (-1:
    a multinomial of one rule, weight 1).  State (float64 arrays): x, s2, y per block
    coordinate, held in the chunks' lane order (block k's coordinate u at slot bq[k] + 8 u,
    :meth:`_slots`: the solvers work on them in place); m, v, F per instance coordinate;
    zeta per instance.
    """
    cdef readonly i64 B, T, C, NB, NBC, NL, P
    cdef const i64[::1] inst_off, inst_c0, c_inst, blk_off, blk_pat, blk_c0, bc_f, loc_off, loc_f, order, chunk_off
    cdef double[::1] _lx, _ls, _ly      # x, s2, y per lane slot (an empty lane: mu, 1/p, 0 of its pattern)
    cdef double[::1] _m, _v, _F, _zeta
    cdef double[::1] _ee, _lz          # exp(min(m~ + v~/2, 700)) per coordinate, log zeta~ per instance
    cdef unsigned char[::1] _idle     # per block: no data in the last round (at the prior's closed form)
    # the chunks' lane slots (slot q = u * 8 + lane of chunk ch at chunk_q0[ch] + q): the instance
    # coordinate of each (-1: an empty lane) and its instance; per block the slot of its coordinate 0
    # (its coordinate u at bq + 8 u); made once with the layout
    cdef i64[::1] _chunk_q0, _slot_f, _slot_t, _bq
    cdef i64[::1] _f_slot              # per instance coordinate, its slot (plain; -1: none)
    cdef i64[::1] _loc_q, _loc_t       # per local rule, its coordinate's slot and instance (plain; -1, 0: none)
    cdef public object layout
    cdef bint _plain                 # each instance coordinate in one block, w = 1: e from exp(m~ + v~/2)
    # plain: per slot exp(min(s2/2, 700)) and exp(min(x + s2/2, 700)) as the last round left them
    # (valid while _cached; :meth:`_update_plain`)
    cdef double[::1] _lh, _le
    cdef double[::1] _la               # plain: F per lane slot (0 in an empty lane), as set_counts writes it
    cdef bint _f_ok, _la_ok            # plain: F, _la hold the counts (set_counts writes _la; F made from it when read)
    cdef bint _cached
    cdef bint _stale                 # plain: m~, v~ and exp(m~ + v~/2) behind the lanes (:meth:`_sync`)
    cdef object prior
    # the prior, per pattern: Sigma_UU and Q = Sigma_UU^-1 (leading dimension ld), and per
    # coordinate w, mu_U and p_U = (Sigma^-1)_ii
    cdef const double **sig
    cdef const double **q
    cdef const double **pw
    cdef const double **pmu
    cdef const double **pp
    cdef i64 *ld
    cdef i64 maxn
    cdef double[::1] _lp               # per pattern, sum of log p_U over its coordinates (set_prior)

    def __cinit__(self):
        self.sig = self.q = self.pw = self.pmu = self.pp = NULL
        self.ld = NULL

    def __dealloc__(self):
        self._free_prior()

    cdef void _free_prior(self) noexcept:
        free(self.sig); free(self.q); free(self.pw); free(self.pmu); free(self.pp); free(self.ld)
        self.sig = self.q = self.pw = self.pmu = self.pp = NULL
        self.ld = NULL

    def __init__(self, layout, i64 n_patterns):
        self.layout = layout
        self.inst_off, self.inst_c0, self.c_inst = layout["inst_off"], layout["inst_c0"], layout["c_inst"]
        self.blk_off, self.blk_pat, self.blk_c0 = layout["blk_off"], layout["blk_pat"], layout["blk_c0"]
        self.bc_f, self.loc_off, self.loc_f = layout["bc_f"], layout["loc_off"], layout["loc_f"]
        self.order, self.chunk_off = layout["order"], layout["chunk_off"]
        self.B = self.inst_off.shape[0] - 1
        self.T = self.inst_c0.shape[0] - 1
        self.C = self.c_inst.shape[0]
        self.NB = self.blk_pat.shape[0]
        self.NBC = self.bc_f.shape[0]
        self.NL = self.loc_f.shape[0]
        self.P = n_patterns
        if (self.blk_off.shape[0] != self.B + 1 or self.loc_off.shape[0] != self.B + 1
                or self.blk_c0.shape[0] != self.NB + 1 or self.inst_c0[self.T] != self.C
                or self.blk_c0[self.NB] != self.NBC or self.loc_off[self.B] != self.NL
                or self.inst_off[self.B] != self.T or self.blk_off[self.B] != self.NB):
            raise ValueError("Shard: inconsistent layout")
        cdef i64 k, i
        self.maxn = 1
        for k in range(self.NB):
            if self.blk_pat[k] < 0 or self.blk_pat[k] >= self.P:
                raise ValueError("Shard: a block's pattern is out of range")
            self.maxn = max(self.maxn, self.blk_c0[k + 1] - self.blk_c0[k])
        for k in range(self.T):
            self.maxn = max(self.maxn, self.inst_c0[k + 1] - self.inst_c0[k])
        for k in range(self.NBC):
            if self.bc_f[k] < 0 or self.bc_f[k] >= self.C:
                raise ValueError("Shard: a block coordinate is out of range")
        if self.order.shape[0] != self.NB or self.chunk_off.shape[0] < 1 or self.chunk_off[self.chunk_off.shape[0] - 1] != self.NB:
            raise ValueError("Shard: the chunks are not the blocks")
        for k in range(self.chunk_off.shape[0] - 1):
            if not 0 < self.chunk_off[k + 1] - self.chunk_off[k] <= 8:
                raise ValueError("Shard: a chunk holds 1 to 8 blocks")
            for i in range(self.chunk_off[k], self.chunk_off[k + 1]):
                if self.order[i] < 0 or self.order[i] >= self.NB or self.blk_pat[self.order[i]] != self.blk_pat[self.order[self.chunk_off[k]]]:
                    raise ValueError("Shard: a chunk's blocks are not of one pattern")
        self._slots()
        cdef i64 NS = self._chunk_q0[self._chunk_q0.shape[0] - 1]
        self._lx, self._ls, self._ly = _lanes(NS, 0.0), _lanes(NS, 1.0), _lanes(NS, 0.0)
        self._m, self._v, self._F = np.zeros(self.C), np.ones(self.C), np.zeros(self.C)
        self._zeta = np.ones(self.T)
        self._idle = np.ones(self.NB, dtype=np.uint8)
        self._ee, self._lz = np.zeros(self.C), np.zeros(self.T)
        self._plain = self.NBC == self.C and isinstance(layout, dict) and bool(layout.get("plain", False))
        self._cached = False
        self._stale = False
        self._f_ok, self._la_ok = True, False
        if self._plain:
            self._lh, self._le, self._la = _lanes(NS, 1.0), _lanes(NS, 1.0), _lanes(NS, 0.0)

    cdef void _slots(self):
        """The chunks' lane slots, made once a layout (kept in it: a shard is made anew every
        iteration from the same layout)."""
        cached = self.layout.get("_slots") if isinstance(self.layout, dict) else None
        if cached is not None:
            self._chunk_q0, self._slot_f, self._slot_t, self._bq, self._f_slot, self._loc_q, self._loc_t = cached
            return
        cdef i64 nch = self.chunk_off.shape[0] - 1, ch, k, n, lane, u, q, total = 0
        self._chunk_q0 = np.zeros(nch + 1, dtype=np.int64)
        for ch in range(nch):
            k = self.order[self.chunk_off[ch]]
            total += 8 * (self.blk_c0[k + 1] - self.blk_c0[k])
            self._chunk_q0[ch + 1] = total
        self._slot_f = np.full(total, -1, dtype=np.int64)
        self._slot_t = np.zeros(total, dtype=np.int64)
        self._bq = np.zeros(self.NB, dtype=np.int64)
        for ch in range(nch):
            for lane in range(self.chunk_off[ch + 1] - self.chunk_off[ch]):
                k = self.order[self.chunk_off[ch] + lane]
                n = self.blk_c0[k + 1] - self.blk_c0[k]
                self._bq[k] = self._chunk_q0[ch] + lane
                for u in range(n):
                    q = self._chunk_q0[ch] + u * 8 + lane
                    self._slot_f[q] = self.bc_f[self.blk_c0[k] + u]
                    self._slot_t[q] = self.c_inst[self._slot_f[q]]
        self._f_slot = np.full(self.C, -1, dtype=np.int64)
        for q in range(total):
            if self._slot_f[q] >= 0:
                self._f_slot[self._slot_f[q]] = q
        self._loc_q = np.full(self.NL, -1, dtype=np.int64)
        self._loc_t = np.zeros(self.NL, dtype=np.int64)
        for q in range(self.NL):
            if self.loc_f[q] >= 0:
                self._loc_q[q] = self._f_slot[self.loc_f[q]]
                self._loc_t[q] = self.c_inst[self.loc_f[q]]
        if isinstance(self.layout, dict):
            self.layout["_slots"] = (self._chunk_q0, self._slot_f, self._slot_t, self._bq, self._f_slot,
                                     self._loc_q, self._loc_t)

    cdef object _blocks_of(self, const double[::1] lane):
        """A per-slot array in block-coordinate order (a new array)."""
        out = np.empty(self.NBC)
        cdef double[::1] o = out
        cdef i64 k, u, c0, q
        for k in range(self.NB):
            c0, q = self.blk_c0[k], self._bq[k]
            for u in range(self.blk_c0[k + 1] - c0):
                o[c0 + u] = lane[q + 8 * u]
        return out

    def __getattr__(self, name):
        """The state as numpy arrays: x, s2, y per block coordinate (copies, in block order);
        m, v, F per instance coordinate and zeta per instance (views: writing into them changes
        the shard); idle per block
        (1 where the block had no data in the last round, or the shard started at the prior:
        it is then at the prior's closed form, and :meth:`kl` and :meth:`accumulate` count it
        as the sentence's other experts, adding nothing for it)."""
        if name == "idle":
            return np.asarray(self._idle)
        lanes = {"x": self._lx, "s2": self._ls, "y": self._ly}
        if name in lanes:
            return self._blocks_of(lanes[name])
        self._sync()
        if name == "F":                 # a view the caller may write into
            self._need_F()
            self._la_ok = False
        views = {"m": self._m, "v": self._v, "F": self._F, "zeta": self._zeta}
        if name not in views:
            raise AttributeError(name)
        return np.asarray(views[name])

    cdef void _need_F(self) noexcept nogil:
        """F from the lane slots' counts where set_counts left them there."""
        cdef i64 q, f
        if self._f_ok:
            return
        for f in range(self.C):
            self._F[f] = 0.0
        for q in range(self._la.shape[0]):
            f = self._slot_f[q]
            if f >= 0:
                self._F[f] = self._la[q]
        self._f_ok = True

    cdef void _need_la(self) noexcept nogil:
        """The lane slots' counts from F (plain), where F was written last."""
        cdef i64 q, f
        if self._la_ok:
            return
        for q in range(self._la.shape[0]):
            f = self._slot_f[q]
            self._la[q] = self._F[f] if f >= 0 else 0.0
        self._la_ok = True

    def set_prior(self, list pools, const i64[:, ::1] where, const i64[::1] ld):
        """The prior of every pattern: ``where[p]`` = (pool, offset) pairs of Sigma_UU, Q_U,
        w, mu_U, p_U (10 columns) into the float64 arrays ``pools``; ``ld[p]`` the leading
        dimension of Sigma_UU and Q_U.  Sizes are checked against each pattern's blocks."""
        cdef i64 k, j, n, need
        if where.shape[0] != self.P or where.shape[1] != 10 or ld.shape[0] != self.P:
            raise ValueError("Shard.set_prior: one row of 10 a pattern")
        pools = [np.ascontiguousarray(x, dtype=np.float64) for x in pools]
        cdef i64 G = len(pools), pi, off
        cdef const double **base = <const double **> malloc(max(G, 1) * sizeof(double *))
        cdef i64 *plen = <i64 *> malloc(max(G, 1) * sizeof(i64))
        cdef i64 *size = <i64 *> calloc(max(self.P, 1), sizeof(i64))
        cdef int bad = 0
        if base == NULL or plen == NULL or size == NULL:
            free(base); free(plen); free(size)
            raise MemoryError()
        _bases(pools, base, plen)
        for k in range(self.NB):
            size[self.blk_pat[k]] = self.blk_c0[k + 1] - self.blk_c0[k]
        self._free_prior()
        self.sig = <const double **> malloc(max(self.P, 1) * sizeof(double *))
        self.q = <const double **> malloc(max(self.P, 1) * sizeof(double *))
        self.pw = <const double **> malloc(max(self.P, 1) * sizeof(double *))
        self.pmu = <const double **> malloc(max(self.P, 1) * sizeof(double *))
        self.pp = <const double **> malloc(max(self.P, 1) * sizeof(double *))
        self.ld = <i64 *> malloc(max(self.P, 1) * sizeof(i64))
        if self.sig == NULL or self.q == NULL or self.pw == NULL or self.pmu == NULL or self.pp == NULL \
                or self.ld == NULL:
            self._free_prior()
            free(base); free(plen); free(size)
            raise MemoryError()
        cdef const double **tabs[5]
        tabs[0], tabs[1], tabs[2], tabs[3], tabs[4] = self.sig, self.q, self.pw, self.pmu, self.pp
        for k in range(self.P):
            n = size[k]
            self.ld[k] = ld[k]
            if n and ld[k] < n:
                bad = 1
            for j in range(5):
                pi, off = where[k, 2 * j], where[k, 2 * j + 1]
                need = (n - 1) * ld[k] + n if j < 2 else n
                if pi < 0 or pi >= G or off < 0 or (n and off + need > plen[pi]):
                    bad = 1
                    break
                tabs[j][k] = base[pi] + off if base[pi] != NULL else NULL
            if bad:
                break
        if not bad:
            self._lp = np.zeros(max(self.P, 1))
            for k in range(self.P):
                for j in range(size[k]):
                    self._lp[k] += log(self.pp[k][j])
        free(base); free(plen); free(size)
        if bad:
            self._free_prior()
            raise ValueError("Shard.set_prior: a pattern reaches past its pool")
        for k in range(self.NB if self._plain else 0):
            for j in range(self.blk_c0[k + 1] - self.blk_c0[k]):
                if self.pw[self.blk_pat[k]][j] != 1.0:
                    self._plain = False
        self.prior = pools

    def copy(self):
        """A shard of the same layout, without a prior, holding a copy of the state."""
        cdef Shard out = Shard(self.layout, self.P)
        self._sync()
        out._lx[:] = self._lx
        out._ls[:] = self._ls
        out._ly[:] = self._ly
        out._m, out._v, out._F, out._zeta = self.m.copy(), self.v.copy(), self.F.copy(), self.zeta.copy()
        out._idle = self.idle.copy()
        out._ee, out._lz = np.asarray(self._ee).copy(), np.asarray(self._lz).copy()
        return out

    cdef int _ready(self) except -1:
        if self.ld == NULL:
            raise ValueError("Shard: no prior (set_prior)")
        return 0

    def start(self, x=None, s2=None):
        """The state at the prior (x = mu_U, s2 = 1/p_U, y = 0), or at the given x and s2
        per block coordinate (y = Q (x - mu_U)); then :meth:`combine`."""
        self._ready()
        cdef const double[::1] xi, si
        cdef i64 k, u, n, p, c0, q, ch
        cdef double *d = <double *> malloc(2 * self.maxn * sizeof(double))
        if d == NULL:
            raise MemoryError()
        cdef bint warm = x is not None
        cdef i64 q0
        cdef double mu, s0
        cdef double *LX = &self._lx[0] if self._lx.shape[0] else NULL
        cdef double *LS = &self._ls[0] if self._ls.shape[0] else NULL
        cdef double *LY = &self._ly[0] if self._ly.shape[0] else NULL
        cdef int status
        if not warm and self._plain:
            free(d)
            with nogil:
                status = self._start_plain()
            return status
        if warm:
            xi, si = x, s2
            if xi.shape[0] != self.NBC or si.shape[0] != self.NBC:
                free(d)
                raise ValueError("Shard.start: one value a block coordinate")
        with nogil:
            for ch in range(self.chunk_off.shape[0] - 1):    # every slot at the prior (empty lanes stay there)
                k = self.order[self.chunk_off[ch]]
                p = self.blk_pat[k]
                q0 = self._chunk_q0[ch]
                for u in range((self._chunk_q0[ch + 1] - q0) // 8):
                    mu, s0 = self.pmu[p][u], 1.0 / self.pp[p][u]
                    for q in range(q0 + 8 * u, q0 + 8 * u + 8):
                        LX[q] = mu
                        LS[q] = s0
                        LY[q] = 0.0
            for k in range(self.NB):
                p, c0, q = self.blk_pat[k], self.blk_c0[k], self._bq[k]
                n = self.blk_c0[k + 1] - c0
                self._idle[k] = not warm
                if warm:
                    for u in range(n):
                        self._lx[q + 8 * u] = xi[c0 + u]
                        self._ls[q + 8 * u] = si[c0 + u]
                        d[u] = xi[c0 + u] - self.pmu[p][u]
                    grind_ln_symv(<int> n, self.q[p], self.ld[p], d, &d[n])
                    for u in range(n):
                        self._ly[q + 8 * u] = d[n + u]
        free(d)
        return self.combine()

    cdef int _start_plain(self) noexcept nogil:
        """:meth:`start` at the prior for a plain structure: every lane of a pattern holds the
        same x = mu, s2 = 1/p, y = 0, so exp(min(s2/2, 700)), exp(min(x + s2/2, 700)) and zeta~
        are made once a chunk (the values combine makes: :meth:`_update_plain` reads them)."""
        cdef i64 ch, k, p, n, u, q, q0, lane, t
        cdef double mu, s0, h, e, z, top
        cdef int status = 0
        cdef double *LX = &self._lx[0] if self._lx.shape[0] else NULL
        cdef double *LY = &self._ly[0] if self._ly.shape[0] else NULL
        cdef double *LS = &self._ls[0] if self._ls.shape[0] else NULL
        cdef double *LH = &self._lh[0] if self._lh.shape[0] else NULL
        cdef double *LE = &self._le[0] if self._le.shape[0] else NULL
        cdef const i64 *st = &self._slot_t[0] if self._slot_t.shape[0] else NULL
        for k in range(self.NB):
            self._idle[k] = 1
        for ch in range(self.chunk_off.shape[0] - 1):
            k = self.order[self.chunk_off[ch]]
            p = self.blk_pat[k]
            q0 = self._chunk_q0[ch]
            n = (self._chunk_q0[ch + 1] - q0) // 8
            z = 0.0
            top = -INFINITY
            for u in range(n):
                mu, s0 = self.pmu[p][u], 1.0 / self.pp[p][u]
                h = grind_ln_exp(0.5 * s0 if 0.5 * s0 < EXP_MAX else EXP_MAX)
                e = mu + 0.5 * s0
                top = e if e > top else top
                e = grind_ln_exp(e if e < EXP_MAX else EXP_MAX)
                z += e
                for q in range(q0 + 8 * u, q0 + 8 * u + 8):
                    LX[q] = mu
                    LS[q] = s0
                    LY[q] = 0.0
                    LH[q] = h
                    LE[q] = e
            if top > EXP_MAX:
                status = 1
            elif z == 0.0:
                status = 2
            for lane in range(self.chunk_off[ch + 1] - self.chunk_off[ch]):
                t = st[q0 + lane]
                self._zeta[t] = z
                self._lz[t] = log(z)
        self._cached = status == 0
        self._stale = True
        return status

    cdef void _sync(self) noexcept nogil:
        """m~, v~ and exp(min(m~ + v~/2, 700)) of the instances from the lanes, where a plain
        round or start left them behind."""
        cdef i64 q, f
        if not self._stale:
            return
        for q in range(self._slot_f.shape[0]):
            f = self._slot_f[q]
            if f >= 0:
                self._m[f] = self._lx[q]
                self._v[f] = self._ls[q]
                self._ee[f] = self._le[q]
        self._stale = False

    def combine(self):
        """m~ = sum_j w x_j, v~ = sum_j w^2 s2_j over the blocks covering each coordinate, and
        zeta~_t = sum_i exp(min(m~ + v~/2, 700)).  Returns 0, or 1 if an m~ + v~/2 exceeds 700,
        2 if a zeta~ underflows to 0 (grind.infer.ln.closed_zeta's errors)."""
        self._ready()
        cdef int status
        with nogil:
            status = self._combine()
        return status

    cdef int _combine(self, bint afresh=True) noexcept nogil:
        """:meth:`combine`; ``afresh`` False: m~ and v~ as :meth:`_update` left them (it moves them
        with every block's step), only the exps and zeta~ anew."""
        cdef i64 ch, p, f, t, i, q, q0, u, n, lane
        cdef double w, top, z, e
        self._cached = False
        if afresh:
            self._stale = False
        else:
            self._sync()
        if self.C == 0:
            return 0
        cdef double *M = &self._m[0]
        cdef double *V = &self._v[0]
        cdef double *EE = &self._ee[0]
        cdef const double *LX = &self._lx[0]
        cdef const double *LS = &self._ls[0]
        cdef const i64 *sf = &self._slot_f[0]
        cdef const i64 *q0s = &self._chunk_q0[0]
        cdef const i64 *ic0 = &self.inst_c0[0]
        cdef const double *pw
        for i in range(self.C if afresh else 0):
            M[i] = 0.0
            V[i] = 0.0
        # slot by slot: the blocks adding to one m~ (at most one of each group) come in group order,
        # as they would block by block
        for ch in range(self.chunk_off.shape[0] - 1 if afresh else 0):
            pw = self.pw[self.blk_pat[self.order[self.chunk_off[ch]]]]
            q0 = q0s[ch]
            n = (q0s[ch + 1] - q0) // 8
            for u in range(n):
                w = pw[u]
                for lane in range(8):
                    q = q0 + 8 * u + lane
                    f = sf[q]
                    if f >= 0:
                        M[f] += w * LX[q]
                        V[f] += w * w * LS[q]
        for i in range(self.C):
            e = M[i] + 0.5 * V[i]
            EE[i] = grind_ln_exp(e if e < EXP_MAX else EXP_MAX)
        for t in range(self.T):
            top = -INFINITY
            z = 0.0
            for i in range(ic0[t], ic0[t + 1]):
                e = M[i] + 0.5 * V[i]
                top = e if e > top else top
                z += EE[i]
            if top > EXP_MAX:
                return 1
            if z == 0.0:
                return 2
            self._zeta[t] = z
            self._lz[t] = log(z)
        return 0

    def weights(self, double[::1] lw):
        """exp(psi~) of every rule the sentences read (lw, aligned with ``loc_f``):
        psi~ = m~ - log zeta~ + 1 - sum exp(min(m~ + v~/2, 700)) / zeta~; 1 for a rule of a
        one-rule multinomial."""
        if lw.shape[0] != self.NL:
            raise ValueError("Shard.weights: one weight a local rule")
        cdef double *corr = <double *> malloc(max(self.T, 1) * sizeof(double))
        cdef i64 t, j, f, q
        if corr == NULL:
            raise MemoryError()
        with nogil:
            if self._plain and self._cached:      # m~ = x; corr = 0 (zeta~ is the sum of the slots' E)
                for j in range(self.NL):
                    q = self._loc_q[j]
                    lw[j] = self._lx[q] - self._lz[self._loc_t[j]] if q >= 0 else 0.0
            else:
                self._corr(corr)
                for j in range(self.NL):
                    f = self.loc_f[j]
                    t = self.c_inst[f] if f >= 0 else 0
                    lw[j] = self._m[f] - self._lz[t] + corr[t] if f >= 0 else 0.0
            for j in range(self.NL):
                lw[j] = grind_ln_exp(lw[j])
        free(corr)

    cdef void _corr(self, double *corr) noexcept nogil:
        """psi~ = m~ - log zeta~ + corr[t]: corr = 1 - sum exp(min(m~ + v~/2, 700)) / zeta~ (0 while
        zeta~ is the closed form of the current m~, v~, as the same sum)."""
        cdef i64 t, i
        cdef double e
        self._sync()
        for t in range(self.T):
            e = 0.0
            for i in range(self.inst_c0[t], self.inst_c0[t + 1]):
                e += self._ee[i]
            corr[t] = 1.0 - e / self._zeta[t]

    def set_counts(self, const double[::1] lc, const double[::1] logz):
        """F from the expected counts of the local rules (aligned with ``loc_f``); 0 for a
        sentence without a parse (log Z not finite)."""
        if lc.shape[0] != self.NL or logz.shape[0] != self.B:
            raise ValueError("Shard.set_counts: sizes")
        cdef i64 b, i, j, k, nt
        cdef double *tgt
        cdef const i64 *at
        if self._plain:                     # into the lane slots (F made from them when read)
            nt = self._la.shape[0]
            tgt = &self._la[0] if nt else NULL
            at = &self._loc_q[0] if self.NL else NULL
        else:
            nt = self.C
            tgt = &self._F[0] if nt else NULL
            at = &self.loc_f[0] if self.NL else NULL
        with nogil:
            for i in range(nt):
                tgt[i] = 0.0
            for b in range(self.B):
                if not (logz[b] > -INFINITY and logz[b] < INFINITY):
                    continue
                for j in range(self.loc_off[b], self.loc_off[b + 1]):
                    k = at[j]
                    if k >= 0:
                        tgt[k] += lc[j]
        self._la_ok, self._f_ok = self._plain, not self._plain

    def update(self, i64 rounds=1):
        """``rounds`` rounds of steps 2-4 for every sentence with F fixed (module docstring).
        Returns (status, mu~ solver iterations): status as :meth:`combine`, or 3 if a
        covariance was not positive definite in a solve."""
        self._ready()
        cdef int status = 0
        cdef i64 its[2]
        cdef i64 r
        its[0] = its[1] = 0
        with nogil:
            for r in range(rounds):
                if self._plain:
                    status = self._update_plain(its)
                else:
                    status = self._update(its)
                    if status == 0:
                        status = self._combine(False)
                if status:
                    break
        return status, its[0], its[1]

    cdef int _update_plain(self, i64 *its) noexcept nogil:
        """:meth:`_update` and then ``_combine(False)`` for a plain structure: each instance is one
        block (lane) over all of it with w = 1, so m~ = x and v~ = s2 slot by slot, and every
        value of a chunk is read contiguously from its lanes.  Per slot, exp(min(s2/2, 700)) (H)
        and exp(min(x + s2/2, 700)) (E) are kept from the last round: b = c H, the solve's first
        b exp(x) = c E, beta = c exp(x) is its last b exp(x) over H, the sigma~^2 solve's first
        exp is H, and the new E is beta H / c (exp where c = 0).  zeta~ is summed lane by
        lane into zeta~ and log zeta~ of the instances; m~, v~ and exp(m~ + v~/2) are left behind
        (:meth:`_sync` makes them: what _combine makes, the same values up to rounding)."""
        cdef i64 n = self.maxn, ch, lane, u, p, q, q0
        cdef size_t nv = 12 * n + 10 * n + GRIND_LN_KMAX * (GRIND_LN_KMAX + 2) + GRIND_LN_KMAX * GRIND_LN_KMAX + 17
        cdef double *vb = <double *> aligned_alloc(64, nv * 64)   # lane vectors of 8 doubles
        cdef const double *va                            # a = F, the chunk's lane slots of _la
        cdef double *vbb = vb + 8 * n
        cdef double *ve = vb + 16 * n
        cdef double *vbeta = vb + 24 * n
        cdef double *vw2 = vb + 32 * n
        cdef double *vp = vb + 40 * n
        cdef double *act = vb + 48 * n
        cdef double *vwork = vb + 48 * n + 8             # the solves' scratch; the mu~ solve's last e at its start
        cdef double *vx
        cdef double *vy
        cdef double *vs
        cdef double *H
        cdef double *E
        cdef const i64 *qf
        cdef const double *pmu
        cdef const double *ppp
        cdef i64 blk[8]
        cdef i64 tl[8]
        cdef double cl[8]
        cdef double ic[8]
        cdef double zl[8]
        cdef double top[8]
        cdef double Nl[8]
        cdef double h, z
        cdef const double *v0
        cdef int far
        cdef i64 last_p = -1
        cdef int status = 0, got, nl
        cdef double *LX = &self._lx[0] if self._lx.shape[0] else NULL
        cdef double *LY = &self._ly[0] if self._ly.shape[0] else NULL
        cdef double *LS = &self._ls[0] if self._ls.shape[0] else NULL
        cdef double *LH = &self._lh[0] if self._lh.shape[0] else NULL
        cdef double *LE = &self._le[0] if self._le.shape[0] else NULL
        cdef double *Z = &self._zeta[0] if self.T else NULL
        cdef double *LZ = &self._lz[0] if self.T else NULL
        cdef const i64 *q0s = &self._chunk_q0[0]
        cdef const i64 *st = &self._slot_t[0] if self._slot_t.shape[0] else NULL
        cdef i64 NS = self._lx.shape[0]
        if vb == NULL:
            return 4
        self._need_la()
        cdef const double *LA = &self._la[0] if NS else NULL
        if not self._cached:
            for q in range(NS):
                h = 0.5 * LS[q]
                LH[q] = grind_ln_exp(h if h < EXP_MAX else EXP_MAX)
                h = LX[q] + h
                LE[q] = grind_ln_exp(h if h < EXP_MAX else EXP_MAX)
        self._cached = False
        for q in range(8 * self.maxn):                # w^2 = 1 (plain)
            vw2[q] = 1.0
        for ch in range(self.chunk_off.shape[0] - 1):
            nl = <int> (self.chunk_off[ch + 1] - self.chunk_off[ch])
            p = self.blk_pat[self.order[self.chunk_off[ch]]]
            q0 = q0s[ch]
            n = (q0s[ch + 1] - q0) // 8
            pmu, ppp = self.pmu[p], self.pp[p]
            if p != last_p:                           # p_U by lane: a pattern's chunks come one after another
                last_p = p
                for u in range(n):
                    for lane in range(8):
                        vp[8 * u + lane] = ppp[u]
            vx, vy, vs, H, E, va = LX + q0, LY + q0, LS + q0, LH + q0, LE + q0, LA + q0
            for lane in range(8):
                Nl[lane] = 0.0
            for u in range(n):                        # N = sum of a, lane by lane
                for lane in range(8):
                    Nl[lane] += va[8 * u + lane]
            for lane in range(8):                     # c = N / zeta~ of the lane's instance, fixed through the round
                act[lane] = 0.0
                cl[lane] = 0.0
                blk[lane] = -1
                tl[lane] = -1
                if lane < nl:
                    blk[lane] = self.order[self.chunk_off[ch] + lane]
                    tl[lane] = st[q0 + lane]
                    cl[lane] = Nl[lane] / Z[tl[lane]] if Nl[lane] > 0.0 else 0.0
            for u in range(n):
                for lane in range(8):
                    q = 8 * u + lane
                    vbb[q] = cl[lane] * H[q]
                    ve[q] = cl[lane] * E[q]
            for lane in range(nl):
                self._idle[blk[lane]] = cl[lane] == 0.0
                if cl[lane] == 0.0:                   # no data: the maximiser is mu exactly
                    for u in range(n):
                        vx[u * 8 + lane] = pmu[u]
                        vy[u * 8 + lane] = 0.0
                else:
                    act[lane] = 1.0
            got = grind_ln_mu_batch(<int> n, <grind_v8d *> va, <grind_v8d *> vbb, self.pw[p], self.sig[p], self.q[p],
                                    self.ld[p], pmu, <grind_v8d *> vx, <grind_v8d *> vy, <grind_v8d *> act, GTOL,
                                    MAXITER, <grind_v8d *> vwork, <grind_v8d *> ve, NULL)
            if got == -2:
                status = 3
                break
            its[0] += got
            for q in range(8 * n):                    # beta = c exp(x): the last b exp(x) over H
                vbeta[q] = vwork[q] / H[q]
            its[1] += grind_ln_sigma(<int> (8 * n), vbeta, vw2, vp, vs, STOL, SITERS, vwork, H)
            v0 = vwork + 16 * n                       # the sigma~^2 solve's start, whose exp H is
            for lane in range(8):
                ic[lane] = 1.0 / cl[lane] if cl[lane] > 0.0 else 0.0
            far = 0                                   # H anew: H exp((s2 - s2')/2) where s2 moved little
            for q in range(8 * n):
                far += (fabs(0.5 * (vs[q] - v0[q])) > 1.0 / 64.0) | (0.5 * v0[q] >= 699.0)
            if far == 0:
                for u in range(n):                    # E = exp(x) H = beta H / c (an idle lane's below)
                    for lane in range(8):
                        q = 8 * u + lane
                        H[q] = H[q] * grind_ln_exp_small(0.5 * (vs[q] - v0[q]))
                        E[q] = vbeta[q] * H[q] * ic[lane]
            else:
                for u in range(n):
                    for lane in range(8):
                        q = 8 * u + lane
                        h = 0.5 * vs[q]
                        H[q] = grind_ln_exp(h if h < EXP_MAX else EXP_MAX)
                        E[q] = vbeta[q] * H[q] * ic[lane]
            for lane in range(nl):
                if cl[lane] == 0.0:
                    for u in range(n):
                        q = 8 * u + lane
                        h = vx[q] + 0.5 * vs[q]
                        E[q] = grind_ln_exp(h if h < EXP_MAX else EXP_MAX)
            for lane in range(8):
                zl[lane] = 0.0
                top[lane] = -INFINITY
            for u in range(n):                        # zeta~ lane by lane, in the instance's coordinate order
                for lane in range(8):
                    q = 8 * u + lane
                    zl[lane] += E[q]
                    h = vx[q] + 0.5 * vs[q]
                    top[lane] = h if h > top[lane] else top[lane]
            for lane in range(nl):
                if top[lane] > EXP_MAX:
                    status = 1
                elif zl[lane] == 0.0:
                    status = 2
                Z[tl[lane]] = zl[lane]
                LZ[tl[lane]] = log(zl[lane])
            if status:
                break
        free(vb)
        self._cached = status == 0
        self._stale = True
        return status

    cdef int _update(self, i64 *its) noexcept nogil:
        """One round: the blocks chunk by chunk (``chunk_off`` / ``order``: up to eight blocks of
        one pattern, the chunks of a group before those of the next), each chunk's mu~ solves
        at once (grind_ln_mu_batch, a block a lane), then their sigma~^2 solves, both in place
        on the lane-ordered x, y, s2.  The instances' values are gathered through the slot maps
        (``_slots``); the exps of b and beta run as separate contiguous loops (vectorised),
        c_t = 0 in an empty lane making both 0."""
        cdef i64 n = self.maxn, ch, lane, k, u, p, f, t, i, q
        cdef double *c = <double *> malloc(max(self.T, 1) * sizeof(double))
        cdef size_t nv = 12 * n + 10 * n + GRIND_LN_KMAX * (GRIND_LN_KMAX + 2) + GRIND_LN_KMAX * GRIND_LN_KMAX + 17
        cdef double *vb = <double *> aligned_alloc(64, nv * 64)   # lane vectors of 8 doubles
        cdef double *va = vb
        cdef double *vbb = vb + 8 * n
        cdef double *vx
        cdef double *vy
        cdef double *vs
        cdef double *vxo = vb + 32 * n
        cdef double *vso = vb + 40 * n
        cdef double *vw2 = vb + 48 * n
        cdef double *vbeta = vb + 56 * n
        cdef double *vp = vb + 64 * n
        cdef double *vc = vb + 72 * n                   # c_t of each slot (0: an empty lane)
        cdef double *varg = vb + 80 * n                 # the exps' arguments
        cdef double *ve = vb + 16 * n                   # plain: b exp(w x) = c_t exp(min(m~ + v~/2, 700)), as combine left it
        cdef double *act = vb + 96 * n
        cdef double *vwork = vb + 96 * n + 8           # the mu~ solves' scratch, and the sigma~^2 solves' (8 n)
        cdef const i64 *qf
        cdef const i64 *qt
        cdef i64 blk[8]
        cdef const double *pw
        cdef const double *pmu
        cdef const double *ppp
        cdef double N, w, e
        cdef int status = 0, got, nl, idle
        # raw pointers: the compiler then keeps them in registers (no reloads through self)
        cdef double *LX = &self._lx[0] if self._lx.shape[0] else NULL
        cdef double *LY = &self._ly[0] if self._ly.shape[0] else NULL
        cdef double *LS = &self._ls[0] if self._ls.shape[0] else NULL
        cdef double *M = &self._m[0] if self.C else NULL
        cdef double *V = &self._v[0] if self.C else NULL
        cdef const double *F = &self._F[0] if self.C else NULL
        cdef const i64 *bc0 = &self.blk_c0[0]
        cdef const double *EE = &self._ee[0] if self.C else NULL
        cdef const i64 *sf = &self._slot_f[0] if self._slot_f.shape[0] else NULL
        cdef const i64 *st = &self._slot_t[0] if self._slot_t.shape[0] else NULL
        cdef double lane_data[8]
        if c == NULL or vb == NULL:
            free(c); free(vb)
            return 4
        self._need_F()
        for t in range(self.T):                       # c_t = N_t / zeta~_t, fixed through the round
            N = 0.0
            for i in range(self.inst_c0[t], self.inst_c0[t + 1]):
                N += F[i]
            c[t] = N / self._zeta[t] if N > 0.0 else 0.0
        for ch in range(self.chunk_off.shape[0] - 1):
            nl = <int> (self.chunk_off[ch + 1] - self.chunk_off[ch])
            k = self.order[self.chunk_off[ch]]
            p = self.blk_pat[k]
            n = bc0[k + 1] - bc0[k]
            pw, pmu, ppp = self.pw[p], self.pmu[p], self.pp[p]
            qf, qt = sf + self._chunk_q0[ch], st + self._chunk_q0[ch]
            vx, vy, vs = LX + self._chunk_q0[ch], LY + self._chunk_q0[ch], LS + self._chunk_q0[ch]
            for lane in range(8):
                act[lane] = 0.0
                blk[lane] = self.order[self.chunk_off[ch] + lane] if lane < nl else -1
            for u in range(n):                        # gather; b = c_t exp(min(m~ - w x + v~/2, 700))
                w = pw[u]
                for q in range(8 * u, 8 * u + 8):
                    vw2[q] = w * w
                    vp[q] = ppp[u]
                    f = qf[q]
                    if f < 0:                         # an empty lane: no data, at the prior (start)
                        va[q], vc[q], varg[q] = 0.0, 0.0, 0.0
                        continue
                    va[q] = w * F[f]
                    vc[q] = c[qt[q]]
                    varg[q] = M[f] - w * vx[q] + 0.5 * V[f]
            for q in range(8 * n):
                e = varg[q]
                vbb[q] = vc[q] * grind_ln_exp(e if e < EXP_MAX else EXP_MAX)
            if self._plain:
                for q in range(8 * n):
                    f = qf[q]
                    ve[q] = vc[q] * EE[f] if f >= 0 else 0.0
            for lane in range(8):
                lane_data[lane] = 0.0
            for u in range(n):                        # a lane has data where some a or b is not 0
                for lane in range(8):
                    lane_data[lane] += (va[8 * u + lane] != 0.0) + (vbb[8 * u + lane] != 0.0)
            for q in range(8 * n):                    # x before this round: m~ moves by w (x - xo) below
                vxo[q] = vx[q]
            for lane in range(nl):
                idle = lane_data[lane] == 0.0
                self._idle[blk[lane]] = idle
                if idle:                              # no data: the maximiser is mu exactly
                    for u in range(n):
                        vx[u * 8 + lane] = pmu[u]
                        vy[u * 8 + lane] = 0.0
                else:
                    act[lane] = 1.0
            got = grind_ln_mu_batch(<int> n, <grind_v8d *> va, <grind_v8d *> vbb, pw, self.sig[p], self.q[p], self.ld[p],
                                    pmu, <grind_v8d *> vx, <grind_v8d *> vy, <grind_v8d *> act, GTOL, MAXITER,
                                    <grind_v8d *> vwork, <grind_v8d *> ve if self._plain else NULL, NULL)
            if got == -2:
                status = 3
                break
            its[0] += got
            for u in range(n):                        # beta = c_t exp(min(m~ + (v~ - w^2 s2)/2, 700))
                w = pw[u]
                for q in range(8 * u, 8 * u + 8):
                    f = qf[q]
                    varg[q] = 0.0
                    if f < 0:
                        continue
                    M[f] += w * (vx[q] - vxo[q])
                    varg[q] = M[f] + 0.5 * (V[f] - vw2[q] * vs[q])
            for q in range(8 * n):
                e = varg[q]
                vbeta[q] = vc[q] * grind_ln_exp(e if e < EXP_MAX else EXP_MAX)
                vso[q] = vs[q]                        # the sigma~^2 solves start at s2 (kept in vso)
            its[1] += grind_ln_sigma(<int> (8 * n), vbeta, vw2, vp, vs, STOL, SITERS, vwork, NULL)
            for q in range(8 * n):
                if qf[q] >= 0:
                    V[qf[q]] += vw2[q] * (vs[q] - vso[q])
        free(c); free(vb)
        return status

    def kl(self):
        """Per sentence, its (not idle) blocks' part of sum_j KL_j beyond the prior's closed form:
        1/2 sum over block coordinates of [p s2 - 1 - log s2 - log p + (x - mu) y]."""
        self._ready()
        out = np.zeros(self.B)
        kb = np.zeros(self.NB)
        cdef double[::1] o = out
        cdef double[::1] K = kb
        cdef i64 b, k, u, p, n, q, q0, ch, lane, nl
        cdef double acc, ls
        cdef double lane_acc[8]
        with nogil:
            for ch in range(self.chunk_off.shape[0] - 1):     # per block, in the lanes' order (contiguous)
                nl = self.chunk_off[ch + 1] - self.chunk_off[ch]
                p = self.blk_pat[self.order[self.chunk_off[ch]]]
                q0 = self._chunk_q0[ch]
                n = (self._chunk_q0[ch + 1] - q0) // 8
                for lane in range(8):
                    lane_acc[lane] = -(n + self._lp[p])
                for u in range(n):
                    for lane in range(8):
                        q = q0 + 8 * u + lane
                        ls = self._ls[q]
                        lane_acc[lane] += (self.pp[p][u] * ls - log(ls)
                                           + (self._lx[q] - self.pmu[p][u]) * self._ly[q])
                for lane in range(nl):
                    K[self.order[self.chunk_off[ch] + lane]] = lane_acc[lane]
            for b in range(self.B):
                acc = 0.0
                for k in range(self.blk_off[b], self.blk_off[b + 1]):
                    if not self._idle[k]:
                        acc += K[k]
                o[b] = 0.5 * acc
        return out

    def data_term(self):
        """Per sentence, sum over its instances of F . psi~ (the fixed-count objective's data part)."""
        out = np.zeros(self.B)
        cdef double[::1] o = out
        cdef double *corr = <double *> malloc(max(self.T, 1) * sizeof(double))
        cdef i64 b, t, i
        cdef double acc
        if corr == NULL:
            raise MemoryError()
        with nogil:
            self._need_F()
            self._corr(corr)
            for b in range(self.B):
                acc = 0.0
                for t in range(self.inst_off[b], self.inst_off[b + 1]):
                    for i in range(self.inst_c0[t], self.inst_c0[t + 1]):
                        acc += self._F[i] * (self._m[i] - self._lz[t] + corr[t])
                o[b] = acc
        free(corr)
        return out

    def accumulate(self, const double[::1] weight, list pools, const i64[:, ::1] where,
                   const i64[::1] ld, const i64[::1] uidx, const i64[::1] u0, const unsigned char[::1] by_y,
                   double[::1] cnt):
        """Add, over the (not idle) blocks of the sentences b with weight[b] > 0, weight[b] times:
        at pattern p's places, x_U to A1, s2_U to SD and x_U x_U^T to A2; or, where by_y[p], y to
        A1, s2_U to SD, y y^T to A2 and 1 to CU (the experts whose uncovered coordinates
        x_R = mu_R + Sigma_RU y follow: their x - mu is Sigma times y scattered into the expert).
        ``where[p]`` = (pool, offset) pairs of A1, SD, A2 (leading dimension ld[p]), CU into the
        float64 arrays ``pools``; coordinate u at index uidx[u0[p] + u] there.  Adds the weights
        of each pattern's blocks to cnt[p].  The outer products of a pattern's blocks go to BLAS
        as one matrix product a batch of blocks."""
        cdef i64 b, k, u, v, p, n, i, j, L, q, r, r1, m, nb
        cdef double *s1
        cdef double *sd
        cdef double *s2
        cdef double *cu
        cdef double wb
        if where.shape[0] != self.P or where.shape[1] != 8 or ld.shape[0] != self.P or u0.shape[0] != self.P \
                or cnt.shape[0] != self.P or weight.shape[0] != self.B or by_y.shape[0] != self.P:
            raise ValueError("Shard.accumulate: sizes")
        cdef i64 G = len(pools), pi, o
        cdef const double **base = <const double **> malloc(max(G, 1) * sizeof(double *))
        cdef i64 *plen = <i64 *> malloc(max(G, 1) * sizeof(i64))
        cdef i64 *size = <i64 *> calloc(max(self.P, 1), sizeof(i64))
        cdef double **P = <double **> calloc(4 * max(self.P, 1), sizeof(double *))
        cdef i64 *bsent = <i64 *> malloc(max(self.NB, 1) * sizeof(i64))
        cdef double *X = <double *> malloc(2 * ACC_BATCH * self.maxn * sizeof(double) + self.maxn * self.maxn * sizeof(double))
        cdef double *XW = X + ACC_BATCH * self.maxn
        cdef double *C = XW + ACC_BATCH * self.maxn
        cdef const double *lane
        cdef int bad = 0, contiguous
        if base == NULL or plen == NULL or size == NULL or P == NULL or bsent == NULL or X == NULL:
            free(base); free(plen); free(size); free(P); free(bsent); free(X)
            raise MemoryError()
        _bases(pools, base, plen)
        for k in range(self.NB):
            size[self.blk_pat[k]] = self.blk_c0[k + 1] - self.blk_c0[k]
        for k in range(self.P):
            n = size[k]
            for j in range(4):
                if j == 3 and not by_y[k]:
                    continue
                pi, o = where[k, 2 * j], where[k, 2 * j + 1]
                L = (n - 1) * ld[k] + n if j == 2 else n
                if n and (pi < 0 or pi >= G or o < 0 or o + L > plen[pi] or u0[k] + n > uidx.shape[0]):
                    bad = 1
                if n and not bad:
                    P[4 * k + j] = <double *> base[pi] + o
        free(base); free(plen); free(size)
        if bad:
            free(P); free(bsent); free(X)
            raise ValueError("Shard.accumulate: a pattern reaches past its pool")
        with nogil:
            for b in range(self.B):
                for k in range(self.blk_off[b], self.blk_off[b + 1]):
                    bsent[k] = b
            r = 0
            while r < self.NB:                 # the blocks of one pattern are a run of ``order``
                p = self.blk_pat[self.order[r]]
                r1 = r
                while r1 < self.NB and self.blk_pat[self.order[r1]] == p:
                    r1 += 1
                n = self.blk_c0[self.order[r] + 1] - self.blk_c0[self.order[r]]
                s1, sd, s2, cu = P[4 * p], P[4 * p + 1], P[4 * p + 2], P[4 * p + 3]
                contiguous = uidx[u0[p]] == 0 and uidx[u0[p] + n - 1] == n - 1     # U = 0..n-1
                m = 0
                for i in range(r, r1):
                    k = self.order[i]
                    wb = weight[bsent[k]]
                    if not wb > 0.0 or self._idle[k]:
                        continue
                    q = self._bq[k]
                    cnt[p] += wb
                    lane = &self._ly[q] if by_y[p] else &self._lx[q]     # coordinate u at lane[8 u]
                    for u in range(n):
                        j = uidx[u0[p] + u]
                        X[m * n + u] = lane[8 * u]
                        XW[m * n + u] = wb * lane[8 * u]
                        s1[j] += wb * lane[8 * u]
                        sd[j] += wb * self._ls[q + 8 * u]
                        if cu != NULL:
                            cu[j] += wb
                    m += 1
                    if m == ACC_BATCH:
                        _outer_add(n, m, X, XW, s2, ld[p], &uidx[u0[p]], contiguous, C)
                        m = 0
                if m:
                    _outer_add(n, m, X, XW, s2, ld[p], &uidx[u0[p]], contiguous, C)
                r = r1
        free(P); free(bsent); free(X)


cdef void _outer_add(i64 n, i64 m, double *X, double *XW, double *s2, i64 ld, const i64 *U, int contiguous,
                     double *C) noexcept nogil:
    """s2[U, U] += sum over the m rows x of X (w x the rows of XW) of x (w x)^T: one BLAS matrix
    product (X and XW row-major m x n; s2 row-major with leading dimension ld)."""
    cdef int ni = <int> n, mi = <int> m, lc = <int> (ld if contiguous else n)
    cdef double one = 1.0, zero = 0.0
    cdef char tn = b'N', tt = b'T'
    cdef i64 u, v
    dgemm(&tn, &tt, &ni, &ni, &mi, &one, X, &ni, XW, &ni, &one if contiguous else &zero,
          s2 if contiguous else C, &lc)
    if not contiguous:
        for u in range(n):
            for v in range(n):
                s2[U[u] * ld + U[v]] += C[u * n + v]


def spd_inverse(const double[:, :, ::1] S):
    """(S^-1, log|S|) of each symmetric positive definite matrix of the stack S (n, L, L), by
    Cholesky factorisation (LAPACK dpotrf, dpotri); None if one is not positive definite."""
    cdef Py_ssize_t n = S.shape[0], L = S.shape[1], k, i, j
    if S.shape[2] != L:
        raise ValueError("spd_inverse: square matrices")
    Q = np.array(S, dtype=np.float64, order="C")
    ld = np.zeros(n)
    cdef double[:, :, ::1] q = Q
    cdef double[::1] d = ld
    cdef int m = <int> L, info = 0
    cdef char lo = b'L'
    with nogil:
        for k in range(n):
            if L == 0:
                break
            dpotrf(&lo, &m, &q[k, 0, 0], &m, &info)      # column-major lower = row-major upper
            if info:
                break
            for i in range(L):
                d[k] += 2.0 * log(q[k, i, i])
            dpotri(&lo, &m, &q[k, 0, 0], &m, &info)
            if info:
                break
            for i in range(L):
                for j in range(i):
                    q[k, i, j] = q[k, j, i]      # the lower triangle from the upper
    if info:
        return None
    return Q, ld


def kernel_exp(const double[::1] x, bint small=False):
    """The kernel's exp (csrc/ln_kernels.h) of every element of ``x``; ``small``: the polynomial
    it uses for |x| <= 1/64 (grind_ln_exp_small).  For tests."""
    out = np.empty(x.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        o[i] = grind_ln_exp_small(x[i]) if small else grind_ln_exp(x[i])
    return out


def mu_solve(const double[:, ::1] a, const double[:, ::1] b, const double[::1] w, const double[:, ::1] S,
             const double[:, ::1] Q, const double[::1] mu, double[:, ::1] x, double[:, ::1] y):
    """The mu~ block solve (csrc/ln_kernels.h's grind_ln_mu_batch) of eight lanes in place on
    ``x``, ``y`` (n x 8: coordinate by lane), each lane started where it is; returns (steps,
    size of the Woodbury set A).  For tests."""
    cdef int n = <int> S.shape[0], m = -1, got
    if not (a.shape[0] == b.shape[0] == x.shape[0] == y.shape[0] == w.shape[0] == mu.shape[0] == Q.shape[0] == n
            and a.shape[1] == b.shape[1] == x.shape[1] == y.shape[1] == 8 and S.shape[1] == Q.shape[1] == n):
        raise ValueError("mu_solve: shapes")
    cdef size_t nv = 12 * n + 10 * n + GRIND_LN_KMAX * (GRIND_LN_KMAX + 2) + GRIND_LN_KMAX * GRIND_LN_KMAX + 17
    cdef double *vb = <double *> aligned_alloc(64, (nv + 4 * n + 1) * 64)
    if vb == NULL:
        raise MemoryError()
    cdef double *va = vb + 8 * nv
    cdef double *vbb = va + 8 * n
    cdef double *vx = vbb + 8 * n
    cdef double *vy = vx + 8 * n
    cdef double *act = vy + 8 * n
    cdef int i, l
    for i in range(n):
        for l in range(8):
            va[8 * i + l], vbb[8 * i + l] = a[i, l], b[i, l]
            vx[8 * i + l], vy[8 * i + l] = x[i, l], y[i, l]
    for l in range(8):
        act[l] = 1.0
    got = grind_ln_mu_batch(n, <grind_v8d *> va, <grind_v8d *> vbb, &w[0], &S[0, 0], &Q[0, 0], n, &mu[0],
                            <grind_v8d *> vx, <grind_v8d *> vy, <grind_v8d *> act, GTOL, MAXITER,
                            <grind_v8d *> vb, NULL, &m)
    for i in range(n):
        for l in range(8):
            x[i, l], y[i, l] = vx[8 * i + l], vy[8 * i + l]
    free(vb)
    return got, m
