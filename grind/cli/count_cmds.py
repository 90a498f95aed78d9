"""``grind estep``, ``sum`` and ``mstep``: EM, MAP-EM and VB one step at a time, through count files.

One iteration of ``grind train --algo em|vb`` is ``estep`` on every shard of
the corpus (``grind split``), ``sum`` of the count files in shard order and
``mstep`` with the grammar the counts were made with.  The count files say
which E-step made them (``# estep:``) and with which weights (``#
estep-weights:``, a fingerprint), so ``sum`` refuses to add counts of
different iterations and ``mstep`` refuses counts of another grammar.
"""
from __future__ import annotations

import os

import click
import numpy as np

from grind import log
from grind.errors import InputError, NumericalError
from grind.formats.corpus import read_options
from grind.formats.counts import Counts, missing_shards, read_counts, shard_meta, write_counts
from grind.formats.shards import check_shard
from grind.formats.textio import read_header
from grind.grammars.grammar import PSEUDO_COUNTS, Grammar, read_grammar
from grind.cli.options import GroupedCommand, option, table_option
from grind.cli.common import (AlphaType, corpus_options, output_option, start_option, kernel_option, write_grammar,
                              not_counted, load, load_trees, report_failures, TREES_TEXT, check_tree_options,
                              is_treebank_grammar, max_unparsed_option, grammar_spec)

#: The algorithms whose iteration estep / sum / mstep carry out (map = em with --alpha, as in grind train).
STEP_ALGOS = ("em", "map", "vb")
#: ``# weights:`` of a VB grammar, as grind train --algo vb writes it.
VB_WEIGHTS = f"{PSEUDO_COUNTS} (posterior)"


def weights_fingerprint(grammar: Grammar) -> str:
    """The ``# estep-weights:`` of counts made with ``grammar``: 16 hex digits
    of the SHA-256 of its weights (float64, as read from the file)."""
    from grind.infer.training import fingerprint_array
    return fingerprint_array(grammar.weights)


@click.command(cls=GroupedCommand)
@option("--algo", type=click.Choice(STEP_ALGOS), default="em", show_default=True,
        help="Whose E-step: em, map or vb.",
        doc="Whose E-step: em and map use the grammar's rule probabilities; vb the weights "
            "exp(psi(alpha_hat) - psi(sum over the LHS)) of a grammar of posterior pseudo-counts alpha_hat "
            "(as grind train --algo vb and grind mstep --algo vb write them), or, for a grammar of "
            "probabilities, its probabilities: VB's initialisation (see grind mstep).")
@table_option("jobs")
@option("--trees", "on_trees", is_flag=True, group="Grammar and kernel",
        help="CORPUS is PTB trees (a latent treebank grammar).",
        doc="CORPUS holds PTB bracketed trees: expected counts of a latent treebank grammar's rules on the "
            "gold trees, subtypes summed out (see grind make-grammar treebank).")
@corpus_options
@kernel_option
@start_option
@max_unparsed_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def estep(grammar, corpus, spec, algo, jobs, kernel, start, max_unparsed, output, on_trees):
    """Expected rule counts of CORPUS under GRAMMAR (the E-step of EM or VB).

    Counts of corpus shards (grind split) add up with 'grind sum'; 'grind
    mstep' completes the iteration.

    \b
    Example (one EM iteration on two shards):
      grind estep g.txt shard.1.txt > c1.txt; grind estep g.txt shard.2.txt > c2.txt
      grind sum c1.txt c2.txt | grind mstep --grammar g.txt - > g.next.txt
    \f
    The header carries what the objective
    needs from the shard: sentences, parsed, words and loglik (the sum of
    log Z over the parsed sentences: the log-likelihood for em/map, the
    first term of the variational bound for vb), left_out (sentences of
    the file not counted: outside the length limits, without words) and
    repeats (dropped by --types), only when there are some (grind mstep
    carries the sums into its grammar's header), and the E-step made
    ('# estep:', '# estep-weights:' = a fingerprint of GRAMMAR's weights).
    The sentences are summed in blocks of 256 as grind train sums them.
    """
    from grind.grammars.latent import treebank_meta
    from grind.infer.training import ShardedEstep
    if on_trees:
        check_tree_options("vb" if algo == "vb" else "em", spec, {})
        g, sents, parser = load_trees(grammar, corpus, start, "grind estep")
        what = TREES_TEXT
    else:
        if is_treebank_grammar(grammar):
            raise click.UsageError("a treebank grammar's E-step is over gold trees with hidden subtypes: "
                                   "grind estep --trees TREES (grind loglik scores plain sentences)")
        spec = grammar_spec(grammar, corpus, spec)
        g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind estep", tokens_only=True)
        what = spec.describe(sents.format)
    head = read_header(corpus)
    if not on_trees and shard_meta(head):
        _check_split_options(corpus, head.get("corpus"), what)
        check_shard(corpus, head, spec, sents.format, sentences=len(sents))
    if hasattr(parser, "release_index"):
        parser.release_index()          # built: the DMV index (~17 bytes a rule) is not read by the E-step
    run = ShardedEstep(parser, jobs)
    vb = algo == "vb" and g.weight_kind() == "pseudo-counts"
    fingerprint = weights_fingerprint(g)
    if vb:
        from grind.infer.vb import vb_estep_weights, vb_estep_with
        alpha_hat = g.weights
        if not np.all(alpha_hat > 0):
            r = int(np.flatnonzero(~(alpha_hat > 0))[0])
            raise InputError(f"{grammar}: VB's pseudo-counts must be positive, but rule {g.keys()[r]} has "
                             f"{float(alpha_hat[r])!r}")
        w, under = vb_estep_weights(g, alpha_hat)
        del alpha_hat, g.weights        # read no more (the fingerprint is made): one vector over the rules less
        counts, logz, lost, inexact = vb_estep_with(run, g, w, under)
        del w
        if len(lost) or len(inexact):
            log.warn(f"{corpus}: VB weights exp(psi(alpha_hat) - psi(sum)) underflow to 0 for pseudo-counts below "
                     f"~1.4e-3: {len(lost)} of {len(sents)} sentences left out (every derivation needs such a "
                     f"rule), {len(inexact)} with counts accurate only to about 1e-12 or worse (use a larger "
                     "--alpha)")
    else:
        if algo == "vb":
            log.info(f"{grammar} holds probabilities: VB's initialisation, the E-step under them "
                     "(grind mstep --algo vb makes the first pseudo-counts alpha + counts)")
        counts, logz = run(g.probabilities())
    report_failures(sents, parser, logz, "trees" if on_trees else "sentences", limit=max_unparsed)
    ok = np.isfinite(logz)
    stats = {"sentences": len(sents), "parsed": int(ok.sum()),
             "words": int(sum(len(s) for s, k in zip(sents, ok) if k)), "loglik": float(logz[ok].sum()),
             "left_out": not_counted(sents), "repeats": int(getattr(sents, "duplicates", 0))}
    meta = {"estep": "vb" if vb else "probabilities", "estep-weights": fingerprint, "estep-start": g.start,
            "corpus": what,
            **treebank_meta(g)}
    shards = shard_meta(head)
    if shards:
        meta["shards"] = shards
    out = Counts.of(g, counts, stats, meta)
    # The counts share the grammar's rule table; the rest (weights, parser, its scratch vectors, the
    # sentences) goes before the file is written.
    del g, sents, parser, run, counts, logz, ok
    write_counts(output, out)


def _same_alpha(a: str, b: str) -> bool:
    """Two --alpha values that are the same setting (1 and 1.0 alike)."""
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def _check_split_options(corpus: str, split_as, read_as: str) -> None:
    """A grind split shard read with other corpus options than it was cut with: InputError (other
    --types or length limits make counts that do not add up to the whole corpus's: a repeat in
    another shard is counted again)."""
    if split_as is not None and read_options(split_as) != read_options(read_as):
        raise InputError(f"{corpus}: grind split cut this shard with the corpus options '{read_options(split_as)}', "
                         f"read here with '{read_options(read_as)}': give the split's options (the shards' counts add "
                         "up to the corpus's only then)")


@click.command("sum", cls=GroupedCommand)
@output_option
@click.argument("counts", nargs=-1, required=True)
def sum_(counts, output):
    """Add count files (rules matched by key, in the order given).

    \b
    Example:
      grind sum c1.txt c2.txt c3.txt > c.txt
    \f
    Counts and header statistics (sentences, parsed, words, loglik, left_out, repeats) are
    added in the order of the arguments (give shards in their order for a
    reproducible result); the files must come from one E-step over the
    shards of one corpus (the same '# estep:', '# estep-weights:' and
    '# corpus:' lines) and have the same statistics lines.
    """
    from grind.formats.counts import add_mismatch, check_same_grammar
    seen: dict = {}
    for k, path in enumerate(counts, 1):
        real = os.path.realpath(path) if path != "-" else "-"
        if real in seen:
            log.warn(f"{path} (argument {k}) is the file of argument {seen[real]}: its counts are added twice")
        seen.setdefault(real, k)
    total = read_counts(counts[0])
    first = total
    for path in counts[1:]:
        c = read_counts(path)
        check_same_grammar(c, path, total.fingerprint(), counts[0],
                           "grind sum adds count files of one grammar only")
        problem = add_mismatch(first, c)
        if problem:
            raise InputError(f"{counts[0]} and {path} {problem}: grind sum adds the count files of one iteration "
                             "(one grammar's weights) over the shards of one corpus, read with the same options")
        try:
            total = total + c
        except InputError as e:
            raise InputError(f"{counts[0]} .. {path}: {e}") from None
    write_counts(output, total)


@click.command(cls=GroupedCommand)
@option("--algo", type=click.Choice(STEP_ALGOS), default="em", show_default=True, help="The update: em, map or vb.",
        doc="The update: em / map: theta ∝ max(0, count + alpha - 1) (MAP-EM; alpha 1 = maximum "
            "likelihood; map is em by another name); vb: posterior pseudo-counts alpha + count "
            "(needs --grammar).")
@option("--alpha", type=AlphaType(zero_ok=True), default="1.0", show_default=True, metavar="ALPHA",
        help="Dirichlet hyperparameter(s), as train's.",
        doc="Dirichlet hyperparameter: a number (symmetric), a number and per-LHS numbers "
            "(1e-20,Stem=1e-15), or a grammar file of per-rule pseudo-counts, as grind train --alpha.")
@option("--grammar", "grammar_path", default=None, metavar="FILE", help="The grammar the counts were made with.",
        doc="The grammar the counts were made with: its rule set, its weights for LHSs no sentence uses "
            "(em), the previous pseudo-counts for the bound (vb), and the objective of the iteration.")
@start_option
@output_option
@click.argument("counts")
def mstep(counts, algo, alpha, grammar_path, start, output):
    """Complete an iteration from (summed) COUNTS: the grammar of the next step.

    \b
    Example (grind train --algo vb --alpha 0.5 --iterations 2 g0.txt, on 2 shards):
      for i in 0 1 2; do
        grind estep --algo vb g$i.txt shard.1.txt > c1.txt
        grind estep --algo vb g$i.txt shard.2.txt > c2.txt
        grind sum c1.txt c2.txt | grind mstep --algo vb --alpha 0.5 --grammar g$i.txt - > g$((i+1)).txt
      done    # g1.txt: the initialisation; g3.txt: grind train's grammar
    \f
    em, map  rule probabilities, the MAP estimate under a Dirichlet(alpha)
             prior (alpha 1: maximum likelihood).  With --grammar G (the
             grammar the counts were made with) the header's '# objective:'
             is loglik + sum (alpha - 1) log theta_G: grind train --algo em's
             objective of that step.
    vb       --grammar G required.  G of pseudo-counts (a VB step): writes
             alpha_hat = alpha + counts and '# objective:' = the variational
             bound loglik - KL(Dir(alpha_hat_G) || Dir(alpha)), as grind
             train --algo vb.  G of probabilities: VB's initialisation
             (counts of 'grind estep --algo vb G'): alpha_hat = alpha +
             counts, '# steps: 0', no objective.
    The output is written as grind train writes its grammar ('# weights:',
    '# algorithm:', '# alpha:', '# steps:' counted on from G's, '#
    objective:'), so the next 'grind estep --algo ALGO' reads it.  Counts
    summed in another order than grind train sums them give the same
    grammar up to rounding (about 1e-15 relative a step).
    """
    from grind.formats.counts import check_same_grammar
    from grind.grammars.latent import TREEBANK_META, treebank_meta
    from grind.infer.em import log_dirichlet_prior, map_estimate
    from grind.infer.training import prior_vector
    name = "<stdin>" if counts == "-" else counts
    c = read_counts(counts)
    missing = missing_shards(c)
    if missing:
        raise InputError(f"{name}: the counts are of shards {c.meta['shards']}: shard(s) "
                         f"{', '.join(map(str, missing))} missing (grind sum the counts of every shard)")
    if algo == "vb" and not grammar_path:
        raise click.UsageError("--algo vb needs --grammar: the grammar the counts were made with")
    made_from = c.meta.get("estep-start")
    if grammar_path:
        g = read_grammar(grammar_path, start)
        check_same_grammar(c, name, g.fingerprint(), grammar_path,
                           "--grammar must be the grammar the counts were made with (grind estep)")
    else:
        if c.has_table():
            t = c.table()
            g = Grammar._from_table(t, c._rules, np.ones(len(t)), start or made_from or t.symbols[int(t.lhs[0])])
        else:
            g = Grammar(c.rules, np.ones(len(c.rules)), start or made_from or c.rules[0][0])
    if made_from is not None and made_from != g.start:
        raise InputError(f"{name}: the counts were made with the start symbol {made_from!r} ('# estep-start:'), this "
                         f"update has {g.start!r}: give grind estep's --start to grind mstep too")
    values = c.aligned(g)
    if c.stats.get("parsed", 1) == 0:
        raise NumericalError(f"{name}: no sentence has a parse of positive probability (# parsed: 0)")
    try:
        a = float(alpha)
    except ValueError:
        a = None
    if algo == "vb" and a is not None and a <= 0:
        raise click.BadParameter("VB needs a positive Dirichlet hyperparameter", param_hint="'--alpha'")
    try:
        prior = prior_vector(g, alpha) if a is None or a > 0 else np.zeros(len(g))
    except InputError as e:
        msg = str(e)
        raise InputError(msg if msg.startswith("--alpha") else f"--alpha {alpha}: {msg}") from None
    made_with = grammar_path is not None and _made_with(c, g, name, grammar_path, algo)
    name_of = "vb" if algo == "vb" else "em"
    steps = None
    if grammar_path:
        same = g.meta.get("algorithm") == name_of and g.weight_kind() == ("pseudo-counts" if algo == "vb"
                                                                           else "probabilities")
        try:
            steps = int(g.meta.get("steps", 0)) + 1 if same else 1
        except ValueError:
            steps = 1
        if same and g.meta.get("alpha") is not None and not _same_alpha(g.meta["alpha"], str(alpha)):
            log.warn(f"{grammar_path} was made with --alpha {g.meta['alpha']}, this step uses {alpha}: the run "
                     "goes on under another prior")
        was, now = (read_options(str(x)) for x in (g.meta.get("corpus"), c.meta.get("corpus")))
        if same and "corpus" in g.meta and "corpus" in c.meta and was != now:
            log.warn(f"{grammar_path} was trained on a corpus read as '{was}', the counts on one read as '{now}'")
    objective = None
    extra = {}
    if algo == "vb":
        from grind.infer.vb import check_sums, kl_dirichlet
        check_sums(g, g.lhs_sums(prior + values), f"{name}: alpha + the counts",
                   "the next E-step's weights exp(psi(alpha_hat) - psi(sum))")
        if g.weight_kind() == "pseudo-counts":
            if "loglik" not in c.stats:
                raise InputError(f"{name}: no '# loglik:' header line: --algo vb needs it for the variational "
                                 "bound (count files of grind estep and grind sum have it)")
            objective = c.stats["loglik"] - kl_dirichlet(g, g.weights, prior)
        else:
            steps = 0
            extra["estimate"] = "VB initialisation: alpha + expected counts under the grammar's probabilities"
        weights, kind = prior + values, VB_WEIGHTS
    else:
        theta_prev = g.probabilities() if grammar_path else None
        if theta_prev is None:
            used = g.lhs_sums(values) > 0
            empty = np.flatnonzero(g.lhs_sums(np.maximum(0.0, values + (np.asarray(prior) - 1.0))) <= 0)
            if len(empty):
                first = int(empty[0])
                more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
                why = "has E[f] + alpha - 1 <= 0" if used[first] else "has no count (no sentence used it)"
                raise NumericalError(
                    f"{name}: every rule of {g.nonterminals[first]!r}{more} {why}, so its MAP probabilities are "
                    "0/0: give --grammar (the grammar the counts were made with) to keep its previous "
                    "probabilities, as grind train does")
        weights, kind = map_estimate(g, values, prior, previous=theta_prev), "probabilities"
        if made_with and "loglik" in c.stats:
            objective = c.stats["loglik"] + log_dirichlet_prior(g, theta_prev, prior)
        extra["estimate"] = f"MAP alpha={alpha}"
    tb_meta = {k: c.meta[k] for k in TREEBANK_META if k in c.meta} if c.meta.get("model") == "treebank" else {}
    if "parsed" in c.stats and "sentences" in c.stats and c.stats["parsed"] < c.stats["sentences"]:
        extra["unparsed"] = (f"{int(c.stats['sentences'] - c.stats['parsed'])} of {int(c.stats['sentences'])} "
                             "sentences without a parse in the counts' E-step (left out of its counts)")
    gone, repeats = int(c.stats.get("left_out", 0)), int(c.stats.get("repeats", 0))
    parts = ([f"{gone} sentences of the corpus not counted by grind estep (not trained on)"] if gone else []) + \
        ([f"{repeats} repeats dropped by --types"] if repeats else [])
    if parts:
        extra["left_out"] = "; ".join(parts)
        log.info(f"{name}: {'; '.join(parts)} (the counts' '# left_out:' / '# repeats:' lines)")
    write_grammar(output, g, weights, kind, algorithm=name_of, alpha=alpha, steps=steps,
                  objective=None if objective is None else repr(objective), corpus=c.meta.get("corpus"),
                  **extra, **(treebank_meta(g) if grammar_path else tb_meta), **_constraints_line(g, grammar_path))


def _constraints_line(g, grammar_path) -> dict:
    """The grammar's '# constraints:' line (a constrained DMV's), carried to the next step's grammar."""
    from grind.grammars.dmv_constraints import header_constraints
    return header_constraints(g) if grammar_path else {}


def _made_with(c: Counts, g: Grammar, name: str, grammar_path: str, algo: str) -> bool:
    """Whether the counts ``c`` were made by ``grind estep --algo ALGO`` with the
    weights of ``g``: an InputError when they name other weights (counts of
    another iteration); counts that name no weights (not made by grind estep)
    are taken by em / map without an objective, refused by vb."""
    kind = g.weight_kind()
    fp, made = c.meta.get("estep-weights"), c.meta.get("estep")
    if algo == "vb":
        if kind not in ("pseudo-counts", "probabilities"):
            raise InputError(f"{grammar_path}: its header says '# weights: {g.meta.get('weights')}': --algo vb "
                             "needs VB's pseudo-counts (or, to start, rule probabilities)")
        want = "vb" if kind == "pseudo-counts" else "probabilities"
        if made is None or fp is None:
            raise InputError(f"{name}: the counts do not say which E-step made them (no '# estep:' and '# "
                             "estep-weights:' lines): make them with grind estep --algo vb")
        if made != want:
            how = ("VB's weights exp(psi(alpha_hat) - psi(sum))" if want == "vb"
                   else "its probabilities (VB's initialisation)")
            raise InputError(f"{name}: the counts were made with '# estep: {made}', but {grammar_path} holds "
                             f"{kind}, whose E-step uses {how}: run grind estep --algo vb")
        if fp != weights_fingerprint(g):
            raise InputError(f"{name}: the counts were not made with the weights of {grammar_path} (weights "
                             f"fingerprint {fp}, the grammar's is {weights_fingerprint(g)}): counts of another "
                             "iteration?")
        return True
    if made == "vb":
        raise InputError(f"{name}: the counts come from VB's E-step (# estep: vb): use --algo vb")
    if fp is None:
        log.info(f"{name}: the counts do not name the weights they were made with: no objective")
        return False
    if fp != weights_fingerprint(g):
        raise InputError(f"{name}: the counts were not made with the weights of {grammar_path} (weights "
                         f"fingerprint {fp}, the grammar's is {weights_fingerprint(g)}): counts of another "
                         "iteration? (--grammar is the grammar grind estep read)")
    return True

