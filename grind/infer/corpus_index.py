"""A corpus file indexed for minibatches drawn in any order, without holding
the corpus (issue 15: stochastic VB never holds the corpus).

:class:`CorpusIndex` makes one streaming pass over the corpus file, a
sentence at a time (:func:`grind.formats.corpus.iter_corpus`), and keeps:

* the sentences' tokens in a :class:`grind.formats.spool.TokenSpool` (an
  unnamed temporary file; in memory its offsets, 8 bytes a sentence);
* which sentences the grammar can parse: the sentence numbers that can,
  ``pool`` (int32 while the corpus has fewer than 2^31 sentences: 4 bytes a
  sentence); those that cannot are reported (:meth:`report`) and counted,
  as when the corpus is loaded whole;
* the corpus's fingerprint for checkpoints (:func:`grind.infer.training.fingerprint_sentences`'s);
* whatever the caller's ``visit(parser, ok)`` sums over the parseable
  sentences (``totals``: stochastic VB's event numbers).

The parseable sentences are found by building a parser for :data:`CHUNK`
sentences at a time (``parser.failures``; the chunk's tokens and parser are
then dropped), so the pass holds one chunk.  Afterwards :meth:`parser`
builds the parser of any set of sentences, read back from the spool.

:class:`FileEstep` is the E-step over such an index by sentence number,
``(weights, idx) -> (counts, log Z)`` as :class:`grind.infer.training.ShardedEstep`
over the whole corpus's parser: the first call for a minibatch ``idx``
builds its parser (its sentences only), later calls with the same ``idx``
reuse it, a new ``idx`` drops it first.  The counts are the same bit for bit
(each sentence's chart is its own; the shards of 256 hold the same sentences
in the same order, summed in the same order).
"""
from __future__ import annotations

import numpy as np

from grind import log
from grind.errors import InputError
from grind.formats.corpus import iter_corpus
from grind.formats.spool import TokenSpool
from grind.formats.textio import is_stream, read_lines
from grind.infer.training import SentenceFingerprint, ShardedEstep

#: Sentences per parser while the index is made.
CHUNK = 4096
#: Unparseable sentences named by :meth:`CorpusIndex.report` (the others are counted).
MAX_NAMED = 10



#: The reason given for a sentence the grammar cannot derive under any weights.
UNDERIVABLE = "the grammar has no derivation of it under any weights (left out of every pass)"


def mark_underivable(parser, grammar, idx=None) -> int:
    """Add to ``parser.failures`` the sentences (of ``idx``; default all, once a parser) that have no
    derivation even under uniform rule probabilities (every rule positive), so none can under any
    weights (a one-word sentence under a CNF grammar); one inside pass.  Returns how many."""
    if idx is None:
        if getattr(parser, "underivable_marked", False):
            return 0
        parser.underivable_marked = True
        idx = range(len(parser.sentences))
    ok = np.array([i for i in idx if i not in parser.failures], dtype=np.int64)
    if not ok.size:
        return 0
    _, z = parser.inside_outside(grammar.normalize(np.ones(len(grammar))), idx=ok)
    lost = ok[np.isneginf(np.asarray(z, dtype=np.float64))]
    for i in lost:
        parser.failures[int(i)] = UNDERIVABLE
    return len(lost)

class CorpusIndex:
    """One pass over ``path`` read with ``spec``: the spool, the parseable
    sentences and the caller's totals (see the module doc).

    ``grammar`` and ``kernel`` make the parsers (:func:`grind.kernels.select.make_parser`;
    the kernel it picks for the first chunk is used from then on, so a
    note about the choice comes once).  ``visit(parser, ok)``, if given, is
    called for each chunk's parser with the positions ``ok`` (in the chunk)
    of its parseable sentences and returns an array; ``totals`` is their
    sum.  ``where`` (the grammar's file name) starts the message of an
    InputError of the parser's (a grammar it cannot parse with), as
    :func:`grind.cli.common.load` says it.  A context manager: :meth:`close`
    deletes the spool (also on error).
    """

    def __init__(self, path: str, spec, grammar, kernel: str = "auto", visit=None, chunk: int = CHUNK,
                 tmpdir: str | None = None, where: str | None = None):
        self.grammar, self.kernel, self.where = grammar, kernel, where
        self.totals = None
        self.named: list[tuple[int, int, str]] = []          # (number, line, why) of the first failures
        self.failed = 0
        self.spool = TokenSpool(tmpdir)
        try:
            self._pass(path, spec, visit, chunk)
        except BaseException:
            self.spool.close()
            raise

    def _pass(self, path, spec, visit, chunk):
        if not is_stream(path):           # bad bytes anywhere first, as read_corpus_tokens reports them
            for _ in read_lines(path):
                pass
        fp, n = SentenceFingerprint(), 0
        bad: list[int] = []
        toks: list[list[str]] = []
        where: list[tuple[int, int]] = []
        stats: dict = {}
        for s in iter_corpus(path, spec, stats):
            fp.add(s.tokens)
            self.spool.add(s.tokens)
            toks.append(s.tokens)
            where.append((s.number, s.line))
            n += 1
            if len(toks) == chunk:
                self._chunk(toks, where, n - len(toks), bad, visit)
                toks, where = [], []
        if toks:
            self._chunk(toks, where, n - len(toks), bad, visit)
        del toks, where
        self.spool.close_writing()
        self.n, self.format = n, stats["format"]
        self.left_out, self.wordless = stats["left_out"], stats.get("wordless", 0)    # as grind.formats.corpus.Corpus
        self.multiword, self.duplicates = stats.get("multiword", 0), stats.get("duplicates", 0)
        self.no_words = stats.get("no_words", 0)
        self.punct_only, self.limits = stats.get("punct_only", 0), stats.get("limits", "")
        self.fingerprint = fp.text()
        dtype = np.int32 if n < 2 ** 31 else np.int64
        self.pool = np.delete(np.arange(n, dtype=dtype), np.asarray(bad, dtype=np.int64))

    def _chunk(self, toks, where, first, bad, visit):
        """Parse one chunk of sentences (numbers ``first``...): failures (a word the grammar lacks, or
        no derivation under any weights: :func:`mark_underivable`) and totals."""
        parser = self._make(toks)
        mark_underivable(parser, self.grammar)
        failures = parser.failures
        for i in sorted(failures):
            bad.append(first + i)
            self.failed += 1
            if len(self.named) < MAX_NAMED:
                self.named.append((*where[i], str(failures[i])))
        if visit is not None:
            ok = np.array([i for i in range(len(toks)) if i not in failures], dtype=np.int64)
            part = np.asarray(visit(parser, ok))
            self.totals = part if self.totals is None else self.totals + part

    def _make(self, toks):
        from grind.kernels.select import make_parser
        try:
            parser = make_parser(self.grammar, toks, self.kernel)
        except InputError as e:
            msg = str(e)
            if self.where is None or msg.startswith(self.where + ":"):
                raise
            raise InputError(f"{self.where}: {msg}") from None
        if self.kernel == "auto":         # the same kernel from now on, without the note again
            from grind.kernels.dmv import DMVParser
            from grind.kernels.segment import SegmentParser
            self.kernel = ("dmv" if isinstance(parser, DMVParser) else "segment"
                           if isinstance(parser, SegmentParser) else "cky")
        return parser

    def parser(self, idx):
        """The parser of sentences ``idx`` (numbers, in that order), read from the spool."""
        return self._make(self.spool.read(idx))

    def report(self, what: str = "sentences") -> int:
        """Warn about the sentences without a parse (the first :data:`MAX_NAMED`
        named, as :func:`grind.cli.common.report_failures` does); their number."""
        for number, line, why in self.named:
            log.warn(f"sentence {number} (line {line}) has no parse: {why}")
        if self.failed > len(self.named):
            log.warn(f"... and {self.failed - len(self.named)} more")
        if self.failed:
            log.warn(f"{self.failed} of {self.n} {what} have no parse and were left out")
        return self.failed

    def close(self) -> None:
        self.spool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FileEstep:
    """The E-step over sentences of a :class:`CorpusIndex` by number (module doc).

    Holds the parser of one minibatch at a time (built on the first call
    for it, dropped before the next minibatch's is built); ``jobs`` threads
    per E-step, as :class:`grind.infer.training.ShardedEstep`.
    """

    def __init__(self, index: CorpusIndex, jobs: int = 1):
        self.index, self.jobs = index, jobs
        self._idx: np.ndarray | None = None
        self._estep = None

    def batch(self, idx):
        """The :class:`grind.infer.training.ShardedEstep` over minibatch ``idx``'s own parser."""
        if idx is None:
            raise InputError("FileEstep: an E-step over the whole corpus would hold it; pass the sentences")
        idx = np.asarray(idx, dtype=np.int64)
        if self._idx is None or not np.array_equal(self._idx, idx):
            self._idx, self._estep = None, None           # the last minibatch's parser goes first
            self._estep = ShardedEstep(self.index.parser(idx), self.jobs)
            self._idx = idx
        return self._estep

    @property
    def parser(self):
        """The parser of the minibatch seen last (None before the first)."""
        return None if self._estep is None else self._estep.parser

    def __call__(self, weights, idx):
        return self.batch(idx)(weights)
