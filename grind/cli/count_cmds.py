"""``grind estep``, ``sum`` and ``mstep``: EM one step at a time, through count files."""
from __future__ import annotations

import click
import numpy as np

from grind.formats.counts import Counts, read_counts, write_counts
from grind.grammars.grammar import Grammar, read_grammar
from grind.cli.common import (corpus_options, output_option, start_option, kernel_option, FiniteFloatRange,
                              write_grammar, load, load_trees, report_failures,
                              TREES_TEXT, check_tree_options)


@click.command()
@click.option("--trees", "on_trees", is_flag=True,
              help="CORPUS holds PTB bracketed trees: expected counts of a latent treebank grammar's rules on the "
                   "gold trees, subtypes summed out (see grind make-grammar treebank).")
@corpus_options
@kernel_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def estep(grammar, corpus, spec, kernel, start, output, on_trees):
    """Expected rule counts of CORPUS under GRAMMAR (the E-step of EM).

    Counts of corpus shards add up with 'grind sum'.

    \b
    Example:
      grind estep g.txt shard1.txt > c1.txt; grind estep g.txt shard2.txt > c2.txt
      grind sum c1.txt c2.txt | grind mstep - > g.next.txt
    """
    if on_trees:
        check_tree_options("em", spec, {})
        g, sents, parser = load_trees(grammar, corpus, start, "grind estep")
        what = TREES_TEXT
    else:
        g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind estep")
        what = spec.describe()
    counts, logz = parser.inside_outside(g.probabilities())
    report_failures(sents, parser, logz, "trees" if on_trees else "sentences")
    ok = np.isfinite(logz)
    stats = {"sentences": len(sents), "parsed": int(ok.sum()),
             "words": int(sum(len(s) for s, k in zip(sents, ok) if k)), "loglik": float(logz[ok].sum())}
    write_counts(output, Counts(g.rules, counts, stats), corpus=what)


@click.command("sum")
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


@click.command()
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
    from grind.grammars.latent import treebank_meta
    write_grammar(output, g, theta, "probabilities", estimate=f"MAP alpha={alpha}", **treebank_meta(g))
