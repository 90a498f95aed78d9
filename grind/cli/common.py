"""Helpers the ``grind`` commands share: option decorators, click parameter
types, reading grammars and corpora, writing grammars and CoNLL, reporting
sentences without a parse."""
from __future__ import annotations

import functools
import os


import click
import numpy as np

from grind import log
from grind.formats.corpus import COLUMNS, FORMATS, PUNCT_RULES, CorpusSpec, left_out, read_corpus  # noqa: F401 (left_out: re-exported)
from grind.grammars.grammar import Grammar
from grind.formats.textio import header_lines, open_out, set_run_info
# Reading a grammar and corpus for a command, and reporting sentences without a parse: grind.run's (train and
# grind.fit build their run there), re-exported for the commands.
from grind.run import (TREE_ALGOS, TREES_TEXT, NO_DERIVATION, Namer, TreeItem, ADOPTED,  # noqa: F401
                       check_unparsed, grammar_options, known_failures, load, load_trees, read_prepared_trees,
                       read_probabilities, report_failures, unparsed_fix)
from grind.cli.options import (AlphaType, FiniteFloatRange, GroupedCommand, GroupedOption,  # noqa: F401
                               OutputPath, table_option)


# ----------------------------------------------------------------------------- helpers

class OneChoiceCommand(GroupedCommand):
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
    g = dict(cls=GroupedOption, group="Corpus")
    opts = [
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True, metavar="FORMAT",
                     help="text, conllu, conllx, malt, ptb, sigmorphon.", **g,
                     doc="One sentence a line (text), CoNLL-U, CoNLL-X, Malt-TAB, PTB trees, or sigmorphon "
                         "(word<TAB>morph @@morph ..., needs --chars); auto: by extension and content; with --chars "
                         "a .tsv file is sigmorphon."),
        click.option("--column", type=click.Choice(COLUMNS), default=None, metavar="COLUMN", **g,
                     help="FORM, LFORM, UPOS or XPOS (treebanks).",
                     doc="The CoNLL column whose values are the tokens: FORM, LFORM (lower-cased FORM), UPOS or "
                         "XPOS.  Required for treebanks."),
        click.option("--punct", type=click.Choice(PUNCT_RULES), default="none", show_default=True, **g,
                     metavar="RULE", help="Drop punctuation: ud, ptb, ptb+.",
                     doc="ud = UPOS PUNCT; ptb = PTB tags `` '' , . : -LRB- -RRB-; ptb+ also # $."),
        click.option("--max-length", type=click.IntRange(1), default=None, metavar="N", **g,
                     help="Keep sentences of at most N tokens.",
                     doc="Keep sentences of at most this many tokens (after punctuation removal); default: no "
                         "limit."),
        click.option("--min-length", type=click.IntRange(1), default=1, show_default=True, metavar="N", **g,
                     help="Keep sentences of at least N tokens."),
        click.option("--chars", is_flag=True, **g, help="One word a line, its characters as tokens.",
                     doc="Morphology: one word a line (or a sigmorphon TSV), NFC-normalised, each Unicode "
                         "character one token; a plain-text line with whitespace or an empty line is an error, "
                         "a sigmorphon row of several words is skipped and counted ('# left_out:'). "
                         "--max-length/--min-length count characters."),
        click.option("--types", is_flag=True, **g, help="Keep the first occurrence of each sentence.",
                     doc="Keep only the first occurrence of every distinct sentence (word types with --chars, "
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


#: --max-unparsed, the one option (the same on parse, loglik, estep, eval and train) that lets a run leave more
#: than a share of its sentences without a parse and still exit 0 (:func:`grind.run.check_unparsed`): declared
#: with the training options (grind.infer.options).
max_unparsed_option = table_option("max_unparsed")


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


def output_option(f):
    return click.option("-o", "--output", cls=GroupedOption, group="Output", type=OutputPath(), default="-",
                        show_default=True, metavar="FILE", help="Output file (- = stdout).",
                        doc="Written atomically, through a symlink to its target; compressed by its suffix.")(f)


#: --seed, --start, --kernel: declared with the training options (grind.infer.options), shared by every command.
seed_option = table_option("seed")
start_option = table_option("start")
kernel_option = table_option("kernel")


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
    body = grammar.rule_text(weights, grammar.pseudocounts)       # checked before a byte is written
    with open_out(path) as f:
        f.writelines(header_lines(weights=kind, start=grammar.start, rules=len(grammar), **extra))
        f.writelines(body)


def check_tree_options(algo, spec, opts):
    """--trees trains on gold trees: em, vb, cvb or gibbs, no corpus options, no --joint (a usage error)."""
    from grind.run import OptionError, check_trees
    try:
        check_trees(algo, spec, opts, Namer())
    except OptionError as e:
        raise click.UsageError(str(e)) from None


def _given(name) -> bool:
    """True when option ``name`` of the current command was given (not its default)."""
    from click.core import ParameterSource
    return click.get_current_context().get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


def grammar_spec(grammar_path, corpus_path, spec, meta=None, late=None):
    """:func:`grind.run.grammar_spec` with the command line's options as given (:func:`_given`)."""
    from grind.run import grammar_spec as reconcile
    return reconcile(grammar_path, corpus_path, spec, meta, late, given=_given)


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
