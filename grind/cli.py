"""The ``grind`` command line: small subcommands that read and write plain text.

Every FILE argument may be ``-`` (stdin / stdout).  Data goes to stdout (or
``-o``), messages and progress to stderr.  Exit status: 0 success, 1 runtime
or input error, 2 usage error.
"""
from __future__ import annotations

import functools
import sys

import click
import numpy as np

from . import __version__, log
from .corpus import COLUMNS, FORMATS, PUNCT_RULES, CorpusSpec, read_corpus
from .counts import Counts, read_counts, write_counts
from .errors import GrindError, InputError
from .grammar import Grammar, read_grammar, rule_lines
from .textio import header_lines, open_out, set_run_info

EPILOG_PIPELINE = """\b
A whole pipeline on a CoNLL-U file (UPOS tags, punctuation removed, <= 10 words):
  C="--column UPOS --punct ud --max-length 10"
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
        kw["spec"] = CorpusSpec(fmt, column, punct, max_length, min_length)
        return f(*a, **kw)

    return wrapper


def output_option(f):
    return click.option("-o", "--output", default="-", show_default=True,
                        help="Output file (- = stdout); written atomically.")(f)


def seed_option(f):
    return click.option("--seed", type=int, default=None,
                        help="Seed of the one random generator every random choice draws from.")(f)


def start_option(f):
    return click.option("--start", default=None,
                        help="Start symbol (default: the grammar's '# start:' header, else the first rule's LHS).")(f)


def make_rng(seed):
    set_run_info(seed=seed)
    return np.random.default_rng(seed)


def write_grammar(path, grammar: Grammar, weights, kind, **extra):
    """Write rules with ``weights`` and a header saying what the weights are."""
    with open_out(path) as f:
        f.writelines(header_lines(weights=kind, start=grammar.start, **extra))
        f.writelines(rule_lines(grammar.rules, weights, grammar.pseudocounts))


def load(grammar_path, corpus_path, spec, start=None):
    """Grammar, sentences and a chart parser for them."""
    from .parser import make_parser
    grammar = read_grammar(grammar_path, start)
    sents = read_corpus(corpus_path, spec)
    return grammar, sents, make_parser(grammar, [s.tokens for s in sents])


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
    """Write a grammar to train: a fully connected CNF grammar, or a checked copy of a file."""


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
    from .make_grammar import cnf_grammar
    vocab = sorted({t for s in read_corpus(corpus, spec) for t in s.tokens})
    g = cnf_grammar(vocab, nonterminals, preterminals, start_symbol)
    write_grammar(output, g, g.weights, "unnormalised (all 1)", corpus=spec.describe())


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
    write_grammar(output, g, g.weights, g.meta.get("weights", "as read"))


@cli.command()
@click.option("--uniform", "mode", flag_value="uniform", default=True, help="Uniform per LHS (default).")
@click.option("--random", "mode", flag_value="random", help="Uniform times exp(jitter * N(0,1)) noise.")
@click.option("--jitter", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Scale of the log-normal noise of --random.")
@seed_option
@start_option
@output_option
@click.argument("grammar")
def init(grammar, mode, jitter, seed, start, output):
    """Initial rule probabilities for GRAMMAR's rules.

    \b
    Example:
      grind init --random --seed 1 g0.txt > g1.txt
    """
    rng = make_rng(seed)
    g = read_grammar(grammar, start)
    w = np.ones(len(g))
    if mode == "random":
        w = w * np.exp(jitter * rng.standard_normal(len(g)))
    write_grammar(output, g, g.normalize(w), "probabilities", init=mode)


@cli.command()
@corpus_options
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def estep(grammar, corpus, spec, start, output):
    """Expected rule counts of CORPUS under GRAMMAR (the E-step of EM).

    Counts of corpus shards add up with 'grind sum'.

    \b
    Example:
      grind estep g.txt shard1.txt > c1.txt; grind estep g.txt shard2.txt > c2.txt
      grind sum c1.txt c2.txt | grind mstep - > g.next.txt
    """
    g, sents, parser = load(grammar, corpus, spec, start)
    counts, logz = parser.inside_outside(g.weights)
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
    total = read_counts(counts[0])
    for path in counts[1:]:
        total = total + read_counts(path)
    write_counts(output, total)


@cli.command()
@click.option("--alpha", type=click.FloatRange(0), default=1.0, show_default=True,
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
    from .em import map_estimate
    c = read_counts(counts)
    if grammar_path:
        g = read_grammar(grammar_path, start)
        prev = g.weights
    else:
        g = Grammar(c.rules, np.ones(len(c.rules)), start or c.rules[0][0])
        prev = None
    theta = map_estimate(g, c.aligned(g), alpha, previous=prev)
    write_grammar(output, g, theta, "probabilities", estimate=f"MAP alpha={alpha}")


@cli.command()
@click.option("--algo", type=click.Choice(["em"]), default="em", show_default=True, help="Inference algorithm.")
@click.option("--iterations", type=click.IntRange(1), default=50, show_default=True)
@click.option("--tolerance", type=click.FloatRange(0), default=1e-6, show_default=True,
              help="Stop when the objective's relative gain is below this.")
@click.option("--alpha", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Dirichlet hyperparameter for MAP-EM (1 = maximum likelihood).")
@click.option("--trace", "trace_path", default=None, help="Also write the per-iteration trace as TSV here.")
@corpus_options
@seed_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def train(grammar, corpus, spec, algo, iterations, tolerance, alpha, trace_path, seed, start, output):
    """Train GRAMMAR's weights on CORPUS; write the trained grammar.

    The per-iteration objective (log-likelihood, + log prior for MAP) goes to stderr.

    \b
    Example:
      grind train --algo em --iterations 30 --column UPOS --punct ud g1.txt train.conllu > g.txt
    """
    from . import em
    make_rng(seed)
    g, sents, parser = load(grammar, corpus, spec, start)
    report_failures(sents, parser, np.where([i in parser.failures for i in range(len(sents))], -np.inf, 0.0))
    log.info(f"training {algo} on {len(sents)} sentences ({spec.describe()}), {len(g)} rules")
    trace = []

    def on_step(s):
        ppl = np.exp(-s.loglik / s.words) if s.words else float("nan")
        log.info(f"iter {s.iteration:3d}  loglik {s.loglik:.6f}  objective {s.objective:.6f}  "
                 f"perplexity {ppl:.4f}  parsed {s.parsed}/{len(sents)}  {s.seconds:.2f}s")
        trace.append(s)

    theta, steps = em.run(parser, g, g.weights, iterations, tolerance, alpha, on_step)
    write_grammar(output, g, theta, "probabilities", algorithm=f"{algo} alpha={alpha}",
                  iterations=len(steps), loglik=repr(steps[-1].loglik), corpus=spec.describe())
    if trace_path:
        write_trace(trace_path, steps)


def write_trace(path, steps):
    with open_out(path) as f:
        f.writelines(header_lines())
        f.write("iteration\tobjective\tloglik\tparsed\twords\tseconds\n")
        for s in steps:
            f.write(f"{s.iteration}\t{s.objective!r}\t{s.loglik!r}\t{s.parsed}\t{s.words}\t{s.seconds:.3f}\n")


@cli.command()
@corpus_options
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def parse(grammar, corpus, spec, start, output):
    """Viterbi trees of CORPUS under GRAMMAR, one bracketed tree a line.

    A sentence without a parse is reported on stderr and written as the flat
    tree (NOPARSE w1 ... wn), so lines stay aligned with the corpus.

    \b
    Example:
      grind parse --column UPOS --punct ud g.txt test.conllu > test.trees
    """
    from .trees import derivation_tree, format_tree
    g, sents, parser = load(grammar, corpus, spec, start)
    derivs, logp = parser.viterbi(g.weights)
    report_failures(sents, parser, logp)
    with open_out(output) as f:
        f.writelines(header_lines(decoder="viterbi", corpus=spec.describe()))
        for s, d in zip(sents, derivs):
            t = ("NOPARSE", *s.tokens) if d is None else derivation_tree(g, d, s.tokens)
            f.write(format_tree(t) + "\n")


@cli.command()
@corpus_options
@click.option("--summary", is_flag=True, help="Only the corpus totals, not one line per sentence.")
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def loglik(grammar, corpus, spec, summary, start, output):
    """Log probability of each sentence of CORPUS, the total and per-word perplexity.

    Rows are 'sentence<TAB>words<TAB>logprob' (natural log; -inf = no parse);
    the totals follow as '# key: value' lines.  Perplexity = exp(-total / words)
    over the parsed sentences.

    \b
    Example:
      grind loglik --summary --column UPOS --punct ud g.txt dev.conllu
    """
    g, sents, parser = load(grammar, corpus, spec, start)
    _, logz = parser.inside_outside(g.weights)
    failed = report_failures(sents, parser, logz)
    ok = np.isfinite(logz)
    words = sum(len(s) for s, k in zip(sents, ok) if k)
    total = float(logz[ok].sum())
    with open_out(output) as f:
        f.writelines(header_lines(corpus=spec.describe()))
        if not summary:
            f.write("sentence\twords\tlogprob\n")
            for s, lz in zip(sents, logz):
                f.write(f"{s.number}\t{len(s)}\t{lz!r}\n")
        f.write(f"# sentences: {len(sents)}\n# parsed: {len(sents) - failed}\n# words: {words}\n")
        f.write(f"# logprob: {total!r}\n# perplexity: {np.exp(-total / words) if words else float('nan')!r}\n")


@cli.command("eval")
@corpus_options
@output_option
@click.argument("gold")
@click.argument("predicted")
def eval_(gold, predicted, spec, output):
    """Score PREDICTED against GOLD: bracketed trees or dependency trees.

    Give the corpus options the parsed corpus was read with; they are applied
    to GOLD so that both hold the same sentences and tokens.

    \b
    Trees (unlabeled brackets, Kim et al. 2019 convention): corpus-level
    (pooled) and sentence-level (mean) precision/recall/F1, exact match.
    Dependencies (CoNLL): directed and undirected attachment accuracy for
    sentences of <= 10, <= 20 words and all, the root arc counted as one arc.

    \b
    Examples:
      grind eval --column XPOS --punct ptb --max-length 10 gold.mrg test.trees
      grind eval --column UPOS --punct ud gold.conllu parsed.conllu
    """
    from .corpus import detect_format
    if gold == "-" and spec.format == "auto":
        raise click.UsageError("reading GOLD from stdin needs an explicit --format")
    fmt = spec.format if spec.format != "auto" else detect_format(gold, _first_line(gold))
    if fmt == "ptb" or fmt == "text":
        from .bracket_eval import evaluate_files
        report = evaluate_files(gold, predicted, spec)
    else:
        from .dep_eval import evaluate, format_report
        rows = evaluate(read_corpus(gold, spec), read_corpus(predicted, spec))
        report = format_report(rows, dependency_convention(spec))
    with open_out(output) as f:
        f.writelines(header_lines())
        f.write(report)


def _first_line(path):
    from .textio import read_lines
    return next((ln for _, ln in read_lines(path) if ln.strip() and not ln.startswith("#")), None)


def dependency_convention(spec) -> str:
    punct = {"none": "all tokens scored (punctuation kept, as conll18_ud_eval.py)",
             "ud": "punctuation (UPOS PUNCT) removed before scoring, heads re-attached",
             "ptb": "PTB punctuation tags removed before scoring, heads re-attached",
             "ptb+": "PTB punctuation tags and # $ removed before scoring, heads re-attached"}[spec.punct]
    return ("directed / undirected attachment accuracy over words, root attachment counted as one arc; "
            f"{punct}; sentence lengths after removal; corpus read as {spec.describe()}")


# ----------------------------------------------------------------------------- entry point

def main(argv=None):
    """Run the CLI: one-line errors, quiet broken pipes, exit status 0/1/2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    set_run_info(argv=["grind"] + argv)
    try:
        cli.main(args=argv, prog_name="grind", standalone_mode=False)
    except click.exceptions.Abort:
        sys.stderr.write("grind: interrupted\n")
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except GrindError as e:
        sys.stderr.write(f"grind: error: {e}\n")
        sys.exit(1)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except KeyboardInterrupt:
        sys.stderr.write("grind: interrupted\n")
        sys.exit(130)
    except MemoryError:
        sys.stderr.write("grind: error: out of memory\n")
        sys.exit(1)
    _flush_stdout()


def _flush_stdout():
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def _quiet_broken_pipe():
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


if __name__ == "__main__":
    main()
