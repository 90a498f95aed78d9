"""The collapsed Metropolis-Hastings sampler for PCFGs (Johnson, Griffiths &
Goldwater 2007, §5), annealed as in their §6.

theta is integrated out; the state is one tree t_i per sentence.  With
f(t_{-i}) the rule counts of all trees but t_i, the target conditional is the
collapsed predictive (JGG §5; a ratio of two instances of Eq. 3)

    P(t_i | t_{-i}, alpha) = prod_A B(f_A(t_{-i}) + f_A(t_i) + alpha_A)
                                    / B(f_A(t_{-i}) + alpha_A),

restricted to the trees of w_i.  It cannot be sampled with a chart (the rules
of t_i interact through the Gamma functions), so JGG propose from the PCFG
with the posterior mean of theta given t_{-i},

    theta'_r = (f_r(t_{-i}) + alpha_r) / sum_{r' in R_A} (f_r'(t_{-i}) + alpha_r'),
    t'_i ~ P(t | w_i, theta') ∝ prod_r theta'_r^{f_r(t)}      (the kernel, idx=[i]),

and accept it with probability

    min{1, P(t'_i | t_{-i}, alpha) P(t_i | w_i, theta')
           / (P(t_i | t_{-i}, alpha) P(t'_i | w_i, theta'))}      (Z(w_i) cancels).

With c_r = f_r(t_{-i}) + alpha_r, C_A = sum_{R_A} c_r and rising factorials,
P(t | t_{-i}, alpha) = prod_r prod_{j<f_r(t)} (c_r + j) / prod_A prod_{j<n_A(t)} (C_A + j)
(n_A = sum_{R_A} f_r), and theta'^{f(t)} = prod_r c_r^{f_r} / prod_A C_A^{n_A}, so

    log [P(t | t_{-i}, alpha) / theta'^{f(t)}]
        = sum_r sum_{j<f_r(t)} log(1 + j/c_r) - sum_A sum_{j<n_A(t)} log(1 + j/C_A)

(:meth:`Hastings._excess`): only a tree's *repeated* uses of a rule or LHS
matter, and the log acceptance ratio is excess(t') - excess(t_i).

Annealing (cfg.temp_start = T0 > 1): sweep k of K (K = cfg.iterations, or
cfg.anneal_sweeps when set) runs at T_k = T0 + (1 - T0)(k - 1)/(K - 1), then
T = 1.  At temperature T the target is P(t_i | t_{-i}, alpha)^(1/T) (JGG §6
raise the probabilities to the power 1/T), so the chain's stationary distribution
is ∝ P(t | alpha)^(1/T).  The proposal is tempered the same way,
q_T(t) ∝ theta'^{f(t)/T} (kernel weights theta'^(1/T)); its normaliser cancels,
so the acceptance probability is

    min{1, ([P(t'_i | t_{-i}) theta'^{f(t_i)}] / [P(t_i | t_{-i}) theta'^{f(t'_i)}])^(1/T)}
      = min{1, exp((excess(t'_i) - excess(t_i)) / T)}.

Batched proposals (cfg.proposal_batch = N > 1, ``grind train --proposal-batch``).
With N = 1 a sweep calls the kernel once per sentence, and its fixed cost per
call (a pass over every weight) dominates on large grammars.  With N > 1 the
random visiting order is cut into batches B of N sentences; at the start of a
batch the proposal grammar is computed once from the counts of the trees
OUTSIDE the batch,

    theta^B_r = b_r / b_A,   b = f(t_{-B}) + alpha   (b_A = sum_{R_A} b_r),
    t'_i ~ q_B(t | w_i) ∝ (theta^B)^{f(t)/T}   for every i in B   (ONE kernel call, idx = B),

and the sentences of B are then updated one by one, in order, each against the
exact collapsed target given the CURRENT trees of all other sentences
(including the already updated ones of B; the counts are updated after every
acceptance).  The acceptance probability is JGG's (their §5 Metropolis-Hastings
ratio, with the PCFG proposal theta' replaced by theta^B)

    A(t_i -> t'_i) = min{1, [P(t'_i | t_{-i}, alpha) q_B(t_i | w_i)
                             / (P(t_i | t_{-i}, alpha) q_B(t'_i | w_i))]^(1/T)},

where P(t | t_{-i}, alpha) = prod_A B(f_A(t_{-i}) + f_A(t) + alpha_A) / B(f_A(t_{-i}) + alpha_A)
as above and q_B is the grammar the proposal was drawn from (Z_B(w_i) cancels).
With c = f(t_{-i}) + alpha and rising factorials its log is
excess_B(t'_i) - excess_B(t_i), where

    excess_B(t) = sum_r sum_{j<f_r(t)} log((c_r + j) / b_r) - sum_A sum_{j<n_A(t)} log((C_A + j) / b_A)

(``excess`` in :meth:`Hastings._resample_batch`; it is :meth:`Hastings._excess` when c = b, so
N = 1 is the sampler above).  Why it stays exact: theta^B depends only on the
trees outside B, which do not change while B is processed, and never on t_i
(nor on any t_j, j in B), so for sentence i it is an *independence* proposal
given the rest of the state; drawing t'_i before the earlier sentences of B
are updated does not matter since the draw is independent of them.  Each
update therefore satisfies detailed balance for P(t_i | t_{-i}, alpha)^(1/T),
and the sweep, a composition of such updates, leaves P(t | alpha)^(1/T)
invariant.  The price is a proposal that ignores the other trees of B (a
lower acceptance rate when N is a large part of the corpus, and slower
mixing: on a 2-sentence DMV corpus at alpha 0.05-2 the exact one-sweep
kernel's second eigenvalue is 0.9956 with N = 2 against 0.863 with N = 1,
~229 sweeps to relax instead of ~7; a helper audit's measurement); N = 1 (the
default) is bit-identical to the per-sentence sampler.

The DMV kernel's sweep.  When the parser is the split-head DMV kernel
(:class:`~grind.kernels.dmv.DMVParser`, which has ``hastings_sweep``), a whole
sweep -- for every batch (N = 1: every sentence) the proposal weights computed
from the integer counts as needed (theta^B_r = ((f_r + alpha_r) / (f_A +
alpha_A))^(1/T), f the counts of the trees outside the batch), the inside
chart, the top-down tree draw, excess_B of both trees, the acceptance test and
the count update -- runs in one nogil call (csrc/dmv.pyx, Corpus.hastings), on
the same chain as above: same target, same proposals, same acceptance
probabilities, so the same stationary distribution.  Its random numbers are one
xoshiro256** stream per sweep seeded by ``rng.integers(2**63)`` after the
visiting order ``rng.permutation``, so a run is reproducible from ``--seed``
and resumes bit-identically, but its draws differ from the Python path's
(``Hastings.fast = False`` forces that path, the reference).  The general CKY
kernel (:class:`~grind.kernels.cky.CKYParser`) has the same sweep for N = 1
(csrc/cky.pyx, Kernel.hastings: the proposal weights set in the kernel's own
arrays for the rules of the LHSs whose counts moved; batches take the Python
path); the segmentation kernel always takes the Python path.  The trees are then
kept as one int64 array of derivation rows, each sentence's from its offset with
room for the parser's ``tree_capacity()`` rows (the DMV's: exactly its 5n-1);
``self.trees`` is rebuilt from it when read.

Sentences are visited in a fresh random order each sweep.  Per sentence only
the LHSs of the two trees change, so the counts f, the per-LHS totals and the
proposal weight vector are updated incrementally for those LHSs only.  The
per-sweep objective is the collapsed log P(t, w | alpha) (JGG Eq. 3); the
acceptance rate goes to Step.extra["acceptance"].
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from grind.infer.config import config_class
from grind.infer.gibbs import (TreeSampler, collapsed_logprob, initial_trees, pack_trees, schedule,
                    tree_counts, unpack_trees)
from grind.infer.training import Step


class TreeUses(NamedTuple):
    """What an MH update needs of a tree, over the joint index space of the
    counts vector (rule r at r, LHS A at R + A; see :class:`Hastings`)."""

    uses: np.ndarray       # sorted: each node's rule, then each node's R + LHS
    rep: np.ndarray        # the uses that repeat an earlier one (index space)
    rank: np.ndarray       # j >= 1: how many equal uses precede it (float)
    sign: np.ndarray       # +1 for a rule, -1 for a LHS
    lhs: list              # the distinct LHSs the tree uses (its rules: Hastings._touch)


HastingsConfig = config_class("HastingsConfig", "hastings", "The Hastings sampler: the samplers' options and the "
                              "proposal batch.")


class Hastings(TreeSampler):
    """JGG 2007's collapsed Metropolis-Hastings sampler as a training-loop algorithm.

    ``self.n`` holds the counts of all trees (or all but t_i during its
    update) in one int64 vector: n[r] = f_r for the R rules, n[R + A] = n_A =
    sum_{R_A} f_r; ``self.a`` the matching hyperparameters (alpha_r, alpha_A =
    sum_{R_A} alpha_r), so c = n + a in both halves.
    """

    name = "hastings"
    output = "pseudo-counts"
    Config = HastingsConfig
    fast = True         # sweep in the parser's kernel when it has one (DMV); False: the Python path

    def __init__(self, grammar, estep, prior, theta0, cfg, rng):
        cfg = HastingsConfig.of(cfg)
        self.g, self.parser, self.rng = grammar, getattr(estep, "parser", estep), rng
        self.prior = np.asarray(prior, dtype=np.float64)
        R, nA = len(grammar), len(grammar.nonterminals)
        self.lhs = grammar.lhs
        self.lhs_at = np.ascontiguousarray(R + grammar.lhs, dtype=np.int64)   # rule -> its LHS's slot
        self.a = np.concatenate([self.prior, np.bincount(self.lhs, weights=self.prior, minlength=nA)])
        order = np.argsort(self.lhs, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(self.lhs, minlength=nA))])
        self._rules_of = [order[ptr[A]:ptr[A + 1]] for A in range(nA)]   # R_A
        self.iterations = cfg.iterations
        self.proposal_batch = int(cfg.proposal_batch)
        if self.proposal_batch > 1:
            self._lhs_at_list = self.lhs_at.tolist()
        self.temp_start, self.anneal = schedule(cfg)
        self._set_trees(initial_trees(self.parser, theta0, rng))
        self.it = 0

    def _set_trees(self, trees, counts=None):
        """The state: trees (a list, None for a skipped sentence) and their counts."""
        self._trees, self.uses, self._flat = list(trees), None, None
        self.ok = np.array([k for k, d in enumerate(self._trees) if d is not None], dtype=np.int64)
        f = tree_counts(self._trees, len(self.g)) if counts is None else np.array(counts, dtype=np.int64)
        self.n = np.concatenate([f, np.bincount(self.lhs, weights=f, minlength=len(self.a) - len(f))
                                 .astype(np.int64)])

    # -- the two representations of the trees -----------------------------------
    # Python path: self._trees (list of derivations) and self.uses; kernel path:
    # self._flat = (rows, row_off, tree_len): each tree at its row_off with room for the
    # parser's tree_capacity() rows (pack_trees' layout when they are all full).  At least one
    # is current; the other is None until it is needed.

    @property
    def trees(self) -> list:
        """The current derivation of every sentence (None: skipped)."""
        if self._trees is None:
            self._trees = unpack_trees(self._packed())
        return self._trees

    def _packed(self) -> dict:
        """The kernel path's trees in :func:`pack_trees`' layout (tree_rows, tree_len)."""
        rows, off, lens = self._flat
        if np.array_equal(np.diff(off), np.maximum(lens, 0)):          # no spare room (the DMV's trees)
            return {"tree_rows": rows, "tree_len": lens}
        keep = np.flatnonzero(lens > 0)
        idx = np.concatenate([np.arange(off[k], off[k] + lens[k]) for k in keep]) if keep.size else np.zeros(0, int)
        return {"tree_rows": rows[idx], "tree_len": lens}

    def _kernel_ready(self) -> bool:
        """Whether this sweep runs in the parser's kernel (building its state if so)."""
        if not (self.fast and callable(getattr(self.parser, "hastings_sweep", None))):
            return False
        if self.proposal_batch > 1 and not getattr(self.parser, "hastings_batch", True):
            return False
        if self._flat is None:
            trees = self._trees
            lens = np.array([-1 if d is None else len(d) for d in trees], dtype=np.int64)
            caps = np.asarray(self.parser.tree_capacity(), dtype=np.int64)
            if len(caps) != len(lens) or np.any(lens > caps):
                return False
            room = np.where(lens >= 0, caps, 0)
            off = np.concatenate([[0], np.cumsum(room)[:-1]]).astype(np.int64)
            rows = np.zeros((int(room.sum()), 3), dtype=np.int64)
            for k, d in enumerate(trees):
                if d is not None:
                    rows[off[k]:off[k] + len(d)] = d
            if rows.size and (rows[:, 0].min() < 0 or rows[:, 0].max() >= len(self.g)):
                return False
            self._flat = (rows, off, lens)
        return True

    def _python_ready(self):
        """Make self.trees / self.uses current for the Python path."""
        trees = self.trees
        if self.uses is None:
            uses = self._uses if self.proposal_batch == 1 else self._uses_batch
            self.uses = [None if d is None else uses(d) for d in trees]
        self._flat = None

    # -- one sweep ------------------------------------------------------------

    def update(self):
        """One sweep: an MH update of every tree, in a random order."""
        T = self.temperature(self.it + 1)
        self._inv = 1.0 / T
        if self._kernel_ready():
            order = self.rng.permutation(self.ok)
            seed = int(self.rng.integers(2 ** 63))
            rows, off, lens = self._flat
            try:
                accepted = self.parser.hastings_sweep(self.n, self.a, self.lhs_at, order, self.proposal_batch,
                                                      self._inv, rows, off, seed, lens=lens)
            finally:                                     # rows changed in place (also on NumericalError)
                self._trees = self.uses = None
        elif self.proposal_batch == 1:
            self._python_ready()
            self._w = self._proposal(np.arange(len(self.g)))
            self._dirty = np.zeros(0, dtype=np.int64)
            accepted = sum(self._resample(int(i)) for i in self.rng.permutation(self.ok))
        else:
            self._python_ready()
            order, N = self.rng.permutation(self.ok), self.proposal_batch
            accepted = sum(self._resample_batch(order[k:k + N]) for k in range(0, len(order), N))
        self.it += 1
        extra = {"acceptance": accepted / len(self.ok), "temperature": T, "parsed": len(self.ok)}
        return Step(self.it, collapsed_logprob(self.g, self.counts, self.prior), self.it * len(self.ok),
                    extra=extra)

    def _resample(self, i: int) -> bool:
        """One MH update of t_i; returns whether the proposal was accepted."""
        old = self.uses[i]
        np.add.at(self.n, old.uses, -1)                                # counts of t_{-i}
        r = np.concatenate([self._dirty, self._touch(old)])
        self._w[r] = self._proposal(r)                                 # theta'^(1/T)
        d = self.parser.sample(self._w, self.rng, [i])[0]
        keep = old
        if d is not None:                               # None: numerically impossible proposal
            new = self._uses(d)
            logr = (self._excess(new) - self._excess(old)) * self._inv
            if logr >= 0 or self.rng.random() < np.exp(logr):
                self.trees[i], self.uses[i], keep = d, new, new
        np.add.at(self.n, keep.uses, 1)
        self._dirty = self._touch(keep)
        return keep is not old

    def _resample_batch(self, batch) -> int:
        """MH updates of the trees of ``batch`` (sentence ids, in order) with
        proposals drawn in one kernel call from theta^B (see the module doc);
        returns the number accepted.  Trees are kept as :meth:`_uses_batch`
        lists (pure Python: a tree has a handful of rules)."""
        n, a, log, rand = self.n, self.a, math.log, self.rng.random
        ids = batch.tolist()
        cat = list(itertools.chain.from_iterable(self.uses[i][0] for i in ids))
        np.subtract.at(n, cat, 1)                                      # counts of t_{-B}
        b = n + a                                                      # b, joint index space
        w = b[:len(self.g)] / b[self.lhs_at]                           # theta^B
        if self._inv != 1.0:
            w **= self._inv                                            # (theta^B)^(1/T)
        np.add.at(n, cat, 1)
        props = self.parser.sample(w, self.rng, batch)

        def excess(t):
            """excess_B(t) over the current n = f(t_{-i})."""
            return math.fsum(s * (log(n[u] + a[u] + j) - log(b[u])) for u, j, s in zip(*t))

        accepted = 0
        for i, d in zip(ids, props):
            old = self.uses[i]
            for u in old[0]:
                n[u] -= 1                                              # counts of t_{-i}
            keep = old
            if d is not None:                           # None: numerically impossible proposal
                new = self._uses_batch(d)
                logr = (excess(new) - excess(old)) * self._inv
                if logr >= 0 or rand() < math.exp(logr):
                    self.trees[i], self.uses[i], keep = d, new, new
                    accepted += 1
            for u in keep[0]:
                n[u] += 1
        return accepted

    def _uses_batch(self, d) -> tuple:
        """(uses, ranks j >= 0, signs) of derivation ``d`` as lists: each node's
        rule (+1) and each node's R + LHS (-1), sorted, j = equal uses before it."""
        rules = sorted(d[:, 0].tolist())
        lhs_at = self._lhs_at_list
        uses = rules + sorted([lhs_at[r] for r in rules])
        ranks, signs, prev, j, R = [], [], -1, 0, len(self.g)
        for u in uses:
            j = j + 1 if u == prev else 0
            prev = u
            ranks.append(j)
            signs.append(1.0 if u < R else -1.0)
        return uses, ranks, signs

    def _touch(self, t: TreeUses) -> np.ndarray:
        """Every rule of every LHS tree ``t`` uses (the proposal weights its update changes)."""
        return np.concatenate([self._rules_of[A] for A in t.lhs])

    def _uses(self, d) -> TreeUses:
        """The :class:`TreeUses` of derivation ``d``."""
        R, rules = len(self.g), np.sort(d[:, 0])
        uses = np.concatenate([rules, np.sort(self.lhs_at[rules])])     # sorted: rules < R <= R + A
        j = np.arange(len(uses)) - np.searchsorted(uses, uses)        # rank among equal uses
        lhs = uses[len(rules):][j[len(rules):] == 0] - R
        m = j > 0
        rep = uses[m]
        return TreeUses(uses, rep, j[m].astype(np.float64), np.where(rep < R, 1.0, -1.0), lhs.tolist())

    def _excess(self, t: TreeUses) -> float:
        """log P(t | t_{-i}, alpha) - log theta'^{f(t)}
        = sum_r sum_{j<f_r(t)} log(1 + j/c_r) - sum_A sum_{j<n_A(t)} log(1 + j/C_A)
        with c = n + a the counts of t_{-i} plus alpha (the j = 0 terms are 0)."""
        return float(np.dot(t.sign, np.log1p(t.rank / (self.n[t.rep] + self.a[t.rep]))))

    def _proposal(self, r) -> np.ndarray:
        """theta'_r^(1/T) = ((f_r + alpha_r) / sum_{R_A} (f + alpha))^(1/T) for rules r."""
        A = self.lhs_at[r]
        w = (self.n[r] + self.a[r]) / (self.n[A] + self.a[A])
        return w if self._inv == 1.0 else w ** self._inv

    # -- the algorithm interface ------------------------------------------------

    @property
    def counts(self) -> np.ndarray:
        """f(t): the rule counts of the current trees."""
        return self.n[:len(self.g)]

    def get_state(self):
        if self._trees is None:                          # kernel path
            packed = {k: v.copy() for k, v in self._packed().items()}
        else:
            packed = pack_trees(self._trees)
        return {**packed, "counts": self.counts.copy(), "it": self.it}

    def set_state(self, s):
        self._set_trees(unpack_trees(s), s["counts"])
        self.it = int(s["it"])
