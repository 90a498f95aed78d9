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
from scipy.special import digamma

from grind import log
from grind.errors import NumericalError
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.dirichlet import log_rising
from grind.infer.training import Step


def vb_weights(grammar, alpha_hat: np.ndarray) -> np.ndarray:
    """pi_r = exp(E_q[log theta_r]) = exp(psi(alpha_hat_r) - psi(sum_{R_A} alpha_hat))."""
    return np.exp(vb_log_weights(grammar, alpha_hat))


#: Rules whose per-rule terms are made at once (the temporaries of a large grammar stay small).
CHUNK = 1 << 20


def vb_log_weights(grammar, alpha_hat: np.ndarray) -> np.ndarray:
    """log pi_r = psi(alpha_hat_r) - psi(sum_{R_A} alpha_hat), computed :data:`CHUNK`
    rules at a time into one array (the same numbers as at once)."""
    a = np.asarray(alpha_hat, dtype=np.float64)
    tot = grammar.lhs_sums(a)
    check_sums(grammar, tot, "VB's pseudo-counts alpha_hat", "their weights exp(psi(alpha_hat) - psi(sum))")
    out = np.empty(len(a))
    for lo in range(0, len(a), CHUNK):
        hi = lo + CHUNK
        np.subtract(digamma(a[lo:hi]), digamma(tot[grammar.lhs[lo:hi]]), out=out[lo:hi])
    return out


def check_sums(grammar, tot: np.ndarray, what: str, needs: str) -> None:
    """NumericalError when a per-LHS sum ``tot`` overflowed (values near the float limit): an
    overflow, said as such, not the weights' underflow that it would otherwise show as."""
    over = np.flatnonzero(np.isinf(tot))
    if len(over):
        lhs = grammar.nonterminals[int(over[0])]
        more = f" (and those of {len(over) - 1} more LHSs)" if len(over) > 1 else ""
        raise NumericalError(f"{what} of the rules of {lhs!r} sum to more than the largest float "
                             f"({np.finfo(np.float64).max:.4g}){more}: {needs} cannot be computed (an overflow)")


#: The smallest positive normal float64 and its log (about -708.4): VB weights
#: below it underflow (psi(x) ~ -1/x, so alpha_hat_r below about 1.4e-3).
TINY = float(np.finfo(np.float64).tiny)
LOG_TINY = float(np.log(TINY))


def vb_estep(estep, grammar, alpha_hat: np.ndarray, idx=None):
    """``estep`` under pi = vb_weights(alpha_hat), with underflow accounted for:
    ``(counts, logz, lost, inexact)``.

    For alpha_hat_r below about 1.4e-3, pi_r = exp(psi(alpha_hat_r) - ...) is
    below the smallest normal float (for alpha = 1e-4 it is about e^-10000)
    and the kernels, which take linear float64 weights, see 0.  Those
    derivations are then left out.  That is exact to double precision for a
    sentence that also has derivations without such rules -- unless their
    weight is itself comparable -- and impossible for a sentence all of whose
    derivations need one (class B: it would silently get log Z = -inf and no
    counts).  No rescaling of the weights fixes class B exactly: multiplying
    the rules of a LHS A by c_A multiplies a derivation by c_A^(uses of A),
    which differs between derivations, so the posterior changes; only a
    constant per derivation (e.g. potentials that telescope) leaves it
    unchanged, and that cannot lift the unseen rules of a LHS apart from its
    seen ones.  Flooring pi at TINY is not exact either (every floored rule
    gets the same weight, whatever its true e^-1000 or e^-10000).

    So: when some pi_r underflow, a second E-step with them floored at TINY
    bounds what was left out.  The floored weights are >= the true ones, so
    Z_floor >= Z_true >= Z_zero per sentence, and the left-out mass relative
    to Z_zero is at most expm1(logz_floor - logz_zero) (as far as the kernel
    itself does not underflow).  Sentences with logz_zero = -inf that have a
    derivation (under uniform weights) are *lost* (their counts cannot
    be computed with float64 weights; they are left out and the caller must
    say so); sentences whose bound exceeds 1e-12 are *inexact* (kept, with
    counts accurate to that bound).  ``lost`` and ``inexact`` are index arrays
    into ``idx`` order (positions in the logz vector).  Without underflow this
    is one E-step, as before.
    """
    w, under = vb_estep_weights(grammar, alpha_hat)
    return vb_estep_with(estep, grammar, w, under, idx)


def vb_estep_weights(grammar, alpha_hat: np.ndarray):
    """The weights :func:`vb_estep` runs the E-step with: ``(w, under)``, w =
    exp(psi(alpha_hat) - psi(sum over the LHS)), 0 for the rules ``under``
    (int64 indices) whose weight underflows (log below LOG_TINY).  Once made,
    ``alpha_hat`` is not needed by :func:`vb_estep_with`."""
    logw = vb_log_weights(grammar, alpha_hat)
    under = np.flatnonzero(logw < LOG_TINY)
    w = np.exp(logw, out=logw)
    del logw
    w[under] = 0.0
    return w, under


def vb_estep_with(estep, grammar, w: np.ndarray, under: np.ndarray, idx=None):
    """:func:`vb_estep` from the weights of :func:`vb_estep_weights` (``w`` is
    changed when some weights underflow)."""
    counts, logz = estep(w, idx)
    none = np.zeros(0, dtype=np.int64)
    if not len(under):
        return counts, logz, none, none
    w[under] = TINY
    _, logz_floor = estep(w, idx)
    zero_ok = np.isfinite(logz)
    with np.errstate(invalid="ignore"):
        inexact = np.flatnonzero(zero_ok & (np.expm1(logz_floor - logz) > 1e-12))
    # Lost: no derivation without an underflowing rule, but a derivation all the
    # same.  The floored run cannot tell (a product of several TINY weights
    # underflows inside the kernels too), so ask uniform weights, which every
    # derivation has, once some sentence came out -inf.
    lost = np.zeros(0, dtype=np.int64)
    if not zero_ok.all():
        _, logz_any = estep(grammar.normalize(np.ones(len(grammar))), idx)
        lost = np.flatnonzero(~zero_ok & np.isfinite(logz_any))
    return counts, logz, lost, inexact


def underflow_message(grammar, alpha_hat, prior, lost, inexact, total, where="") -> str:
    """One warning line for :func:`vb_estep`'s lost / inexact sentences."""
    n_under = int(np.sum(vb_log_weights(grammar, alpha_hat) < LOG_TINY))
    parts = []
    if len(lost):
        parts.append(f"{len(lost)} of {total} sentences were left out: every derivation needs one of them, "
                     "so their counts cannot be computed with float64 weights")
    if len(inexact):
        parts.append(f"{len(inexact)} sentences have counts accurate only to about 1e-12 or worse")
    return (f"{where}VB weights exp(psi(alpha_hat) - psi(sum)) of {n_under} rules underflow to 0 "
            f"(alpha {float(np.min(prior)):g}; alpha_hat below ~1.4e-3): " + "; ".join(parts)
            + " (use a larger --alpha)")


#: Above this (pseudo-)count the log Gamma differences of the KL come from Stirling's series
#: (:func:`grind.infer.dirichlet.log_rising`): taken naively they lose their digits (a negative KL at alpha 1e8).
KL_STIRLING_FROM = 1e4


def kl_dirichlet(grammar, alpha_hat: np.ndarray, alpha: np.ndarray) -> float:
    """sum_A KL(Dir(alpha_hat_A) || Dir(alpha_A)), LHSs with rules only: per LHS
    [lnG(S^) - lnG(S)] - sum_r [lnG(alpha^_r) - lnG(alpha_r)] + sum_r (alpha^_r - alpha_r)(psi(alpha^_r) - psi(S^)),
    S^, S the LHS sums, each lnG difference a log rising factorial taken stably at large alpha."""
    alpha_hat, alpha = np.asarray(alpha_hat, dtype=np.float64), np.asarray(alpha, dtype=np.float64)
    nA = len(grammar.nonterminals)
    sa = np.bincount(grammar.lhs, weights=alpha, minlength=nA)
    ca = np.bincount(grammar.lhs, weights=alpha_hat - alpha, minlength=nA)    # the counts, not S^ - S: no cancellation
    sa_hat = sa + ca
    per_lhs = log_rising(sa, ca, KL_STIRLING_FROM)
    per_rule = np.empty(len(alpha_hat))           # made CHUNK rules at a time: the same numbers, summed as one
    for lo in range(0, len(per_rule), CHUNK):
        hi = lo + CHUNK
        a_hat, a = alpha_hat[lo:hi], alpha[lo:hi]
        per_rule[lo:hi] = (-log_rising(a, a_hat - a, KL_STIRLING_FROM)
                           + (a_hat - a) * (digamma(a_hat) - digamma(sa_hat[grammar.lhs[lo:hi]])))
    return float(per_lhs.sum() + per_rule.sum())


def posterior_mean(grammar, alpha_hat: np.ndarray) -> np.ndarray:
    """theta_bar = alpha_hat / sum_{R_A} alpha_hat."""
    return grammar.normalize(alpha_hat)


VBConfig = config_class("VBConfig", "vb", "Batch VB reads only the shared options (--iterations, --tolerance).")


class VB(Algorithm):
    """Batch VB from an initial grammar: alpha_hat starts at alpha + E_theta0[f]."""

    name = "vb"
    output = "pseudo-counts"
    Config = VBConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        cfg = VBConfig.of(cfg)
        self.g, self.estep, self.prior = grammar, estep, prior
        self.iterations, self.tolerance = cfg.iterations, cfg.tolerance
        counts, _ = estep(theta0)
        self.alpha_hat = prior + counts
        self.it, self.prev, self.done = 0, None, False
        self.n = len(estep.parser.sentences)

    def update(self):
        """One batch VB iteration: alpha_hat <- alpha + E_pi[f], pi the VB weights of alpha_hat."""
        counts, logz, lost, inexact = vb_estep(self.estep, self.g, self.alpha_hat)
        extra = {}
        if len(lost) or len(inexact):
            log.warn(underflow_message(self.g, self.alpha_hat, self.prior, lost, inexact, self.n,
                                       f"vb step {self.it + 1}: "))
            extra = {"underflow_lost": len(lost), "underflow_inexact": len(inexact)}
        ok = np.isfinite(logz)
        if not ok.any():
            raise NumericalError("no sentence has a parse of positive probability under the VB weights"
                                 + (" (they underflow: see the warning above)" if len(lost) else ""))
        bound = float(logz[ok].sum()) - kl_dirichlet(self.g, self.alpha_hat, self.prior)
        self.alpha_hat = self.prior + counts
        self.it += 1
        self.observe(bound)
        return Step(self.it, bound, self.it * self.n, extra={"parsed": int(ok.sum()), **extra})

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
