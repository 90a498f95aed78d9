"""The logistic-normal model I E-step of a shard, compiled (csrc/ln.pyx; the
math is :mod:`grind.infer.ln`'s docstring, steps 1-4 of Appendix B).

A sentence is held only where its parses read the grammar: its *instances*,
the multinomials with >= 2 rules some rule of which it can read
(:meth:`grind.kernels.contract.ChartParser.local_tables`), and its *blocks*,
the experts that cover an instance, each over the coordinates U of the
instances it covers.  Every other coordinate of the sentence's q(eta) is at
the prior's closed form -- mu~ = mu, sigma~^2 = 1 / (Sigma^-1)_ii, and in a
covered expert the uncovered coordinates R at x_R = mu_R + Sigma_RU y with
y = Sigma_UU^-1 (x_U - mu_U) -- which is where the numpy E-step
(:meth:`grind.infer.ln.LogisticNormal.e_step`) puts them after every round:
there they carry no data, so the marginal over U is the whole problem
(:func:`grind.infer.ln.optimise_mu`).  Their part of sum_j KL_j is then the
same for every sentence, KL0 = 1/2 sum_j [log|Sigma_j| + sum_i log (Sigma_j^-1)_ii],
and a block adds 1/2 sum_U [p s2 - 1 - log s2 - log p] + 1/2 (x_U - mu_U) . y.

A *pattern* is an (expert, U) pair; the blocks of a pattern share its prior
(Sigma_UU, its inverse, mu_U, p_U = (Sigma^-1)_ii, the weights w = 1 / |J_k|).
A pattern covering its whole expert (every plain-structure block) reads
them in place from the per-group arrays.

Per shard and cycle: the kernel writes exp(psi~) for the rules the
sentences read, the chart kernel parses every sentence under its own weights
in one call (:meth:`~grind.kernels.contract.ChartParser.inside_outside_local`),
and the kernel takes the counts and runs a round of the block updates
(:meth:`_ln.Shard.update`).  Same updates, same order, same fixed points as
the numpy E-step: the solves converge tighter (mu~ to a gradient of 1e-11,
sigma~^2 to 1e-13), so results agree to about 1e-10 (tests/test_ln_reference.py).
"""
from __future__ import annotations

import numpy as np

from grind.errors import NumericalError

#: blocks of at most this many coordinates are solved by exact Newton steps, which read Sigma_UU^-1
#: (csrc/ln_kernels.h: GRIND_LN_NSMALL)
NSMALL = 4

#: Kernel status -> the error it stands for (:meth:`_ln.Shard.combine`, :meth:`_ln.Shard.update`).
STATUS = {1: "logistic normal: a mu~ + sigma~^2/2 goes above 700, where exp overflows and the bound would be "
             "wrong; softmax is unchanged by a constant added to one multinomial's mu: recentre the prior's mu "
             "(e.g. an --ln-init file's)",
          2: "logistic normal: every mu~ + sigma~^2/2 of a multinomial is below -745, so zeta~ underflows to 0 "
             "and its sentences would drop out of the bound; recentre the prior's mu (e.g. an --ln-init file's)",
          3: "a logistic-normal covariance is not positive definite",
          4: "out of memory in the logistic-normal E-step"}


def _check(status: int) -> None:
    if status:
        raise NumericalError(STATUS.get(status, f"logistic-normal E-step kernel status {status}"))


def _kernel():
    from grind.kernels import _ln
    return _ln


def coverage(st) -> list:
    """Per multinomial k, the experts covering it: (group, member, positions of its rules in the expert)."""
    cover = [[] for _ in range(st.pk.K)]
    for gi, gr in enumerate(st.groups):
        for e in range(gr.E):
            ks = gr.kof[e][gr.mask[e]]
            for k in np.unique(ks):
                cover[int(k)].append((gi, e, np.flatnonzero(gr.mask[e] & (gr.kof[e] == k))))
    return cover


class Layout:
    """What the sentences ``idx`` of a shard read, as :class:`_ln.Shard` takes it
    (``arrays``), with ``local`` (the parser's :class:`~grind.kernels.contract.LocalRules`)
    and the patterns: per pattern its group, member and U (positions in the expert);
    ``full`` where U is the whole expert.  Built once per structure and shard."""

    def __init__(self, parser, idx, st, cover=None):
        pk = st.pk
        self.st, self.idx = st, np.asarray(idx, dtype=np.int64)
        self.local = local = parser.local_tables(self.idx)
        B, K = len(self.idx), pk.K
        rk = np.empty(pk.n_rules, dtype=np.int64)
        ri = np.empty(pk.n_rules, dtype=np.int64)
        kk, ii = np.nonzero(pk.mask)
        rk[pk.rows[kk, ii]], ri[pk.rows[kk, ii]] = kk, ii
        rules = np.asarray(local.rules, dtype=np.int64)
        sent = np.repeat(np.arange(B, dtype=np.int64), np.diff(local.off))
        k_of = rk[rules]
        free = pk.sizes[k_of] > 1
        ukeys, inv = np.unique(sent[free] * K + k_of[free], return_inverse=True)
        inst_sent, inst_k = ukeys // K, ukeys % K
        d = pk.sizes[inst_k].astype(np.int64)
        inst_c0 = np.concatenate([[0], np.cumsum(d)]).astype(np.int64)
        loc_f = np.full(len(rules), -1, dtype=np.int64)
        loc_f[free] = inst_c0[inv.reshape(-1)] + ri[rules[free]]
        a = dict(inst_off=np.searchsorted(inst_sent, np.arange(B + 1)).astype(np.int64), inst_c0=inst_c0,
                 c_inst=np.repeat(np.arange(len(ukeys), dtype=np.int64), d),
                 loc_off=np.asarray(local.off, dtype=np.int64), loc_f=loc_f)
        if st.is_plain:
            self._plain_blocks(st, inst_k, inst_c0, a)
        else:
            self._blocks(st, inst_k, inst_sent, inst_c0, a, coverage(st) if cover is None else cover)
        # chunks: up to eight blocks of one pattern (one from each of eight sentences), solved at
        # once; the chunks of a group come before those of the next (block coordinate ascent).
        # Within a pattern, the blocks by the share of their sentence's local rules that they
        # read, most first: a chunk's lanes run in lockstep, and blocks of about the same share
        # take about as many steps (12% fewer chunk steps than sentence order on the bench's
        # random corpus).  A group's blocks read none of one another's coordinates, so the order
        # within a group changes no solve.
        pat = a["blk_pat"]
        key = self.pat_g[pat] * (len(self.pat_g) + 1) + pat if len(pat) else pat
        reads = np.bincount(a["c_inst"][loc_f[free]], minlength=len(ukeys))
        sent = np.repeat(np.arange(B), np.diff(a["blk_off"]))
        first = a["bc_f"][a["blk_c0"][:-1]]
        share = reads[a["c_inst"][first]] / np.maximum(np.diff(a["loc_off"]), 1)[sent]
        order = np.lexsort((-share, key)).astype(np.int64)
        ks = key[order]
        run_start = np.flatnonzero(np.concatenate([[True], ks[1:] != ks[:-1]])) if len(ks) else np.zeros(0, np.int64)
        run_end = np.concatenate([run_start[1:], [len(ks)]]).astype(np.int64)
        cuts = [np.arange(s0, e0, 8) for s0, e0 in zip(run_start, run_end)]
        a["order"] = order
        a["chunk_off"] = np.concatenate(cuts + [[len(ks)]]).astype(np.int64)
        self.arrays = a
        self.B = B
        #: the E-step's shard of this layout, made once and restarted every iteration (:func:`run_shard`)
        self.shard = None
        self._sums_plan = None

    def _plain_blocks(self, st, inst_k, inst_c0, a):
        """One block a instance, over the whole of the multinomial's own expert."""
        where = {st.experts[j][1][0]: (gi, e) for gi, gr in enumerate(st.groups) for e, j in enumerate(gr.members)}
        ks, pat = np.unique(inst_k, return_inverse=True)
        ge = np.array([where[int(k)] for k in ks], dtype=np.int64).reshape(-1, 2)
        order = np.lexsort((ge[pat.reshape(-1), 0], np.repeat(np.arange(len(a["inst_off"]) - 1),
                                                                 np.diff(a["inst_off"]))))
        d = np.diff(inst_c0)[order]
        a["blk_off"] = a["inst_off"]
        a["plain"] = True                # every instance one block over all of it (csrc/ln.pyx: Shard._plain)
        a["blk_pat"] = pat.reshape(-1)[order].astype(np.int64)
        a["blk_c0"] = np.concatenate([[0], np.cumsum(d)]).astype(np.int64)
        a["bc_f"] = (np.repeat(inst_c0[order] - a["blk_c0"][:-1], d) + np.arange(a["blk_c0"][-1])).astype(np.int64)
        self.pat_g, self.pat_e = ge[:, 0], ge[:, 1]
        self.pat_u = [np.arange(st.groups[g].L) for g in self.pat_g]
        self.pat_full = np.ones(len(ks), dtype=bool)

    def _blocks(self, st, inst_k, inst_sent, inst_c0, a, cover):
        """Blocks of any structure: per sentence, the experts covering its instances, in group order."""
        pk = st.pk
        pats, pat_g, pat_e, pat_u = {}, [], [], []
        blk_off, blk_pat, bc_f = [0], [], []
        inst_off = a["inst_off"]
        for b in range(len(inst_off) - 1):
            t0, t1 = inst_off[b], inst_off[b + 1]
            inst = {int(inst_k[t]): t for t in range(t0, t1)}
            blocks: dict = {}
            for k in inst:
                for gi, e, pos in cover[k]:
                    blocks.setdefault((gi, e), []).append((k, pos))
            for (gi, e), segs in sorted(blocks.items()):
                gr = st.groups[gi]
                U = np.sort(np.concatenate([pos for _, pos in segs]))
                key = (gi, e, U.tobytes())
                p = pats.get(key)
                if p is None:
                    p = pats[key] = len(pat_g)
                    pat_g.append(gi)
                    pat_e.append(e)
                    pat_u.append(U)
                blk_pat.append(p)
                kof = gr.kof[e, U]
                i = gr.tgt[e, U] - kof * pk.D
                bc_f.append(inst_c0[np.array([inst[int(k)] for k in kof], dtype=np.int64)] + i)
            blk_off.append(len(blk_pat))
        a["blk_off"] = np.array(blk_off, dtype=np.int64)
        a["blk_pat"] = np.array(blk_pat, dtype=np.int64)
        sizes = np.array([len(pat_u[p]) for p in blk_pat], dtype=np.int64)
        a["blk_c0"] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        a["bc_f"] = np.concatenate(bc_f).astype(np.int64) if bc_f else np.zeros(0, dtype=np.int64)
        self.pat_g = np.array(pat_g, dtype=np.int64)
        self.pat_e = np.array(pat_e, dtype=np.int64)
        self.pat_u = pat_u
        self.pat_full = np.array([len(u) == st.groups[g].L for g, u in zip(pat_g, pat_u)], dtype=bool)

    def sums_plan(self) -> dict:
        """Where :meth:`_ln.Shard.accumulate` adds each pattern's sums (:func:`shard_sums`),
        made once: the pools are A1, SD, A2 per group, then (y, y y^T, CU) of each group with
        shared experts (``has_y``); a pattern of a shared expert (``by_y``) adds y there."""
        if self._sums_plan is not None:
            return self._sums_plan
        st = self.st
        G, P = len(st.groups), self.n_patterns
        shared = shared_experts(st)
        has_y = [bool(s.any()) for s in shared]
        ybase = dict(zip([gi for gi in range(G) if has_y[gi]], range(3 * G, 3 * G + 3 * sum(has_y), 3)))
        g, e = self.pat_g, self.pat_e
        L = np.array([gr.L for gr in st.groups], dtype=np.int64)[g] if P else np.zeros(0, dtype=np.int64)
        by_y = np.array([shared[gi][ee] for gi, ee in zip(g, e)], dtype=np.uint8) if P else np.zeros(0, np.uint8)
        where = np.full((P, 8), -1, dtype=np.int64)
        where[:, 0], where[:, 1] = g, e * L
        where[:, 2], where[:, 3] = G + g, e * L
        where[:, 4], where[:, 5] = 2 * G + g, e * L * L
        for p in np.flatnonzero(by_y):
            yb = ybase[int(g[p])]
            where[p, 0], where[p, 4], where[p, 6], where[p, 7] = yb, yb + 1, yb + 2, e[p] * L[p]
        u0 = np.concatenate([[0], np.cumsum([len(u) for u in self.pat_u])]).astype(np.int64)
        uidx = np.concatenate(self.pat_u).astype(np.int64) if P else np.zeros(0, dtype=np.int64)
        self._sums_plan = dict(has_y=has_y, by_y=by_y, where=where, L=L, uidx=uidx, u0=u0[:-1].copy(),
                               sel=[g == gi for gi in range(G)])
        return self._sums_plan

    @property
    def n_patterns(self) -> int:
        return len(self.pat_g)

    @property
    def places(self):
        """:meth:`block_places`, made once."""
        if getattr(self, "_places", None) is None:
            self._places = self.block_places()
        return self._places

    def block_places(self):
        """Per block coordinate: (group, sentence of the shard, member, position in the expert)."""
        a = self.arrays
        sizes = np.diff(a["blk_c0"])
        pat = a["blk_pat"]
        sent = np.repeat(np.repeat(np.arange(self.B), np.diff(a["blk_off"])), sizes)
        pos = np.concatenate([self.pat_u[p] for p in pat]) if len(pat) else np.zeros(0, dtype=np.int64)
        return np.repeat(self.pat_g[pat], sizes), sent, np.repeat(self.pat_e[pat], sizes), pos


class Prior:
    """The prior of one iteration as the kernel reads it: per group mu, Sigma
    (:func:`grind.infer.ln.effective_sigma`), its inverse and log-determinant
    (``terms``, :meth:`grind.infer.ln.LogisticNormal._prior_terms`), the precision
    diagonals, and KL0 (module docstring)."""

    def __init__(self, st, Seff, terms):
        self.st, self.Seff, self.terms = st, Seff, terms
        self.mu = [np.ascontiguousarray(mu, dtype=np.float64) for mu, _, _ in terms]
        self.P = [np.ascontiguousarray(P, dtype=np.float64) for _, P, _ in terms]
        self.S = [np.ascontiguousarray(S, dtype=np.float64) for S in Seff]
        self.p = [np.ascontiguousarray(np.diagonal(P, axis1=-2, axis2=-1)) for P in self.P]
        self.w = [np.ascontiguousarray(gr.w, dtype=np.float64) for gr in st.groups]
        self.kl0 = float(sum(0.5 * (ld.sum() + np.where(gr.mask, np.log(p), 0.0).sum())
                             for gr, (_, _, ld), p in zip(st.groups, terms, self.p)))
        G = len(st.groups)
        #: pools of the whole-expert patterns: Sigma, Q, w, mu, p of group g at 5 g .. 5 g + 4
        self.pools = [x.reshape(-1) for g in range(G) for x in (self.S[g], self.P[g], self.w[g], self.mu[g], self.p[g])]
        self._partial: dict = {}

    def for_layout(self, lay, need_q=True):
        """(pools, where, ld) for :meth:`_ln.Shard.set_prior` of a shard with layout ``lay``.
        ``need_q`` False (a start at the prior): the inverse of a partial pattern's Sigma_UU is
        made only where the exact Newton solve reads it (at most NSMALL coordinates)."""
        P = lay.n_patterns
        where = np.zeros((P, 10), dtype=np.int64)
        ld = np.zeros(P, dtype=np.int64)
        g, e = lay.pat_g, lay.pat_e
        L = np.array([gr.L for gr in self.st.groups], dtype=np.int64)[g] if P else np.zeros(0, dtype=np.int64)
        for j, size in enumerate((L * L, L * L, L, L, L)):
            where[:, 2 * j] = 5 * g + j
            where[:, 2 * j + 1] = e * size
        ld[:] = L
        pools = list(self.pools)
        for p in np.flatnonzero(~lay.pat_full):
            U = lay.pat_u[p]
            arrays = self._partial_prior(int(g[p]), int(e[p]), U, need_q or len(U) <= NSMALL)
            for j, x in enumerate(arrays):
                where[p, 2 * j], where[p, 2 * j + 1] = len(pools), 0
                pools.append(x)
            ld[p] = len(U)
        return pools, where, ld

    def _partial_prior(self, g, e, U, with_q):
        """Sigma_UU, its inverse (Sigma_UU itself if not ``with_q``: not read), w, mu and p over U
        of member e of group g (kept per (g, e, U))."""
        key = (g, e, U.tobytes(), with_q)
        got = self._partial.get(key)
        if got is None:
            S = np.ascontiguousarray(self.S[g][e][np.ix_(U, U)]).reshape(-1)
            Q = np.linalg.inv(S.reshape(len(U), len(U))).reshape(-1) if with_q else S
            got = self._partial[key] = (S, Q, self.w[g][e, U].copy(), self.mu[g][e, U].copy(), self.p[g][e, U].copy())
        return got


def new_shard(lay, prior, init=None, reuse=False):
    """A :class:`_ln.Shard` for ``lay`` under ``prior``, started at the prior or at ``init``
    = (x, s2) per block coordinate.  ``reuse``: the layout's own shard (``lay.shard``, made
    on first use), its state overwritten."""
    sh = lay.shard if reuse else None
    if sh is None:
        sh = _kernel().Shard(lay.arrays, lay.n_patterns)
        if reuse:
            lay.shard = sh
    sh.set_prior(*prior.for_layout(lay, need_q=init is not None))
    _check(sh.start() if init is None else sh.start(*init))
    return sh


def run_shard(parser, lay, prior, cycles, init=None, trace=None):
    """Appendix B's cycles for the sentences of ``lay`` (module docstring): returns the
    shard (its final q(eta) and counts), log Z and the bound per sentence
    (log Z - KL0 - the blocks' KL; the numpy E-step's ``bound``).  ``trace`` (a list)
    gets the bound per cycle.  The shard is the layout's own (``lay.shard``): the next call
    on ``lay`` overwrites its state (``init`` is read first)."""
    sh = new_shard(lay, prior, init, reuse=True)
    lw = np.empty(sh.NL)
    for c in range(cycles + 1):
        sh.weights(lw)
        counts, logz = parser.inside_outside_local(lay.local, lw)
        if np.isnan(logz).any() or not np.all(np.isfinite(counts)):
            raise NumericalError("the logistic-normal E-step produced NaN")
        sh.set_counts(counts, logz)
        if trace is not None:
            trace.append(bound(sh, logz, prior))
        if c == cycles:
            break
        _check(sh.update()[0])
    return sh, logz, bound(sh, logz, prior)


def bound(sh, logz, prior):
    """Eq. 14 per sentence: log Z - sum_j KL_j (log Z taken as 0 where not finite)."""
    return np.where(np.isfinite(logz), logz, 0.0) - prior.kl0 - sh.kl()


def shared_experts(st) -> list:
    """Per group, which members cover several multinomials (a shared expert: a sentence's
    block of it may leave coordinates uncovered)."""
    return [np.array([len(st.experts[j][1]) > 1 for j in gr.members], dtype=bool) for gr in st.groups]


def shard_sums(lay, sh, ok, prior, weight=None):
    """The M-step's sums over the sentences ``ok`` of the shard, each counted ``weight`` times
    (per sentence of the shard; default once), in three parts (added up by :func:`finish_sums`;
    together :func:`grind.infer.ln._shard_sums` of the dense q(eta) the numpy E-step would hold):

    * per group (sum mu~, sum mu~ mu~^T, sum sigma~^2) over the blocks of experts that
      cover one multinomial (sigma~^2: every expert's covered coordinates);
    * per group, the number of those sentences in which each expert sat at the prior's
      closed form;
    * per group with shared experts, (blocks, sum y, sum y y^T, blocks covering each
      coordinate) of those experts, y = Sigma_UU^-1 (x_U - mu_U) in the expert's
      coordinates (0 elsewhere): then x - mu = Sigma y over the whole expert."""
    st = prior.st
    G = len(st.groups)
    plan = lay.sums_plan()
    acc = [np.zeros((gr.E, gr.L)) for gr in st.groups] + [np.zeros((gr.E, gr.L)) for gr in st.groups] \
        + [np.zeros((gr.E, gr.L, gr.L)) for gr in st.groups]
    yacc = [(np.zeros((gr.E, gr.L)), np.zeros((gr.E, gr.L, gr.L)), np.zeros((gr.E, gr.L))) if y else None
            for gr, y in zip(st.groups, plan["has_y"])]
    pools = [x.reshape(-1) for x in acc] + [x.reshape(-1) for ya in yacc if ya is not None for x in ya]
    e, by_y = lay.pat_e, plan["by_y"]
    cnt = np.zeros(lay.n_patterns)
    wt = np.where(ok, 1.0 if weight is None else weight, 0.0)
    sh.accumulate(wt, pools, plan["where"], plan["L"], plan["uidx"], plan["u0"], by_y, cnt)
    s1, sd, s2 = acc[:G], acc[G:2 * G], acc[2 * G:]
    M = float(wt.sum())
    n_un = [np.full(gr.E, M) for gr in st.groups]
    ys = []
    for gi in range(G):
        sel = plan["sel"][gi]
        np.subtract.at(n_un[gi], e[sel], cnt[sel])
        if yacc[gi] is None:
            ys.append(None)
            continue
        blocks = np.zeros(st.groups[gi].E)
        np.add.at(blocks, e[sel], np.where(by_y[sel] != 0, cnt[sel], 0.0))
        ys.append((blocks,) + yacc[gi])
    return [(s1[gi], s2[gi], sd[gi]) for gi in range(G)], n_un, ys


def zero_sums(st):
    """What :func:`shard_sums` returns for no sentences."""
    shared = shared_experts(st)
    return ([(np.zeros((gr.E, gr.L)), np.zeros((gr.E, gr.L, gr.L)), np.zeros((gr.E, gr.L))) for gr in st.groups],
            [np.zeros(gr.E) for gr in st.groups],
            [(np.zeros(gr.E), np.zeros((gr.E, gr.L)), np.zeros((gr.E, gr.L, gr.L)), np.zeros((gr.E, gr.L)))
             if y.any() else None for gr, y in zip(st.groups, shared)])


def add_shard_sums(acc, part):
    """``acc`` (None, or what :func:`shard_sums` returned) plus ``part``, element by element."""
    if acc is None:
        return [[tuple(x.copy() for x in t) for t in part[0]], [x.copy() for x in part[1]],
                [None if t is None else tuple(x.copy() for x in t) for t in part[2]]]
    for dst, src in zip(acc[0], part[0]):
        for x, y in zip(dst, src):
            x += y
    for x, y in zip(acc[1], part[1]):
        x += y
    for dst, src in zip(acc[2], part[2]):
        if dst is not None:
            for x, y in zip(dst, src):
                x += y
    return acc


def finish_sums(S1, S2, n_un, ys, prior) -> None:
    """Add to the M-step's sums (S1 per group (E, L), S2 (E, L, L) with the sigma~^2 on its
    diagonal, holding the blocks of one-multinomial experts) the experts that sat at the
    prior's closed form, ``n_un`` (per group (E,)) times each (mu~ = mu, sigma~^2 =
    1 / (Sigma^-1)_ii, 1 in padding), and the blocks of shared experts from their
    y-sums ``ys`` (:func:`shard_sums`): with c blocks, x - mu = Sigma y, and
    sigma~^2 = 1 / (Sigma^-1)_ii on the coordinates a block leaves uncovered,

        sum x = c mu + Sigma sum y,
        sum x x^T = c mu mu^T + mu (Sigma sum y)^T + (Sigma sum y) mu^T + Sigma (sum y y^T) Sigma."""
    for gi, (s1, s2, n, gr, mu, pdiag) in enumerate(zip(S1, S2, n_un, prior.st.groups, prior.mu, prior.p)):
        i = np.arange(gr.L)
        unit = np.where(gr.mask, 1.0 / pdiag, 1.0)
        s1 += n[:, None] * mu
        s2 += n[:, None, None] * mu[:, :, None] * mu[:, None, :]
        s2[:, i, i] += n[:, None] * unit
        if ys[gi] is None:
            continue
        c, ysum, yy, cu = ys[gi]
        rows = np.flatnonzero(c > 0)
        if not rows.size:
            continue
        S, m, cr = prior.S[gi][rows], mu[rows], c[rows]
        d = np.einsum("eij,ej->ei", S, ysum[rows])
        s1[rows] += cr[:, None] * m + d
        s2[rows] += (cr[:, None, None] * m[:, :, None] * m[:, None, :] + m[:, :, None] * d[:, None, :]
                     + d[:, :, None] * m[:, None, :] + S @ yy[rows] @ S)
        s2[rows[:, None], i[None, :], i[None, :]] += (cr[:, None] - cu[rows]) * unit[rows]


def to_dense(lay, sh, prior, vmu, vs2, lo) -> None:
    """Write the shard's q(eta) into the dense arrays (per group (n, E, L)) at rows lo..lo+B
    (``lo`` None: at the rows of its sentences, ``lay.idx``):
    every expert at the prior's closed form (padding mu~ = 0, sigma~^2 = 1), then the blocks'
    coordinates, and the uncovered coordinates of partly covered experts."""
    st, B = prior.st, lay.B
    rows = lay.idx if lo is None else lo + np.arange(B)
    for gi, gr in enumerate(st.groups):
        vmu[gi][rows] = np.where(gr.mask, prior.mu[gi], 0.0)
        vs2[gi][rows] = np.where(gr.mask, 1.0 / prior.p[gi], 1.0)
    g, b, e, pos = lay.places
    for gi in range(len(st.groups)):
        sel = g == gi
        vmu[gi][rows[b[sel]], e[sel], pos[sel]] = sh.x[sel]
        vs2[gi][rows[b[sel]], e[sel], pos[sel]] = sh.s2[sel]
    a = lay.arrays
    for k in np.flatnonzero(~lay.pat_full[a["blk_pat"]]):
        p = a["blk_pat"][k]
        gi, ee, U = int(lay.pat_g[p]), int(lay.pat_e[p]), lay.pat_u[p]
        R = np.setdiff1d(np.arange(st.groups[gi].L), U)
        c0, c1 = a["blk_c0"][k], a["blk_c0"][k + 1]
        sent = np.searchsorted(a["blk_off"], k, side="right") - 1
        vmu[gi][rows[sent], ee, R] = prior.mu[gi][ee, R] + prior.S[gi][ee][np.ix_(R, U)] @ sh.y[c0:c1]


def from_dense(lay, vmu, vs2, lo):
    """(x, s2) per block coordinate from dense per-group arrays (n, E, L), rows lo..lo+B
    (``lo`` None: the rows of its sentences, ``lay.idx``)."""
    g, b, e, pos = lay.places
    rows = lay.idx if lo is None else lo + np.arange(lay.B)
    x, s2 = np.empty(len(g)), np.empty(len(g))
    for gi in range(len(vmu)):
        sel = g == gi
        x[sel] = vmu[gi][rows[b[sel]], e[sel], pos[sel]]
        s2[sel] = vs2[gi][rows[b[sel]], e[sel], pos[sel]]
    return x, s2


def profile(lay, sh, prior, ok, rounds, weight=None):
    """The Newton M-step's objective on one shard (:meth:`grind.infer.ln.LogisticNormal._profile`):
    from the shard's q(eta) under ``prior`` (y recomputed), ``rounds`` rounds of the
    fixed-count updates, then sum over the sentences ``ok`` of F . psi~ - sum_j KL_j (each
    ``weight`` times, per sentence; default once).  Returns (objective, the updated shard)."""
    new = new_shard(lay, prior, (sh.x, sh.s2))
    new.F[:] = sh.F
    _check(new.update(rounds)[0])
    obj = new.data_term() - prior.kl0 - new.kl()
    return float(obj[ok].sum() if weight is None else (weight[ok] * obj[ok]).sum()), new
