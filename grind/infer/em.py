"""Inside-outside EM and MAP-EM for PCFGs (and the DMV, through the same kernel contract).

E-step: expected rule counts E[f_r] under the current weights theta (the
kernel).  M-step (MAP with a symmetric Dirichlet(alpha) prior per LHS):

    theta_r  proportional to  max(0, E[f_r] + alpha - 1),   r in R_A

alpha = 1 is maximum likelihood.  A LHS whose adjusted counts are all zero
(every E[f_r] + alpha - 1 <= 0: unused, or at alpha < 1 used too little)
keeps its previous weights.  For alpha >= 1 the objective
log P(w | theta) + log P(theta | alpha) never decreases (while the parsed
sentences stay parsed).  For alpha < 1 the objective as computed here does
not have that guarantee: MAP sets rules to theta = 0, where the Dirichlet
density is unbounded, and :func:`log_dirichlet_prior` leaves such rules
out, so the objective falls when MAP zeroes a rule (an audit measured
-33.5 -> -38.0 on a 12-sentence corpus at alpha 0.5).
"""
from __future__ import annotations

import numpy as np

from grind import log
from grind.errors import NumericalError
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.training import Step


def map_estimate(grammar, counts: np.ndarray, alpha=1.0, previous=None) -> np.ndarray:
    """theta_r = max(0, E[f_r] + alpha - 1) / sum_{r' in R_A} max(0, E[f_r'] + alpha - 1)."""
    if not np.all(np.isfinite(counts)):
        raise NumericalError("expected counts contain NaN or infinity")
    adj = np.maximum(0.0, counts + (alpha - 1.0))
    theta = grammar.normalize(adj)
    if previous is not None:
        unused = grammar.lhs_totals(adj) <= 0
        theta[unused] = np.asarray(previous)[unused]
    return theta


def log_dirichlet_prior(grammar, theta: np.ndarray, alpha) -> float:
    """sum_r (alpha_r - 1) log theta_r (up to a constant); 0 for alpha = 1."""
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), theta.shape)
    use = (theta > 0) & (a != 1.0)
    return float(np.sum((a[use] - 1.0) * np.log(theta[use])))


EMConfig = config_class("EMConfig", "em", "EM reads only the shared options (--iterations, --tolerance).")


class EM(Algorithm):
    """Inside-outside EM / MAP-EM as a training-loop algorithm (see grind.infer.training)."""

    name = "em"
    output = "probabilities"
    Config = EMConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        cfg = EMConfig.of(cfg)
        self.g, self.estep, self.prior = grammar, estep, prior
        self.iterations, self.tolerance = cfg.iterations, cfg.tolerance
        self.theta = np.asarray(theta0, dtype=np.float64)
        self.it, self.prev, self.done = 0, None, False
        self.n = len(estep.parser.sentences)
        self.parsed_before: int | None = None

    def update(self):
        """One EM iteration: E-step under theta, MAP M-step; the objective is that of theta before it."""
        counts, logz = self.estep(self.theta)
        ok = np.isfinite(logz)
        if not ok.any():
            raise NumericalError("no sentence has a parse of positive probability")
        loglik = float(logz[ok].sum())
        parsed = int(ok.sum())
        if self.parsed_before is not None and parsed < self.parsed_before:
            log.warn(f"em step {self.it + 1}: {self.parsed_before - parsed} more sentence(s) have no parse of positive "
                     f"probability ({parsed} of {self.n} parsed): rules they need are now 0 (MAP-EM with alpha < 1 "
                     "zeroes a rule whose expected count is below 1 - alpha, Johnson, Griffiths & Goldwater 2007, "
                     "sec. 7; or a weight underflowed); the objective is over the parsed sentences only, so it can "
                     "fall")
        self.parsed_before = parsed
        obj = loglik + log_dirichlet_prior(self.g, self.theta, self.prior)
        self.theta = map_estimate(self.g, counts, self.prior, previous=self.theta)
        self.it += 1
        self.observe(obj)
        return Step(self.it, obj, self.it * self.n, extra={"loglik": loglik, "parsed": parsed})

    def weights(self):
        return self.theta

    mean = weights

    def get_state(self):
        return {"theta": self.theta, "it": self.it, "prev": self.prev, "done": self.done,
                "parsed_before": self.parsed_before}

    def set_state(self, s):
        self.theta = np.array(s["theta"], dtype=np.float64)
        self.it, self.prev, self.done = int(s["it"]), s["prev"], bool(s["done"])
        p = s.get("parsed_before")                 # absent in checkpoints of older grinds
        self.parsed_before = None if p is None else int(p)


def run(parser, grammar, theta, iterations=50, tolerance=1e-6, alpha=1.0):
    """EM from theta on the parser's corpus; returns (theta, trace)."""
    from types import SimpleNamespace

    from grind.infer.training import ShardedEstep, train
    cfg = SimpleNamespace(iterations=iterations, tolerance=tolerance)
    algo = EM(grammar, ShardedEstep(parser), alpha, theta, cfg)
    trace = train(algo, np.random.default_rng(0))
    return algo.theta, trace
