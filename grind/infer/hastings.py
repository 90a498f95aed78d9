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

Sentences are visited in a fresh random order each sweep.  Per sentence only
the LHSs of the two trees change, so the counts f, the per-LHS totals and the
proposal weight vector are updated incrementally for those LHSs only.  The
per-sweep objective is the collapsed log P(t, w | alpha) (JGG Eq. 3); the
acceptance rate goes to Step.extra["acceptance"].
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from grind.infer.gibbs import (SamplerConfig, TreeSampler, collapsed_logprob, initial_trees, pack_trees, schedule,
                    tree_counts, unpack_trees)
from grind.infer.training import Step


class TreeUses(NamedTuple):
    """What an MH update needs of a tree, over the joint index space of the
    counts vector (rule r at r, LHS A at R + A; see :class:`Hastings`)."""

    uses: np.ndarray       # sorted: each node's rule, then each node's R + LHS
    rep: np.ndarray        # the uses that repeat an earlier one (index space)
    rank: np.ndarray       # j >= 1: how many equal uses precede it (float)
    sign: np.ndarray       # +1 for a rule, -1 for a LHS
    touch: np.ndarray      # every rule of every LHS the tree uses


class Hastings(TreeSampler):
    """JGG 2007's collapsed Metropolis-Hastings sampler as a training-loop algorithm.

    ``self.n`` holds the counts of all trees (or all but t_i during its
    update) in one int64 vector: n[r] = f_r for the R rules, n[R + A] = n_A =
    sum_{R_A} f_r; ``self.a`` the matching hyperparameters (alpha_r, alpha_A =
    sum_{R_A} alpha_r), so c = n + a in both halves.
    """

    name = "hastings"
    output = "pseudo-counts"
    Config = SamplerConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng):
        cfg = SamplerConfig.of(cfg)
        self.g, self.parser, self.rng = grammar, getattr(estep, "parser", estep), rng
        self.prior = np.asarray(prior, dtype=np.float64)
        R, nA = len(grammar), len(grammar.nonterminals)
        self.lhs, self.lhs_at = grammar.lhs, R + grammar.lhs          # rule -> its LHS's slot
        self.a = np.concatenate([self.prior, np.bincount(self.lhs, weights=self.prior, minlength=nA)])
        order = np.argsort(self.lhs, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(self.lhs, minlength=nA))])
        self._rules_of = [order[ptr[A]:ptr[A + 1]] for A in range(nA)]   # R_A
        self.iterations = cfg.iterations
        self.temp_start, self.anneal = schedule(cfg)
        self._set_trees(initial_trees(self.parser, theta0, rng))
        self.it = 0

    def _set_trees(self, trees, counts=None):
        self.trees = trees
        self.ok = np.array([k for k, d in enumerate(trees) if d is not None], dtype=np.int64)
        self.uses = [None if d is None else self._uses(d) for d in trees]
        f = tree_counts(trees, len(self.g)) if counts is None else np.array(counts, dtype=np.int64)
        self.n = np.concatenate([f, np.bincount(self.lhs, weights=f, minlength=len(self.a) - len(f))
                                 .astype(np.int64)])

    # -- one sweep ------------------------------------------------------------

    def update(self):
        """One sweep: an MH update of every tree, in a random order."""
        T = self.temperature(self.it + 1)
        self._inv = 1.0 / T
        self._w = self._proposal(np.arange(len(self.g)))
        self._dirty = np.zeros(0, dtype=np.int64)
        accepted = sum(self._resample(int(i)) for i in self.rng.permutation(self.ok))
        self.it += 1
        extra = {"acceptance": accepted / len(self.ok), "temperature": T}
        return Step(self.it, collapsed_logprob(self.g, self.counts, self.prior), self.it * len(self.ok),
                    extra=extra)

    def _resample(self, i: int) -> bool:
        """One MH update of t_i; returns whether the proposal was accepted."""
        old = self.uses[i]
        np.add.at(self.n, old.uses, -1)                                # counts of t_{-i}
        r = np.concatenate([self._dirty, old.touch])
        self._w[r] = self._proposal(r)                                 # theta'^(1/T)
        d = self.parser.sample(self._w, self.rng, [i])[0]
        keep = old
        if d is not None:                               # None: numerically impossible proposal
            new = self._uses(d)
            logr = (self._excess(new) - self._excess(old)) * self._inv
            if logr >= 0 or self.rng.random() < np.exp(logr):
                self.trees[i], self.uses[i], keep = d, new, new
        np.add.at(self.n, keep.uses, 1)
        self._dirty = keep.touch
        return keep is not old

    def _uses(self, d) -> TreeUses:
        """The :class:`TreeUses` of derivation ``d``."""
        R, rules = len(self.g), np.sort(d[:, 0])
        uses = np.concatenate([rules, np.sort(self.lhs_at[rules])])     # sorted: rules < R <= R + A
        j = np.arange(len(uses)) - np.searchsorted(uses, uses)        # rank among equal uses
        lhs = uses[len(rules):][j[len(rules):] == 0] - R
        touch = np.concatenate([self._rules_of[A] for A in lhs.tolist()])
        m = j > 0
        rep = uses[m]
        return TreeUses(uses, rep, j[m].astype(np.float64), np.where(rep < R, 1.0, -1.0), touch)

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
        return {**pack_trees(self.trees), "counts": self.counts.copy(), "it": self.it}

    def set_state(self, s):
        self._set_trees(unpack_trees(s), s["counts"])
        self.it = int(s["it"])
