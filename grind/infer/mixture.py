"""Posterior-mixture constraints (Cohen & Smith 2009, "Variational inference
for grammar induction with prior knowledge", ACL-IJCNLP short paper) over a
chosen base model of the DMV.

The variational posterior over the trees y of each sentence x is a mixture

    q(y) = sum_{k=0}^{K} beta_k q_k(y),      beta in a polytope B of the simplex

of the unconstrained ("mean-field") component q_0 and prior-knowledge
components q_k supported on constraint sets Y_k (:mod:`grind.infer.constraints`;
e.g. Y_RA ∩ Y_VAR ∩ Y_SD).  The concavity of entropy,
H(sum_k beta_k q_k) >= sum_k beta_k H(q_k), turns the base model's bound
into the bound of Proposition 1:

    log p(x) >= sum_k beta_k ( E_{q(theta) q_k}[log p(x, y | theta)] + H(q_k) ) - KL(q(theta) || p(theta)).

For each k the best q_k is the posterior restricted to Y_k under the base
model's rule weights w (the q(theta)-expected weights), and its term becomes
log Z_k(w) = log sum_{y in Y_k} prod_r w_r^{f_r(y)} (a masked inside pass).
So the mixture changes exactly one thing in the base algorithm: where it
asked the parser for (E_{q_0}[f], log Z_0) it now gets

    ( sum_k beta_k E_{q_k}[f],  sum_k beta_k log Z_k )      per sentence,

which is what :class:`MixtureParser` returns behind the
:class:`~grind.kernels.contract.ChartParser` contract.  The base algorithm runs
unchanged over it (``cfg.mix_base``):

    ln  the logistic-normal prior with mean-field q(eta) q(y), Cohen & Smith
        (2010) / :mod:`grind.infer.ln` (the paper's base: "LN, mean-field").  The
        weights are per sentence, w_s = exp(psi~_s), and the bound is
        sum_s [ sum_k beta_k log Z_{k,s}(exp psi~_s) - KL_s ];
    vb  Dirichlet mean-field VB (:mod:`grind.infer.vb`): w = exp(E_q[log theta]),
        bound sum_k beta_k L_k(w) - KL(q(theta) || Dirichlet(alpha));
    em  MAP-EM (:mod:`grind.infer.em`), theta a point estimate: the objective
        sum_k beta_k L_k(theta) + log p(theta) bounds log p(x | theta) + log p(theta).

with L_k = sum_s log Z_{k,s} over the parsed sentences.  Every E-step / M-step
of the base increases its objective for fixed beta.

C-step (between base steps): beta = argmax_{beta in B} sum_k beta_k L_k, the
L_k of the base's latest E-step (a linear program: closed form on a segment
for K = 1, ``scipy.optimize.linprog`` otherwise).  The KL term does not
depend on beta, so this maximises the bound in beta.  Since Y_k is a subset
of all trees, L_0 >= L_k: the LP puts on the mean-field component as much
weight as B allows, beta_0 = hi, and the rest on the constrained component(s)
with the largest L_k.  The polytope's bound hi injects the prior knowledge.

Schedules (``cfg.mix_schedule``), the paper's three settings of B:

    I    simplex annealing: B_t = {beta_0 <= min(mix_end, mix_start + mix_rate t)}
         at step t = 0, 1, ... (default 0.85 -> 0.95 by 0.01, 1 % a step);
    II   beta_0 = 0.85 fixed;      III   beta_0 = 0.95 fixed;

in II and III the remaining weight is split by the C-step among the
constrained components (all of it on one component when K = 1).  Caveat:
only the paper's abstract could be consulted when this was written; the
annealing start/end 0.85 -> 0.95 (from schedule II's coefficient to III's)
is our reading, not a quoted value.  ``cfg.mix_coef`` (K+1 numbers, mean-field
first) fixes beta and skips the C-step.  Step 0 has no L_k yet: it uses
beta_0 = hi_0 and splits the rest equally (the C-step's choice for K = 1).
The paper ran 20 iterations (:data:`MIX_ITERATIONS`); while the cap is still
rising the base's stopping rule is suspended.

A sentence with no tree in Y_k of positive weight (e.g. RA+VAR when the last
word is not a verb but some other word is) uses q_k = q_0 and
log Z_k = log Z_0 there, so every component scores every parseable sentence
and the bound stays finite; the trace counts such sentences per component.

On a cluster (an ``estep`` whose shards run elsewhere, ``estep.remote``:
``grind train --cluster``), :class:`RemoteMixtureEstep` runs every shard on a
worker's own :class:`MixtureParser` (built there once from the worker's DMV
parser, :func:`mixture_shard`) under this step's beta, and brings back with
the shard's result its log Z_k and fall-backs, recorded here for the C-step:
the same numbers, summed in the same order, as the single-process run.
"""
from __future__ import annotations

import importlib

import numpy as np

from grind.infer.constraints import constrained_parser, parse_mixture_spec
from grind.errors import InputError, NumericalError
from grind.kernels.contract import ChartParser, LocalRules
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.options import (BASES, DEFAULT_BASE, MIX_END, MIX_ITERATIONS, MIX_RATE,  # noqa: F401 (re-exported)
                                 MIX_START, SCHEDULES, fixed_coef as _fixed_coef, schedule_name)
from grind.infer.training import SHARD, ShardedEstep, shard_counts

# BASES, DEFAULT_BASE, SCHEDULES (schedule_name), MIX_START, MIX_END, MIX_RATE, MIX_ITERATIONS: declared with
# the options (grind.infer.options).
#: Fixed mean-field coefficients of schedules II and III.
FIXED_COEF = {"II": 0.85, "III": 0.95}


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


class MixtureParser(ChartParser):
    """The DMV parser and its constrained copies as one ChartParser.

    ``inside_outside(w, idx)`` returns (sum_k beta_k E_{q_k}[f], per sentence
    sum_k beta_k log Z_k) with ``beta`` the current coefficients (attribute),
    q_k = q_0 and log Z_k = log Z_0 for a sentence without a tree in Y_k of
    positive weight.  It records, per component and sentence, log Z_k of the
    latest call that covered the sentence (``logz_k``, shape (K+1, n)) and
    whether it fell back to q_0 (``fallback``, (K, n)); :meth:`latest` sums
    them.  Terms with beta_k = 0 are left out of the sums, so with beta_0 = 1
    the results are bit-identical to the DMV parser's.  Decoding (viterbi,
    sample, MBR) and every other attribute are the DMV parser's.
    """

    def __init__(self, parser, components, beta=None):
        self.base = parser
        self.components = list(components)             # [(name, constrained parser)]
        self.names = ["meanfield"] + [n for n, _ in self.components]
        self.grammar, self.sentences, self.failures = parser.grammar, parser.sentences, parser.failures
        K, n = len(self.components), len(parser.sentences)
        self.beta = np.eye(K + 1)[0] if beta is None else np.asarray(beta, dtype=np.float64)
        self.logz_k = np.full((K + 1, n), np.nan)
        self.fallback = np.zeros((K, n), dtype=bool)

    def __getattr__(self, name):
        if name == "base":                              # not yet set (copy, unpickling)
            raise AttributeError(name)
        return getattr(self.base, name)

    def _idx(self, idx):
        return self.base._idx(idx)

    def local_tables(self, idx=None):
        """The base's rules of each sentence: a constrained copy's trees are trees of the base,
        so no component reads another rule.  (Without the base kernel's own tables: the mixture
        parses a sentence at a time, :meth:`ChartParser.inside_outside_local`.)"""
        lr = self.base.local_tables(idx)
        return LocalRules(lr.idx, lr.off, lr.rules)

    def component_io(self, weights, idx=None):
        """[(E_{q_k}[f] summed over ``idx``, log Z_k per sentence)] for k = 0..K,
        q_0 standing in where Y_k has no tree of positive weight; recorded."""
        idx = self._idx(idx)
        c0, z0 = self.base.inside_outside(weights, idx)
        ok0 = np.isfinite(z0)
        self.logz_k[0, idx] = z0
        out = [(c0, z0)]
        for k, (_, p) in enumerate(self.components, 1):
            c, z = p.inside_outside(weights, idx)
            miss = ~np.isfinite(z) & ok0
            if miss.any():
                fb = c0 if np.array_equal(miss, ok0) else self.base.inside_outside(weights, idx[miss])[0]
                c = c + fb
                z = np.where(miss, z0, z)
            self.logz_k[k, idx] = z
            self.fallback[k - 1, idx] = miss
            out.append((c, z))
        return out

    def inside_outside(self, weights, idx=None):
        """(sum_k beta_k E_{q_k}[f], sum_k beta_k log Z_k per sentence); -inf
        where the sentence has no tree at all."""
        idx = self._idx(idx)
        parts = self.component_io(weights, idx)
        ok = np.isfinite(parts[0][1])
        counts = logz = None
        for b, (c, z) in zip(self.beta, parts):
            if b == 0.0:
                continue
            z = np.where(ok, z, 0.0)
            counts = b * c if counts is None else counts + b * c
            logz = b * z if logz is None else logz + b * z
        logz[~ok] = -np.inf
        return counts, logz

    def latest(self):
        """(L_k = sum_s log Z_{k,s} over the sentences parsed at their latest
        call, number of those sentences that fell back to q_0 per k >= 1)."""
        ok = np.isfinite(self.logz_k[0])
        return self.logz_k[:, ok].sum(axis=1), self.fallback[:, ok].sum(axis=1)

    def viterbi(self, weights, idx=None):
        return self.base.viterbi(weights, idx)

    def sample(self, weights, rng, idx=None):
        return self.base.sample(weights, rng, idx)


class MixtureWork:
    """A mixture shard's task for a worker (picklable): the components' spec, the
    coefficients beta, and the base's own shard work ``fn(parser, idx, payload)``."""

    def __init__(self, spec, beta, fn, payload):
        self.spec, self.beta, self.fn, self.payload = spec, np.asarray(beta, dtype=np.float64), fn, payload


def _shard_io(parser, idx, weights):
    """The plain E-step of one shard (the base's ``estep(weights)``), as :class:`ShardedEstep` runs it."""
    return shard_counts(parser, weights, idx)


def _worker_mixture(parser, spec) -> MixtureParser:
    """The :class:`MixtureParser` of components ``spec`` over the worker's DMV ``parser``,
    built at the first shard and kept with the parser (dropped with it at the run's end)."""
    made = parser.__dict__.setdefault("_grind_mixtures", {})
    if spec not in made:
        made[spec] = MixtureParser(parser, [(n, constrained_parser(parser.grammar, parser.sentences, m))
                                            for n, m in parse_mixture_spec(spec)])
    return made[spec]


def mixture_shard(parser, idx, work: MixtureWork) -> tuple:
    """One shard on a worker: ``work.fn`` on the worker's mixture parser under ``work.beta``;
    returns (its result, log Z_k of the shard's sentences (K+1, len(idx)), their fall-backs (K, len(idx)))."""
    mp = _worker_mixture(parser, work.spec)
    mp.beta = work.beta
    out = work.fn(mp, idx, work.payload)
    return out, mp.logz_k[:, idx].copy(), mp.fallback[:, idx].copy()


class RemoteMixtureEstep(ShardedEstep):
    """The mixture's E-step over an ``estep`` whose shards run elsewhere (a Dask cluster):
    each shard, plain (``__call__``) or the base's own work (:meth:`map_shards`, e.g. logistic-normal
    model I's), runs through :func:`mixture_shard` on the worker; the shard's log Z_k and fall-backs
    are recorded in this process's :class:`MixtureParser` (``parser``), which the C-step reads."""

    remote = True

    def __init__(self, estep, parser: MixtureParser, spec: str):
        super().__init__(parser, 1, estep.shard)
        self.inner, self.spec = estep, str(spec)

    def __call__(self, weights, idx=None):
        return self.reduce(self.map_shards(_shard_io, np.asarray(weights, dtype=np.float64), idx))

    def map_shards(self, fn, payload, idx=None, size=None) -> list:
        shards = self.shards(idx, size)
        parts = self.inner.map_shards(mixture_shard, MixtureWork(self.spec, self.parser.beta, fn, payload), idx, size)
        out = []
        for s, (result, logz_k, fallback) in zip(shards, parts):
            self.parser.logz_k[:, s] = logz_k
            self.parser.fallback[:, s] = fallback
            out.append(result)
        return out


MixtureConfig = config_class("MixtureConfig", "mixture", "Posterior-mixture options; the rest (``iterations``, "
                             "``tolerance``, the ``ln`` options, ``jobs``) go to the base algorithm.  The paper ran "
                             ":data:`MIX_ITERATIONS`; the tolerance is the batch algorithms' (not ln's).")


class Mixture(Algorithm):
    """Posterior-mixture constraints over a base algorithm (see the module docstring).

    cfg (:class:`MixtureConfig`): ``mix_base`` (``ln`` | ``vb`` |
    ``em``, default ``ln``), ``mix_constraints`` (spec, default
    ``"RA+VAR+SD"``; comma-separated specs give several constrained
    components), ``mix_schedule`` (I | II | III, default I), ``mix_start``
    (0.85), ``mix_end`` (0.95), ``mix_rate`` (0.01), ``mix_min`` (0: least
    weight of each constrained component), ``mix_coef`` (fixed coefficients or
    None); everything else (``iterations``, ``tolerance``, the ``ln`` options,
    ``jobs``) goes to the base.  ``estep.parser`` must be a DMV parser.
    """

    name = "mixture"
    Config = MixtureConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        cfg = MixtureConfig.of(cfg)
        self.g = grammar
        base = cfg.mix_base
        if base not in BASES:
            raise InputError(f"unknown mixture base {base!r} ({', '.join(BASES)})")
        self.base_name = base
        parser = estep.parser
        if not hasattr(parser, "arc_off"):
            raise InputError("--algo mixture needs a split-head DMV grammar (grind make-grammar dmv) and the dmv "
                             "kernel")
        self.components = parse_mixture_spec(cfg.mix_constraints)
        K = len(self.components)
        self.schedule = schedule_name(cfg.mix_schedule)
        self.start = float(cfg.mix_start)
        self.end = float(cfg.mix_end)
        self.rate = float(cfg.mix_rate)
        if self.start > self.end:
            raise InputError(f"mixture: mix_start {self.start} is above mix_end {self.end}")
        self.min_other = float(cfg.mix_min)
        self.fixed = _fixed_coef(cfg.mix_coef, K)
        self.parser = MixtureParser(parser, [(n, constrained_parser(grammar, parser.sentences, m))
                                             for n, m in self.components])
        self.names = self.parser.names
        self.beta = self.fixed.copy() if self.fixed is not None else self._initial_beta(0)
        self.parser.beta = self.beta
        if getattr(estep, "remote", False):
            self.estep = RemoteMixtureEstep(estep, self.parser, cfg.mix_constraints)
        else:
            self.estep = ShardedEstep(self.parser, getattr(estep, "jobs", 1), getattr(estep, "shard", SHARD))
        module, cls = BASES[base].split(":")
        self.base = getattr(importlib.import_module(module), cls)(grammar, self.estep, prior, theta0, cfg, rng)
        self.output = self.base.output
        self.iterations = self.base.iterations
        self.L = np.full(K + 1, np.nan)                 # L_k of the latest E-step
        self.it = 0

    def describe(self) -> str:
        """The output header's ``mixture`` line: the base, the constrained components, the polytope of the
        coefficients and the coefficients of the last step (mean-field first)."""
        if self.fixed is not None:
            polytope = "fixed coefficients (no C-step)"
        elif self.schedule == "I":
            polytope = (f"schedule I (cap on the mean-field coefficient from {self.start:g} by {self.rate:g} a "
                        f"step to {self.end:g})")
        else:
            polytope = f"schedule {self.schedule} (mean-field coefficient {FIXED_COEF[self.schedule]:g})"
        beta = " ".join(f"{n}={b:.6g}" for n, b in zip(self.names, self.beta))
        return f"base {self.base_name}; components {', '.join(self.names[1:])}; {polytope}; last step's beta {beta}"

    # -- the polytope

    def bounds(self, t):
        """(lo, hi) of beta_0 at step t under the schedule."""
        if self.schedule == "I":
            return 0.0, min(self.end, self.start + self.rate * t)
        b = FIXED_COEF[self.schedule]
        return b, b

    def _initial_beta(self, t):
        K = len(self.components)
        _, hi = self.bounds(t)
        b0 = min(hi, 1.0 - K * self.min_other)
        return np.concatenate([[b0], np.full(K, (1.0 - b0) / K)])

    def component_estep(self, weights, idx=None):
        """Per component k: (E_{q_k}[f] summed over sentences, log Z_{k,s})."""
        return self.parser.component_io(weights, idx)

    # -- the algorithm interface

    def step(self):
        if self.fixed is None:                          # C-step from the latest L_k
            lo, hi = self.bounds(self.it)
            if np.all(np.isfinite(self.L)):
                self.beta = c_step(self.L, lo, hi, self.min_other)
            else:
                self.beta = self._initial_beta(self.it)
        if not np.array_equal(self.parser.beta, self.beta):
            self.base.parser_changed()                  # e.g. LN model II's reusable parse was made under the old beta
        self.parser.beta = self.beta
        st = self.base.step()
        if st is None:
            return None
        self.it += 1
        self.L, fallback = self.parser.latest()
        if self.fixed is None and self.bounds(self.it) != self.bounds(self.it - 1):
            self.base.done = False                      # beta moves on: not converged
            st.extra.pop("stopped", None)               # (nor does the trace say so)
        extra = {f"beta_{n}": float(b) for n, b in zip(self.names, self.beta)}
        extra.update({f"L_{n}": float(v) for n, v in zip(self.names, self.L)})
        extra.update({f"fallback_{n}": int(v) for n, v in zip(self.names[1:], fallback)})
        extra["bound"] = st.objective
        if self.base_name == "em":
            extra["loglik"] = float(self.L[0])          # log p(x | theta): the mean-field component
        st.extra.update(extra)
        return st

    def weights(self):
        return self.base.weights()

    def mean(self):
        return self.base.mean()

    @property
    def theta(self):
        return self.base.theta

    @property
    def st(self):
        """The logistic-normal expert structure (base ln only)."""
        return self.base.st

    def save(self, path):
        if not hasattr(self.base, "save"):
            raise InputError("--ln-params needs --base ln")
        self.base.save(path)

    def get_state(self):
        s = {f"base_{k}": v for k, v in self.base.get_state().items()}
        s.update({"mix_beta": self.beta, "mix_L": self.L, "mix_it": self.it})
        return s

    def set_state(self, s):
        self.base.set_state({k[5:]: v for k, v in s.items() if k.startswith("base_")})
        self.beta = np.array(s["mix_beta"], dtype=np.float64)
        self.L = np.array(s["mix_L"], dtype=np.float64)
        self.it = int(s["mix_it"])
        self.parser.beta = self.beta
