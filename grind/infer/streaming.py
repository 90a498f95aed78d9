"""Streaming variational Bayes for PCFGs (Broderick et al. 2013; Pate & Johnson
2016, Alg. 2): one pass over a stream of minibatches, each read, fitted and
forgotten, so the corpus never has to fit in memory.

Broderick et al. (2013, §2) apply Bayes' rule one minibatch at a time,
p(theta | C_1..C_b) ∝ p(C_b | theta) p(theta | C_1..C_{b-1}), replacing each
exact posterior by its mean-field approximation: the posterior after
minibatches 1..b-1, Dirichlet(alpha_hat), is the prior of minibatch b.  With
the prior alpha (initially alpha_hat = alpha), minibatch b is fitted by batch
VB (Pate & Johnson 2016, Alg. 1 = :mod:`grind.infer.vb`) on b alone with alpha_hat
as its prior (Alg. 2), ``cfg.batch_iterations`` = K iterations of

    pi_r       = exp(psi(alpha_b,r) - psi(sum_{r' in R_A} alpha_b,r'))
    alpha_b    = alpha_hat + E_pi[f on b]

from alpha_b = alpha_hat, after which alpha_hat <- alpha_b: the pseudo-counts
accumulate, alpha_hat = alpha + sum over minibatches of their expected counts.

Initialisation: the first minibatch starts, like :class:`grind.infer.vb.VB`, from
the initial grammar theta0: alpha_b = alpha + E_theta0[f on b] (one extra
E-step), then its K iterations.  So a single minibatch holding the whole
corpus gives exactly batch VB after K iterations.  Later minibatches start
from pi = vb_weights(alpha_hat), the weights of the posterior so far.

Objective of a step: the minibatch's VB bound before its last update
(:mod:`grind.infer.vb`, with alpha_hat in place of alpha as the prior),

    L_b = sum_{s in b} log Z_s(pi) - sum_A KL(Dir(alpha_b,A) || Dir(alpha_hat_A)),

a lower bound on log of the marginal likelihood of minibatch b under the
prior Dirichlet(alpha_hat), i.e. on log p(w_b | w_1..w_{b-1}) with the
approximate posterior; minibatches differ, so the trace is not monotone.

The minibatches come from the driver's :class:`grind.infer.training.StreamBatches`:
the corpus read with :func:`grind.formats.corpus.iter_corpus` (first minibatch
``cfg.first_batch`` sentences, default ``cfg.batch``; then ``cfg.batch``).
Sentences the parser cannot handle (unknown word, ...) or without a derivation
of positive weight are reported and contribute no counts.  The state is
alpha_hat, its per-LHS sums and the number of sentences consumed; a resumed
run reopens the file and skips that many sentences.

Sparse update (a minibatch of a few sentences, e.g. Pate & Johnson's one
sentence, on a kernel that lists a sentence's rules, the DMV's): minibatch b
can read only the rules R_b of its sentences (``local_rules``), so alpha_b
differs from alpha_hat only there, and pi, E_pi[f on b] and the KL term need
only R_b, their LHSs' sums S_A = sum_{R_A} alpha_hat (kept up to date, summed
afresh every :data:`RESUM` minibatches or more) and the sentence's sparse counts::

    pi_r = exp(psi(alpha_b,r) - psi(S_A + C_A)),   r in R_b, C_A = sum_{r in R_A} c_r
    KL   = sum_{A touched} log Gamma(S_A + C_A) - log Gamma(S_A)
           - sum_{r in R_b} [log Gamma(alpha_hat_r + c_r) - log Gamma(alpha_hat_r) - c_r log pi_r]

with c = alpha_b - alpha_hat (every other term of the dense KL is 0).  An
update costs O(|R_b|), not O(|R|): the same numbers as the dense update up to
rounding (1e-12; ``tests/test_streaming.py``).  A minibatch whose rules
would be more than :data:`SPARSE_SHARE` of the grammar, or one with a VB
weight that underflows (a tiny alpha), takes the dense update.
"""
from __future__ import annotations

import numpy as np

from scipy.special import digamma

from grind import log
from grind.kernels.select import make_parser
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.dirichlet import log_rising
from grind.infer.training import ShardedEstep, Step, StreamBatches
from grind.infer.vb import (KL_STIRLING_FROM, LOG_TINY, kl_dirichlet, posterior_mean, underflow_message,
                            vb_estep)

#: At most this many unparseable sentences are named per minibatch.
MAX_REPORTED = 10
#: A minibatch whose sentences can read at most this share of the rules takes the sparse update.
SPARSE_SHARE = 0.125
#: The sparse update's per-LHS sums of alpha_hat are summed afresh every this many minibatches, or every
#: #rules / 256 on a larger grammar (a sum over all the rules costs about 256 rules a minibatch then).
RESUM = 1024


StreamingConfig = config_class("StreamingConfig", "streaming", "Streaming VB: minibatches of the stream ``corpus`` "
                               "read with ``spec`` (``iterations`` and ``tolerance`` are unused: the stream's end "
                               "stops it).")


class StreamingVB(Algorithm):
    """Streaming VB over ``cfg.corpus`` read with ``cfg.spec`` (``estep`` is unused).

    Its minibatches (lists of sentences) come from a
    :class:`grind.infer.training.StreamBatches` over the stream (the corpus
    need not fit in memory, and a resumed run skips the ``consumed``
    sentences); :meth:`update` fits one."""

    name = "streaming"
    output = "pseudo-counts"
    Config = StreamingConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        cfg = StreamingConfig.of(cfg)
        self.g, self.prior = grammar, np.asarray(prior, dtype=np.float64)
        self.theta0 = np.asarray(theta0, dtype=np.float64)
        self.batches = StreamBatches(cfg.corpus, cfg.spec, cfg.batch, cfg.first_batch)
        self.iterations = cfg.batch_iterations
        self.kernel, self.jobs = cfg.kernel, cfg.jobs
        self.alpha_hat = self.prior.copy()
        self.lhs_tot = grammar.lhs_sums(self.alpha_hat)      # per-LHS sums of alpha_hat (the sparse update's)
        self.started = False            # a minibatch has parsed (the first one starts from theta0)
        self.it, self.done = 0, False
        self.unparsed = 0               # sentences of the stream without a parse in their minibatch (skipped)
        self._w = None                  # the sparse update's weight buffer (only its minibatch's rules are read)

    @property
    def consumed(self) -> int:
        """Sentences of the stream read so far."""
        return self.batches.consumed

    def update(self, sents):
        """Fit minibatch ``sents`` (Alg. 2); alpha_hat <- its posterior."""
        self.lost = 0
        self.alpha_hat, bound, parsed = self._fit(sents)
        self.it += 1
        if self.it % max(RESUM, len(self.alpha_hat) // 256) == 0:
            self.lhs_tot = self.g.lhs_sums(self.alpha_hat)
        extra = {"underflow_lost": self.lost} if self.lost else {}
        return Step(self.it, bound, self.consumed, extra={"batch": len(sents), "parsed": parsed, **extra})

    def _fit(self, sents):
        """Alg. 2's inner loop on one minibatch: ``(alpha_b, bound, #parsed)``."""
        parser = make_parser(self.g, [s.tokens for s in sents], self.kernel)
        base = self.alpha_hat
        idx = np.array([i for i in range(len(sents)) if i not in parser.failures], dtype=np.int64)
        if not idx.size:
            _report(sents, [(i, parser.failures[i]) for i in range(len(sents))])
            self.unparsed += len(sents)
            return base, 0.0, 0
        # the first minibatch that parses starts from theta0 (Alg. 2); one with no parse leaves alpha_hat at the prior
        first = not self.started
        loc = self._local_rules(parser, idx)
        out = None if loc is None else self._fit_sparse(sents, parser, idx, first, loc)
        if out is None:
            out = self._fit_dense(sents, parser, idx, first)
            self.lhs_tot = self.g.lhs_sums(out[0])
        self.started = self.started or out[2] > 0
        return out

    def _local_rules(self, parser, idx):
        """The rules each sentence ``idx`` can read when the kernel lists them and they are few
        (at most :data:`SPARSE_SHARE` of the grammar in all): the sparse update pays; else None."""
        if getattr(parser, "local_rules", None) is None or getattr(parser, "sparse_counts", None) is None:
            return None
        cap = SPARSE_SHARE * len(self.alpha_hat)
        if len(idx) > cap:
            return None
        loc, total = [], 0
        for i in idx:
            loc.append(parser.local_rules(int(i)))
            total += len(loc[-1])
            if total > cap:
                return None
        return loc

    def _fit_sparse(self, sents, parser, idx, first, loc):
        """:meth:`_fit_dense`'s numbers over the minibatch's rules R_b only (module doc; ``loc``:
        each sentence's rules): alpha_hat and the LHS sums are updated in place there; None
        (nothing changed) when a VB weight of R_b underflows, for the dense update to account for it."""
        g = self.g
        rules_b = loc[0] if len(loc) == 1 else np.unique(np.concatenate(loc))
        lhs, inv = np.unique(g.lhs[rules_b], return_inverse=True)
        base, tot = self.alpha_hat[rules_b], self.lhs_tot[lhs]
        if self._w is None:
            self._w = np.zeros(len(g))
        c = np.zeros(len(rules_b))               # alpha_b - alpha_hat on R_b
        if first:
            c, _, _ = self._sparse_counts(parser, idx, self.theta0, rules_b)
        for k in range(self.iterations):
            ca = np.bincount(inv, weights=c, minlength=len(lhs))
            logw = digamma(base + c) - digamma(tot + ca)[inv]
            if logw.min() < LOG_TINY:
                return None
            self._w[rules_b] = np.exp(logw)
            counts, logz, bad = self._sparse_counts(parser, idx, self._w, rules_b)
            if k == 0:
                first_bad = sorted(bad + list(parser.failures.items()))
            ok = np.isfinite(logz)
            kl = 0.0                             # alpha_b = alpha_hat: KL 0 (the dense sum's terms are all exactly 0)
            if c.any():
                kl = float(log_rising(tot, ca, KL_STIRLING_FROM).sum()
                           + (c * logw - log_rising(base, c, KL_STIRLING_FROM)).sum())
            bound = float(logz[ok].sum()) - kl
            c = counts
        _report(sents, first_bad)
        self.unparsed += len(first_bad)
        self.alpha_hat[rules_b] = base + c
        self.lhs_tot[lhs] = tot + np.bincount(inv, weights=c, minlength=len(lhs))
        return self.alpha_hat, bound, int(ok.sum())

    def _sparse_counts(self, parser, idx, w, rules_b):
        """Expected counts of sentences ``idx`` under ``w`` as a vector over ``rules_b``, their
        log Z, and ``(position, reason)`` of those without a parse."""
        c = np.zeros(len(rules_b))
        logz = np.empty(len(idx))
        bad = []
        for k, i in enumerate(idx):
            r, v, logz[k] = parser.sparse_counts(w, int(i))
            if logz[k] == -np.inf:
                bad.append((int(i), "no derivation has positive probability"))
            elif len(idx) == 1:
                c[np.searchsorted(rules_b, r)] = v
            else:
                np.add.at(c, np.searchsorted(rules_b, r), v)
        return c, logz, bad

    def _fit_dense(self, sents, parser, idx, first):
        """Alg. 2's inner loop on one minibatch over all the rules: ``(alpha_b, bound, #parsed)``."""
        estep, base = ShardedEstep(parser, self.jobs), self.alpha_hat
        local = base
        if first:
            local = base + estep(self.theta0, idx)[0]
        for k in range(self.iterations):
            counts, logz, lost, inexact = vb_estep(estep, self.g, local, idx)
            if k == 0:
                bad = _unparsed(parser, idx, logz, lost)
                _report(sents, bad)
                self.unparsed += len(bad)
            self.lost = len(lost)
            if k == 0 and (len(lost) or len(inexact)):
                # Never silent: sentences whose every derivation needs a rule of
                # underflowing weight (alpha_hat ~ alpha <= 1e-3 for rules unseen so
                # far) are counted and named; see grind.infer.vb.vb_estep.
                log.warn(underflow_message(self.g, local, self.prior, lost, inexact, len(sents),
                                           f"minibatch {self.it + 1}, iteration {k + 1}: "))
            ok = np.isfinite(logz)
            bound = float(logz[ok].sum()) - kl_dirichlet(self.g, local, base)
            local = base + counts
        return local, bound, int(ok.sum())

    def weights(self):
        """The posterior pseudo-counts alpha_hat."""
        return self.alpha_hat

    def mean(self):
        return posterior_mean(self.g, self.alpha_hat)

    def get_state(self):
        return {"alpha_hat": self.alpha_hat, "lhs_tot": self.lhs_tot, "started": self.started, "it": self.it,
                **self.batches.get_state(), "done": self.done, "unparsed": self.unparsed}

    def set_state(self, s):
        self.alpha_hat = np.array(s["alpha_hat"], dtype=np.float64)
        # a checkpoint of an older grind: the sums afresh, started once alpha_hat left the prior
        self.lhs_tot = (np.array(s["lhs_tot"], dtype=np.float64) if "lhs_tot" in s
                        else self.g.lhs_sums(self.alpha_hat))
        self.started = bool(s["started"]) if "started" in s else not np.array_equal(self.alpha_hat, self.prior)
        self.it, self.done = int(s["it"]), bool(s["done"])
        self.unparsed = int(s.get("unparsed", 0))
        self.batches.set_state(s)


def _unparsed(parser, idx, logz, lost=()):
    """``(position, reason)`` of the minibatch's sentences without a parse."""
    bad = [(i, why) for i, why in parser.failures.items()]
    lost = set(int(k) for k in lost)
    bad += [(int(idx[k]), "every derivation needs a rule whose VB weight underflows to 0" if k in lost
             else "no derivation has positive probability") for k in np.flatnonzero(~np.isfinite(logz))]
    return sorted(bad)


def _report(sents, bad):
    """Warn about the unparseable sentences of a minibatch (they are skipped)."""
    for k, (i, why) in enumerate(bad):
        if k == MAX_REPORTED:
            log.warn(f"... and {len(bad) - MAX_REPORTED} more")
            break
        log.warn(f"sentence {sents[i].number} (line {sents[i].line}) has no parse: {why}")
    if bad:
        log.warn(f"{len(bad)} of {len(sents)} sentences of this minibatch have no parse and were skipped")
