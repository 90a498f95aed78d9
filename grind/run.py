"""One training run, built the same way for ``grind train`` and ``grind.fit``.

:func:`configure` turns option values (:data:`grind.infer.options.OPTIONS`)
into the algorithm's configuration and runs every check of how they combine;
:class:`TrainingRun` reads the grammar and the corpus (whole, as a stream,
indexed on disk, as gold trees, or two languages), builds the E-step, the
prior, the algorithm and the held-out evaluation, runs the training driver
and says what the output's header records.  The command line adds what only
it has (checkpoints, a Dask cluster, output files); ``grind.fit`` returns
the result.  A :class:`Style` says whose words messages use.

Also here: reading a grammar and corpus for a command (:func:`load`,
:func:`load_trees`) and reporting sentences without a parse.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from grind import log
from grind.errors import InputError
from grind.formats.corpus import Corpus, CorpusSpec, left_out, peek_format, read_corpus
from grind.formats.rules import PSEUDO_COUNTS
from grind.grammars.grammar import Grammar, as_probabilities, read_grammar
from grind.infer.options import Namer, OptionError, PyNamer, check_options, unread_options

__all__ = ["configure", "TrainingRun", "Style", "CLI", "load", "load_trees", "report_failures", "OptionError",
           "Namer", "PyNamer"]

#: Algorithms whose minibatches come from the corpus file as a stream (grind.infer.training.StreamBatches).
STREAMING = ("streaming",)
#: Algorithms that draw minibatches from a corpus indexed on disk (grind.infer.corpus_index), never
#: holding it: its tokens spooled to a temporary file, a minibatch's parser at a time.  Not with
#: --cluster (the workers build the whole corpus's parser), nor with IN_MEMORY_ENV set.
ON_DISK = ("stochastic",)
#: Set (to anything non-empty), stochastic VB loads the corpus and its parser whole, as before the
#: index on disk (the same results; kept for tests and measurements).
IN_MEMORY_ENV = "GRIND_STOCHASTIC_IN_MEMORY"
#: Algorithms that train a latent treebank grammar on gold trees (--trees).
TREE_ALGOS = ("em", "vb", "cvb", "gibbs")
#: How a --trees corpus is described in logs and headers.
TREES_TEXT = "PTB gold trees, latent subtypes hidden"


# ----------------------------------------------------------------------------- options

def configure(algo: str, values: dict, given, namer: Namer):
    """The configuration of ``algo`` (:data:`grind.infer.registry.CONFIG_OF`) from option values (None: the
    algorithm's default), after :func:`grind.infer.options.check_options`; an OptionError worded by
    ``namer`` when options do not go together."""
    from grind.infer.registry import CONFIG_OF
    if algo not in CONFIG_OF:
        raise ValueError(f"unknown algorithm {algo!r}: one of {', '.join(CONFIG_OF)}")
    cfg = CONFIG_OF[algo].from_options(values)
    check_options(algo, values, given, cfg, namer)
    return cfg


def check_trees(algo, spec, values, namer: Namer) -> None:
    """--trees trains on gold trees: em, vb, cvb or gibbs, no corpus options, no --joint."""
    if algo not in TREE_ALGOS:
        raise OptionError(f"{namer.opt('on_trees')} trains with {', '.join(TREE_ALGOS)}, not {namer.algo(algo)}")
    if spec != CorpusSpec():
        raise OptionError(f"{namer.opt('on_trees')} reads PTB trees as they are: the corpus options do not apply")
    if values.get("joint"):
        raise OptionError(f"{namer.opt('joint')} is not supported with {namer.opt('on_trees')}")


# ----------------------------------------------------------------------------- reading grammars and corpora

def read_probabilities(grammar_path, start=None, command="this command", normalise=False):
    """The grammar of ``grammar_path``, checked to hold rule probabilities
    (:func:`grind.grammars.grammar.require_probabilities`), or with ``normalise=True``
    its weights normalised per LHS with a warning when they are not."""
    return as_probabilities(read_grammar(grammar_path, start), grammar_path, command, normalise)


def load(grammar_path, corpus_path, spec, start=None, kernel="auto", command="this command", normalise=False,
         tokens_only=False, keep_outside=False):
    """Grammar, sentences and a chart parser for them.  The grammar's
    :meth:`~grind.grammars.grammar.Grammar.probabilities` must be rule probabilities
    (:func:`grind.grammars.grammar.require_probabilities`; parse, loglik and estep use
    them as such).  ``normalise=True`` (train, which only needs a starting
    point) normalises weights that are not probabilities per LHS instead,
    with a warning.  ``tokens_only``: the sentences keep only their tokens,
    number and line (:func:`grind.formats.corpus.read_corpus_tokens`), for
    a command that writes no corpus back; ``keep_outside``: the sentences
    keep ``everything`` read, those the corpus options leave out included
    (:meth:`grind.formats.corpus.Corpus.kept`), for a command that writes
    every input sentence back."""
    from grind.formats.corpus import read_corpus_tokens
    from grind.kernels.select import make_parser
    sents = read_corpus_tokens(corpus_path, spec) if tokens_only else \
        read_corpus(corpus_path, spec, keep_outside).kept() if keep_outside else read_corpus(corpus_path, spec)
    grammar = read_probabilities(grammar_path, start, command, normalise)
    from grind.formats.textio import is_stream
    if is_stream(grammar_path):           # its header is known only now: checked, nothing adopted (grammar_spec)
        grammar_spec(grammar_path, corpus_path, spec, grammar.meta)
    if grammar.meta.get("model") == "treebank" and is_stream(grammar_path):
        # is_treebank_grammar cannot peek at a stream: the generic path would parse with split symbols,
        # no unknown-word signatures and no word escapes -- silently wrong
        name = "<stdin>" if grammar_path == "-" else grammar_path
        raise InputError(f"{name}: a treebank grammar ('# model: treebank') read from standard input or a pipe: "
                         f"{command} reads such a grammar's header before the corpus, so give it as a file")
    try:
        parser = make_parser(grammar, [s.tokens for s in sents], kernel)
    except InputError as e:
        name = "<stdin>" if grammar_path == "-" else grammar_path
        msg = str(e)
        raise InputError(msg if msg.startswith(name + ":") else f"{name}: {msg}") from None
    return grammar, sents, parser



def _parser(grammar, sents, kernel, grammar_path=None):
    """The chart parser of ``sents``; an error of the grammar's names its file."""
    from grind.kernels.select import make_parser
    try:
        return make_parser(grammar, [s.tokens for s in sents], kernel)
    except InputError as e:
        if grammar_path is None:
            raise
        name = "<stdin>" if grammar_path == "-" else grammar_path
        msg = str(e)
        raise InputError(msg if msg.startswith(name + ":") else f"{name}: {msg}") from None


@dataclass
class TreeItem:
    """A gold tree of a ``--trees`` corpus: its number and line in the file, and its prepared yield."""

    number: int
    line: int
    tokens: list

    def __len__(self):
        return len(self.tokens)


def read_prepared_trees(trees_path, latent, where=None):
    """The trees of a PTB file prepared as the latent grammar's were
    (:func:`grind.formats.treebank.prepare`: the grammar header's ``markov``,
    words the grammar lacks -> signatures) with their :class:`TreeItem`s;
    trees left empty by deleting -NONE- are skipped with a warning.  Returns
    ``(prepared trees, items, counter, the raw trees of the file)``."""
    from grind.formats.trees import leaves, read_trees
    from grind.formats.treebank import prepare
    name = where or ("<stdin>" if trees_path == "-" else trees_path)
    lines: list[int] = []
    raw = read_trees(trees_path, lines)
    markov = latent.grammar.meta.get("markov", "0")
    try:
        h = int(markov)
    except ValueError:
        raise InputError(f"the grammar's '# markov: {markov}' header is not a number") from None
    keep: list[int] = []
    prepared, _, counter = prepare(raw, name, h, known=latent.known_words(), kept=keep, lines=lines)
    if counter["empty"]:
        log.warn(f"{name}: {counter['empty']} trees hold only -NONE- elements: skipped")
    if counter["replaced"]:
        backoff = f" ({counter['backoff']} backed off to a coarser signature)" if counter["backoff"] else ""
        log.info(f"{name}: {counter['replaced']} word tokens the grammar lacks -> unknown-word signatures"
                 f"{backoff}")
    items = Corpus(TreeItem(k + 1, lines[k], leaves(t)) for k, t in zip(keep, prepared))
    items.wordless = counter["empty"]             # for the '# left_out:' header (:func:`left_out`)
    if not items:
        raise InputError(f"{name}: no trees" + (" with words (every one holds only -NONE-)" if raw else ""))
    return prepared, items, counter, raw


def load_trees(grammar_path, trees_path, start=None, command="this command", normalise=False):
    """Latent grammar, tree items and a tree-constrained parser
    (:class:`grind.kernels.latent_tree.TreeParser`) for ``--trees`` commands."""
    from grind.grammars.latent import LatentGrammar
    from grind.kernels.latent_tree import TreeParser
    grammar = read_probabilities(grammar_path, start, command, normalise)
    name = "<stdin>" if grammar_path == "-" else grammar_path
    try:
        latent = LatentGrammar(grammar)
    except InputError as e:
        raise InputError(f"{name}: not a treebank grammar: {e}") from None
    prepared, items, _, _ = read_prepared_trees(trees_path, latent)
    parser = TreeParser(grammar, prepared, latent=latent)
    return grammar, items, parser


def known_failures(parser, n):
    """A log-Z-like vector: -inf for sentences the parser already knows it cannot parse."""
    z = np.zeros(n)
    z[list(parser.failures)] = -np.inf
    return z


#: Why a sentence has no parse when its parser names no other reason.
NO_DERIVATION = "no derivation has positive probability"


def report_failures(sents, parser, logz, what="sentences", fate="were left out", limit=None):
    """Warn about every sentence without a parse (``fate``: what the command does with them), with the fix
    when one is known (:func:`unparsed_fix`); return how many there were.  ``limit`` (--max-unparsed): an
    InputError (:func:`check_unparsed`) when more than that share has none."""
    bad = np.flatnonzero(~np.isfinite(logz))
    for k, i in enumerate(bad):
        if k == 10:
            log.warn(f"... and {len(bad) - 10} more")
            break
        s = sents[i]
        why = parser.failures.get(int(i), NO_DERIVATION)
        log.warn(f"sentence {s.number} (line {s.line}) has no parse: {why}")
    fix = unparsed_fix(sents, parser, bad)
    if len(bad):
        log.warn(f"{len(bad)} of {len(sents)} {what} have no parse and {fate}" + (f"; {fix}" if fix else ""))
    if limit is not None:
        check_unparsed(len(bad), len(sents), limit, what, [parser.failures.get(int(i), NO_DERIVATION) for i in bad],
                       fix)
    return len(bad)


def unparsed_fix(sents, parser, bad) -> str:
    """The fix for sentences ``bad`` without a parse, where one is known: one-word sentences under a grammar
    that derives no one-word sentence (a CNF grammar) are left out with --min-length 2; else ''."""
    from grind.grammars.grammar import derives_one_word
    from grind.kernels.cky import CKYParser
    g = getattr(parser, "grammar", None)
    ones = [int(i) for i in bad if len(sents[int(i)]) == 1]
    if not isinstance(parser, CKYParser) or g is None or not ones or derives_one_word(g):
        return ""                   # (the DMV and segmentation kernels read a word as more than one terminal)
    from grind.grammars.dmv import dmv_problem
    if dmv_problem(g) is None:      # a DMV grammar under --kernel cky: a word is its two split heads
        return ""
    return (f"{len(ones)} of them are one word long, and this grammar derives no one-word sentence (no chain of "
            f"unary rules from {g.start} to a word, as in a CNF grammar): leave them out with --min-length 2")


def warn_failures(what: str, parser, n: int, bad=None, fate: str = "are left out") -> None:
    """On stderr, as ``grind.fit`` and ``grind.parse`` say it: the sentences without a parse (``bad``,
    0-based; default the ones the parser already knows it cannot parse), the first ten by number, then how
    many and ``fate``."""
    fails = getattr(parser, "failures", {}) or {}
    bad = sorted(fails) if bad is None else list(bad)
    if not bad:
        return

    def why(i):
        return fails.get(i, "no derivation has positive probability")
    for i in bad[:10]:
        log.warn(f"{what}: sentence {i + 1} has no parse: {why(i)}")
    if len(bad) > 10:
        log.warn(f"{what}: ... and {len(bad) - 10} more")
    log.warn(f"{what}: {len(bad)} of {n} sentences have no parse and {fate} (sentence {bad[0] + 1}: {why(bad[0])})")


def sentences(corpus) -> list:
    """``corpus`` (a path, Sentences or token lists) as a list of Sentence, as ``grind.fit`` takes it."""
    from grind.formats.corpus import Sentence
    if isinstance(corpus, (str, os.PathLike)):
        try:
            return read_corpus(os.fspath(corpus), CorpusSpec())
        except InputError as e:
            if "needs an explicit --column" not in str(e):
                raise
            raise InputError(f"{e}: in Python, read it with grind.read_corpus(path, column=..., punct=..., "
                             "max_length=...) and pass the sentences") from None
    if isinstance(corpus, (str, bytes, dict)) or not hasattr(corpus, "__iter__"):
        raise TypeError("a corpus is a path, a list of Sentences or a list of token lists, not "
                        f"{type(corpus).__name__}")
    out = []
    for i, s in enumerate(corpus, 1):
        if isinstance(s, Sentence):
            out.append(s)
            continue
        if isinstance(s, (str, bytes)) or not isinstance(s, (list, tuple)) or not all(isinstance(t, str) for t in s):
            raise TypeError(f"sentence {i} of the corpus is {s!r}: a sentence is a list of token strings "
                            "(e.g. 'a b'.split())")
        out.append(Sentence(list(s), i, i))
    return out


# -------------------------------------------------------- unparsed sentences, the grammar's corpus options

def check_unparsed(failed: int, total: int, limit: float, what: str = "sentences", reasons=(), fix: str = "") \
        -> None:
    """An InputError when ``failed`` of ``total`` items have no parse and that is more than the share
    ``limit`` (--max-unparsed): a batch job must not go on, exit 0, with a mostly empty result.  The
    message gives the most frequent of ``reasons`` (one per failed item; positions dropped) and ``fix``."""
    if not total or failed <= limit * total:
        return
    import collections
    import re
    common = collections.Counter(re.sub(r" at position [0-9]+", "", str(r)) for r in reasons).most_common(1)
    cause = f"; most often: {common[0][0]} ({common[0][1]} of them)" if common else ""
    hint = f"{fix}; or give --max-unparsed 1 to write it anyway" if fix else \
        "give --max-unparsed 1 to write it anyway"
    raise InputError(f"{failed} of {total} {what} have no parse ({failed / total:.0%}, more than --max-unparsed "
                     f"{limit:g}){cause}: nothing written ({hint})")



#: How a command that reads a grammar and a corpus (parse, loglik, estep, train, init --harmonic) treats the
#: corpus options the grammar was made with, as its '# corpus:' header records them (make-grammar, init,
#: train, mstep write it), per option:
#:   --column  given and another: refused (another vocabulary: every sentence would be unparsed); not given,
#:             on a treebank: refused with the grammar's column as the fix (a column is never a silent default);
#:   --punct   given and another: refused; not given: the grammar's rule, with a note (a grammar made without
#:             the punctuation tags parses no sentence that keeps them); not compared on plain text, which
#:             has no tags to remove by;
#:   --chars   as --punct (a grammar over characters reads a word list as characters);
#:   --format, --max-length, --min-length, --types: not compared (a grammar of <= 10-word sentences parses
#:             longer test sentences; the others are about reading one file, not the grammar's vocabulary).
ADOPTED = ("punct", "chars")


def grammar_options(meta: dict) -> dict:
    """The corpus options a grammar header's ``# corpus:`` line records: ``column`` (None: plain tokens),
    ``punct``, ``chars``; empty when it records none (no header, or a --trees grammar's)."""
    import re
    line = meta.get("corpus", "")
    col, punct = re.search(r"\bcolumn=(\S+)", line), re.search(r"\bpunct-removed=(\S+)", line)
    if not col or not punct:
        return {}
    return {"column": None if col[1] == "tokens" else col[1], "punct": punct[1],
            "chars": " tokens=characters" in line}


def grammar_spec(grammar_path, corpus_path, spec, meta=None, late=None, given=lambda opt: False):
    """``spec`` reconciled with the corpus options the grammar was made with (the rule: :data:`ADOPTED`
    and the comment above it): a contradiction is an InputError naming both values and the fix; an option
    not given takes the grammar's value, said on stderr.  ``meta``: the header of a grammar read already
    (from standard input, after its corpus: nothing can be adopted any more, so an option not given that
    differs is refused too, unless ``late`` is False: the corpus is not read yet); else the header of the
    file ``grammar_path`` (a stream: not looked at here).  ``given(option)``: the user gave it (the
    command line's :func:`grind.cli.common._given`)."""
    import dataclasses

    from grind.formats.corpus import peek_format
    from grind.formats.textio import is_stream, read_header
    late = meta is not None if late is None else late
    if meta is None:
        if is_stream(grammar_path):
            return spec
        meta = read_header(grammar_path)
    made = grammar_options(meta)
    if not made:
        return spec
    gname = "<stdin>" if grammar_path == "-" else grammar_path
    cname = "<stdin>" if corpus_path == "-" else corpus_path
    fmt = spec.format if spec.format != "auto" else (None if is_stream(corpus_path) else
                                                     _peek(peek_format, corpus_path, spec))
    treebank = fmt in ("conllu", "conllx", "malt", "ptb")
    was = f"{gname} was made with"
    column = made["column"]
    if column is not None and spec.column is not None and spec.column != column:
        raise InputError(f"{was} --column {column} (its '# corpus:' header), but {cname} is read here with "
                         f"--column {spec.column}: give --column {column} (or make a grammar over {spec.column})")
    if column is not None and spec.column is None and treebank:
        raise InputError(f"{cname}: a treebank needs an explicit --column: {was} --column {column} (its "
                         f"'# corpus:' header): give --column {column}")
    changes = {}
    for opt in ADOPTED:
        mine, theirs = getattr(spec, opt), made[opt]
        if mine == theirs or (opt == "punct" and fmt is not None and not treebank):
            continue
        if opt == "punct":
            said, fix = (f"--punct {theirs}", f"--punct {mine}"), f"give --punct {theirs}"
        else:
            said = ("--chars" if theirs else "no --chars", "--chars" if mine else "no --chars")
            fix = "give --chars" if theirs else "leave out --chars"
        # given, read already (a grammar from stdin), or a stream corpus of unknown format: refused
        if late or given(opt) or (opt == "punct" and fmt is None):
            raise InputError(f"{was} {said[0]} (its '# corpus:' header), but {cname} is read here with {said[1]}: "
                             f"{fix} (or make the grammar again with {said[1]})")
        changes[opt] = theirs
        log.info(f"note: {was} {said[0]} (its '# corpus:' header), which is not given here: reading {cname} "
                 f"with {said[0]}")
    return dataclasses.replace(spec, **changes) if changes else spec


def _peek(peek_format, path, spec):
    """The format ``path`` is read as, or None when it cannot be told here (the reader says why later)."""
    try:
        return peek_format(path, spec)
    except InputError:
        return None



# ----------------------------------------------------------------------------- the run

@dataclass
class Style:
    """Whose words a run uses: ``where`` names the caller in messages (``grind train``, ``grind.fit``),
    ``namer`` names options; ``cli``: the command line's reports (each sentence without a parse by number
    and line, the first E-step's zero-probability sentences named)."""

    where: str
    namer: Namer
    cli: bool


CLI = Style("grind train", Namer(), True)


class TrainingRun:
    """A run being built: read the grammar and corpus, then :meth:`train`, then :meth:`header`.  Close it
    (``with``) to delete the on-disk corpus index of stochastic VB.

    ``grammar``: a path or a Grammar; ``corpus``: a path (read with ``spec``) or, from Python, Sentences or
    token lists; ``values``: the option values (:data:`grind.infer.options.OPTIONS` names); ``cfg``: the
    configuration :func:`configure` made of them.  After construction: ``g`` (the grammar, probabilities),
    ``sents`` (the sentences held, or None), ``parser`` (None for streaming and the on-disk index),
    ``estep``, ``n`` (sentences, or "a stream of"), ``failed0`` (sentences known unparseable), ``index``,
    ``joint`` ((g1, g2), parser) of --joint), ``corpus_text`` (how the corpus was read)."""

    def __init__(self, grammar, corpus, algo: str, cfg, values: dict, style: Style = CLI,
                 spec: CorpusSpec | None = None, start: str | None = None):
        from grind.infer.training import ShardedEstep
        self.algo, self.cfg, self.values, self.style = algo, cfg, values, style
        self.corpus, self.spec = corpus, spec or CorpusSpec()
        self.on_trees = bool(values.get("on_trees"))
        self.index = self.sents = self.parser = self.joint = None
        self.failed0 = 0
        self.limit = values.get("max_unparsed")          # --max-unparsed (the command line's)
        kernel, jobs, where = cfg.kernel, cfg.jobs, style.where
        path = isinstance(corpus, (str, os.PathLike))
        if self.on_trees:
            self.g, self.sents, self.parser = load_trees(grammar, corpus, start, where, normalise=True)
            self.failed0 = self._report()
            self.estep, self.n = ShardedEstep(self.parser, jobs), len(self.sents)
        elif values.get("joint"):
            self.g, self.sents, self.parser, self.joint = load_joint(grammar, corpus, values["joint"], self.spec,
                                                                     start, kernel)
            self.failed0 = self._report()
            self.estep, self.n = ShardedEstep(self.parser, jobs), len(self.sents)
        elif algo in STREAMING:
            self.g, self.estep, self.n = self._grammar(grammar, start), None, "a stream of"
            self._stream_grammar(grammar, corpus)
        elif algo in ON_DISK and path and values.get("cluster") is None and not os.environ.get(IN_MEMORY_ENV):
            from grind.infer.corpus_index import FileEstep
            self.g = self._grammar(grammar, start)
            self._stream_grammar(grammar, corpus)
            self.index = index_on_disk(self.g, grammar, os.fspath(corpus), self.spec, kernel)
            self.failed0 = self.index.report()
            if self.limit is not None:
                check_unparsed(self.failed0, self.index.n, self.limit, "sentences",
                               [why for _, _, why in self.index.named])
            self.estep, self.n = FileEstep(self.index, jobs), self.index.n
        else:
            if style.cli:
                self.g, self.sents, self.parser = load(grammar, corpus, self.spec, start, kernel, where,
                                                       normalise=True, tokens_only=True)
            else:
                self.g = self._grammar(grammar, start)
                self.sents = sentences(corpus)
                self.parser = _parser(self.g, self.sents, kernel)
            if algo in ON_DISK:          # stochastic VB: its pool and N leave out what no weights can parse
                from grind.infer.corpus_index import mark_underivable
                mark_underivable(self.parser, self.g)
            self.failed0 = self._report()
            first = (lambda z: name_zero_parses(self.sents, self.parser, z, self.g, self.limit)) if style.cli \
                else None
            self.estep, self.n = ShardedEstep(self.parser, jobs, on_first=first), len(self.sents)
        if algo in STREAMING:           # the stream is read by the algorithm: its file and reading options
            cfg.corpus, cfg.spec = os.fspath(corpus), self.spec
        from grind.infer.training import prior_vector
        alpha = values.get("alpha")
        self.alpha = None if "alpha" in unread_options(algo, cfg) else ("1.0" if alpha is None else alpha)
        self.prior = prior_vector(self.g, 1.0 if self.alpha is None else self.alpha)
        if self.on_trees:
            self.corpus_text = TREES_TEXT
        elif path:
            read_as = getattr(self.sents, "format", None) or getattr(self.index, "format", None) or \
                peek_format(os.fspath(corpus), self.spec)
            self.corpus_text = self.spec.describe(read_as)
        else:
            self.corpus_text = None
        self.universal: dict = {}         # --universal-rules: the header lines of the rule set and fraction
        if self.estep is not None:
            self.estep = self.regularized(self.estep)
        self.algorithm = self.trace = None
        if self.parser is not None:
            log.debug(f"chart kernel: {type(self.parser).__module__}.{type(self.parser).__name__}")

    def regularized(self, estep):
        """``estep`` projected toward --universal-rules (:func:`grind.infer.posterior_reg.regularize`; said
        on stderr), or as it is without them.  The command line wraps a --cluster E-step with it too."""
        rules = self.values.get("universal_rules")
        if not rules:
            return estep
        from grind.infer.posterior_reg import regularize
        estep, self.universal = regularize(self.g, estep, rules, self.values.get("rule_fraction"))
        log.info(f"universal rules {self.universal['universal_rules']}; {self.universal['rule_fraction']}")
        return estep

    def _grammar(self, grammar, start):
        if isinstance(grammar, Grammar):
            return as_probabilities(grammar, grammar.meta.get("path", "the grammar"), self.style.where, True)
        return read_probabilities(os.fspath(grammar), start, self.style.where, True)

    def _stream_grammar(self, grammar, corpus) -> None:
        """A grammar read from a stream: its header is known only now, checked against the corpus options
        (:func:`grammar_spec`; a file's was checked before the run was built)."""
        from grind.formats.textio import is_stream
        if self.style.cli and isinstance(grammar, str) and is_stream(grammar):
            grammar_spec(grammar, corpus, self.spec, self.g.meta)

    def _report(self) -> int:
        """Say which sentences (trees) have no parse; how many (more than --max-unparsed: an InputError)."""
        if self.style.cli:
            what = "trees" if self.on_trees else "sentences"
            return report_failures(self.sents, self.parser, known_failures(self.parser, len(self.sents)), what,
                                   limit=self.limit)
        warn_failures(self.style.where, self.parser, len(self.sents))
        return len(getattr(self.parser, "failures", {}) or {})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.index is not None:
            self.index.close()             # the spool of the corpus's tokens

    def describe(self) -> str:
        what = "trees" if self.on_trees else "sentences"
        text = f" ({self.corpus_text})" if self.corpus_text else ""
        return f"training {self.algo} on {self.n} {what}{text}, {len(self.g)} rules"

    def evaluation(self, dev):
        """The held-out evaluation of ``dev`` (a path read with the corpus options; from Python also
        Sentences or token lists) every --eval-every steps or at --eval-at points: a function of the algorithm."""
        from grind.infer.training import heldout
        if dev is None:
            return None
        if self.on_trees:
            return tree_dev_evaluation(self.g, self.parser, dev)
        if self.style.cli:
            dev_sents = read_corpus(dev, self.spec)
        else:
            dev_sents = sentences(dev)
        dev_parser = _parser(self.g, dev_sents, self.cfg.kernel)
        return lambda a: heldout(dev_parser, a.mean(), dev_sents)

    def build(self, rng):
        """The algorithm (:data:`grind.infer.registry.ALGORITHMS`) over the run's E-step."""
        from grind.infer.registry import ALGORITHMS
        self.algorithm = ALGORITHMS[self.algo](self.g, self.estep, self.prior, self.g.probabilities(), self.cfg, rng)
        return self.algorithm

    def train(self, rng, on_step=None, **driver):
        """Build the algorithm (unless built) and run the training driver (:func:`grind.infer.training.train`;
        ``driver``: checkpoint, checkpoint_every, resume, meta); the trace."""
        from grind.infer.training import EvalPoints, train
        if self.algorithm is None:
            self.build(rng)
        v = self.values
        at = v.get("eval_at")
        self.trace = train(self.algorithm, rng, eval_fn=self.evaluation(v.get("dev_path")),
                           eval_every=v.get("eval_every") or 0, on_step=on_step,
                           eval_at=None if at is None else EvalPoints.parse(at),
                           early_stop=bool(v.get("early_stop")), patience=v.get("patience") or 1, **driver)
        return self.trace

    def kind(self) -> str:
        """What the written weights are."""
        return "probabilities" if self.algorithm.output == "probabilities" else f"{PSEUDO_COUNTS} (posterior)"

    def header(self) -> dict:
        """What the trained grammar's header says of the run, in order (None: no line): algorithm, alpha,
        steps, objective, corpus, left_out, stopped, unparsed, the treebank's, the LN structure, the mixture,
        the M-step, and the temperature of a sampler stopped before its annealing ended (also said on stderr)."""
        from grind.infer.training import run_summary, unfinished_annealing, unparsed_note
        algorithm, trace = self.algorithm, self.trace
        summary = run_summary(trace)              # an early-stopped run: the kept state's steps and objective
        read = (self.corpus if isinstance(self.corpus, Corpus) else self.sents if self.sents is not None
                else self.index if self.index is not None else getattr(algorithm.batches, "read", lambda: None)())
        info = dict(algorithm=self.algo, alpha=self.alpha, steps=summary["steps"], objective=summary["objective"],
                    corpus=self.corpus_text,
                    left_out=left_out(read, "not trained on") if read is not None else None,
                    stopped=summary.get("stopped"))
        note = unparsed_note(self.algo, algorithm, trace, self.n, self.failed0,
                             "trees" if self.on_trees else "sentences")
        if note:
            info["unparsed"] = note
        if self.universal:
            info.update(self.universal)
            last = trace[-1].extra if trace else {}
            if "rule_share" in last:
                info["rule_share"] = (f"{last['rule_share']:.6f} of the arcs under the projected posterior of the "
                                      f"last step (lambda {last['pr_lambda']:.6g}; {last['rule_share_p']:.6f} before "
                                      "the projection)")
        from grind.grammars.dmv_constraints import header_constraints
        info.update(header_constraints(self.g))
        unseen = unseen_tags(self.g, self.sents)
        if unseen:
            info["unseen_tags"] = unseen
        if self.on_trees:
            from grind.grammars.latent import treebank_meta
            info.update(treebank_meta(self.g))
        if hasattr(algorithm, "st"):
            info["structure"] = algorithm.st.describe()
        if self.algo == "mixture":
            info["mixture"] = algorithm.describe()
        if hasattr(algorithm, "mstep"):
            info["ln_mstep"] = algorithm.mstep
        t_end = unfinished_annealing(trace)
        if t_end:                         # a tempered state, not a posterior one: said in the header and on stderr
            info["temperature"] = f"{t_end:.6g} (the annealing had not reached 1)"
            if self.style.cli:
                log.warn(f"the run ended at step {trace[-1].step} at temperature {t_end:.4g}, before the annealing "
                         "(over --anneal-sweeps, else --iterations) reached 1: the written state is a tempered one; "
                         "continue with --checkpoint FILE --resume and more --iterations to finish it")
            else:
                log.warn(f"{self.style.where}: the run ended at step {trace[-1].step} at temperature {t_end:.4g}, "
                         "before the annealing (over anneal_sweeps, else iterations) reached 1: the grammar is a "
                         "tempered state")
        return info


def unseen_tags(g, sents) -> str | None:
    """The header line naming a DMV grammar's head types that no training sentence has (said on stderr):
    point estimates give their root and attach rules probability 0, so grind parse backs off for them."""
    from grind.grammars.dmv import dmv_index, is_dmv_grammar
    if sents is None or not is_dmv_grammar(g) or g.meta.get("lexicalized") == "true":
        return None
    seen = {t for s in sents for t in s.tokens}
    types = dmv_index(g).types
    unseen = [t for t in types if t not in seen]
    if not unseen:
        return None
    note = (f"{len(unseen)} of the grammar's {len(types)} tags are in no training sentence ({' '.join(unseen)}): "
            "their root and attach rules learn nothing (0 under em); grind parse backs off for a sentence that "
            "has one")
    log.info(note)
    return note


def index_on_disk(g, grammar_path, corpus, spec, kernel):
    """The :func:`grind.infer.stochastic.index_corpus` of ``corpus`` (one pass;
    its tokens spooled to a temporary file, said on stderr); an error of the
    grammar's names its file, as :func:`load` does."""
    from grind.infer.stochastic import index_corpus
    name = "<stdin>" if grammar_path == "-" else grammar_path if isinstance(grammar_path, str) else None
    index = index_corpus(g, corpus, spec, kernel, where=name)
    what = {"-": "standard input"}.get(corpus, corpus)
    log.info(f"{what}: the tokens of its {index.n} sentences are spooled to a temporary file "
             f"({index.spool.nbytes / 2**20:.1f} MiB, deleted at the end); each minibatch is read back from it "
             "and parsed alone")
    return index


def load_joint(grammar, corpus, second, spec, start, kernel):
    """Two languages' grammars and corpora as one joint grammar (symbols
    prefixed ``1|`` and ``2|``) and a :class:`grind.infer.sln.JointParser`."""
    from grind.infer.sln import JointParser, joint_grammar
    from grind.formats.textio import read_header
    grammar_spec(second[0], second[1], spec, read_header(second[0]))      # checked against the first's options
    g1, s1, p1 = load(grammar, corpus, spec, start, kernel, "grind train", normalise=True)
    g2, s2, p2 = load(second[0], second[1], spec, None, kernel, "grind train", normalise=True)
    g = joint_grammar([g1, g2], ["1", "2"])
    parser = JointParser(g, [p1, p2])
    return g, s1 + s2, parser, ((g1, g2), parser)


def name_zero_parses(sents, parser, logz, g, limit=None) -> None:
    """After the first E-step: name the sentences with no parse of positive probability under the initial
    weights (those with a word the grammar lacks were named at loading), and among them those the grammar
    cannot derive under any weights (no parse under uniform rule probabilities either); ``limit``
    (--max-unparsed): an InputError when more than that share of the corpus has none, of either kind."""
    z = np.array(logz, dtype=np.float64)
    z[list(parser.failures)] = 0.0
    bad = np.flatnonzero(~np.isfinite(z))
    if len(bad):
        from grind.infer.corpus_index import mark_underivable
        mark_underivable(parser, g, bad)
        log.warn("under the initial weights (left out of the first pass; a sentence whose rules all get positive "
                 "weight is parsed again):")
        report_failures(sents, parser, z)
    if limit is not None:
        every = np.array(logz, dtype=np.float64)
        lost = np.flatnonzero(~np.isfinite(every))
        check_unparsed(len(lost), len(sents), limit, "sentences",
                       [parser.failures.get(int(i), NO_DERIVATION) for i in lost], unparsed_fix(sents, parser, lost))


def tree_dev_evaluation(g, train_parser, dev_path):
    """The --dev evaluation of a --trees run: the held-out gold trees' log
    probability (subtypes summed out) under the posterior mean, and labeled
    F1 (EVALB conventions) of max-rule-sum parses of their sentences."""
    from grind.eval.labeled import evaluate_labeled
    from grind.formats.trees import TRACE_TAGS, leaves, map_leaves, prune
    from grind.formats.treebank import debinarise
    from grind.infer.training import heldout
    from grind.kernels.latent_parse import LatentParser
    from grind.kernels.latent_tree import TreeParser
    latent = train_parser.latent
    prepared, items, _, raw = read_prepared_trees(dev_path, latent)
    dev = TreeParser(g, prepared, latent=latent)
    gold = [raw[it.number - 1] for it in items]
    words = [leaves(prune(t, TRACE_TAGS.__contains__)) for t in gold]
    sents = [[latent.terminal(w) for w in it.tokens] for it in items]

    def evaluate(a):
        theta = a.mean()
        out = heldout(dev, theta)
        results = LatentParser(g, weights=theta, latent=latent).parse(sents)
        pred = [("NOPARSE", *ws) if r.tree is None else map_leaves(debinarise(r.tree), _feed(ws))
                for r, ws in zip(results, words)]
        out["dev_f1"] = evaluate_labeled(gold, pred)["all"]["labeled_f1"]
        return out

    return evaluate


def _feed(words):
    """A leaf function giving ``words`` in order (the gold words back in place of signatures)."""
    it = iter(words)
    return lambda _: next(it)
