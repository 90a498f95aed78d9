"""Helpers the ``grind`` commands share: option decorators, click parameter
types, reading grammars and corpora, writing grammars and CoNLL, reporting
sentences without a parse."""
from __future__ import annotations

import functools
import os

from dataclasses import dataclass

import click
import numpy as np

from grind import log
from grind.formats.corpus import COLUMNS, FORMATS, PUNCT_RULES, CorpusSpec, left_out, read_corpus  # noqa: F401 (left_out: re-exported)
from grind.errors import InputError
from grind.grammars.grammar import Grammar, read_grammar
from grind.formats.textio import header_lines, open_out, output_problem, set_run_info


# ----------------------------------------------------------------------------- helpers

class OneChoiceCommand(click.Command):
    """A command whose flags that share a destination (``--viterbi`` / ``--mbr``:
    ``flag_value`` options of one name) are alternatives: click lets the last one
    given win silently; giving two different ones here is a usage error."""

    def parse_args(self, ctx, args):
        _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        chosen: dict[str, list[str]] = {}
        for param in order:
            if isinstance(param, click.Option) and param.is_flag and not param.is_bool_flag:
                flags = chosen.setdefault(param.name or "", [])
                if param.opts[0] not in flags:
                    flags.append(param.opts[0])
        for flags in chosen.values():
            if len(flags) > 1:
                raise click.UsageError(f"{' and '.join(flags)} are alternatives: give one", ctx)
        return super().parse_args(ctx, args)


def corpus_options(f):
    """--format/--column/--punct/--max-length/--min-length/--chars/--types, collected into ``spec``."""
    opts = [
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True,
                     help="Corpus format: one sentence a line, CoNLL-U, CoNLL-X, Malt-TAB, PTB trees, or "
                          "sigmorphon (word<TAB>morph @@morph ..., needs --chars) (auto: by extension/content; "
                          "with --chars a .tsv file is sigmorphon)."),
        click.option("--column", type=click.Choice(COLUMNS), default=None,
                     help="Treebank column to model (LFORM = lower-cased FORM). Required for treebanks."),
        click.option("--punct", type=click.Choice(PUNCT_RULES), default="none", show_default=True,
                     help="Remove punctuation first: ud = UPOS PUNCT; ptb = PTB tags `` '' , . : -LRB- -RRB-; "
                          "ptb+ also # $."),
        click.option("--max-length", type=click.IntRange(1), default=None, show_default="none: no limit",
                     help="Keep sentences of at most this many tokens (after punctuation removal)."),
        click.option("--min-length", type=click.IntRange(1), default=1, show_default=True,
                     help="Keep sentences of at least this many tokens."),
        click.option("--chars", is_flag=True,
                     help="Morphology: one word a line (or a sigmorphon TSV), NFC-normalised, each Unicode "
                          "character one token; a plain-text line with whitespace or an empty line is an error, "
                          "a sigmorphon row of several words is skipped and counted ('# left_out:'). "
                          "--max-length/--min-length count characters."),
        click.option("--types", is_flag=True,
                     help="Keep only the first occurrence of every distinct sentence (word types with --chars, "
                          "as Johnson, Griffiths & Goldwater 2007 train on; not implied by --chars, the "
                          "SIGMORPHON files are type lists already)."),
    ]
    for o in reversed(opts):
        f = o(f)

    @functools.wraps(f)
    def wrapper(*a, fmt, column, punct, max_length, min_length, chars, types, **kw):
        if max_length is not None and min_length > max_length:
            raise click.BadParameter(f"{min_length} is above --max-length {max_length}", param_hint="'--min-length'")
        kw["spec"] = CorpusSpec(fmt, column, punct, max_length, min_length, chars=chars, types=types)
        return f(*a, **kw)

    return wrapper


def max_unparsed_option(f):
    """--max-unparsed, the one option (the same on parse, loglik, estep, eval and train) that lets a run
    leave more than a share of its sentences without a parse and still exit 0 (:func:`check_unparsed`)."""
    return click.option("--max-unparsed", type=FiniteFloatRange(0, 1), default=MAX_UNPARSED, show_default=True,
                        help="Fail (exit 1, no output) when more than this share of the sentences has no parse "
                             "(1: never fail).")(f)


#: The default share of sentences without a parse above which a command fails (:func:`check_unparsed`).
MAX_UNPARSED = 0.5


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


class OutputPath(click.ParamType):
    """A file grind writes, checked when click converts the option, before the
    command runs: ``''`` is a usage error (exit 2); a missing directory, a
    directory, a file or directory that is not writable, or a dangling symlink
    into a missing directory is a one-line error naming option and path (exit 1).
    Every option that names a file grind writes has this type; the writing is
    :func:`grind.formats.textio.open_out`'s (symlinks written through, FIFOs and devices
    directly, compression by suffix).  ``regular=True``: a file written more than
    once or read back by name (``train --checkpoint``) must be a regular file:
    ``-``, a FIFO, a device or a socket is an error too."""
    name = "file"

    def __init__(self, regular: bool = False):
        self.regular = regular

    def convert(self, value, param, ctx):
        problem = output_problem(value, self.regular)
        if problem == "empty file name":
            self.fail("empty file name", param, ctx)
        if problem:
            opt = "/".join(param.opts) if param else "output"
            raise InputError(f"{opt} {value}: cannot write: {problem}")
        return value


#: Commands whose -o is a grammar made from their GRAMMAR (or mstep's --grammar): that input may be rewritten in
#: place (the output is written to a temporary file, renamed over it at the end).
IN_PLACE = {("init", "grammar"), ("train", "grammar"), ("from-file", "grammar"), ("mstep", "grammar_path")}


def check_outputs_are_not_inputs(ctx: click.Context) -> None:
    """A usage error when a file the command writes (a parameter of type :class:`OutputPath`) is a file it
    reads (any other parameter naming an existing regular file), which it would replace by another kind of
    file -- a corpus by a grammar, a grammar by its parses -- save a grammar's in-place update (:data:`IN_PLACE`).
    Run before every command (``grind.cli.main``)."""
    from grind.formats.textio import is_special, same_file
    outs, ins, stdin = [], [], []
    for p in ctx.command.params:
        v = ctx.params.get(p.name)
        values = v if isinstance(v, (list, tuple)) else [v]
        if isinstance(p.type, OutputPath):
            outs += [(p, x) for x in values if isinstance(x, str) and x != "-"]
        else:
            ins += [(p, x) for x in values if isinstance(x, str) and x != "-" and os.path.isfile(x)
                    and not is_special(x)]
            stdin += [_param_name(p)] * sum(x == "-" for x in values)
    if len(stdin) > 1:
        names = list(dict.fromkeys(stdin))
        if len(names) == 1:
            named = f"{names[0]} is '-' {len(stdin)} times"
        else:
            named = f"{', '.join(names[:-1])} and {names[-1]} are {'both' if len(stdin) == 2 else 'all'} '-'"
        raise click.UsageError(f"{named}: standard input can be read only once; give all but one of them as files")
    for po, o in outs:
        for pi, i in ins:
            if po.name == "output" and (ctx.command.name, pi.name) in IN_PLACE:
                continue
            if same_file(o, i):
                what = "/".join(po.opts) if po.opts else po.name
                src = _param_name(pi)
                raise click.UsageError(f"{what} {o} is {src} ({i}), which this command reads: writing it would "
                                       "replace the input; write elsewhere")


def _param_name(p) -> str:
    """An option by its flags (``--corpus``), an argument by its metavar (``CORPUS``)."""
    return "/".join(p.opts) if p.opts and p.opts[0].startswith("-") else p.name.upper()


class FiniteFloatRange(click.FloatRange):
    """A click.FloatRange that also refuses nan and inf (which FloatRange lets through)."""

    def convert(self, value, param, ctx):
        import math
        v = super().convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return v


class AlphaType(click.ParamType):
    """--alpha: a finite number > 0 (>= 0 with ``zero_ok``; kept as written), a number and per-LHS numbers
    (``1e-20,Stem=1e-15``), or an existing file of per-rule pseudo-counts."""

    name = "NUMBER|NUMBER,LHS=NUMBER...|FILE"

    def __init__(self, zero_ok: bool = False):
        self.zero_ok = zero_ok

    def convert(self, value, param, ctx):
        import math
        import os
        from grind.infer.training import alpha_per_lhs
        if os.path.exists(str(value)) or (value == "-" and not self.zero_ok):
            return value
        per_lhs = alpha_per_lhs(value)
        try:
            values = [float(value)] if per_lhs is None else [per_lhs[0], *(v for _, v in per_lhs[1])]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number, nor NUMBER,LHS=NUMBER,..., nor an existing file of "
                      f"pseudo-counts", param, ctx)
        zero_ok = self.zero_ok and per_lhs is None        # mstep's 0 (no prior) is one number, not per LHS
        bound = ">= 0" if zero_ok else "> 0"
        for v in values:
            if not (math.isfinite(v) and (v >= 0 if zero_ok else v > 0)):
                self.fail(f"{value!r}: a Dirichlet hyperparameter must be a finite number {bound}", param, ctx)
        return value


def output_option(f):
    return click.option("-o", "--output", type=OutputPath(), default="-", show_default=True,
                        help="Output file (- = stdout; .gz/.xz/.bz2 compressed); written atomically, "
                             "through a symlink to its target.")(f)


def seed_option(f):
    return click.option("--seed", type=click.IntRange(0), default=None,
                        help="Seed of the one random generator every random choice draws from.")(f)


def start_option(f):
    return click.option("--start", default=None,
                        help="Start symbol (default: the grammar's '# start:' header, else the first rule's LHS).")(f)


def kernel_option(f):
    return click.option("--kernel", type=click.Choice(["auto", "cky", "dmv", "segment"]), default="auto",
                        show_default=True,
                        help="Chart kernel: auto = the DMV kernel for DMV grammars, the segmentation kernel for "
                             "morphology (template) grammars, CKY otherwise.")(f)


def not_counted(sents) -> int:
    """How many sentences (trees, words) of the input a corpus read by read_corpus holds no more: the
    number parts of :func:`left_out` (repeats that --types drops are the same word, counted once)."""
    return sum(int(getattr(sents, k, 0)) for k in ("left_out", "wordless", "no_words", "multiword"))


def is_treebank_grammar(path) -> bool:
    """The grammar file's header says ``# model: treebank`` (written by make-grammar treebank, train --trees and
    mstep --grammar), read as the grammar reader reads header lines (blank lines and any ``#`` line before the
    first rule); a grammar read from stdin or a pipe is not peeked at (it could not be read again)."""
    from grind.formats.rules import parse_header_meta
    from grind.formats.textio import is_stream, read_lines
    if is_stream(path):
        return False
    meta: dict[str, str] = {}
    lines = read_lines(path)
    try:
        for _, line in lines:
            s = line.strip()
            if s and not s.startswith("#"):
                break
            if s:
                parse_header_meta(s, meta)
    finally:
        lines.close()
    return meta.get("model", "") == "treebank"


def make_rng(seed, random: bool = False):
    """The run's one random generator.  ``random``: this run makes random choices
    (a sampler, a random initialisation, committee members); without ``--seed`` a
    seed is then drawn from the system's entropy and recorded (header ``# seed: N
    (drawn: no --seed given)``, and on stderr), so ``--seed N`` repeats the run.
    A run without random choices records ``# seed: None``."""
    shown = seed
    if seed is None and random:
        import secrets
        seed = secrets.randbits(32)
        shown = f"{seed} (drawn: no --seed given)"
        log.info(f"no --seed given: drew {seed}; --seed {seed} repeats this run")
    set_run_info(seed=shown)
    return np.random.default_rng(seed)


def write_grammar(path, grammar: Grammar, weights, kind, **extra):
    """Write rules with ``weights`` and a header saying what the weights are."""
    with open_out(path) as f:
        f.writelines(header_lines(weights=kind, start=grammar.start, rules=len(grammar), **extra))
        f.writelines(grammar.rule_text(weights, grammar.pseudocounts))


def read_probabilities(grammar_path, start=None, command="this command", normalise=False):
    """The grammar of ``grammar_path``, checked to hold rule probabilities
    (:func:`grind.grammars.grammar.require_probabilities`), or with ``normalise=True``
    its weights normalised per LHS with a warning when they are not."""
    from grind.grammars.grammar import as_probabilities
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
    from grind.formats.corpus import Corpus
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


#: Algorithms that train a latent treebank grammar on gold trees (--trees).
TREE_ALGOS = ("em", "vb", "cvb", "gibbs")
#: How a --trees corpus is described in logs and headers.
TREES_TEXT = "PTB gold trees, latent subtypes hidden"


def check_tree_options(algo, spec, opts):
    """--trees trains on gold trees: em, vb, cvb or gibbs, no corpus options, no --joint."""
    from grind.formats.corpus import CorpusSpec
    if algo not in TREE_ALGOS:
        raise click.UsageError(f"--trees trains with {', '.join(TREE_ALGOS)}, not --algo {algo}")
    if spec != CorpusSpec():
        raise click.UsageError("--trees reads PTB trees as they are: the corpus options do not apply")
    if opts.get("joint"):
        raise click.UsageError("--joint is not supported with --trees")


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


def _given(name) -> bool:
    """True when option ``name`` of the current command was given (not its default)."""
    from click.core import ParameterSource
    return click.get_current_context().get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


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


def grammar_spec(grammar_path, corpus_path, spec, meta=None, late=None):
    """``spec`` reconciled with the corpus options the grammar was made with (the rule: :data:`ADOPTED`
    and the comment above it): a contradiction is an InputError naming both values and the fix; an option
    not given takes the grammar's value, said on stderr.  ``meta``: the header of a grammar read already
    (from standard input, after its corpus: nothing can be adopted any more, so an option not given that
    differs is refused too, unless ``late`` is False: the corpus is not read yet); else the header of the
    file ``grammar_path`` (a stream: not looked at here)."""
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
        if late or _given(opt) or (opt == "punct" and fmt is None):
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


def removed_tokens(spec, fmt) -> str | None:
    """The ``# removed_tokens:`` header value of a CoNLL file written from a corpus read with ``spec``
    (grind eval refuses to score it with another --punct: the removed tokens' heads are filler)."""
    if spec.punct == "none":
        return None
    if fmt in ("conllu", "conllx"):
        return ("attached to the root word with DEPREL punct (not predicted; removed again by eval --punct "
                f"{spec.punct})")
    return (f"not written ({fmt} input: the kept tokens are written with IDs 1..n; grind eval --punct {spec.punct} "
            "aligns them with the gold)")


def write_dependencies(output, sents, parser, heads, decoder, spec, weights=None, explain=None, limit=None,
                       **extra):
    """CoNLL output (:func:`write_conll`).  A sentence without a tree
    (``heads[i] is None``) is written with filler heads after the comment
    :data:`grind.formats.corpus.UNPARSED_MARK` and its reason (never a
    baseline tree as a prediction: grind eval scores its words 0), counted in
    the header's ``# unparsed:`` line and named on stderr (the offending tag
    when the grammar lacks it or, given ``weights``, gives it probability 0;
    ``explain(i)``, given, says it instead).  ``limit`` (--max-unparsed): an
    InputError, nothing written, when more than that share has none."""
    from grind.formats.corpus import UNPARSED_MARK
    bad = [i for i, h in enumerate(heads) if h is None]
    zero = parser.zero_types(weights) if bad and weights is not None and explain is None else set()
    reasons = {i: explain(i) if explain is not None else parser.explain(i, weights, zero) for i in bad}
    for k, i in enumerate(bad):
        if k == 10:
            log.warn(f"... and {len(bad) - 10} more")
            break
        log.warn(f"sentence {sents[i].number} (line {sents[i].line}) has no parse: {reasons[i]}")
    if bad:
        log.warn(f"{len(bad)} of {len(sents)} sentences have no parse; written with filler heads (attach-right) "
                 f"after the comment '{UNPARSED_MARK}REASON' (grind eval scores their words 0)")
    if limit is not None:
        check_unparsed(len(bad), len(sents), limit, "sentences", reasons.values())
    write_conll(output, sents, heads, spec, reasons, decoder=decoder, corpus=spec.describe(sents.format),
                unparsed=len(bad), **extra)


def write_conll(output, sents, heads, spec, reasons=None, **header):
    """Write every sentence of the corpus as read (``sents.everything``, in
    order; the kept ones with their ``heads``, None = unparsed, with
    ``reasons[i]``; those the corpus options left out with filler heads
    after :data:`grind.formats.corpus.LEFT_OUT_MARK` and why), the header
    lines being the first sentence's comments: a file the CoNLL 2018
    evaluator reads (one root a sentence, the gold's token stream) and grind
    eval scores as before.  A sentence with no row left to write (a Malt-TAB
    or PTB sentence of punctuation only) is not written (the header's
    ``# left_out:`` counts it)."""
    from grind.formats.corpus import LEFT_OUT_MARK, UNPARSED_MARK, conll_block
    reasons = reasons or {}
    allsents = sents.everything if getattr(sents, "everything", None) is not None else list(sents)
    index = {id(s): i for i, s in enumerate(sents)}
    written = sum(1 for s in allsents if s.outside) if len(allsents) > len(sents) else 0
    what = f"written with filler heads, marked '{LEFT_OUT_MARK}REASON'" if written else "not written"
    lines = header_lines(**header, left_out=left_out(sents, what), removed_tokens=removed_tokens(spec, sents.format))
    with open_out(output) as f:
        for s in allsents:
            i = index.get(id(s))
            if i is None:
                h, mark = None, LEFT_OUT_MARK + (s.outside or "outside the corpus options")
            else:
                h, mark = heads[i], UNPARSED_MARK + str(reasons.get(i, NO_DERIVATION))
            if s.raw is None and not s.rows and not s.tokens:
                continue                              # nothing to write (counted in the header)
            f.write(conll_block(s, h, sents.format, header=lines, mark=mark))
            lines = []


def dependency_convention(spec, read_as=None) -> str:
    punct = {"none": "all tokens scored (punctuation kept, as conll18_ud_eval.py)",
             "ud": "punctuation (UPOS PUNCT) removed before scoring, heads re-attached",
             "ptb": "PTB punctuation tags removed before scoring, heads re-attached",
             "ptb+": "PTB punctuation tags and # $ removed before scoring, heads re-attached"}[spec.punct]
    return ("directed / undirected attachment accuracy over words, root attachment counted as one arc; "
            f"{punct}; sentence lengths after removal; corpus read as {spec.describe(read_as)}")
