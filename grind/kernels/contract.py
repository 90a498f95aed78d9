"""The one contract between inference algorithms and chart kernels.

    rule weights in  ->  expected rule counts and log partition out
                         (+ Viterbi derivations and sampled derivations)

Every algorithm (EM, VB, CVB, samplers, priors) talks to a grammar only
through a :class:`ChartParser` built for a fixed corpus; the kernels behind it
(the general CKY kernel, the split-head DMV kernel) know nothing of priors.

A *derivation* is an ``int64`` array of shape ``(n_nodes, 3)`` whose rows are
``(rule, start, end)`` in pre-order: the rule (an index into
``grammar.rules``) used at a node and the token span ``[start, end)`` it
covers.  ``np.bincount(d[:, 0], minlength=len(grammar))`` is its rule-count
vector.
"""
from __future__ import annotations

import abc
from typing import NamedTuple

import numpy as np

from grind import log
from grind.errors import NumericalError

#: Rule weights in (0, FLUSH) are read as 0 by the DMV kernel: its power-of-two scaling cannot mix
#: them with ordinary weights (it returned NaN), and a tree that needs one weighs less than FLUSH times
#: one that does not.  A sentence all of whose trees need one is unparseable (log Z = -inf).
FLUSH = 1e-200
#: The CKY kernel reads subnormal weights (below the smallest normal float, ~2.2e-308) as 0: its outside
#: scores, stored relative to the inside ones, overflowed with them (EM had driven three weights to
#: ~1e-310 .. 9e-322).  Normal weights, however small (VB's exp(psi) under a sparse prior), stay exact.
SUBNORMAL = float(np.finfo(np.float64).tiny)
#: The kernels that have said so in this process (once each: training calls a kernel every step).
_flush_said: set = set()


def flushed(w: np.ndarray, kernel: str, below: float = FLUSH) -> np.ndarray:
    """``w`` with its weights in (0, ``below``) set to 0, said once a process per ``kernel`` name."""
    tiny = (w > 0) & (w < below)
    if not tiny.any():
        return w
    say_flush(tiny, kernel, below)
    return np.where(tiny, 0.0, w)


def say_flush(tiny, kernel: str, below: float = FLUSH) -> None:
    """Warn (once a process per kernel) that the weights in ``tiny`` (a mask) are read as 0."""
    if kernel not in _flush_said:
        _flush_said.add(kernel)
        log.warn(f"the {kernel} kernel reads {int(np.count_nonzero(tiny))} rule weight(s) in (0, {below:.3g}) as "
                 "0: its scaled arithmetic cannot mix them with ordinary weights, and a tree that needs one "
                 f"weighs less than {below:.3g} times one that does not (a sentence all of whose trees need one "
                 "is unparseable)")




class LocalRules(NamedTuple):
    """The rules each of some sentences can read (:meth:`ChartParser.local_tables`): sentence
    ``idx[k]`` reads ``rules[off[k]:off[k+1]]`` (sorted); ``tables`` is the kernel's own."""

    idx: np.ndarray
    off: np.ndarray
    rules: np.ndarray
    tables: object = None


class ChartParser(abc.ABC):
    """A grammar's rule set compiled for one corpus of tokenised sentences.

    ``failures`` maps the index of each sentence that cannot be parsed for a
    reason known before any weights are seen (an unknown word, a sentence too
    long) to that reason; those sentences get log Z = -inf and no counts.
    Sentences whose every derivation has zero weight also get -inf.
    """

    grammar: object
    sentences: list
    failures: dict

    @abc.abstractmethod
    def inside_outside(self, weights: np.ndarray, idx=None):
        """Expected rule counts and log partition of sentences ``idx`` (all if None).

        Returns ``(counts, logz)``: ``counts[r] = sum_s E[f_r | w_s]`` over the
        parseable sentences (float64, one entry per grammar rule) and
        ``logz[s] = log sum_t prod_r weights[r]^{f_r(t)}`` (``-inf`` when
        sentence ``s`` has no derivation of positive weight).  Weights need not
        be normalised (VB passes sub-normalised weights).
        """

    #: whether :meth:`inside_outside_sparse` costs less than :meth:`inside_outside`
    #: on a large grammar (the shard reduction uses it then)
    sparse_counts_pay = False

    def inside_outside_sparse(self, weights: np.ndarray, idx=None):
        """:meth:`inside_outside` as ``(rules, values, logz)``: ``counts[rules]
        = values`` and every other count 0 (each rule at most once, in no
        particular order).  A kernel that touches only a few rules per sentence
        overrides it to skip the passes over all rules; the values are the
        same bit for bit."""
        counts, logz = self.inside_outside(weights, idx)
        rules = np.flatnonzero(counts)
        return rules, counts[rules], logz

    def duplicate_keys(self):
        """Per sentence a hashable key, equal for two sentences only if every quantity of theirs
        (log Z, counts, Viterbi, samples) is the same under any weights; or None (this default:
        the kernel does not say).  Callers may then compute one sentence of each key."""
        return None

    def local_tables(self, idx=None) -> LocalRules:
        """The rules each sentence of ``idx`` can read: its counts and log Z depend on
        their weights only.  This default says every rule; a kernel that knows its
        sentences' rules (the DMV's) overrides it and :meth:`inside_outside_local`."""
        idx = self._idx(idx)
        R = len(self.grammar)
        off = np.arange(len(idx) + 1, dtype=np.int64) * R
        return LocalRules(idx, off, np.tile(np.arange(R, dtype=np.int64), len(idx)))

    def inside_outside_local(self, local: LocalRules, weights: np.ndarray):
        """Every sentence of ``local`` under its own weights, ``weights[off[k]:off[k+1]]``
        for the rules it reads (:meth:`local_tables`): ``(counts, logz)``, the expected
        counts at the same places and log Z per sentence.  This default calls
        :meth:`inside_outside` once a sentence (the other rules at weight 0)."""
        weights = np.asarray(weights, dtype=np.float64)
        counts, logz = np.zeros(len(local.rules)), np.empty(len(local.idx))
        for k, i in enumerate(local.idx):
            lo, hi = local.off[k], local.off[k + 1]
            w = np.zeros(len(self.grammar))
            w[local.rules[lo:hi]] = weights[lo:hi]
            c, z = self.inside_outside(w, [int(i)])
            counts[lo:hi] = c[local.rules[lo:hi]]
            logz[k] = z[0]
        return counts, logz

    @abc.abstractmethod
    def viterbi(self, weights: np.ndarray, idx=None):
        """Best derivation of each sentence: ``(derivations, logprob)``, ``None`` where unparseable."""

    @abc.abstractmethod
    def sample(self, weights: np.ndarray, rng: np.random.Generator, idx=None):
        """One derivation per sentence drawn from ``P(t | w_s, weights)``; ``None`` where unparseable."""

    def _idx(self, idx):
        return np.arange(len(self.sentences)) if idx is None else np.asarray(idx, dtype=np.int64)

    def _weight_vector(self, weights, check: bool = True) -> np.ndarray:
        """``weights`` as a C-contiguous float64 vector, one entry per rule (not
        copied when it already is one); ValueError for another shape; with
        ``check``, NumericalError unless every entry is finite and non-negative
        (a kernel that reads only some entries checks those itself)."""
        w = weights
        if not (type(w) is np.ndarray and w.dtype == np.float64 and w.flags.c_contiguous):
            w = np.ascontiguousarray(w, dtype=np.float64)
        if w.shape != (len(self.grammar),):
            raise ValueError(f"expected {len(self.grammar)} weights, got shape {w.shape}")
        if check and w.size and not (w.min() >= 0 and np.isfinite(w.max())):     # NaN fails both
            raise NumericalError("rule weights must be finite and non-negative")
        return w

    def _sentence(self, i) -> int:
        """Sentence index ``i`` as an int; IndexError outside the corpus."""
        if not 0 <= i < len(self.sentences):
            raise IndexError(f"sentence index out of range 0..{len(self.sentences) - 1}")
        return int(i)


def derivation_counts(derivations, n_rules: int) -> np.ndarray:
    """Rule-count vector f(t) summed over derivations (``None`` entries skipped)."""
    c = np.zeros(n_rules, dtype=np.float64)
    for d in derivations:
        if d is not None:
            c += np.bincount(d[:, 0], minlength=n_rules)
    return c
