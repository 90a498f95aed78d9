"""Batch mean-field variational Bayes for PCFGs (Kurihara & Sato 2006;
Pate & Johnson 2016, Alg. 1).

q(theta) q(t) with q(theta_A) = Dirichlet(alpha_hat_A).  Each iteration:

    pi_r      = exp(psi(alpha_hat_r) - psi(sum_{r' in R_A} alpha_hat_r'))
    E[f_r]    = expected counts under the sub-normalised weights pi (the kernel)
    alpha_hat = alpha + E[f]

The bound on log P(w | alpha) before the update is exact:

    L = sum_s log Z_s(pi) - sum_A KL(Dirichlet(alpha_hat_A) || Dirichlet(alpha_A))

(the expected complete-data log-likelihood plus the entropy of q(t) is
sum_s log Z_s(pi) because E_q[log theta_r] = log pi_r).  It never decreases.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from .training import Step


def vb_weights(grammar, alpha_hat: np.ndarray) -> np.ndarray:
    """pi_r = exp(E_q[log theta_r]) = exp(psi(alpha_hat_r) - psi(sum_{R_A} alpha_hat))."""
    return np.exp(digamma(alpha_hat) - digamma(grammar.lhs_totals(alpha_hat)))


def kl_dirichlet(grammar, alpha_hat: np.ndarray, alpha: np.ndarray) -> float:
    """sum_A KL(Dir(alpha_hat_A) || Dir(alpha_A)), LHSs with rules only."""
    nA = len(grammar.nonterminals)
    sa_hat = np.bincount(grammar.lhs, weights=alpha_hat, minlength=nA)
    sa = np.bincount(grammar.lhs, weights=alpha, minlength=nA)
    per_lhs = gammaln(sa_hat) - gammaln(sa)
    per_rule = (gammaln(alpha) - gammaln(alpha_hat)
                + (alpha_hat - alpha) * (digamma(alpha_hat) - digamma(sa_hat[grammar.lhs])))
    return float(per_lhs.sum() + per_rule.sum())


def posterior_mean(grammar, alpha_hat: np.ndarray) -> np.ndarray:
    """theta_bar = alpha_hat / sum_{R_A} alpha_hat."""
    return grammar.normalize(alpha_hat)


class VB:
    """Batch VB from an initial grammar: alpha_hat starts at alpha + E_theta0[f]."""

    name = "vb"
    output = "pseudo-counts"

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        self.g, self.estep, self.prior = grammar, estep, prior
        self.iterations, self.tolerance = cfg.iterations, cfg.tolerance
        counts, _ = estep(theta0)
        self.alpha_hat = prior + counts
        self.it, self.prev, self.done = 0, None, False
        self.n = len(estep.parser.sentences)

    def step(self):
        if self.done or self.it >= self.iterations:
            return None
        counts, logz = self.estep(vb_weights(self.g, self.alpha_hat))
        ok = np.isfinite(logz)
        bound = float(logz[ok].sum()) - kl_dirichlet(self.g, self.alpha_hat, self.prior)
        self.alpha_hat = self.prior + counts
        self.it += 1
        if self.prev is not None and abs(bound - self.prev) <= self.tolerance * abs(self.prev):
            self.done = True
        self.prev = bound
        return Step(self.it, bound, self.it * self.n, extra={"parsed": int(ok.sum())})

    def weights(self):
        """What the output grammar holds: the posterior pseudo-counts alpha_hat."""
        return self.alpha_hat

    def mean(self):
        return posterior_mean(self.g, self.alpha_hat)

    def get_state(self):
        return {"alpha_hat": self.alpha_hat, "it": self.it, "prev": self.prev, "done": self.done}

    def set_state(self, s):
        self.alpha_hat = np.array(s["alpha_hat"], dtype=np.float64)
        self.it, self.prev, self.done = int(s["it"]), s["prev"], bool(s["done"])
