"""Collapsed variational Bayes for PCFGs (Wang & Blunsom 2013, Fig. 3;
Pate & Johnson 2016, Alg. 4).

The rule probabilities theta are integrated out; q(t) = prod_i q(t_i) is a
product over sentences and each sentence i keeps its expected rule counts
f_hat^(i) = E_{q(t_i)}[f(t_i)].  With Dirichlet(alpha) priors per LHS::

    alpha_hat = alpha + sum_i f_hat^(i)

One sweep visits every sentence once, in an order drawn from ``rng``::

    alpha_hat^{-i} = alpha_hat - f_hat^(i)                        (remove i)
    theta_r        = alpha_hat^{-i}_r / sum_{r' in R_A} alpha_hat^{-i}_r'
    f_hat^(i)      = E[f | w_i; theta]     (inside-outside on sentence i)
    alpha_hat      = alpha_hat^{-i} + f_hat^(i)                   (add back)

theta is the posterior mean of the *other* sentences.  Exactly,
P(t_i | t_{-i}) = prod_A prod_{r in R_A} a_r^(f_r(t_i)) / a_A^(f_A(t_i)) with
a = alpha + f(t_{-i}), a_A its sum over R_A and x^(k) the rising factorial;
Wang & Blunsom replace f(t_{-i}) by its expectation alpha_hat^{-i} - alpha
under q and x^(k) by x^k, which makes it the PCFG with weights theta (exact
when t_i uses each LHS at most once and the other counts are certain).
The kernel gets these normalised weights, so its log Z_i is the approximate
collapsed predictive log P(w_i | w_{-i}); the reported objective of a sweep
is the sum of these log Z_i over the sentences parsed during the sweep, each
under the theta it was parsed with (a pseudo-likelihood, not a bound: it
need not increase).  One kernel call per sentence: ``cfg.jobs`` is unused.

Sentences the parser cannot parse (``parser.failures``, or log Z = -inf)
are skipped and keep zero counts.

Memory: f_hat^(i) is stored sparsely in one :class:`CountPool`: the rule
index (uint16 for grammars of at most 65,536 rules, else int32) and float32
value of each nonzero count, plus 16 bytes a sentence.  A DMV sentence of n
words has 5n - 1 rule uses but nonzero expected counts for every possible
arc's choose rule: on random 4-15-tag sentences over 35 tags about 154
counts, 937 bytes a sentence (``python -m grind.bench.cvb``), within the 1 KB
budget, so no count is dropped (only float32 underflows to 0).  alpha_hat
always changes by the float32 values stored, so removing a sentence
subtracts exactly what adding it added; it is summed afresh from the pool
after every sweep, so float64 rounding cannot drift across sweeps.
"""
from __future__ import annotations

import math

import numpy as np

from grind.errors import NumericalError
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.training import Step

#: Sentences per chunk when summing the pool (bounds temporary memory).
_CHUNK = 1 << 15
_NO_RULES, _NO_VALUES = np.zeros(0, np.int64), np.zeros(0, np.float32)


def _excl_cumsum(x):
    """[0, x0, x0+x1, ...] without the last total (int64)."""
    out = np.zeros(len(x), dtype=np.int64)
    np.cumsum(x[:-1], out=out[1:])
    return out


def _ranges(starts, lengths):
    """Concatenation of arange(s, s + l) for each (s, l), vectorised."""
    lengths = np.asarray(lengths, dtype=np.int64)
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - _excl_cumsum(lengths), lengths)
    return shift + np.arange(int(lengths.sum()), dtype=np.int64)


class CountPool:
    """Sparse per-sentence count vectors in one growing pool (CSR-like).

    Sentence i owns the slot ``[off[i], off[i] + cap[i])`` of ``idx``/``val``;
    its first ``len[i]`` entries are its nonzero counts (rule index, float32
    value), sorted by rule.  A vector that does not fit its slot moves to
    the end; a full pool is compacted (slots shrunk to their lengths) and,
    only if that frees too little, enlarged by what is needed plus 1/64.
    Rule indices are uint16 when the grammar has at most 65,536 rules, int32
    otherwise; the per-sentence bookkeeping is 16 bytes.
    """

    def __init__(self, n_sentences: int, n_rules: int, capacity: int = 0):
        self.idx_dtype = np.dtype(np.uint16 if n_rules <= 1 << 16 else np.int32)
        self.idx = np.zeros(capacity, dtype=self.idx_dtype)
        self.val = np.zeros(capacity, dtype=np.float32)
        self.off = np.zeros(n_sentences, dtype=np.int64)
        self.len = np.zeros(n_sentences, dtype=np.int32)
        self.cap = np.zeros(n_sentences, dtype=np.int32)
        self.top = 0                       # first free entry after the last slot

    def get(self, i):
        """Views (rule indices, float32 values) of sentence i's counts."""
        o = self.off[i]
        e = o + self.len[i]
        return self.idx[o:e], self.val[o:e]

    def put(self, i, rules, values, growth=64):
        """Store sentence i's counts (``values`` float32, zeros already dropped)."""
        k = len(rules)
        if k > self.cap[i]:
            if self.top + k > len(self.idx):
                self._make_room(k, growth)
            self.off[i], self.cap[i] = self.top, k
            self.top += k
        o = self.off[i]
        self.idx[o:o + k] = rules
        self.val[o:o + k] = values
        self.len[i] = k

    def _make_room(self, k, growth):
        self.compact()
        need = self.top + k
        if need > len(self.idx):
            self._resize(need + len(self.idx) // growth)

    def compact(self):
        """Move slots to the front in pool order, each shrunk to its length."""
        order = np.flatnonzero(self.cap > 0)
        order = order[np.argsort(self.off[order], kind="stable")]
        new_off = _excl_cumsum(self.len[order])
        for lo in range(0, len(order), _CHUNK):           # new_off <= off: moves left only
            s = order[lo:lo + _CHUNK]
            src = _ranges(self.off[s], self.len[s])
            dst = _ranges(new_off[lo:lo + _CHUNK], self.len[s])
            self.idx[dst], self.val[dst] = self.idx[src], self.val[src]
        self.off[:] = 0
        self.off[order] = new_off
        self.cap[:] = self.len
        self.top = int(new_off[-1] + self.len[order[-1]]) if len(order) else 0

    def trim(self):
        """Compact and drop all free capacity."""
        self.compact()
        self._resize(self.top)

    def _resize(self, capacity):
        """Grow or shrink the pool in place (``ndarray.resize``: realloc, which
        moves a large block by remapping its pages, so the old and the new pool
        are never both in memory; at Fisher size the copy was the peak).  No
        view of ``idx`` / ``val`` may be alive here (:meth:`get`'s are dropped
        before :meth:`put`)."""
        for a in (self.idx, self.val):
            a.resize(capacity, refcheck=False)

    def add_to(self, out):
        """out += sum_i f_hat^(i), in sentence order (independent of the layout)."""
        n = len(self.len)
        for lo in range(0, n, _CHUNK):
            pos = _ranges(self.off[lo:lo + _CHUNK], self.len[lo:lo + _CHUNK])
            out += np.bincount(self.idx[pos], weights=self.val[pos].astype(np.float64),
                               minlength=len(out))
        return out

    def nbytes(self) -> int:
        """Bytes held: pool capacity plus per-sentence bookkeeping."""
        return sum(a.nbytes for a in (self.idx, self.val, self.off, self.len, self.cap))

    def get_state(self):
        return {"pool_idx": self.idx[:self.top], "pool_val": self.val[:self.top], "pool_off": self.off,
                "pool_len": self.len, "pool_cap": self.cap, "pool_capacity": len(self.idx)}

    def set_state(self, s):
        self.top = len(s["pool_idx"])
        capacity = int(s["pool_capacity"])
        self.idx = np.zeros(capacity, dtype=self.idx_dtype)
        self.val = np.zeros(capacity, dtype=np.float32)
        self.idx[:self.top], self.val[:self.top] = s["pool_idx"], s["pool_val"]
        self.off = np.array(s["pool_off"], dtype=np.int64)
        self.len = np.array(s["pool_len"], dtype=np.int32)
        self.cap = np.array(s["pool_cap"], dtype=np.int32)


class DenseOnly:
    """A parser seen without its one-sentence hooks (``local_rules`` /
    ``sparse_counts``): CVB's dense path -- theta refreshed per LHS, one
    inside-outside over all rules a sentence.  The reference the hooks are
    tested and benchmarked against."""

    def __init__(self, p):
        self.p, self.grammar, self.sentences, self.failures = p, p.grammar, p.sentences, p.failures

    def inside_outside(self, w, idx=None):
        return self.p.inside_outside(w, idx)

    def _idx(self, idx):
        return self.p._idx(idx)


CVBConfig = config_class("CVBConfig", "cvb", "Collapsed VB: --iterations are sweeps; one kernel call per sentence "
                         "(``jobs`` unused).")


class CVB(Algorithm):
    """Collapsed VB as a training-loop algorithm; one ``update()`` is one sweep.

    ``cfg.cvb_init`` (default ``"grammar"``): the initial f_hat^(i) are the
    expected counts of sentence i under the initial grammar theta0;
    ``"random"``: under theta0 * exp(z_i) with z_i ~ N(0, 1) per rule, drawn
    for each sentence from ``rng`` (sentence-specific random counts, each a
    valid posterior over sentence i's trees); on the local-theta path (a large
    grammar) z_i is drawn only for the rules sentence i can read, the only
    weights its counts depend on (the same distribution, O(n^2) a sentence).  Output: alpha_hat
    (pseudo-counts).
    """

    name = "cvb"
    output = "pseudo-counts"
    Config = CVBConfig
    #: Grammars up to this size renormalise all of theta for each sentence.
    full_refresh_rules = 16384

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        cfg = CVBConfig.of(cfg)
        self.g, self.parser, self.rng = grammar, estep.parser, rng
        self.prior = np.asarray(prior, dtype=np.float64)
        self.iterations, self.tolerance = cfg.iterations, cfg.tolerance
        self.n = len(self.parser.sentences)
        self._index_lhs()
        self.pool = CountPool(self.n, len(grammar))
        #: LHS totals of alpha_hat for the local-theta path (a parser with ``local_rules``, on a
        #: grammar above ``full_refresh_rules``); None: theta refreshed per LHS (:meth:`_refresh`).
        self.lhs_tot = (np.zeros(0) if getattr(self.parser, "local_rules", None) is not None
                        and len(grammar) > self.full_refresh_rules else None)
        self._one = np.zeros(1, dtype=np.int64)
        self.it, self.prev, self.done, self.parsed_total = 0, None, False, 0
        self._refit(np.asarray(theta0, dtype=np.float64))
        self._initialise(np.asarray(theta0, dtype=np.float64), cfg.cvb_init, getattr(estep, "on_first", None))

    def _refit(self, theta):
        """A parser that projects the posterior (:class:`grind.infer.posterior_reg.TiltedParser`) fits its
        dual to the whole corpus under ``theta`` and holds it through the next sweep."""
        refit = getattr(self.parser, "refit", None)
        if refit is not None:
            refit(theta)

    def _index_lhs(self):
        """Rules grouped by LHS: ``by_lhs[start[A]:start[A] + size[A]]``."""
        lhs = self.g.lhs
        self.by_lhs = np.argsort(lhs, kind="stable").astype(np.int32 if len(lhs) < 1 << 31 else np.int64)
        self.lhs_size = np.bincount(lhs, minlength=len(self.g.nonterminals)).astype(np.int64)
        self.lhs_start = _excl_cumsum(self.lhs_size)

    def _initialise(self, theta0, how, on_first=None):
        """Each sentence's expected counts under ``theta0`` (or, ``random``, theta0
        times log-normal noise); ``on_first(log Z)`` names the sentences with none."""
        if how not in ("grammar", "random"):
            raise ValueError(f"cvb_init must be 'grammar' or 'random', not {how!r}")
        logz = np.zeros(self.n)
        noisy = None if how == "grammar" or self.lhs_tot is None else theta0.copy()
        for i in range(self.n):
            if i in self.parser.failures:
                continue
            if how == "grammar":
                w = theta0
            elif noisy is not None:         # a large grammar: noise on the rules sentence i can read, the rest unread
                r = self.parser.local_rules(i)
                noisy[r] = theta0[r] * np.exp(self.rng.standard_normal(len(r)))
                w = noisy
            else:
                w = theta0 * np.exp(self.rng.standard_normal(len(theta0)))
            rules, values, logz[i] = self._expected_counts(w, i)
            self.pool.put(i, rules, values, growth=2)
        if on_first is not None:
            on_first(logz)
        self.pool.trim()
        self._resync()

    def _resync(self):
        """alpha_hat = alpha + sum_i f_hat^(i) afresh, theta = its normalisation
        (once a sweep: rounding cannot drift across sweeps)."""
        self.alpha_hat = self.theta = None          # dropped before their successors are made
        self.alpha_hat = self.pool.add_to(self.prior.copy())
        self.theta = self.g.normalize(self.alpha_hat)
        if self.lhs_tot is not None:
            self.lhs_tot = np.bincount(self.g.lhs, weights=self.alpha_hat, minlength=len(self.lhs_size))

    def _expected_counts(self, weights, i):
        """(nonzero rule indices, float32 counts, log Z) of sentence i; none if unparseable."""
        sparse = getattr(self.parser, "sparse_counts", None)
        if sparse is not None:                  # a kernel that can give one sentence's nonzero counts directly
            rules, values, z = sparse(weights, i)
        else:
            self._one[0] = i
            counts, logz = self.parser.inside_outside(weights, self._one)
            z = float(logz[0])
        if math.isnan(z):
            raise NumericalError(f"CVB: log Z of sentence {i} is NaN")
        if z == -math.inf:
            return _NO_RULES, _NO_VALUES, z
        if sparse is not None:
            keep = values != 0
            rules, values = rules[keep], values[keep]
        else:
            rules = np.flatnonzero(counts)
            values = counts[rules]
        if not math.isfinite(values.sum()):
            raise NumericalError(f"CVB: non-finite expected counts for sentence {i}")
        values = values.astype(np.float32)
        if not values.all():                               # float32 underflow
            keep = values > 0
            rules, values = rules[keep], values[keep]
        return rules, values, z

    def _refresh(self, added, removed):
        """theta = alpha_hat normalised per LHS, where it may have changed
        (on the LHSs of the rules in ``added`` or ``removed``).

        Small grammars (at most ``full_refresh_rules`` rules): all of theta
        (a few vectorised passes, cheaper than finding what changed).  Larger
        ones: theta_r = alpha_hat_r / sum_{R_A} alpha_hat for the rules r of
        those LHSs A only, each total summed afresh (no drift).
        """
        if len(self.g) <= self.full_refresh_rules:
            tot = np.bincount(self.g.lhs, weights=self.alpha_hat, minlength=len(self.lhs_size))
            np.divide(self.alpha_hat, tot[self.g.lhs], out=self.theta)
            return
        lhs = np.unique(self.g.lhs[np.concatenate([added, removed])])
        if not len(lhs):
            return
        size = self.lhs_size[lhs]
        r = self.by_lhs[_ranges(self.lhs_start[lhs], size)]
        a = self.alpha_hat[r]
        tot = np.add.reduceat(a, _excl_cumsum(size))
        self.theta[r] = a / np.repeat(tot, size)

    def _local_theta(self, i, old):
        """theta_r = alpha_hat_r / sum_{R_A} alpha_hat for the rules sentence i's
        parse can read only (``parser.local_rules(i)``: a gold tree's subtype
        blocks), from LHS totals kept up to date by every change of alpha_hat
        (``self.lhs_tot``, summed afresh once a sweep): the other entries of
        theta go stale and are never read.  The totals are updated by the
        changes, so they differ from fresh sums by rounding only (1e-15)."""
        rules = self.parser.local_rules(i)
        self.theta[rules] = self.alpha_hat[rules] / self.lhs_tot[self.g.lhs[rules]]

    def _visit(self, i, touched):
        """Remove, re-parse and add back sentence i; returns (its rules, log Z).

        ``touched``: the rules the previous visit added to (theta is stale
        on their LHSs)."""
        old, v = self.pool.get(i)
        ah = self.alpha_hat
        local = self.lhs_tot is not None
        if local:
            before = ah[old].copy()
        ah[old] = np.maximum(ah[old] - v, self.prior[old])   # alpha_hat^{-i} >= alpha
        if local:
            np.add.at(self.lhs_tot, self.g.lhs[old], ah[old] - before)
            self._local_theta(i, old)
        else:
            self._refresh(touched, old)
        rules, values, z = self._expected_counts(self.theta, i)
        del old, v                                             # views of the pool, which put may resize
        self.pool.put(i, rules, values)
        ah[rules] += values                                    # exactly the stored float32
        if local:
            np.add.at(self.lhs_tot, self.g.lhs[rules], values.astype(np.float64))
        return rules, z

    def update(self):
        """One sweep: every parseable sentence removed, re-parsed and added back, in a random order."""
        objective, parsed, touched = 0.0, 0, np.zeros(0, np.int64)
        self._refit(self.theta)
        for i in self.rng.permutation(self.n):
            if int(i) in self.parser.failures:
                continue
            touched, z = self._visit(int(i), touched)
            if math.isfinite(z):
                objective += z
                parsed += 1
        if not parsed:
            raise NumericalError(f"collapsed VB sweep {self.it + 1}: no sentence has a parse of positive probability")
        self._resync()
        self.it += 1
        self.parsed_total += parsed
        self.observe(objective)
        return Step(self.it, objective, self.parsed_total,
                    extra={"parsed": parsed, "bytes_per_sentence": self.bytes_per_sentence()})

    def bytes_per_sentence(self) -> float:
        """Bytes of stored counts (pool capacity + bookkeeping) per sentence."""
        return self.pool.nbytes() / max(1, self.n)

    def weights(self):
        """What the output grammar holds: the posterior pseudo-counts alpha_hat."""
        return self.alpha_hat

    def mean(self):
        """Posterior mean alpha_hat / sum_{R_A} alpha_hat."""
        return self.g.normalize(self.alpha_hat)

    def get_state(self):
        s = {"alpha_hat": self.alpha_hat, "it": self.it, "prev": self.prev, "done": self.done,
             "parsed_total": self.parsed_total}
        s.update(self.pool.get_state())
        return s

    def set_state(self, s):
        self.pool.set_state(s)
        self.alpha_hat = np.array(s["alpha_hat"], dtype=np.float64)
        self.theta = self.g.normalize(self.alpha_hat)
        if self.lhs_tot is not None:
            self.lhs_tot = np.bincount(self.g.lhs, weights=self.alpha_hat, minlength=len(self.lhs_size))
        self.it, self.prev, self.done = int(s["it"]), s["prev"], bool(s["done"])
        self.parsed_total = int(s["parsed_total"])
