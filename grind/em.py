"""Inside-outside EM and MAP-EM for PCFGs (and the DMV, through the same kernel contract).

E-step: expected rule counts E[f_r] under the current weights theta (the
kernel).  M-step (MAP with a symmetric Dirichlet(alpha) prior per LHS):

    theta_r  proportional to  max(0, E[f_r] + alpha - 1),   r in R_A

alpha = 1 is maximum likelihood.  A LHS whose adjusted counts are all zero
(unused by every parseable sentence) keeps its previous weights, so the
objective log P(w | theta) + log P(theta | alpha) never decreases.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .errors import NumericalError


def map_estimate(grammar, counts: np.ndarray, alpha: float = 1.0, previous=None) -> np.ndarray:
    """theta_r = max(0, E[f_r] + alpha - 1) / sum_{r' in R_A} max(0, E[f_r'] + alpha - 1)."""
    if not np.all(np.isfinite(counts)):
        raise NumericalError("expected counts contain NaN or infinity")
    adj = np.maximum(0.0, counts + (alpha - 1.0))
    theta = grammar.normalize(adj)
    if previous is not None:
        unused = grammar.lhs_totals(adj) <= 0
        theta[unused] = np.asarray(previous)[unused]
    return theta


def log_dirichlet_prior(grammar, theta: np.ndarray, alpha: float) -> float:
    """sum_r (alpha - 1) log theta_r (up to a constant); 0 for alpha = 1."""
    if alpha == 1.0:
        return 0.0
    with np.errstate(divide="ignore"):
        return float((alpha - 1.0) * np.sum(np.log(theta[theta > 0])))


@dataclass
class Step:
    """One iteration's record for the trace."""

    iteration: int
    loglik: float
    objective: float
    parsed: int
    words: int
    seconds: float


def estep(parser, theta):
    """Counts, total log-likelihood and parsed-sentence count under theta."""
    counts, logz = parser.inside_outside(theta)
    ok = np.isfinite(logz)
    if np.isnan(logz).any():
        raise NumericalError("log partition is NaN: the grammar weights are invalid")
    if not ok.any():
        raise NumericalError("no sentence has a parse of positive probability")
    return counts, float(logz[ok].sum()), ok


def run(parser, grammar, theta, iterations=50, tolerance=1e-6, alpha=1.0, on_step=None):
    """Iterate E and M steps from ``theta``; stop after ``iterations`` or when the
    relative objective gain falls below ``tolerance``.  Returns (theta, steps)."""
    steps, prev = [], None
    words = np.array([len(s) for s in parser.sentences])
    t0 = time.perf_counter()
    for it in range(1, iterations + 1):
        counts, loglik, ok = estep(parser, theta)
        obj = loglik + log_dirichlet_prior(grammar, theta, alpha)
        step = Step(it, loglik, obj, int(ok.sum()), int(words[ok].sum()), time.perf_counter() - t0)
        steps.append(step)
        if on_step:
            on_step(step)
        theta = map_estimate(grammar, counts, alpha, previous=theta)
        if prev is not None and abs(obj - prev) <= tolerance * abs(prev):
            break
        prev = obj
    return theta, steps
