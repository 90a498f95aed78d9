"""Universal dependency rules as posterior regularization (Naseem, Chen, Barzilay & Johnson 2010;
Ganchev, Graça, Gillenwater & Taskar 2010).

A rule set is a list of (head tag, dependent tag) arcs (``ROOT`` as the head:
the root attachment).  phi(z) is the number of arcs of the trees z of the
corpus that follow a rule; N the number of arcs (one per word, the root's
included).  The E-step's posterior p(z | x) (under the weights the algorithm
passes: EM's theta, VB's exp(E log theta)) is replaced by its KL projection
onto the set of posteriors with E_q[phi] >= F N::

    q = argmin_{q : E_q[phi] >= F N} KL(q || p)   =   p(z | x) exp(lam phi(z)) / normaliser

lam >= 0 maximises the concave dual  g(lam) = lam F N - sum_s log(Z_s(lam) / Z_s(0)),
Z_s(lam) the partition function of sentence s with the weights of the
rule-following attach rules (choose and root rules) multiplied by exp(lam).
g'(lam) = F N - E_{q_lam}[phi] is decreasing, so lam = 0 when p already meets
the constraint, else the root of E_{q_lam}[phi] = F N, found by regula falsi
(Illinois) on E-steps of the unchanged kernel: each gives E_{q_lam}[phi] as
the sum of the rule-following rules' expected counts.  The counts returned
are E_q[f]; the per-sentence log Z returned is log Z_s(lam) - lam E_q[phi] n_s / N
(n_s words), so their sum is sum_s log Z_s(0) - KL(q || p): the PR objective
L(theta) - min_{q in Q} KL(q || p_theta), which EM with this E-step never
decreases (coordinate ascent on L - KL(q || p), Ganchev et al. 2010 §2.6);
VB's bound gains the same -KL term.

When no lam <= :data:`LAMBDA_MAX` reaches F N (fewer arcs can follow the
rules), lam stops there; the trace's ``rule_share`` says how far it got.
"""
from __future__ import annotations

import os

import numpy as np

from grind import log
from grind.errors import InputError, NumericalError
from grind.formats.textio import two_columns
from grind.infer.options import RULE_FRACTION

ROOT = "ROOT"
#: ``--universal-rules`` names of the shipped rule files (grind/data/).
RULE_FILES = {"naseem": "universal-rules-naseem.txt", "ud": "universal-rules-ud.txt"}
#: The rule set of ``--universal-rules`` without a value.
DEFAULT_RULES = "ud"
#: The default --rule-fraction.
DEFAULT_FRACTION = RULE_FRACTION
#: The largest dual variable tried: rule-following arcs weigh e^30 (about 1e13) times more.
LAMBDA_MAX = 30.0
#: The dual is solved to |E_q[phi] - F N| <= this * N.
TOLERANCE = 1e-9
#: At most this many E-steps per projection.
MAX_ESTEPS = 60


def rules_path(name: str) -> str:
    """``naseem`` / ``ud`` -> the shipped rule file; anything else is a path."""
    if name in RULE_FILES:
        return os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", RULE_FILES[name])
    return name


def read_rules(name: str) -> list[tuple[str, str]]:
    """The (head, dependent) pairs of a rule file (:func:`rules_path`): ``HEAD DEP`` a line, ``#`` comments."""
    out = [(head, dep) for _, head, dep in two_columns(rules_path(name), name, "'HEAD DEP' (HEAD may be ROOT)")]
    if not out:
        raise InputError(f"{name}: no 'HEAD DEP' lines: an empty rule set")
    return out


def rule_mask(grammar, rules) -> np.ndarray:
    """Per grammar rule: does it make an arc of the rule set (a choose rule of a listed head and
    dependent, either direction, or the root rule of a tag listed under ROOT)?  InputError when no
    rule of the grammar does (a rule set over other tags)."""
    from grind.grammars.dmv import CHOOSE_L, SLOT, dmv_index, dmv_problem
    why = dmv_problem(grammar)
    if why is not None:
        raise InputError(f"universal rules are arcs of a DMV grammar, and this is none: {why}")
    ix = dmv_index(grammar)
    pairs = set(rules)
    head = np.array([ROOT] + list(ix.types), dtype=object)
    tid = np.where(ix.kind == SLOT["root"], -1, ix.head)         # the root rule's head is ROOT
    dep = np.where(ix.kind == SLOT["root"], ix.head, ix.dep)
    use = (ix.kind >= CHOOSE_L) | (ix.kind == SLOT["root"])
    types = np.array(ix.types, dtype=object)
    mask = np.zeros(len(grammar), dtype=bool)
    rows = np.flatnonzero(use)
    mask[rows] = [(h, d) in pairs for h, d in zip(head[tid[rows] + 1], types[dep[rows]])]
    if not mask.any():
        tags = sorted({t for p in rules for t in p} - {ROOT})
        raise InputError(f"no rule of the grammar makes an arc of the universal rules (tags {' '.join(tags)}); "
                         f"the grammar's tags are {' '.join(ix.types)}: a rule set for another tag set?")
    return mask


def regularize(grammar, estep, rules: str = DEFAULT_RULES, fraction: float | None = None):
    """``estep`` projected toward the rule set ``rules`` (a :data:`RULE_FILES` name or a file) with
    ``fraction`` (None: :data:`DEFAULT_FRACTION`), and the header lines that say so:
    ``(PosteriorRegularizer, {"universal_rules": ..., "rule_fraction": ...})``."""
    pairs = read_rules(rules)
    mask = rule_mask(grammar, pairs)
    fraction = DEFAULT_FRACTION if fraction is None else float(fraction)
    shown = f"{rules} ({os.path.basename(rules_path(rules))})" if rules != rules_path(rules) else rules
    head = {"universal_rules": f"{shown}: {len(pairs)} head>dependent arcs ({' '.join(f'{h}>{d}' for h, d in pairs)})"
                               f"; {int(mask.sum())} rules of the grammar follow them",
            "rule_fraction": f"{fraction:g} (posterior regularization: E_q[arcs following the rules] >= this share of "
                             "the arcs)"}
    return PosteriorRegularizer(estep, mask, fraction), head


class PosteriorRegularizer:
    """An E-step ``(weights, idx) -> (counts, logz)`` projected as the module says.

    ``estep``: the plain E-step (a :class:`grind.infer.training.ShardedEstep`);
    ``follows``: :func:`rule_mask`; ``fraction``: F.  Everything else of the
    E-step (``parser``, shards, ...) is the plain one's.  :meth:`trace_extra` gives
    the last projection's lam, the share of arcs following the rules under q
    and under p, and the E-steps it took (for the trace).
    """

    def __init__(self, estep, follows, fraction: float, lam_max: float = LAMBDA_MAX, tol: float = TOLERANCE):
        if not 0.0 <= fraction <= 1.0:
            raise InputError(f"rule fraction {fraction}: not in [0, 1]")
        self.estep, self.follows, self.fraction = estep, np.asarray(follows, dtype=bool), float(fraction)
        self.lam_max, self.tol = lam_max, tol
        self.words = np.array([len(s) for s in estep.parser.sentences], dtype=np.float64)
        self.last: dict = {}
        self.short = False              # said that the constraint could not be met
        #: The parser the algorithm sees: the plain one, tilted by the lambda of :meth:`TiltedParser.refit`
        #: (collapsed VB's one-sentence updates; 0, i.e. the plain parser, until refitted).
        self.parser = TiltedParser(self)

    def __getattr__(self, name):
        if name in ("estep", "parser"):   # (not set yet: no recursion)
            raise AttributeError(name)
        return getattr(self.estep, name)

    def tilted(self, weights, lam: float) -> np.ndarray:
        """The weights with the rule-following rules' multiplied by exp(lam)."""
        w = np.array(weights, dtype=np.float64)
        w[self.follows] *= np.exp(lam)
        return w

    def __call__(self, weights, idx=None):
        counts, logz = self.estep(weights, idx)
        ok = np.isfinite(logz)
        n = self.words[self.estep.parser._idx(idx)] * ok
        arcs = float(n.sum())
        target = self.fraction * arcs
        phi0 = float(counts[self.follows].sum())
        lam, phi, esteps = 0.0, phi0, 1
        if arcs > 0 and phi0 < target - self.tol * arcs:
            lam, counts, logz, phi, esteps = self._solve(weights, idx, target, arcs, phi0)
        share = phi / arcs if arcs else float("nan")
        self.last = {"pr_lambda": lam, "rule_share": share, "rule_share_p": phi0 / arcs if arcs else float("nan"),
                     "pr_esteps": esteps}
        if lam:
            logz = np.where(ok, logz - lam * phi * n / arcs, logz)
        return counts, logz

    def _solve(self, weights, idx, target, arcs, phi0):
        """lam with E_{q_lam}[phi] = target (regula falsi, Illinois), and its counts, log Z, phi, E-steps."""
        def at(lam):
            c, z = self.estep(self.tilted(weights, lam), idx)
            if not np.all(np.isfinite(c)):
                raise NumericalError(f"posterior regularization: non-finite counts at lambda {lam:g}")
            return c, z, float(c[self.follows].sum())
        esteps = 1
        a, fa = 0.0, phi0 - target
        b = 1.0
        while True:
            cb, zb, pb = at(b)
            esteps += 1
            if pb >= target or b >= self.lam_max:
                break
            a, fa = b, pb - target
            b = min(2.0 * b, self.lam_max)
        fb = pb - target
        if fb < 0:                          # the constraint cannot be met below lam_max
            if not self.short:
                self.short = True
                log.warn(f"posterior regularization: at most {pb / arcs:.4f} of the arcs follow the universal "
                         f"rules in expectation (lambda {b:g}), not the {self.fraction:g} asked for: training goes "
                         "on at that lambda (the trace's rule_share says it at each step)")
            return b, cb, zb, pb, esteps
        best = (b, cb, zb, pb)
        side = 0
        for _ in range(MAX_ESTEPS):
            if abs(best[3] - target) <= self.tol * arcs:
                break
            c = (a * fb - b * fa) / (fb - fa)
            cc, zc, pc = at(c)
            esteps += 1
            fc = pc - target
            if abs(fc) < abs(best[3] - target):
                best = (c, cc, zc, pc)
            if fc < 0:
                a, fa = c, fc
                if side == -1:
                    fb /= 2
                side = -1
            else:
                b, fb = c, fc
                if side == 1:
                    fa /= 2
                side = 1
            if b - a <= 1e-12 * max(1.0, b):
                break
        lam, cnt, z, phi = best
        return lam, cnt, z, phi, esteps

    def trace_extra(self) -> dict:
        """The last projection's figures (for the trace)."""
        return dict(self.last)


class TiltedParser:
    """The plain parser with the rule-following rules' weights multiplied by
    exp(lam), lam the dual of the last :meth:`refit`: the projection for an
    algorithm that updates one sentence at a time (collapsed VB).  Its corpus-
    level constraint does not split over sentences, so lam is refitted on the
    whole corpus once a sweep (:meth:`refit`, under the posterior mean) and held
    through the sweep: each sentence's q is p exp(lam phi) normalised, and the
    constraint holds as of the refit, approximately after the sweep.  log Z of
    a one-sentence call is log Z(lam) - lam E_q[phi], as the regularizer's."""

    def __init__(self, pr: PosteriorRegularizer):
        self.pr, self.lam = pr, 0.0
        self.tilt = np.ones(len(pr.follows))

    def __getattr__(self, name):
        if name in ("pr", "lam", "tilt"):
            raise AttributeError(name)
        if name == "sparse_counts" and hasattr(self.pr.estep.parser, "sparse_counts"):
            return self._sparse_counts
        return getattr(self.pr.estep.parser, name)

    def refit(self, theta) -> None:
        """lam of the projection of the whole corpus's posterior under ``theta``."""
        self.pr(theta)
        self.lam = self.pr.last["pr_lambda"]
        self.tilt = np.where(self.pr.follows, np.exp(self.lam), 1.0)

    def inside_outside(self, weights, idx=None):
        counts, logz = self.pr.estep.parser.inside_outside(np.asarray(weights) * self.tilt, idx)
        if self.lam and len(logz) == 1:
            logz = logz - self.lam * float(counts[self.pr.follows].sum())
        elif self.lam:
            raise ValueError("TiltedParser.inside_outside: one sentence at a time")
        return counts, logz

    def _sparse_counts(self, weights, i):
        rules, values, logz = self.pr.estep.parser.sparse_counts(np.asarray(weights) * self.tilt, i)
        if self.lam and np.isfinite(logz):
            logz = logz - self.lam * float(values[self.pr.follows[rules]].sum())
        return rules, values, logz

    def trace_extra(self) -> dict:
        return self.pr.trace_extra()
