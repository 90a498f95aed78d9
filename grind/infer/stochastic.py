"""Stochastic variational Bayes for PCFGs (Hoffman et al. 2010, Alg. 2;
Pate & Johnson 2016, Alg. 3).

Each step t = 1, 2, ... takes a minibatch b of ``cfg.batch`` sentences (the
corpus in an order shuffled per epoch with ``rng``, ``cfg.epochs`` epochs:
the driver's :class:`grind.infer.training.ShuffledBatches`),
fits it by local VB as if the whole corpus looked like b, and moves the
global posterior Dirichlet(alpha_hat) a step eta_t = (tau + t)^(-kappa)
towards that fit (Robbins-Monro: sum eta = inf, sum eta^2 < inf for kappa in
(0.5, 1]; --kappa also takes 0.5, the edge of Hoffman et al.'s range, where
sum eta^2 diverges).

Local VB (``cfg.batch_iterations`` = K iterations, from a_1 = alpha_hat)::

    pi_r  = exp(psi(a_k,r) - psi(sum_{r' in R_A} a_k,r'))      (grind.infer.vb.vb_weights)
    c     = E_pi[f on b]                  (the kernel, through grind.infer.vb.vb_estep)
    a_k+1 = alpha + s * c

``s * c`` (elementwise) scales the minibatch's expected counts to the corpus
(Hoffman et al.'s D / |S|; Pate & Johnson §4.2), see :meth:`StochasticVB.scale`:

* a general PCFG: s_r = N / |b| (parseable sentences in corpus / in batch);
* a DMV grammar (:func:`grind.grammars.dmv.is_dmv_grammar`): s_r = E_r(corpus) / E_r(b),
  the ratio of the numbers of events of rule r's type.  In a sentence of n
  words these are fixed by n alone: 1 root event (S --> Y_h); n Y events
  (Y_h --> L0_h R0_h) and, per direction, n valence-0 STOP/¬STOP decisions
  (L0_h, R0_h); n - 1 attachments (choose, L'_h and R'_h) and n - 1
  valence-1 STOP/¬STOP decisions (L_h, R_h), because a head with k > 0
  dependents on a side makes k decisions at valence 1 (k - 1 ¬STOP, 1 STOP).
  So three ratios: sentences, words, and words - sentences (non-root
  dependents), each summed over the parseable sentences.

Global update, with m = alpha + s * c of the last local iteration:

* ``cfg.update == "hoffman"`` (Hoffman et al. 2010, Alg. 2, prior inside the
  step): alpha_hat <- (1 - eta_t) alpha_hat + eta_t (alpha + s * c).
* ``cfg.update == "pate-johnson"`` (Pate & Johnson 2016, Alg. 3, prior
  omitted inside the step): alpha_hat <- (1 - eta_t) alpha_hat + eta_t (s * c).
  The prior enters only through the start (below), and its share of
  alpha_hat decays as prod_t (1 - eta_t); with eta = 1 it is gone at once.
  (Were alpha added back whenever weights are computed, the recursion would
  be exactly Hoffman's, so this is the reading under which the two differ.)
  alpha_hat is kept >= the smallest positive float so psi stays finite.

Start: at the first step the minibatch's counts under the initial grammar
theta0, as in :class:`grind.infer.vb.VB`: alpha_hat = alpha + s * E_theta0[f on b]
(lambda = s * E_theta0[f on b]).  With the whole corpus as one batch and
eta = 1 (tau = 0: eta_1 = 1^-kappa = 1) a step is exactly K batch-VB
iterations.

Objective of a step: the local bound before the last local update, scaled to
the corpus (a noisy estimate of the batch-VB bound at a_K)::

    L_b = (N / |b|) sum_{s in b} log Z_s(pi) - sum_A KL(Dir(a_K,A) || Dir(alpha_A))

(log Z is a per-sentence quantity, so the sentence ratio even for the DMV).
Trace ``sentences``: minibatch sentences visited so far (each is parsed K
times, plus once for the start).  Sentences the parser cannot handle were
reported when the corpus was loaded (or indexed); they are left out of every
minibatch and of N.

Where the sentences are: ``estep`` is either an E-step over the whole
corpus's parser (:class:`grind.infer.training.ShardedEstep`; ``grind train
--cluster``'s workers, tests) or, as ``grind train`` runs it, a
:class:`grind.infer.corpus_index.FileEstep` over the corpus indexed on disk
by :func:`index_corpus`: one streaming pass finds the parseable sentences
and the event totals and spools the tokens to a temporary file; each
minibatch is read back, parsed alone and dropped.  Held then: alpha_hat and
the prior (the rules'), 8 bytes a sentence of offsets, 4 of ``pool`` and 4
of the epoch's permutation, and one minibatch's parser -- never the corpus.
Both give the same numbers bit for bit (``tests/test_stochastic_ondisk.py``).

At a tiny alpha (<= ~1e-3) the VB weights of rules unseen so far
underflow to 0, and a sentence all of whose derivations need one cannot be
counted: as in batch and streaming VB (:func:`grind.infer.vb.vb_estep`) it is left
out of that local iteration with a warning, and the trace's
``underflow_lost`` / ``underflow_inexact`` count such sentences (of the last
local iteration; the scale s is not changed for them).
"""
from __future__ import annotations

import numpy as np

from grind import log
from grind.grammars.dmv import CHOOSE_L, CHOOSE_R, SLOT, dmv_index, is_dmv_grammar
from grind.errors import InputError
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.corpus_index import mark_underivable
from grind.infer.training import ShuffledBatches, Step
from grind.infer.vb import kl_dirichlet, posterior_mean, underflow_message, vb_estep

UPDATES = ("hoffman", "pate-johnson")
_TINY = np.finfo(np.float64).tiny
#: DMV rule kind (grind.grammars.dmv.SLOTS index or CHOOSE_L/R) -> event class:
#: 0 = sentences, 1 = words, 2 = words - sentences (non-root dependents).
_WORD_KINDS = [SLOT[k] for k in ("Y", "stopL0", "nostopL0", "stopR0", "nostopR0")]
_DEP_KINDS = [SLOT[k] for k in ("stopL1", "nostopL1", "stopR1", "nostopR1")] + [CHOOSE_L, CHOOSE_R]


StochasticConfig = config_class("StochasticConfig", "stochastic", "Stochastic VB (``iterations`` and ``tolerance`` "
                                "are unused: ``epochs`` passes).")


class StochasticVB(Algorithm):
    """Stochastic VB over ``estep``'s corpus: ``estep.parser``'s, or a
    :class:`grind.infer.corpus_index.FileEstep`'s index on disk (see module doc).

    Its minibatches come from a :class:`grind.infer.training.ShuffledBatches`
    over the parseable sentences (a permutation per epoch from ``rng``, so
    the draws interleave with nothing else of the run); :meth:`update` takes
    one."""

    name = "stochastic"
    output = "pseudo-counts"
    Config = StochasticConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng):
        cfg = StochasticConfig.of(cfg)
        self.g, self.estep, self.rng = grammar, estep, rng
        self.prior, self.theta0 = np.asarray(prior, dtype=np.float64), np.asarray(theta0, dtype=np.float64)
        self.iterations = cfg.batch_iterations               # local VB iterations K
        self.tau, self.kappa = float(cfg.tau), float(cfg.kappa)
        self.form = cfg.update
        if self.form not in UPDATES:
            raise InputError(f"unknown stochastic VB update {self.form!r} (one of {', '.join(UPDATES)})")
        index = getattr(estep, "index", None)
        if index is not None:             # a FileEstep: the corpus on disk, a minibatch's parser at a time
            if index.totals is None and index.pool.size:
                raise ValueError("StochasticVB needs the corpus index of grind.infer.stochastic.index_corpus")
            self.pool, self.events = index.pool, None
            self.rule_class = rule_classes(grammar)
            self.corpus_events = index.totals
        else:                             # the whole corpus's parser (in memory; --cluster's workers)
            parser = estep.parser
            mark_underivable(parser, grammar)     # as the on-disk index does: out of the pool and of N
            self.pool = np.array([i for i in range(len(parser.sentences)) if i not in parser.failures],
                                 dtype=np.int64)
            self.events, self.rule_class = event_table(grammar, parser)
            self.corpus_events = self.events[self.pool].sum(axis=0)
        if not self.pool.size:
            raise InputError("no sentence of the corpus can be parsed with this grammar")
        self.stat, self.t, self.seen = None, 0, 0
        self.batches = ShuffledBatches(self.pool, cfg.batch, cfg.epochs, rng)

    # -- the algorithm ----------------------------------------------------------

    def update(self, b):
        """One stochastic step on minibatch ``b`` (sorted sentence indices)."""
        epoch = self.batches.batch_epoch
        s = self.scale(b)
        if self.stat is None:
            self._start(b, s)
        sc, bound, parsed, under = self._local_vb(b, s)
        self.t += 1
        eta = (self.tau + self.t) ** -self.kappa
        target = self.prior + sc if self.form == "hoffman" else sc
        self.stat = np.maximum((1.0 - eta) * self.stat + eta * target, _TINY)
        self.seen += len(b)
        return Step(self.t, bound, self.seen, extra={"eta": eta, "epoch": epoch, "parsed": parsed, **under})

    def _next_batch(self):
        """The next minibatch of :attr:`batches` (what :meth:`step` hands to :meth:`update`)."""
        return self.batches.next()

    def _start(self, b, s):
        counts, _ = self.estep(self.theta0, b)
        self.stat = self.prior + s * counts

    def _local_vb(self, b, s):
        """K local iterations: ``(s * c of the last, its scaled bound, #parsed,
        underflow figures of the last for the trace)``.

        The E-step is :func:`grind.infer.vb.vb_estep`: minibatch sentences whose every
        derivation needs a rule of underflowing VB weight (alpha_hat <= ~1e-3,
        e.g. rules unseen so far at a tiny alpha) cannot be counted in float64;
        they are left out, but never silently: a warning (at the first local
        iteration that has any) and the trace's ``underflow_lost`` /
        ``underflow_inexact`` say how many.
        """
        a = self.alpha_hat
        ratio = len(self.pool) / len(b)
        warned = False
        for k in range(self.iterations):
            counts, logz, lost, inexact = vb_estep(self.estep, self.g, a, b)
            if not warned and (len(lost) or len(inexact)):
                log.warn(underflow_message(self.g, a, self.prior, lost, inexact, len(b),
                                           f"stochastic step {self.t + 1} (minibatch of {len(b)}), "
                                           f"local iteration {k + 1}: "))
                warned = True
            under = {"underflow_lost": len(lost), "underflow_inexact": len(inexact)} if warned else {}
            ok = np.isfinite(logz)
            bound = ratio * float(logz[ok].sum()) - kl_dirichlet(self.g, a, self.prior)
            sc = s * counts
            a = self.prior + sc
        return sc, bound, int(ok.sum()), under

    def scale(self, b) -> np.ndarray:
        """Per-rule factor s_r = E_r(corpus) / E_r(minibatch b) (module doc); 0
        where b has no event of r's type (its counts are then 0 too)."""
        if self.events is None:           # the minibatch's own parser (FileEstep builds it once a minibatch)
            batch = sentence_events(self.g, self.estep.batch(b).parser).sum(axis=0)
        else:
            batch = self.events[np.asarray(b, dtype=np.int64)].sum(axis=0)
        ratio = np.divide(self.corpus_events, batch, out=np.zeros_like(batch), where=batch > 0)
        return ratio[self.rule_class]

    # -- the driver's interface -------------------------------------------------

    @property
    def alpha_hat(self) -> np.ndarray:
        """The global posterior pseudo-counts."""
        return self.prior.copy() if self.stat is None else self.stat

    def weights(self):
        return self.alpha_hat

    def mean(self):
        return posterior_mean(self.g, self.alpha_hat)

    def get_state(self):
        return {"stat": np.zeros(0) if self.stat is None else self.stat, "started": self.stat is not None,
                "t": self.t, "seen": self.seen, **self.batches.get_state()}

    def set_state(self, st):
        self.stat = np.array(st["stat"], dtype=np.float64) if st["started"] else None
        self.t, self.seen = int(st["t"]), int(st["seen"])
        self.batches.set_state(st)


def event_table(grammar, parser):
    """``(events, rule_class)``: events[i, k] = number of events of class k in
    sentence i; rule_class[r] = the class of rule r.  A PCFG has one class
    (sentences); the DMV three (sentences, words, words - sentences)."""
    return sentence_events(grammar, parser), rule_classes(grammar)


def sentence_events(grammar, parser) -> np.ndarray:
    """:func:`event_table`'s ``events`` alone (a pass over the parser's
    sentences, none over the rules: what a minibatch or a chunk costs)."""
    n_sent = len(parser.sentences)
    if not is_dmv_grammar(grammar):
        return np.ones((n_sent, 1))
    n = _words(parser).astype(np.float64)
    return np.stack([np.ones(n_sent), n, np.maximum(n - 1, 0)], axis=1)


def rule_classes(grammar) -> np.ndarray:
    """rule_class[r] = the event class of rule r (:func:`event_table`)."""
    if not is_dmv_grammar(grammar):
        return np.zeros(len(grammar), dtype=np.int64)
    kind = dmv_index(grammar).kind
    return np.where(np.isin(kind, _WORD_KINDS), 1, np.where(np.isin(kind, _DEP_KINDS), 2, 0))


def index_corpus(grammar, path, spec, kernel="auto", tmpdir=None, where=None):
    """The :class:`grind.infer.corpus_index.CorpusIndex` of corpus file
    ``path`` (read with ``spec``) that :class:`StochasticVB` draws its
    minibatches from through a :class:`grind.infer.corpus_index.FileEstep`:
    its ``totals`` are the corpus's event numbers over the parseable sentences
    (:func:`event_table`'s columns summed), found in the index's one pass."""
    from grind.infer.corpus_index import CorpusIndex

    def events(parser, ok):
        return sentence_events(grammar, parser)[ok].sum(axis=0)
    return CorpusIndex(path, spec, grammar, kernel, visit=events, tmpdir=tmpdir, where=where)


def _words(parser) -> np.ndarray:
    """Words per sentence: the DMV kernel's lengths, or half the split tokens (CKY kernel)."""
    if hasattr(parser, "lengths"):
        return np.asarray(parser.lengths)
    return np.array([len(s) // 2 for s in parser.sentences])
