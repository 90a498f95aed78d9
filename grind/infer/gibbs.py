"""The (uncollapsed) Gibbs sampler for PCFGs (Johnson, Griffiths & Goldwater 2007, §3-4).

The state is one tree t_i per sentence w_i; theta is drawn afresh each sweep.
With f(t) the rule-count vector of the trees, f_A its restriction to the rules
R_A of LHS A and alpha_A the Dirichlet hyperparameters of R_A, one sweep is

    theta_A ~ Dirichlet(f_A(t) + alpha_A)       for every LHS A      (JGG §3)
    t_i     ~ P(t | w_i, theta)                 for every sentence   (JGG §4)

(the trees by the kernel's batched sampler, one call for the whole corpus),
so (theta, t) is a Markov chain whose stationary distribution is
P(theta, t | w, alpha); the trees alone are distributed as JGG Eq. 3:

    P(t | w, alpha)  ∝  prod_A B(f_A(t) + alpha_A) / B(alpha_A),
    B(a) = prod_r Gamma(a_r) / Gamma(sum_r a_r)      (multivariate beta),

whose log (the collapsed log P(t, w | alpha)) is the per-sweep objective.
The initial trees are drawn from P(t | w, theta0).  The output is the
posterior pseudo-counts alpha + f(t) of the final trees.

Annealing (cfg.temp_start = T0 > 1): sweep k of K (K = cfg.iterations, or
cfg.anneal_sweeps when set) runs at T_k = T0 + (1 - T0)(k - 1)/(K - 1), then
T = 1.  At temperature T the sweep is an exact Gibbs sweep for the tempered
joint  pi_T(theta, t) ∝ P(theta | alpha) prod_i P(t_i, w_i | theta)^(1/T):

    theta_A ~ Dirichlet(f_A(t)/T + alpha_A),
    t_i     ~ P(t | w_i, theta^(1/T))    (kernel weights theta_r^(1/T)),

whose tree marginal is prod_A B(f_A(t)/T + alpha_A) / B(alpha_A); at T = 1
this is the sampler above.

Dirichlet draws with tiny alpha: Gamma(a) underflows to 0 for a << 1, so
theta is drawn in log space, log X = log Gamma(a + 1) + log(U)/a for a < 1
(X = Gamma(a+1) U^(1/a) ~ Gamma(a)), and normalised by a per-LHS
log-sum-exp: theta_r may be 0, never NaN for alpha >= 1e-307; below that
log(U)/a can overflow to -inf for every rule of a left-hand side (at the
smallest normal alpha, 2.2e-308, about 1 draw in 4,000), which stops the run
with an error naming alpha.
"""
from __future__ import annotations

import math

import numpy as np

from grind import log
from grind.errors import NumericalError
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.dirichlet import log_rising
from grind.infer.training import Step


# ----------------------------------------------------------------------------- shared with hastings

def collapsed_logprob(grammar, counts, alpha) -> float:
    """log P(t, w | alpha) = sum_A [log B(f_A(t) + alpha_A) - log B(alpha_A)] (JGG Eq. 3)."""
    counts = np.asarray(counts, dtype=np.float64)
    nA = len(grammar.nonterminals)
    per_rule = log_rising(alpha, counts)
    fa = np.bincount(grammar.lhs, weights=counts, minlength=nA)
    aa = np.bincount(grammar.lhs, weights=alpha, minlength=nA)
    return math.fsum(per_rule) - math.fsum(log_rising(aa, fa))


def temperature(k: int, temp_start: float, sweeps: int) -> float:
    """T of sweep k (1-based): linear from temp_start at sweep 1 to 1 at sweep ``sweeps``, 1 after."""
    if temp_start <= 1.0 or sweeps <= 1 or k >= sweeps:
        return 1.0
    # never below 1: with a huge temp_start the sum cancels in floating point (1e16 + (1 - 1e16) = 0)
    return max(1.0, temp_start + (1.0 - temp_start) * ((k - 1) / (sweeps - 1)))


def schedule(cfg):
    """(temp_start, annealing sweeps) of a training config."""
    return float(cfg.temp_start), int(cfg.anneal_sweeps or cfg.iterations)


def initial_trees(parser, theta0, rng) -> list:
    """t_i ~ P(t | w_i, theta0) for every sentence (one kernel call); None where
    no tree has positive weight, reported once (those sentences are skipped)."""
    trees = list(parser.sample(np.asarray(theta0, dtype=np.float64), rng))
    bad = sum(t is None for t in trees)
    if bad == len(trees):
        raise NumericalError("no sentence has a parse of positive probability under the initial grammar")
    if bad:
        log.warn(f"{bad} of {len(trees)} sentences have no parse under the initial grammar; "
                 "the sampler skips them")
    return trees


def tree_counts(trees, n_rules: int) -> np.ndarray:
    """f(t) = sum_i f(t_i) as int64 (None trees skipped)."""
    rules = [d[:, 0] for d in trees if d is not None]
    return np.bincount(np.concatenate(rules), minlength=n_rules).astype(np.int64)


def pack_trees(trees) -> dict:
    """Checkpoint arrays of the trees: all rows (rule, start, end) and each tree's
    row count (-1 for a skipped sentence)."""
    rows = [d for d in trees if d is not None]
    return {"tree_rows": np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 3), np.int64),
            "tree_len": np.array([-1 if d is None else len(d) for d in trees], dtype=np.int64)}


def unpack_trees(state) -> list:
    rows, lens = np.asarray(state["tree_rows"], dtype=np.int64).reshape(-1, 3), state["tree_len"]
    off = np.concatenate([[0], np.cumsum(np.maximum(lens, 0))])
    return [None if n < 0 else rows[off[k]:off[k + 1]].copy() for k, n in enumerate(lens)]


def log_lhs_sum(grammar, logx) -> np.ndarray:
    """log sum_{r' in R_A} exp(logx_r') for each rule's LHS A (per rule)."""
    mx = np.full(len(grammar.nonterminals), -np.inf)
    np.maximum.at(mx, grammar.lhs, logx)
    s = np.bincount(grammar.lhs, weights=np.exp(logx - mx[grammar.lhs]), minlength=len(mx))
    with np.errstate(divide="ignore"):
        return (mx + np.log(s))[grammar.lhs]


def sample_log_dirichlet(grammar, a, rng) -> np.ndarray:
    """log theta, theta_A ~ Dirichlet(a_A) per LHS, from Gamma draws in log space
    (log Gamma(a+1) + log(U)/a for a < 1, so tiny a cannot underflow to log 0)."""
    a = np.asarray(a, dtype=np.float64)
    small = a < 1.0
    g = rng.gamma(np.where(small, a + 1.0, a))
    logx = np.log(np.maximum(g, np.finfo(np.float64).tiny))
    u = 1.0 - rng.random(int(small.sum()))           # in (0, 1]
    with np.errstate(over="ignore", invalid="ignore"):
        logx[small] += np.log(u) / a[small]
        out = logx - log_lhs_sum(grammar, logx)
    if np.isnan(out).any():
        raise NumericalError(f"a Dirichlet draw overflowed: log(U)/alpha is -inf for every rule of a left-hand "
                             f"side at alpha {float(a[np.isnan(out)].min())!r}; use alpha >= 1e-307")
    return out


# ----------------------------------------------------------------------------- the sampler

SamplerConfig = config_class("SamplerConfig", "gibbs", "The samplers (gibbs, hastings): --iterations sweeps "
                             "(``tolerance`` unused), annealed from ``temp_start``.")


class TreeSampler(Algorithm):
    """What both samplers share: the annealing schedule and the posterior
    pseudo-counts alpha + f(t) of the current trees (``self.prior``, ``self.counts``)."""

    def temperature(self, k: int) -> float:
        return temperature(k, self.temp_start, self.anneal)

    def weights(self):
        """The posterior pseudo-counts alpha + f(t) of the current trees."""
        return self.prior + self.counts

    def mean(self):
        return self.g.normalize(self.weights())


class Gibbs(TreeSampler):
    """JGG 2007's Gibbs sampler as a training-loop algorithm (see grind.infer.training)."""

    name = "gibbs"
    output = "pseudo-counts"
    Config = SamplerConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng):
        cfg = SamplerConfig.of(cfg)
        self.g, self.parser, self.rng = grammar, getattr(estep, "parser", estep), rng
        self.prior = np.asarray(prior, dtype=np.float64)
        self.iterations = cfg.iterations
        self.temp_start, self.anneal = schedule(cfg)
        self.trees = initial_trees(self.parser, theta0, rng)
        self.ok = np.array([k for k, d in enumerate(self.trees) if d is not None], dtype=np.int64)
        self.counts = tree_counts(self.trees, len(grammar))
        self.it = 0

    def update(self):
        """One sweep: theta ~ Dirichlet(f(t) + alpha) (annealed), then every tree t_i ~ P(t | w_i, theta)."""
        T = self.temperature(self.it + 1)
        logtheta = sample_log_dirichlet(self.g, self.counts / T + self.prior, self.rng)
        self._resample_trees(np.exp(logtheta / T))
        self.it += 1
        extra = {"temperature": T} if self.temp_start > 1 else {}
        return Step(self.it, collapsed_logprob(self.g, self.counts, self.prior),
                    self.it * len(self.ok), extra={**extra, "parsed": len(self.ok)})

    def _resample_trees(self, weights):
        """t_i ~ P(t | w_i, weights) for all parseable sentences in one kernel call
        (a sentence whose draw fails numerically keeps its tree)."""
        new = self.parser.sample(weights, self.rng, self.ok)
        for k, d in zip(self.ok, new):
            if d is not None:
                self.trees[k] = d
        self.counts = tree_counts(self.trees, len(self.g))

    def get_state(self):
        return {**pack_trees(self.trees), "counts": self.counts, "it": self.it}

    def set_state(self, s):
        self.trees = unpack_trees(s)
        self.ok = np.array([k for k, d in enumerate(self.trees) if d is not None], dtype=np.int64)
        self.counts = np.array(s["counts"], dtype=np.int64)
        self.it = int(s["it"])
