"""Constrained mixture variational EM (Cohen & Smith 2009) for the DMV.

The variational posterior over the trees y of each sentence x is a mixture

    q(y) = sum_{k=0}^{K} beta_k q_k(y),      beta in a polytope B of the simplex

of the unconstrained ("mean-field") component q_0 and prior-knowledge
components q_k supported on constraint sets Y_k (:mod:`grind.constraints`;
e.g. Y_RA ∩ Y_VAR ∩ Y_SD).  With theta a point estimate, Jensen and the
concavity of entropy, H(sum_k beta_k q_k) >= sum_k beta_k H(q_k), give the
lower bound we maximise:

    log p(x | theta) + log p(theta)
      >= sum_k beta_k ( E_{q_k}[log p(x, y | theta)] + H(q_k) ) + log p(theta)
      =: F(theta, beta, q).

E-step (per component, beta and theta fixed): the best q_k is the posterior
restricted to Y_k, q_k(y) = p(x, y | theta) [y in Y_k] / Z_k(theta), where
F's k-th term becomes log Z_k(theta) = log sum_{y in Y_k} p(x, y | theta)
(a masked inside pass).  So at the E-step optimum

    F(theta, beta) = sum_k beta_k L_k(theta) + log p(theta),
    L_k(theta)     = sum_s log Z_{k,s}(theta)                      (the objective)

M-step: theta = MAP estimate (Dirichlet(alpha), as :mod:`grind.em`) from the
mixture-weighted expected counts sum_k beta_k E_{q_k}[f].  Neither step
decreases F for fixed beta.

C-step: beta = argmax_{beta in B} sum_k beta_k L_k, a linear program
(closed form on a segment for K = 1, ``scipy.optimize.linprog`` otherwise).
B = {beta >= 0, sum beta = 1, lo <= beta_0 <= hi, beta_k >= mix_min for
k >= 1}.  Since Y_k is a subset of all trees, L_0 >= L_k, so the LP puts
as much weight as B allows on the mean-field component: beta_0 = hi, the
rest on the constrained component(s) with the largest L_k.  It is the upper
bound hi that injects the prior knowledge.

Simplex annealing (``cfg.mix_anneal``, default on): hi_t = min(mix_end,
mix_start + mix_rate * t) at step t = 0, 1, ... (default 0.5 -> 0.95 by 0.01,
"1 % a step"): the constraints start strong and are gradually loosened.
``cfg.mix_polytope = "lower"`` anneals the lower bound instead, B_t =
{beta_0 in [b_t, 1]}; note that with this objective the C-step then always
chooses beta_0 = 1 (the constrained components are ignored).
Fixed coefficients: ``cfg.mix_coef`` (a list or comma-separated string of
K+1 numbers summing to 1, mean-field first) skips the C-step.

A sentence with no tree in Y_k (e.g. RA+VAR when the last word is not a verb
but some other word is) uses Y_k = all trees for that sentence (q_k = q_0
there), so every component scores every parseable sentence.

The reported objective of step t is F(theta_t, beta_t) before the update.
"""
from __future__ import annotations

import numpy as np

from .constraints import constrained_parser, parse_mixture_spec
from .em import log_dirichlet_prior, map_estimate
from .errors import InputError, NumericalError
from .training import ShardedEstep, Step

_FLUSH = 1e-200          # weights below this become 0 after the M-step (see step())


def c_step(L, lo=0.0, hi=1.0, min_other=0.0):
    """argmax_beta sum_k beta_k L_k over B = {beta >= 0, sum_k beta_k = 1,
    lo <= beta_0 <= hi, beta_k >= min_other (k >= 1)}.

    K = 1 (a segment): beta_0 = hi if L_0 >= L_1 else lo.  Otherwise SciPy's
    ``linprog`` (HiGHS).  Raises InputError when B is empty.
    """
    L = np.asarray(L, dtype=np.float64)
    K = len(L) - 1
    if K == 0:
        return np.ones(1)
    lo, hi = max(0.0, float(lo)), min(1.0, float(hi))
    lo = max(lo, 0.0)
    hi = min(hi, 1.0 - K * min_other)
    if lo > hi + 1e-12:
        raise InputError(f"empty mixture polytope: beta_0 in [{lo}, {hi}], others >= {min_other}")
    if K == 1:
        b0 = hi if L[0] >= L[1] else lo
        return np.array([b0, 1.0 - b0])
    from scipy.optimize import linprog
    res = linprog(-L, A_eq=np.ones((1, K + 1)), b_eq=[1.0],
                  bounds=[(lo, hi)] + [(min_other, 1.0)] * K, method="highs")
    if not res.success:
        raise NumericalError(f"C-step linear program failed: {res.message}")
    beta = np.clip(res.x, 0.0, 1.0)
    return beta / beta.sum()


def _fixed_coef(v, K):
    if v is None:
        return None
    if isinstance(v, str):
        v = [float(x) for x in v.split(",")]
    b = np.asarray(v, dtype=np.float64)
    if b.shape != (K + 1,) or np.any(b < 0) or abs(b.sum() - 1.0) > 1e-9:
        raise InputError(f"mix_coef: need {K + 1} non-negative numbers summing to 1 (mean-field first)")
    return b


class Mixture:
    """Constrained mixture variational EM as a training-loop algorithm.

    cfg (read with ``getattr`` defaults): ``iterations``, ``tolerance``,
    ``mix_constraints`` (spec, default ``"RA+VAR+SD"``; comma-separated
    specs give several constrained components), ``mix_start`` (0.5),
    ``mix_end`` (0.95), ``mix_rate`` (0.01), ``mix_anneal`` (True),
    ``mix_polytope`` ("upper" | "lower"), ``mix_min`` (0: least weight of
    each constrained component), ``mix_coef`` (fixed coefficients or None),
    ``jobs``.  ``estep.parser`` must be a DMV parser (the constrained
    components are masked DMV parsers of its sentences).
    """

    name = "mixture"
    output = "probabilities"

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        self.g, self.estep, self.prior = grammar, estep, prior
        self.iterations = getattr(cfg, "iterations", 50)
        self.tolerance = getattr(cfg, "tolerance", 1e-6)
        spec = getattr(cfg, "mix_constraints", None) or "RA+VAR+SD"
        self.components = parse_mixture_spec(spec)
        self.names = ["meanfield"] + [n for n, _ in self.components]
        K = len(self.components)
        parser = estep.parser
        if not hasattr(parser, "arc_off"):
            raise InputError("mixture needs a split-head DMV grammar and the dmv kernel")
        jobs = getattr(estep, "jobs", getattr(cfg, "jobs", 1))
        self.csteps = [ShardedEstep(constrained_parser(grammar, parser.sentences, m), jobs)
                       for _, m in self.components]
        self.start = float(getattr(cfg, "mix_start", 0.5))
        self.end = float(getattr(cfg, "mix_end", 0.95))
        self.rate = float(getattr(cfg, "mix_rate", 0.01))
        self.anneal = bool(getattr(cfg, "mix_anneal", True))
        self.side = getattr(cfg, "mix_polytope", "upper")
        if self.side not in ("upper", "lower"):
            raise InputError("mix_polytope must be 'upper' or 'lower'")
        self.min_other = float(getattr(cfg, "mix_min", 0.0))
        self.fixed = _fixed_coef(getattr(cfg, "mix_coef", None), K)
        self.theta = np.asarray(theta0, dtype=np.float64)
        self.beta = self.fixed.copy() if self.fixed is not None else self._initial_beta(K)
        self.it, self.prev, self.done = 0, None, False
        self.n = len(parser.sentences)

    def _initial_beta(self, K):
        lo, hi = self.bounds(0)
        b0 = hi if self.side == "upper" else lo
        return np.concatenate([[b0], np.full(K, (1.0 - b0) / K)])

    def bounds(self, t):
        """(lo, hi) of beta_0 at step t (the annealed polytope)."""
        b = min(self.end, self.start + self.rate * t) if self.anneal else self.start
        return (0.0, b) if self.side == "upper" else (b, 1.0)

    def component_estep(self, theta):
        """Per component k: (E_{q_k}[f] summed over sentences, log Z_{k,s}),
        with the unconstrained posterior standing in where Y_k is empty."""
        c0, z0 = self.estep(theta)
        out = [(c0, z0)]
        for es in self.csteps:
            c, z = es(theta)
            miss = np.flatnonzero(~np.isfinite(z) & np.isfinite(z0))
            if miss.size:
                c = c + self.estep(theta, miss)[0]
                z = z.copy()
                z[miss] = z0[miss]
            out.append((c, z))
        return out

    def step(self):
        if self.done or self.it >= self.iterations:
            return None
        parts = self.component_estep(self.theta)
        ok = np.isfinite(parts[0][1])
        if not ok.any():
            raise NumericalError("no sentence has a parse of positive probability")
        L = np.array([float(z[ok].sum()) for _, z in parts])
        logprior = log_dirichlet_prior(self.g, self.theta, self.prior)
        if self.fixed is None:                      # C-step for this theta, then the bound
            lo, hi = self.bounds(self.it)
            self.beta = c_step(L, lo, hi, self.min_other)
        obj = float(self.beta @ L) + logprior
        counts = sum(b * c for b, (c, _) in zip(self.beta, parts))
        self.theta = map_estimate(self.g, counts, self.prior, previous=self.theta)
        # Work-around: the DMV kernel's scaled arithmetic can return NaN when
        # a weight is tiny (seen with 2.3e-294, and for subnormals); the
        # constraint components drive some weights that low.  A weight below
        # _FLUSH is zero for every purpose, so it is flushed to 0.
        self.theta[self.theta < _FLUSH] = 0.0
        self.it += 1
        annealing = self.fixed is None and self.anneal and self.start + self.rate * self.it < self.end
        if (not annealing and self.prev is not None
                and abs(obj - self.prev) <= self.tolerance * abs(self.prev)):
            self.done = True
        self.prev = obj
        extra = {"loglik": float(L[0]), "parsed": int(ok.sum())}
        extra.update({f"beta_{n}": float(b) for n, b in zip(self.names, self.beta)})
        return Step(self.it, obj, self.it * self.n, extra=extra)

    def weights(self):
        return self.theta

    mean = weights

    def get_state(self):
        return {"theta": self.theta, "beta": self.beta, "it": self.it, "prev": self.prev,
                "done": self.done}

    def set_state(self, s):
        self.theta = np.array(s["theta"], dtype=np.float64)
        self.beta = np.array(s["beta"], dtype=np.float64)
        self.it, self.prev, self.done = int(s["it"]), s["prev"], bool(s["done"])
