"""The ``grind`` command line: small subcommands that read and write plain text.

Every FILE argument may be ``-`` (stdin / stdout).  Data goes to stdout (or
``-o``), messages and progress to stderr.  Exit status: 0 success, 1 runtime
or input error, 2 usage error, 130 interrupted, 143 terminated (SIGTERM).
Every output path is checked before the command runs (:class:`OutputPath`)
and written by :func:`grind.formats.textio.open_out`.
"""
from __future__ import annotations

import functools
import sys
from types import SimpleNamespace

import click
import numpy as np

from grind import __version__, log
from grind.formats.corpus import COLUMNS, FORMATS, PUNCT_RULES, CorpusSpec, read_corpus
from grind.formats.counts import Counts, read_counts, write_counts
from grind.errors import GrindError, InputError
from grind.grammars.grammar import PSEUDO_COUNTS, Grammar, read_grammar, rule_lines
from grind.formats.textio import StdoutClosed, header_lines, open_out, output_group, output_problem, same_file, set_run_info

EPILOG_PIPELINE = """\b
A whole pipeline on a CoNLL-U file (UPOS tags, punctuation removed, 2..10 words:
a CNF grammar has no derivation of a one-word sentence):
  C="--column UPOS --punct ud --min-length 2 --max-length 10"
  grind make-grammar cnf $C --nonterminals 10 --preterminals 10 train.conllu > g0.txt
  grind init --random --seed 1 g0.txt > g1.txt
  grind train --algo em $C g1.txt train.conllu > g.txt
  grind parse $C g.txt test.conllu > test.trees
  grind loglik $C g.txt test.conllu | tail -3
"""


# ----------------------------------------------------------------------------- helpers

def corpus_options(f):
    """--format/--column/--punct/--max-length/--min-length, collected into ``spec``."""
    opts = [
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True,
                     help="Corpus format: one sentence a line, CoNLL-U, CoNLL-X or Malt-TAB (auto: by extension/content)."),
        click.option("--column", type=click.Choice(COLUMNS), default=None,
                     help="Treebank column to model (LFORM = lower-cased FORM). Required for treebanks."),
        click.option("--punct", type=click.Choice(PUNCT_RULES), default="none", show_default=True,
                     help="Remove punctuation first: ud = UPOS PUNCT; ptb = PTB tags `` '' , . : -LRB- -RRB-; ptb+ also # $."),
        click.option("--max-length", type=click.IntRange(1), default=None,
                     help="Keep sentences of at most this many tokens (after punctuation removal)."),
        click.option("--min-length", type=click.IntRange(1), default=1, show_default=True,
                     help="Keep sentences of at least this many tokens."),
    ]
    for o in reversed(opts):
        f = o(f)

    @functools.wraps(f)
    def wrapper(*a, fmt, column, punct, max_length, min_length, **kw):
        if max_length is not None and min_length > max_length:
            raise click.BadParameter(f"{min_length} is above --max-length {max_length}", param_hint="'--min-length'")
        kw["spec"] = CorpusSpec(fmt, column, punct, max_length, min_length)
        return f(*a, **kw)

    return wrapper


class OutputPath(click.ParamType):
    """A file grind writes, checked when click converts the option, before the
    command runs: ``''`` is a usage error (exit 2); a missing directory, a
    directory, a file or directory that is not writable, or a dangling symlink
    into a missing directory is a one-line error naming option and path (exit 1).
    Every option that names a file grind writes has this type; the writing is
    :func:`grind.formats.textio.open_out`'s (symlinks written through, FIFOs and devices
    directly, compression by suffix)."""
    name = "file"

    def convert(self, value, param, ctx):
        problem = output_problem(value)
        if problem == "empty file name":
            self.fail("empty file name", param, ctx)
        if problem:
            opt = "/".join(param.opts) if param else "output"
            raise InputError(f"{opt} {value}: cannot write: {problem}")
        return value


class FiniteFloatRange(click.FloatRange):
    """A click.FloatRange that also refuses nan and inf (which FloatRange lets through)."""

    def convert(self, value, param, ctx):
        import math
        v = super().convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return v


class AlphaType(click.ParamType):
    """train --alpha: a positive finite number (kept as written) or an existing file of pseudo-counts."""

    name = "NUMBER|FILE"

    def convert(self, value, param, ctx):
        import math
        import os
        try:
            v = float(value)
        except (TypeError, ValueError):
            if value != "-" and not os.path.exists(str(value)):
                self.fail(f"{value!r} is neither a number nor an existing file of pseudo-counts", param, ctx)
            return value
        if not (math.isfinite(v) and v > 0):
            self.fail(f"{value!r}: a Dirichlet hyperparameter must be a positive finite number", param, ctx)
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
    return click.option("--kernel", type=click.Choice(["auto", "cky", "dmv"]), default="auto", show_default=True,
                        help="Chart kernel: auto = the DMV kernel for DMV grammars, CKY otherwise.")(f)


def make_rng(seed):
    set_run_info(seed=seed)
    return np.random.default_rng(seed)


def write_grammar(path, grammar: Grammar, weights, kind, **extra):
    """Write rules with ``weights`` and a header saying what the weights are."""
    with open_out(path) as f:
        f.writelines(header_lines(weights=kind, start=grammar.start, **extra))
        f.writelines(rule_lines(grammar.rules, weights, grammar.pseudocounts))


def read_probabilities(grammar_path, start=None, command="this command", normalise=False):
    """The grammar of ``grammar_path``, checked to hold rule probabilities
    (:func:`grind.grammars.grammar.require_probabilities`), or with ``normalise=True``
    its weights normalised per LHS with a warning when they are not."""
    from grind.grammars.grammar import require_probabilities
    grammar = read_grammar(grammar_path, start)
    try:
        require_probabilities(grammar, grammar_path, command)
    except InputError:
        if not normalise or grammar.weight_kind() == "counts":
            raise
        grammar = Grammar(grammar.rules, grammar.normalize(grammar.weights), grammar.start, grammar.pseudocounts,
                          dict(grammar.meta, weights="probabilities (normalised by grind train)"))
        log.warn(f"{'<stdin>' if grammar_path == '-' else grammar_path}: the weights are not probabilities "
                 "(some left-hand side's do not sum to 1); training starts from them normalised per "
                 "left-hand side (run 'grind init' first to choose the start yourself)")
    return grammar


def load(grammar_path, corpus_path, spec, start=None, kernel="auto", command="this command", normalise=False):
    """Grammar, sentences and a chart parser for them.  The grammar's
    :meth:`~grind.grammars.grammar.Grammar.probabilities` must be rule probabilities
    (:func:`grind.grammars.grammar.require_probabilities`; parse, loglik and estep use
    them as such).  ``normalise=True`` (train, which only needs a starting
    point) normalises weights that are not probabilities per LHS instead,
    with a warning."""
    from grind.kernels.select import make_parser
    sents = read_corpus(corpus_path, spec)
    grammar = read_probabilities(grammar_path, start, command, normalise)
    try:
        parser = make_parser(grammar, [s.tokens for s in sents], kernel)
    except InputError as e:
        name = "<stdin>" if grammar_path == "-" else grammar_path
        msg = str(e)
        raise InputError(msg if msg.startswith(name + ":") else f"{name}: {msg}") from None
    return grammar, sents, parser


def known_failures(parser, n):
    """A log-Z-like vector: -inf for sentences the parser already knows it cannot parse."""
    z = np.zeros(n)
    z[list(parser.failures)] = -np.inf
    return z


def report_failures(sents, parser, logz, what="sentences"):
    """Warn about every sentence without a parse; return how many there were."""
    bad = np.flatnonzero(~np.isfinite(logz))
    for k, i in enumerate(bad):
        if k == 10:
            log.warn(f"... and {len(bad) - 10} more")
            break
        s = sents[i]
        why = parser.failures.get(int(i), "no derivation has positive probability")
        log.warn(f"sentence {s.number} (line {s.line}) has no parse: {why}")
    if len(bad):
        log.warn(f"{len(bad)} of {len(sents)} {what} have no parse and were left out")
    return len(bad)


# ----------------------------------------------------------------------------- the group

@click.group(epilog=EPILOG_PIPELINE, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grind")
@click.option("-q", "--quiet", is_flag=True, help="No progress or log messages (warnings still shown).")
def cli(quiet):
    """grind: unsupervised grammar induction with Bayesian probabilistic grammars.

    Grammars are plain text, one rule a line: 'weight LHS --> RHS ...'
    (Mark Johnson's format); count files use the same rule keys.
    """
    log.set_quiet(quiet)


@cli.group("make-grammar")
def make_grammar():
    """Write a grammar to train: a fully connected CNF grammar, the DMV, or a checked copy of a file.

    \b
    Examples:
      grind make-grammar cnf -n 10 -p 10 --column UPOS --punct ud train.conllu > g0.txt
      grind make-grammar dmv --column UPOS --punct ud --max-length 10 train.conllu > dmv0.txt
    """


@make_grammar.command("cnf")
@corpus_options
@click.option("-n", "--nonterminals", type=click.IntRange(1), required=True, help="Number of nonterminals X0...")
@click.option("-p", "--preterminals", type=click.IntRange(0), default=0, show_default=True,
              help="Number of preterminals PT0... (0: the X rewrite to words directly).")
@click.option("--start-symbol", default="ROOT", show_default=True, help="Name of the start symbol.")
@output_option
@click.argument("corpus")
def make_cnf(corpus, spec, nonterminals, preterminals, start_symbol, output):
    """Fully connected CNF grammar over the vocabulary of CORPUS.

    \b
    ROOT --> X_i;  X_i --> A B  for all A, B in X (and PT);
    X_i --> w (no preterminals) or PT_j --> w (with preterminals).
    All weights are 1: run 'grind init' to turn them into probabilities.

    \b
    Example:
      grind make-grammar cnf -n 10 -p 10 --column UPOS --punct ud train.conllu > g0.txt
    """
    from grind.grammars.cnf import cnf_grammar
    vocab = sorted({t for s in read_corpus(corpus, spec) for t in s.tokens})
    g = cnf_grammar(vocab, nonterminals, preterminals, start_symbol)
    write_grammar(output, g, g.weights, "unnormalised (all 1)", corpus=spec.describe())


@make_grammar.command("dmv")
@corpus_options
@click.option("--lexicalized", is_flag=True,
              help="Words as heads: choose rules only for (head, dependent, direction) triples seen in a sentence.")
@click.option("--tags", "tags_path", default=None,
              help="Unlexicalized: also cover the tags of this file (whitespace separated; lines starting "
                   "'# ' are comments).")
@click.option("--tags-from", "tags_from", multiple=True,
              help="Unlexicalized: also cover every tag of this corpus, read with the same --column/--punct "
                   "and no length filter (repeatable: e.g. dev and test).")
@click.option("--max-rules", type=click.IntRange(1), default=5_000_000, show_default=True,
              help="Refuse to build an unlexicalized DMV of more rules than this (10 |V| + 2 |V|^2 for "
                   "|V| head types; FORM over a corpus gives tens of millions).")
@output_option
@click.argument("corpus")
def make_dmv(corpus, spec, lexicalized, tags_path, tags_from, max_rules, output):
    """The DMV (Klein & Manning 2004) as a split-head PCFG over a tag set.

    \b
    S --> Y_h;  Y_h --> L0_h R0_h;  L0_h / L_h --> h_l (STOP) | L'_h (not STOP),
    valence 0 / 1;  L'_h --> Y_d L_h (choose d);  mirror rules R0_h, R_h, R'_h.
    Uniform probabilities; any PCFG tool can read it, grind uses its DMV kernel.

    \b
    The head types (unlexicalized) are a tag set, not the sample's tags, so
    held-out sentences parse:
      --column UPOS   the 17 UPOS tags (without PUNCT under --punct ud), plus
                      any other value CORPUS has (with a warning);
      other columns   every tag of CORPUS read without --max-length/--min-length
                      (a <= 10 grammar covers the whole training file);
      and in both cases the tags of --tags FILE and --tags-from CORPUS2.
    The header's '# tagset:' line says how it was made.  --lexicalized:
    the words of the (length-filtered) CORPUS, choose rules only for pairs
    seen in one sentence.

    \b
    Examples:
      grind make-grammar dmv --column UPOS --punct ud --max-length 10 train.conllu > dmv0.txt
      grind make-grammar dmv --column XPOS --punct ptb --max-length 10 --tags-from dev.conllu train.conllu > dmv0.txt
      grind make-grammar dmv --lexicalized --column LFORM --punct ud childes.conllu > lex0.txt
    """
    from grind.grammars.dmv import dmv_grammar, dmv_size
    if lexicalized:
        if tags_path or tags_from:
            raise click.UsageError("--tags / --tags-from are for the unlexicalized DMV")
        sents = [s.tokens for s in read_corpus(corpus, spec)]
        g = dmv_grammar(sents, lexicalized=True)
        tagset = f"{spec.column or 'tokens'} of the length-filtered corpus ({len({t for s in sents for t in s})} types)"
    else:
        vocab, tagset = dmv_tagset(corpus, spec, tags_path, tags_from)
        n_rules = dmv_size(len(vocab))
        if n_rules > max_rules:
            raise InputError(f"{corpus}: an unlexicalized DMV over {len(vocab)} head types "
                             f"({spec.column or 'tokens'}) has {n_rules:,} rules (10 |V| + 2 |V|^2), above the "
                             f"limit of {max_rules:,}: use a tag column, or --lexicalized (choose rules only for "
                             f"pairs seen in a sentence), or lift the limit with --max-rules {n_rules}")
        g = dmv_grammar([], vocabulary=vocab)
    log.info(f"DMV over {tagset}: {len(g)} rules")
    write_grammar(output, g, g.weights, "probabilities (uniform)", model="dmv",
                  lexicalized=str(lexicalized).lower(), tagset=tagset, corpus=spec.describe())


def dmv_tagset(corpus, spec, tags_path, tags_from):
    """The head types of an unlexicalized DMV and a one-line description (see make_dmv)."""
    from grind.formats.corpus import UPOS_TAGS, corpus_types, read_tags
    seen = corpus_types(corpus, spec)
    sources = [f"{corpus} (all lengths)"]
    for path in tags_from:
        seen |= corpus_types(path, spec)
        sources.append(f"{path} (--tags-from)")
    listed = set(read_tags(tags_path)) if tags_path else set()
    if tags_path:
        sources.append(f"{tags_path} (--tags)")
    if spec.column == "UPOS":
        base = {t for t in UPOS_TAGS if not (spec.punct == "ud" and t == "PUNCT")}
        other = sorted((seen | listed) - set(UPOS_TAGS))
        if other:
            log.warn(f"values that are not UPOS tags, added to the tag set: {' '.join(other)}")
        vocab = sorted(base | seen | listed)
        what = "UPOS" + (" without PUNCT (--punct ud)" if spec.punct == "ud" else "")
        extra = sorted(set(vocab) - base)
        desc = f"{what} ({len(vocab)} tags{'; also ' + ' '.join(extra) if extra else ''})"
        if listed:
            desc += f"; --tags {tags_path}"
        return vocab, desc
    vocab = sorted(seen | listed)
    col = spec.column or "tokens"
    return vocab, f"{col} of {' + '.join(sources)} ({len(vocab)} tags)"


@make_grammar.command("from-file")
@start_option
@output_option
@click.argument("grammar")
def make_from_file(grammar, start, output):
    """Check a grammar file and write it back with a grind header.

    \b
    Example:
      grind make-grammar from-file --start S my.grammar > g0.txt
    """
    g = read_grammar(grammar, start)
    cyc = g.unary_cycle()
    if cyc:
        name = "<stdin>" if grammar == "-" else grammar
        raise InputError(f"{name}: unary rules of positive weight form a cycle: {' --> '.join(cyc)} "
                         "(a chart parser cannot sum over unboundedly many derivations; remove a rule of it "
                         "or give it weight 0)")
    write_grammar(output, g, g.weights, g.meta.get("weights", "as read"))


@cli.command("make-structure")
@click.option("--tie", required=True, type=click.Choice(["V", "N", "VN", "A"]),
              help="TieV, TieN (noun and proper_noun families), TieV&N, TieA (every family).")
@click.option("--tie-what", type=click.Choice(["choose+stop", "choose"]), default="choose+stop", show_default=True,
              help="Tie the choose and the stop multinomials of a family's heads (experts tie:F:left|right and "
                   "tie:F:stop:left|right:0|1), or the choose multinomials only.")
@click.option("--families", default="upos", show_default=True,
              help="Tag-family mapping: upos, ptb (grind/data/families-*.txt, every tag in a family), "
                   "or a file of 'TAG FAMILY' lines.")
@output_option
@click.argument("grammars", nargs=-1, required=True)
def make_structure(tie, tie_what, families, output, grammars):
    """Write the shared-logistic-normal structure --tie builds for a DMV GRAMMAR
    (two grammars: the bilingual structure of train --joint, symbols prefixed
    1| and 2|), as an editable file for train --algo ln --tie FILE.  Per tied
    family F: experts tie:F:left and tie:F:right over the heads' choose
    multinomials (L'_h, R'_h) and, with --tie-what choose+stop (default),
    tie:F:stop:left:0 / left:1 / right:0 / right:1 over their stop
    multinomials (L0_h, L_h, R0_h, R_h).

    
    Format: 'expert NAME LHS1 LHS2 ...' (an expert over these multinomials,
    concatenated) and 'own yes|no' (every multinomial keeps its own expert).

    
    Example:
      grind make-structure --tie V --families ptb dmv.txt > tiev.txt
    """
    from grind.infer.ln import Packing
    from grind.infer.sln import joint_grammar, make_structure as build, write_structure
    if len(grammars) > 2:
        raise click.UsageError("one grammar, or two for the bilingual structure")
    gs = [read_grammar(x) for x in grammars]
    g = gs[0] if len(gs) == 1 else joint_grammar(gs, ["1", "2"])
    try:
        st = build(g, Packing(g), tie, families, tie_what)
    except InputError as e:
        if not str(e).startswith("--tie"):
            raise
        raise InputError(f"{' + '.join(grammars)}: {e}") from None
    write_structure(output, st, tie=tie, tie_what=tie_what,
                    families=families)


@cli.command()
@click.option("--uniform", "mode", flag_value="uniform", default=True, help="Uniform per LHS (default).")
@click.option("--random", "mode", flag_value="random", help="Uniform times exp(jitter * N(0,1)) noise.")
@click.option("--harmonic", "mode", flag_value="harmonic",
              help="DMV only: Klein & Manning's harmonic initialiser from --corpus.")
@click.option("--variant", type=click.Choice(["km-global", "independent"]), default="km-global", show_default=True,
              help="--harmonic: how stop counts are set: km-global = the authors' code (a global first-kid "
                   "probability, +0.1 on every rule; the default: on the WSJ10 sample it trains LN and EM to "
                   "higher accuracy, see README), independent = exact expected counts when candidate dependents "
                   "attach independently (grind before issue 10).")
@click.option("--jitter", type=FiniteFloatRange(0), default=1.0, show_default=True,
              help="Scale of the log-normal noise of --random.")
@click.option("--corpus", "corpus_path", default=None, help="The training corpus (for --harmonic).")
@corpus_options
@seed_option
@start_option
@output_option
@click.argument("grammar")
def init(grammar, mode, variant, jitter, corpus_path, spec, seed, start, output):
    """Initial rule probabilities for GRAMMAR's rules.

    \b
    --uniform   1/|R_A| for every rule of each LHS A.
    --random    uniform times exp(jitter * z), z ~ N(0,1), renormalised.
    --harmonic  (DMV) in an n-word sentence each word is the root with weight
                1/n and attaches to word j with weight proportional to
                1/|i-j| (Klein & Manning 2004; Cohen & Smith 2010 §5.1).
                Stop counts by --variant:
                km-global (default): the authors' code.  Attachments weigh
                (n-1)/n in all; every rule gets +0.1; one global first-kid
                probability f: per head type h and side D, with N tokens,
                N_D of them with a word on side D and E_D expected
                dependents, STOP(v0) = N + 0.1 - f N_D, not-STOP(v0) =
                STOP(v1) = 0.1 + f N_D, not-STOP(v1) = E_D + 0.1 - f N_D,
                f = 0.9 x the largest value keeping every count >= 0.
                independent: each candidate dependent attaches
                independently with its weight, so STOP(v0) = P(no
                dependent), not-STOP(v0) = STOP(v1) = 1 - P(no dependent),
                not-STOP(v1) = E[#dependents] - (1 - P(no dependent)).
                The counts are normalised per LHS.

    \b
    Examples:
      grind init --random --seed 1 g0.txt > g1.txt
      grind init --harmonic --corpus train.conllu --column UPOS --punct ud --max-length 10 dmv0.txt > dmv1.txt
    """
    rng = make_rng(seed)
    g = read_grammar(grammar, start)
    w = np.ones(len(g))
    if mode == "random":
        w = w * np.exp(jitter * rng.standard_normal(len(g)))
    elif mode == "harmonic":
        w = harmonic_weights(g, corpus_path, spec, variant)
    elif _given("variant"):
        raise click.UsageError("--variant is for --harmonic")
    extra = {"harmonic_variant": variant} if mode == "harmonic" else {}
    write_grammar(output, g, g.normalize(w), "probabilities", init=mode, **extra)


def _given(name) -> bool:
    """True when option ``name`` of the current command was given (not its default)."""
    from click.core import ParameterSource
    return click.get_current_context().get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


def harmonic_weights(g, corpus_path, spec, variant="km-global"):
    """Harmonic-initialiser counts of DMV grammar ``g`` from ``corpus_path`` (:func:`grind.grammars.dmv.harmonic_counts`)."""
    from grind.grammars.dmv import dmv_index, harmonic_counts, is_dmv_grammar
    if not is_dmv_grammar(g):
        raise click.UsageError("--harmonic needs a DMV grammar (grind make-grammar dmv)")
    if not corpus_path:
        raise click.UsageError("--harmonic needs --corpus (the training corpus)")
    sents = [s.tokens for s in read_corpus(corpus_path, spec)]
    ix = dmv_index(g)
    if not any(len(s) and all(t in ix.type_id for t in s) for s in sents):
        raise InputError(f"{corpus_path}: no sentence of the corpus fits the grammar's vocabulary")
    return harmonic_counts(g, sents, variant)


@cli.command()
@corpus_options
@kernel_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def estep(grammar, corpus, spec, kernel, start, output):
    """Expected rule counts of CORPUS under GRAMMAR (the E-step of EM).

    Counts of corpus shards add up with 'grind sum'.

    \b
    Example:
      grind estep g.txt shard1.txt > c1.txt; grind estep g.txt shard2.txt > c2.txt
      grind sum c1.txt c2.txt | grind mstep - > g.next.txt
    """
    g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind estep")
    counts, logz = parser.inside_outside(g.probabilities())
    report_failures(sents, parser, logz)
    ok = np.isfinite(logz)
    stats = {"sentences": len(sents), "parsed": int(ok.sum()),
             "words": int(sum(len(s) for s, k in zip(sents, ok) if k)), "loglik": float(logz[ok].sum())}
    write_counts(output, Counts(g.rules, counts, stats), corpus=spec.describe())


@cli.command("sum")
@output_option
@click.argument("counts", nargs=-1, required=True)
def sum_(counts, output):
    """Add count files (rules matched by key, in the order given).

    \b
    Example:
      grind sum c1.txt c2.txt c3.txt > c.txt
    """
    from grind.formats.counts import check_same_grammar
    total = read_counts(counts[0])
    for path in counts[1:]:
        c = read_counts(path)
        check_same_grammar(c, path, total.fingerprint(), counts[0],
                           "grind sum adds count files of one grammar only")
        total = total + c
    write_counts(output, total)


@cli.command()
@click.option("--alpha", type=FiniteFloatRange(0), default=1.0, show_default=True,
              help="Symmetric Dirichlet hyperparameter: theta ∝ max(0, count + alpha - 1) (1 = maximum likelihood).")
@click.option("--grammar", "grammar_path", default=None,
              help="Grammar whose rule set (and weights, for unused LHSs) the output keeps.")
@start_option
@output_option
@click.argument("counts")
def mstep(counts, alpha, grammar_path, start, output):
    """Rule probabilities from COUNTS (MAP estimate under a Dirichlet prior).

    \b
    Example:
      grind sum c*.txt | grind mstep --alpha 1.0 - > g.next.txt
    """
    from grind.infer.em import map_estimate
    from grind.formats.counts import check_same_grammar
    c = read_counts(counts)
    if grammar_path:
        g = read_grammar(grammar_path, start)
        check_same_grammar(c, "<stdin>" if counts == "-" else counts, g.fingerprint(), grammar_path,
                           "--grammar must be the grammar the counts were made with (grind estep)")
        prev = g.weights
    else:
        g = Grammar(c.rules, np.ones(len(c.rules)), start or c.rules[0][0])
        prev = None
    theta = map_estimate(g, c.aligned(g), alpha, previous=prev)
    write_grammar(output, g, theta, "probabilities", estimate=f"MAP alpha={alpha}")


#: --algo name -> "module:Class"; every class takes (grammar, estep, prior, theta0, cfg, rng).
ALGORITHMS = {
    "em": "grind.infer.em:EM",
    "vb": "grind.infer.vb:VB",
    "cvb": "grind.infer.cvb:CVB",
    "streaming": "grind.infer.streaming:StreamingVB",
    "stochastic": "grind.infer.stochastic:StochasticVB",
    "gibbs": "grind.infer.gibbs:Gibbs",
    "hastings": "grind.infer.hastings:Hastings",
    "mixture": "grind.infer.mixture:Mixture",
    "ln": "grind.infer.ln:LogisticNormal",
}
#: Algorithms that read the corpus as a stream themselves (cfg.corpus, cfg.spec).
STREAMING = ("streaming",)


@cli.command()
@click.option("--algo", type=click.Choice(list(ALGORITHMS)), default="em", show_default=True,
              help="Inference algorithm.")
@click.option("--iterations", type=click.IntRange(1), default=50, show_default=True,
              help="Iterations (batch algorithms, sweeps of the samplers and of cvb); for ln a cap "
                   "[ln default: 1000, with --tolerance 1e-5: run to convergence].")
@click.option("--epochs", type=click.IntRange(1), default=1, show_default=True, help="Passes over the corpus (stochastic).")
@click.option("--batch", type=click.IntRange(1), default=1000, show_default=True, help="Minibatch size (streaming, stochastic).")
@click.option("--first-batch", type=click.IntRange(1), default=None, help="Size of the first minibatch (streaming; default --batch).")
@click.option("--batch-iterations", type=click.IntRange(1), default=5, show_default=True,
              help="VB iterations per minibatch (streaming, stochastic).")
@click.option("--tau", type=FiniteFloatRange(0), default=1.0, show_default=True, help="Step size delay: eta_t = (tau + t)^-kappa (stochastic).")
@click.option("--kappa", type=FiniteFloatRange(0.5, 1.0), default=0.7, show_default=True, help="Step size decay (stochastic).")
@click.option("--update", type=click.Choice(["hoffman", "pate-johnson"]), default="hoffman", show_default=True,
              help="Stochastic VB update: Hoffman et al. (prior inside the step) or Pate & Johnson (prior outside).")
@click.option("--cvb-init", type=click.Choice(["grammar", "random"]), default="grammar", show_default=True,
              help="cvb: per-sentence counts start from an E-step under the init grammar, or under randomly perturbed weights.")
@click.option("--temp-start", type=FiniteFloatRange(1.0), default=1.0, show_default=True,
              help="Annealing: initial temperature, lowered linearly to 1 (hastings, gibbs).")
@click.option("--constraints", "mix_constraints", default="RA+VAR+SD", show_default=True,
              help="mixture: prior-knowledge components, '+' intersects, ',' separates components: "
                   "RA RightAttach, AR AllRight, LC LeftChain, VAR VerbAsRoot, NS NounSequence, SD ShortDep (<= 4).")
@click.option("--base", "mix_base", type=click.Choice(["ln", "vb", "em"]), default="ln", show_default=True,
              help="mixture: the model the components are added to: ln = logistic-normal mean-field variational "
                   "EM (the paper's; takes the ln options --cov, --families, --model, --ln-cycles), vb = Dirichlet "
                   "mean-field VB (--alpha), em = MAP-EM point estimate (--alpha).")
@click.option("--mix-schedule", type=click.Choice(["I", "II", "III", "annealed", "fixed-0.85", "fixed-0.95"],
                                                  case_sensitive=False), default="I", show_default=True,
              help="mixture: the polytope of coefficients: I = annealed (the mean-field coefficient is at most "
                   "--mix-start, the cap rising 1% a step to --mix-end), II = mean-field fixed at 0.85, "
                   "III = fixed at 0.95; the C-step splits the rest among the --constraints components.")
@click.option("--mix-start", type=FiniteFloatRange(0, 1), default=0.85, show_default=True,
              help="mixture, schedule I: the cap on the mean-field coefficient at step 0 ...")
@click.option("--mix-end", type=FiniteFloatRange(0, 1), default=0.95, show_default=True,
              help="mixture, schedule I: ... rising by 0.01 a step up to this.")
@click.option("--mix-coef", default=None, callback=lambda ctx, p, v: _number_list(v, "--mix-coef"),
              help="mixture: fixed coefficients instead of a schedule (no C-step), mean-field first, e.g. 0.85,0.15.")
@click.option("--model", type=click.Choice(["1", "2"]), default="1", show_default=True,
              help="ln: model I (theta drawn per sentence) or II (drawn once).")
@click.option("--cov", "ln_cov", type=click.Choice(["identity", "families"]), default="identity", show_default=True,
              help="ln: initial covariance: identity, or 0.5 between rules whose symbols share a tag family.")
@click.option("--families", default="upos", show_default=True,
              help="ln: tag-family mapping for --cov families and --tie V|N|VN|A: upos, ptb "
                   "(grind/data/families-*.txt, every tag in a family), or a file of 'TAG FAMILY' lines.")
@click.option("--ln-cycles", type=click.IntRange(1), default=5, show_default=True,
              help="ln: E-step cycles (mu, sigma^2, zeta, inside-outside) per iteration.")
@click.option("--ln-warm", is_flag=True,
              help="ln: start each E-step from the previous one's variational parameters (the bound then never "
                   "decreases; model I keeps two floats per sentence and expert coordinate).")
@click.option("--ln-mstep", type=click.Choice(["plain", "newton"]), default="plain", show_default=True,
              help="ln: M-step for mu: plain = Algorithm 3 (mean of the posterior means, the paper's); newton = a "
                   "diagonal Newton-scaled step to the same fixed points, accepted only if the bound for this "
                   "iteration's expected counts is at least the plain step's (faster convergence).")
@click.option("--ln-params", type=OutputPath(), default=None, help="ln: also write the learned mu and Sigma (plain text) here.")
@click.option("--ln-init", default=None,
              help="ln: start from the mu, Sigma and expert structure of this --ln-params file "
                   "(instead of the grammar's weights and --cov / --tie).")
@click.option("--tie", default=None,
              help="ln: shared logistic normal (Cohen & Smith 2010 §3.3): V (TieV), N (TieN), VN (TieV&N), A (TieA) "
                   "tie the DMV multinomials of heads in one tag family (--families, --tie-what); or a structure "
                   "file (see grind make-structure).")
@click.option("--tie-what", type=click.Choice(["choose+stop", "choose"]), default="choose+stop", show_default=True,
              help="ln --tie V|N|VN|A: tie the choose and the stop multinomials of a family's heads, or the "
                   "choose multinomials only.")
@click.option("--tie-warmup", type=click.IntRange(0), default=None,
              help="ln --tie: the first N iterations train the untied logistic normal, then the tied structure "
                   "takes over from its means (0: tied from the start).  [default: 5 with --tie; ours, the "
                   "papers' number was not found]")
@click.option("--joint", nargs=2, default=None, metavar="GRAMMAR2 CORPUS2",
              help="ln: bilingual tying (§5.4): train a second language's grammar on its corpus jointly, "
                   "--tie experts spanning both languages through the tag families.")
@click.option("--joint-output", type=OutputPath(), default=None, help="ln --joint: where the second language's grammar goes.")
@click.option("--anneal-sweeps", type=click.IntRange(1), default=None,
              help="Sweeps over which the temperature falls to 1 (default: all --iterations).")
@click.option("--tolerance", type=FiniteFloatRange(0), default=1e-6, show_default=True,
              help="Stop when the objective's relative gain is below this.  ln: stop when the variational "
                   "bound's relative change |B_t - B_t-1| / |B_t-1| is at most this [ln default: 1e-5]; the "
                   "trace's 'stopped' column says whether the run converged or reached --iterations.")
@click.option("--alpha", type=AlphaType(), default="1.0", show_default=True,
              help="Dirichlet hyperparameter: a number (symmetric) or a grammar file of per-rule pseudo-counts. "
                   "EM: MAP estimate (1 = maximum likelihood).")
@click.option("--trace", "trace_path", type=OutputPath(), default=None, help="Also write the trace as TSV here.")
@click.option("--dev", "dev_path", default=None, help="Held-out corpus for --eval-every (read with the same corpus options).")
@click.option("--eval-every", type=click.IntRange(0), default=0, show_default=True,
              help="Every N steps: held-out log probability / perplexity under the posterior mean (and accuracy for treebanks).")
@click.option("--early-stop", is_flag=True,
              help="With --eval-every: stop when the held-out log probability decreases, keeping the previous "
                   "parameters (Cohen & Smith 2010, Algorithm 1).")
@click.option("--checkpoint", "ckpt", type=OutputPath(), default=None, help="Checkpoint file (.npz), written atomically.")
@click.option("--checkpoint-every", type=click.IntRange(0), default=0, show_default=True)
@click.option("--resume", is_flag=True, help="Continue from --checkpoint; ends bit-identical to an uninterrupted run.")
@click.option("--jobs", type=click.IntRange(1), default=1, show_default=True,
              help="Threads for the E-step (results do not depend on it).")
@corpus_options
@kernel_option
@seed_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def train(grammar, corpus, spec, algo, iterations, tolerance, alpha, trace_path, dev_path, eval_every,
          early_stop, ckpt, checkpoint_every, resume, jobs, kernel, seed, start, output, **opts):
    """Train GRAMMAR's weights on CORPUS; write the trained grammar.

    \b
    em          inside-outside EM / MAP-EM (--alpha); writes probabilities.
    vb          batch mean-field VB (Kurihara & Sato 2006).
    cvb         collapsed VB (Wang & Blunsom 2013).
    streaming   streaming VB over minibatches of a stream (Broderick et al. 2013).
    stochastic  stochastic VB, step (tau + t)^-kappa (Hoffman et al. 2010).
    gibbs       Gibbs sampler for (t, theta) (Johnson, Griffiths & Goldwater 2007).
    hastings    collapsed Metropolis-Hastings sampler, annealed from --temp-start.
    mixture     DMV only: posterior-mixture constraints (Cohen & Smith 2009):
                the --base model (default ln) with its posterior over trees
                a mixture of the unconstrained one and --constraints
                components, coefficients by --mix-schedule (C-step);
                20 iterations unless --iterations is given.
    ln          logistic-normal prior, variational EM (Cohen & Smith 2010),
                model I or II (--model), --cov identity|families; shared
                logistic normal with --tie V|N|VN|A|FILE (--tie-what,
                after --tie-warmup untied iterations), two languages with
                --joint; writes softmax of the mean (and mu, Sigma with
                --ln-params).  Runs to convergence: until the bound's
                relative change is <= --tolerance (default 1e-5 for ln),
                at most --iterations (default 1000 for ln).
    All but em, mixture and ln write the posterior Dirichlet pseudo-counts (grind parse and
    loglik use their mean).  The per-step objective (log-likelihood + log
    prior, variational bound, or collapsed log probability) goes to stderr,
    and with --trace to a TSV file.

    \b
    Examples:
      grind train --algo em --iterations 30 --column UPOS --punct ud g1.txt train.conllu > g.txt
      grind train --algo vb --alpha 0.1 --dev dev.conllu --eval-every 5 --column UPOS --punct ud g1.txt train.conllu > post.txt
    """
    from grind.infer.training import ShardedEstep, heldout, prior_vector, train as run_training, write_trace
    rng = make_rng(seed)
    if resume and not ckpt:
        raise click.UsageError("--resume needs --checkpoint FILE")
    _check_distinct_outputs(**{"-o/--output": output, "--trace": trace_path, "--checkpoint": ckpt,
                               "--ln-params": opts.get("ln_params"), "--joint-output": opts.get("joint_output")})
    if resume:
        try:
            open(ckpt, "rb").close()
        except OSError as e:
            raise InputError(f"--checkpoint {ckpt}: cannot read (needed by --resume): {e.strerror}") from None
    if eval_every and not dev_path:
        raise click.UsageError("--eval-every needs --dev FILE")
    if early_stop and not eval_every:
        raise click.UsageError("--early-stop needs --eval-every N --dev FILE")
    cfg = SimpleNamespace(iterations=iterations, tolerance=tolerance, jobs=jobs, kernel=kernel,
                          corpus=corpus, spec=spec, **opts)
    _check_ln_options(algo, opts, dev_path, cfg)
    _ln_stopping_defaults(algo, cfg)
    _check_mixture_options(algo, cfg)
    joint = None
    if opts.get("joint"):
        g, sents, parser, joint = load_joint(grammar, corpus, opts["joint"], spec, start, kernel)
        report_failures(sents, parser, known_failures(parser, len(sents)))
        estep, n = ShardedEstep(parser, jobs), len(sents)
    elif algo in STREAMING:
        g, estep, n = read_probabilities(grammar, start, "grind train", True), None, "a stream of"
    else:
        g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind train", normalise=True)
        report_failures(sents, parser, known_failures(parser, len(sents)))
        estep, n = ShardedEstep(parser, jobs), len(sents)
    prior = prior_vector(g, alpha)
    log.info(f"training {algo} on {n} sentences ({spec.describe()}), {len(g)} rules")
    from grind.infer.training import check_checkpoint, fingerprint_sentences, run_meta
    params = click.get_current_context().params
    flags = {p.name: max(p.opts, key=len) for p in click.get_current_context().command.params if p.opts}
    from grind.formats.corpus import iter_corpus
    toks = (s.tokens for s in (iter_corpus(corpus, spec) if algo in STREAMING else sents))
    meta = run_meta(params, flags, grammar=g, theta0=g.probabilities(), prior=prior,
                    corpus_fp=fingerprint_sentences(toks), algo=algo, spec_text=spec.describe())
    if resume:
        check_checkpoint(ckpt, meta)     # a changed option stops the run before any work
    algorithm = make_algorithm(algo, g, estep, prior, g.probabilities(), cfg, rng)
    eval_fn = None
    if dev_path:
        dev_sents = read_corpus(dev_path, spec)
        from grind.kernels.select import make_parser
        dev = make_parser(g, [s.tokens for s in dev_sents], kernel)
        eval_fn = lambda a: heldout(dev, a.mean(), dev_sents)  # noqa: E731
    trace = run_training(algorithm, rng, eval_fn=eval_fn, eval_every=eval_every, checkpoint=ckpt,
                         checkpoint_every=checkpoint_every, resume=resume, meta=meta,
                         on_step=lambda s: log.info(format_step(s)), early_stop=early_stop)
    kind = "probabilities" if algorithm.output == "probabilities" else f"{PSEUDO_COUNTS} (posterior)"
    last = trace[-1] if trace else None
    info = dict(algorithm=algo, alpha=alpha, steps=len(trace), objective=repr(last.objective) if last else None,
                corpus=spec.describe())
    if hasattr(algorithm, "st"):
        info["structure"] = algorithm.st.describe()
    if hasattr(algorithm, "mstep"):
        info["ln_mstep"] = algorithm.mstep
    with output_group():              # every output file replaced, or none
        if joint is not None:
            (g1, g2), parser = joint
            w1, w2 = parser.split_weights(algorithm.weights())
            write_grammar(output, g1, w1, kind, language=1, **info)
            write_grammar(opts["joint_output"], g2, w2, kind, language=2, **info)
        else:
            write_grammar(output, g, algorithm.weights(), kind, **info)
        if trace_path:
            write_trace(trace_path, trace)
        if opts.get("ln_params"):
            algorithm.save(opts["ln_params"])


def _check_distinct_outputs(**paths):
    """Two output options naming one file would overwrite each other: a usage error."""
    given = [(k, v) for k, v in paths.items() if v]
    for i, (k1, p1) in enumerate(given):
        for k2, p2 in given[i + 1:]:
            if same_file(p1, p2):
                raise click.UsageError(f"{k1} and {k2} name the same file: {p2}")


def _number_list(value, option):
    """``value`` (comma-separated numbers) unchanged, or a usage error naming ``option``."""
    if value is not None:
        try:
            [float(x) for x in value.split(",")]
        except ValueError:
            raise click.BadParameter(f"not a comma-separated list of numbers: {value!r}",
                                     param_hint=f"'{option}'") from None
    return value


#: The train options that only --algo mixture reads.
MIXTURE_OPTIONS = ("mix_constraints", "mix_base", "mix_schedule", "mix_start", "mix_end", "mix_coef")


def _check_mixture_options(algo, cfg):
    """Mixture options given without --algo mixture, or --mix-coef with
    --mix-schedule, are usage errors; --algo mixture without --iterations runs
    the paper's :data:`grind.infer.mixture.MIX_ITERATIONS`."""
    given = [n for n in MIXTURE_OPTIONS if _given(n)]
    opt = {n: "--" + n.replace("_", "-") for n in MIXTURE_OPTIONS}
    opt.update(mix_constraints="--constraints", mix_base="--base")
    if algo != "mixture":
        if given:
            raise click.UsageError(f"{opt[given[0]]} is for --algo mixture")
        return
    if "mix_coef" in given and "mix_schedule" in given:
        raise click.UsageError("--mix-coef fixes the coefficients: leave out --mix-schedule")
    if cfg.mix_start > cfg.mix_end:
        raise click.UsageError(f"--mix-start {cfg.mix_start} is above --mix-end {cfg.mix_end}")
    from grind.infer.mixture import _fixed_coef, parse_mixture_spec
    try:
        k = len(parse_mixture_spec(cfg.mix_constraints))
    except InputError as e:
        raise click.BadParameter(str(e), param_hint="'--constraints'") from None
    try:
        _fixed_coef(cfg.mix_coef, k)
    except InputError as e:
        raise click.BadParameter(str(e).replace("mix_coef: ", ""), param_hint="'--mix-coef'") from None
    if not _given("iterations"):
        from grind.infer.mixture import MIX_ITERATIONS
        cfg.iterations = MIX_ITERATIONS


def _check_ln_options(algo, opts, dev_path, cfg=None):
    """Options that only --algo ln understands, and what --joint needs; with
    ``cfg``, sets ``cfg.tie_warmup`` to its default under --tie (:data:`grind.infer.ln.TIE_WARMUP`)."""
    for name in ("tie", "joint", "joint_output", "ln_init", "tie_warmup", "ln_params"):
        if opts.get(name) and algo != "ln":
            raise click.UsageError(f"--{name.replace('_', '-')} is for --algo ln")
    if opts.get("ln_mstep", "plain") != "plain" and algo != "ln":
        raise click.UsageError("--ln-mstep is for --algo ln")
    if opts.get("ln_init") and opts.get("tie"):
        raise click.UsageError("--ln-init brings its own expert structure; leave out --tie")
    if opts.get("tie_warmup") is not None and not opts.get("tie"):
        raise click.UsageError("--tie-warmup needs --tie")
    if cfg is not None and opts.get("tie") and opts.get("tie_warmup") is None:
        from grind.infer.ln import TIE_WARMUP
        cfg.tie_warmup = TIE_WARMUP
    if opts.get("joint"):
        if not opts.get("joint_output"):
            raise click.UsageError("--joint needs --joint-output FILE for the second language's grammar")
        if dev_path:
            raise click.UsageError("--dev is not supported with --joint (evaluate each language's grammar after training)")


def _ln_stopping_defaults(algo, cfg):
    """--algo ln runs to convergence: --iterations and --tolerance left at their
    defaults become :data:`grind.infer.ln.LN_ITERATIONS` (a cap) and :data:`grind.infer.ln.LN_TOLERANCE`."""
    if algo != "ln":
        return
    from grind.infer.ln import LN_ITERATIONS, LN_TOLERANCE
    if not _given("iterations"):
        cfg.iterations = LN_ITERATIONS
    if not _given("tolerance"):
        cfg.tolerance = LN_TOLERANCE


def load_joint(grammar, corpus, second, spec, start, kernel):
    """Two languages' grammars and corpora as one joint grammar (symbols
    prefixed ``1|`` and ``2|``) and a :class:`grind.infer.sln.JointParser`."""
    from grind.infer.sln import JointParser, joint_grammar
    g1, s1, p1 = load(grammar, corpus, spec, start, kernel, "grind train", normalise=True)
    g2, s2, p2 = load(second[0], second[1], spec, None, kernel, "grind train", normalise=True)
    g = joint_grammar([g1, g2], ["1", "2"])
    parser = JointParser(g, [p1, p2])
    return g, s1 + s2, parser, ((g1, g2), parser)


def make_algorithm(algo, g, estep, prior, theta0, cfg, rng):
    """An instance of the --algo class (see ALGORITHMS)."""
    import importlib
    module, cls = ALGORITHMS[algo].split(":")
    return getattr(importlib.import_module(module), cls)(g, estep, prior, theta0, cfg, rng)


def format_step(s) -> str:
    extra = "  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.extra.items())
    return f"step {s.step:4d}  objective {s.objective:.6f}  sentences {s.sentences}  {s.seconds:.2f}s  {extra}"


@cli.command()
@corpus_options
@click.option("--viterbi", "decoder", flag_value="viterbi", default=True, help="Most probable tree (default).")
@click.option("--mbr", "decoder", flag_value="mbr",
              help="DMV only: the projective tree maximising the expected number of correct attachments.")
@click.option("--committee", "ln_path", default=None,
              help="DMV only: one committee member: every sentence decoded with its own grammar drawn from the "
                   "logistic-normal prior in this file (train --algo ln --ln-params); vary --seed for members.")
@seed_option
@kernel_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def parse(grammar, corpus, spec, decoder, ln_path, seed, kernel, start, output):
    """Decode CORPUS with GRAMMAR: bracketed trees, or CoNLL for a DMV grammar.

    A PCFG writes one bracketed tree a line; a sentence without a parse is
    reported on stderr, counted in the header ('# unparsed: N') and written
    as (NOPARSE w1 ... wn) so lines stay aligned.  A DMV grammar writes CoNLL
    with the HEAD column filled and every other line and column of a
    CoNLL-U/CoNLL-X input passed through (comments, original IDs, multiword
    tokens, empty nodes); tokens --punct removed get HEAD = the root word and
    DEPREL punct (not predicted: the header's '# removed_tokens:' line says
    so).  A sentence without a parse (e.g. a tag the
    grammar lacks) gets HEAD and DEPREL '_', is named on stderr with its
    reason and counted in the header ('# unparsed: N'); grind eval scores its
    words 0.  --mbr: arc posteriors from inside-outside, then the best
    projective tree over them (Eisner).

    \b
    Examples:
      grind parse --column UPOS --punct ud g.txt test.conllu > test.trees
      grind parse --mbr --column UPOS --punct ud dmv.txt test.conllu > test.parsed.conllu
      for s in 1 2 3; do grind parse --committee ln.params --seed $s $C ln.txt test.conllu > m$s.conllu; done
      grind eval $C test.conllu m1.conllu m2.conllu m3.conllu     # mean and spread
    """
    rng = make_rng(seed)
    g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind parse")
    from grind.kernels.dmv import DMVParser
    if isinstance(parser, DMVParser):
        theta = g.probabilities()
        if ln_path:
            from grind.infer.committee import PriorSampler, committee_heads
            heads = committee_heads(parser, PriorSampler(g, ln_path), rng, decoder)
        else:
            fallback = []
            heads = parser.mbr_heads(theta, fallback=fallback) if decoder == "mbr" else parser.viterbi_heads(theta)[0]
            for i in fallback[:10]:
                log.warn(f"sentence {sents[i].number} (line {sents[i].line}): its arc posteriors leave "
                         "floating-point range under this grammar; its Viterbi tree is written instead")
            if fallback:
                log.warn(f"{len(fallback)} of {len(sents)} sentences decoded with Viterbi instead of MBR")
        write_dependencies(output, sents, parser, heads, decoder, spec, None if ln_path else theta,
                           **({"mbr_fallback_to_viterbi": len(fallback)} if decoder == "mbr" and not ln_path else {}))
        return
    if ln_path:
        raise click.UsageError("--committee decoding is for DMV grammars")
    if decoder == "mbr":
        raise click.UsageError("--mbr decoding is for DMV grammars; use --viterbi for a PCFG")
    from grind.formats.trees import derivation_tree, format_tree
    derivs, logp = parser.viterbi(g.probabilities())
    report_failures(sents, parser, logp)
    unparsed = sum(d is None for d in derivs)          # written as (NOPARSE w1 ... wn)
    with open_out(output) as f:
        f.writelines(header_lines(decoder="viterbi", corpus=spec.describe(), unparsed=unparsed))
        for s, d in zip(sents, derivs):
            t = ("NOPARSE", *s.tokens) if d is None else derivation_tree(g, d, s.tokens)
            f.write(format_tree(t) + "\n")


def write_dependencies(output, sents, parser, heads, decoder, spec, weights=None, **extra):
    """CoNLL output.  A sentence without a tree (``heads[i] is None``) is
    written with HEAD and DEPREL ``_`` (never a baseline tree), counted in the
    header's ``# unparsed:`` line and named with its reason on stderr (the
    offending tag when the grammar lacks it or, given ``weights``, gives it
    probability 0)."""
    from grind.formats.corpus import conll_block
    bad = [i for i, h in enumerate(heads) if h is None]
    zero = parser.zero_types(weights) if bad and weights is not None else set()
    for k, i in enumerate(bad):
        if k == 10:
            log.warn(f"... and {len(bad) - 10} more")
            break
        why = parser.explain(i, weights, zero)
        log.warn(f"sentence {sents[i].number} (line {sents[i].line}) has no parse: {why}")
    if bad:
        log.warn(f"{len(bad)} of {len(sents)} sentences have no parse; written with HEAD '_' "
                 "(grind eval scores their words 0)")
    with open_out(output) as f:
        removed = None
        if spec.punct != "none":
            removed = ("attached to the root word with DEPREL punct (not predicted; removed again by "
                       f"eval --punct {spec.punct})")
        f.writelines(header_lines(decoder=decoder, corpus=spec.describe(), unparsed=len(bad),
                                  removed_tokens=removed, **extra))
        for s, h in zip(sents, heads):
            f.write(conll_block(s, h))


@cli.command()
@corpus_options
@click.option("--attach", type=click.Choice(["left", "right"]), required=True,
              help="right: each word's head is its right neighbour (last word = root); left: the mirror image.")
@output_option
@click.argument("corpus")
def baseline(corpus, spec, attach, output):
    """Write the attach-left or attach-right dependency trees of CORPUS (CoNLL).

    \b
    Example:
      grind baseline --attach right --column UPOS --punct ud test.conllu > right.conllu
      grind eval --column UPOS --punct ud test.conllu right.conllu
    """
    from grind.formats.corpus import conll_block
    from grind.eval.dependencies import attach_heads
    sents = read_corpus(corpus, spec)
    with open_out(output) as f:
        f.writelines(header_lines(baseline=f"attach-{attach}", corpus=spec.describe()))
        for s in sents:
            f.write(conll_block(s, attach_heads(len(s), attach)))


@cli.command()
@corpus_options
@click.option("--summary", is_flag=True, help="Only the corpus totals, not one line per sentence.")
@kernel_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def loglik(grammar, corpus, spec, summary, kernel, start, output):
    """Log probability of each sentence of CORPUS, the total and per-word perplexity.

    Rows are 'sentence<TAB>words<TAB>logprob' (natural log; -inf = no parse);
    the totals follow as '# key: value' lines.  Perplexity = exp(-total / words)
    over the parsed sentences.

    \b
    Example:
      grind loglik --summary --column UPOS --punct ud g.txt dev.conllu
    """
    import math

    from grind.errors import NumericalError
    g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind loglik")
    _, logz = parser.inside_outside(g.probabilities())
    logz = np.asarray(logz, dtype=np.float64)
    odd = np.flatnonzero(np.isnan(logz) | (logz == np.inf))
    if len(odd):
        where = ", ".join(f"{sents[i].number} (line {sents[i].line}): {float(logz[i])!r}" for i in odd[:5])
        raise NumericalError(f"{corpus}: the log probability of {len(odd)} sentence(s) is not a number or "
                             f"+inf, a numerical failure of the chart kernel: sentence {where}"
                             f"{' ...' if len(odd) > 5 else ''}; try --kernel cky")
    failed = report_failures(sents, parser, logz)
    ok = np.isfinite(logz)
    words = sum(len(s) for s, k in zip(sents, ok) if k)
    total = float(logz[ok].sum())
    if not math.isfinite(total):
        worst = np.argsort(logz[ok])[:3]
        idx = np.flatnonzero(ok)[worst]
        raise NumericalError(f"{corpus}: the total log probability of the {int(ok.sum())} parsed sentences "
                             "is not finite although each one is (the sum left floating-point range); "
                             "the lowest: " + ", ".join(f"sentence {sents[i].number} (line {sents[i].line}) "
                                                        f"{float(logz[i])!r}" for i in idx))
    with np.errstate(over="ignore"):
        ppl = float(np.exp(-total / words)) if words else float("nan")
    if words and math.isinf(ppl):
        log.warn(f"the perplexity exp({-total / words!r}) is above the floating-point range: written as inf "
                 f"(the log probability per word is {total / words!r})")
    with open_out(output) as f:
        f.writelines(header_lines(corpus=spec.describe()))
        if not summary:
            f.write("sentence\twords\tlogprob\n")
            for s, lz in zip(sents, logz):
                f.write(f"{s.number}\t{len(s)}\t{float(lz)!r}\n")
        f.write(f"# sentences: {len(sents)}\n# parsed: {len(sents) - failed}\n# words: {words}\n")
        f.write(f"# logprob: {total!r}\n# perplexity: {ppl!r}\n")


@cli.command("eval")
@corpus_options
@click.option("--baselines/--no-baselines", default=True, show_default=True,
              help="Dependencies: also score the attach-right / attach-left trees of GOLD and report each "
                   "prediction's overlap with them (--no-baselines: only the predictions).")
@output_option
@click.argument("gold")
@click.argument("predicted", nargs=-1, required=True)
def eval_(gold, predicted, spec, baselines, output):
    """Score PREDICTED against GOLD: bracketed trees or dependency trees.

    Give the corpus options the parsed corpus was read with; they are applied
    to GOLD so that both hold the same sentences and tokens.

    \b
    Trees (unlabeled brackets, Kim et al. 2019 convention): corpus-level
    (pooled) and sentence-level (mean) precision/recall/F1, exact match.
    Dependencies (CoNLL): directed and undirected attachment accuracy for
    sentences of <= 10, <= 20 words and all, the root arc counted as one arc.
    A predicted sentence whose HEAD column is all '_' (grind parse found no
    tree) is unparsed: its words count with 0 correct; column 'unparsed'
    counts them.  With --baselines (default) the same table is given for
    the attach-right / attach-left trees of GOLD (rows attach-right:<=10 ...),
    each prediction's overlap_right / overlap_left (words whose head equals
    the baseline's / words of its parsed sentences), and a '# note:' line
    where a directed accuracy is within 1 point of a baseline's.  Several
    PREDICTED files (committee members): one table each, then the mean and
    standard deviation.

    \b
    Columns: subset sentences words directed undirected unparsed overlap_right overlap_left

    \b
    Examples:
      grind eval --column XPOS --punct ptb --max-length 10 gold.mrg test.trees
      grind eval --column UPOS --punct ud gold.conllu parsed.conllu
      grind eval --column UPOS --punct ud gold.conllu parsed.conllu | grep '^attach-'
    """
    from grind.formats.corpus import detect_format
    if gold == "-" and spec.format == "auto":
        raise click.UsageError("reading GOLD from stdin needs an explicit --format")
    fmt = spec.format if spec.format != "auto" else detect_format(gold, _first_line(gold))
    if fmt == "ptb" or fmt == "text":
        from grind.eval.brackets import evaluate_files
        report = "".join(evaluate_files(gold, p, spec) for p in predicted)
    else:
        from grind.eval.dependencies import baseline_rows, evaluate, format_baselines, format_report, format_spread
        gold_sents = read_corpus(gold, spec)
        base = baseline_rows(gold_sents) if baselines else None
        runs, report = [], ""
        for k, p in enumerate(predicted):
            try:
                rows = evaluate(gold_sents, read_corpus(p, spec), baselines)
            except InputError as e:
                raise InputError(f"{gold} vs {p}: {e}") from None
            unparsed = rows[-1]["unparsed"]
            if unparsed:
                log.warn(f"{p}: {unparsed} of {rows[-1]['sentences']} predicted sentences are unparsed "
                         "(HEAD '_'); their words are scored 0")
            runs.append(rows)
            report += format_report(rows, dependency_convention(spec), base, p, definitions_too=k == 0)
        if base is not None:
            report += "# baselines: attach-right / attach-left trees of GOLD\n" + format_baselines(base)
        if len(runs) > 1:
            report += format_spread(runs)
    with open_out(output) as f:
        f.writelines(header_lines())
        f.write(report)


def _first_line(path):
    from grind.formats.textio import read_lines
    return next((ln for _, ln in read_lines(path) if ln.strip() and not ln.startswith("#")), None)


def dependency_convention(spec) -> str:
    punct = {"none": "all tokens scored (punctuation kept, as conll18_ud_eval.py)",
             "ud": "punctuation (UPOS PUNCT) removed before scoring, heads re-attached",
             "ptb": "PTB punctuation tags removed before scoring, heads re-attached",
             "ptb+": "PTB punctuation tags and # $ removed before scoring, heads re-attached"}[spec.punct]
    return ("directed / undirected attachment accuracy over words, root attachment counted as one arc; "
            f"{punct}; sentence lengths after removal; corpus read as {spec.describe()}")


# ----------------------------------------------------------------------------- entry point

class Terminated(BaseException):
    """Raised in the main thread by SIGTERM, so that ``finally``/``except
    BaseException`` blocks run (open_out deletes its temporary file)."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None):
    """Run the CLI: one-line errors, quiet broken pipes, exit status 0/1/2
    (130 on Ctrl-C, 143 on SIGTERM)."""
    import signal
    import threading
    argv = sys.argv[1:] if argv is None else list(argv)
    set_run_info(argv=["grind"] + argv)
    in_main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    try:
        cli.main(args=argv, prog_name="grind", standalone_mode=False)
    except click.exceptions.Abort:
        _exit(130, "grind: interrupted")
    except click.ClickException as e:
        e.show()
        _exit(e.exit_code)
    except GrindError as e:
        _exit(1, f"grind: error: {e}")
    except (BrokenPipeError, StdoutClosed):
        _exit(0)
    except KeyboardInterrupt:
        _exit(130, "grind: interrupted")
    except Terminated:
        _exit(143, "grind: terminated")
    except MemoryError:
        _exit(1, "grind: error: out of memory")
    except OSError as e:  # e.g. writing --help to a full disk; reading is InputError already
        where = f"{e.filename}: " if e.filename else ""
        _exit(1, f"grind: error: {where}{e.strerror or e}")
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, old)
    _exit(0)


def _exit(status, message=None):
    """Flush stdout and exit; a stdout that cannot take the rest (closed pipe,
    full disk) is pointed at /dev/null so Python's own flush at exit stays quiet."""
    if message:
        sys.stderr.write(message + "\n")
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except OSError as e:
        _drop_stdout()
        if status == 0:
            sys.stderr.write(f"grind: error: cannot write <stdout>: {e.strerror or e}\n")
            status = 1
    if status:
        sys.exit(status)


def _drop_stdout():
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    main()
