"""``grind eval``: score parses against gold trees."""
from __future__ import annotations

import click

from grind import log
from grind.formats.corpus import read_corpus
from grind.errors import InputError
from grind.formats.textio import header_lines, is_stream, one_line, open_out, shown
from grind.cli.common import (corpus_options, output_option, dependency_convention, make_rng, max_unparsed_option,
                              check_unparsed)
from grind.cli.options import GroupedCommand, option


KIND, SIG = "What is scored", "Significance"


@click.command("eval", cls=GroupedCommand)
@corpus_options
@option("--baselines/--no-baselines", default=True, show_default=True, group=KIND,
        help="Also score the baselines, and the overlap.",
        doc="Dependencies: also score the attach-right / attach-left trees of GOLD; unlabeled brackets: "
            "the right- / left-branching binary trees over GOLD's words; and report each prediction's "
            "overlap with them (--no-baselines: only the predictions).")
@option("--segmentation", is_flag=True, group=KIND, help="Segmentation files: morph and boundary P/R/F.",
        doc="GOLD and PREDICTED are segmentation files (one segmented word a line: 'ab dik ova t' or "
            "'abdikovat<TAB>ab @@dik @@ova @@t'): morph and boundary P/R/F, exact match, with the "
            "one-morph and every-character baselines always.")
@option("--surface-only", is_flag=True, group=KIND, help="--segmentation: skip non-surface rows.",
        doc="--segmentation: skip the rows that are not surface segmentations of one word (morphs that "
            "do not concatenate to it, as SIGMORPHON's canonical English and Mongolian "
            "'happiness<TAB>happy @@ness', or a space without '@@', a word boundary), counted in the report "
            "and on stderr, and leave their words out of every PREDICTED file; without it such a row is an "
            "error (grind scores character spans of surface segmentations).")
@option("--labeled", is_flag=True, group=KIND, help="PTB trees: labeled brackets as EVALB.",
        doc="GOLD and PREDICTED are PTB bracketed trees; labeled brackets with EVALB's COLLINS.prm "
            "conventions (function tags stripped, -NONE- deleted, punctuation , : `` '' . ignored, "
            "ADVP = PRT, root bracket not counted, brackets as a multiset): corpus-level labeled P/R/F1, "
            "exact match and tagging accuracy for all sentences and those of <= 40 words.")
@option("--digits", type=click.IntRange(1, 17), default=4, show_default=True, metavar="N", group=KIND,
        help="Decimals of every fraction written.",
        doc="Decimals of every fraction written (accuracies, P/R/F, overlaps; --labeled's percentages "
            "keep EVALB's 2).  A table rounded again to one decimal of a percent needs more than 4: "
            "0.34348 is 0.3435 at 4, which rounds to 34.4, not 34.3.")
@option("--significance", is_flag=True, group=SIG, help="Paired approximate randomization tests.",
        doc="Dependencies and segmentations: a paired approximate randomization test of every PREDICTED "
            "file against every later one and against each baseline (directed accuracy per length "
            "subset; exact, morph_F and boundary_F), p-values in a table after the baselines.")
@option("--samples", type=click.IntRange(1), default=10_000, show_default=True, metavar="N", group=SIG,
        help="Samples of the --significance test.")
@option("--seed", type=click.IntRange(0), default=None, metavar="N", group=SIG,
        help="Seed of the --significance test.  [default: 1]")
@option("--aggregate", is_flag=True, group=KIND, help="Average every PREDICTED as runs of one setup.",
        doc="Average every PREDICTED file as runs of one configuration, whatever their headers say.")
@max_unparsed_option
@output_option
@click.argument("gold")
@click.argument("predicted", nargs=-1, required=True)
def eval_(gold, predicted, spec, baselines, segmentation, surface_only, labeled, significance, samples, seed, digits,
          aggregate, max_unparsed, output):
    """Score PREDICTED against GOLD: bracketed trees, dependency trees (CoNLL)
    or segmentations.  Give the corpus options the parsed corpus was read with.

    \b
    Examples:
      grind eval --column UPOS --punct ud gold.conllu parsed.conllu
      grind eval --column XPOS --punct ptb --max-length 10 gold.mrg test.trees
      grind eval --labeled gold.mrg test.trees | grep '_labeled_f1'
    \f
    The corpus options are applied to GOLD so that both hold the same sentences and tokens.

    Trees (unlabeled brackets, Kim et al. 2019 convention): corpus-level
    (pooled) and sentence-level (mean) precision/recall/F1, exact match;
    with --baselines (default) the right- and left-branching trees over
    GOLD's words scored the same way, each prediction's overlap with them
    (its spans that are the baseline's / its spans), and a '# note:' line
    where a corpus F1 is within 1 point of a baseline's.

    Dependencies (CoNLL): directed and undirected attachment accuracy for
    sentences of <= 10, <= 20 words and all, the root arc counted as one arc.
    A predicted sentence whose HEAD column is all '_' (grind parse found no
    tree) is unparsed: its words count with 0 correct; column 'unparsed'
    counts them.  With --baselines (default) the same table is given for
    the attach-right / attach-left trees of GOLD (rows attach-right:<=10 ...),
    each prediction's overlap_right / overlap_left (words whose head equals
    the baseline's / words of its parsed sentences), and a '# note:' line
    where a directed accuracy is within 1 point of a baseline's.  Several
    PREDICTED files (committee members, seeds): one table each, then the
    mean and standard deviation of the runs of one configuration (the same
    command and options but the seed, and the same for the grammar they
    parsed with, as their headers say; --aggregate: all of them).
    GOLD must not be a file grind wrote as a prediction (swapped arguments);
    a prediction whose words differ from GOLD's is refused, and so is one
    with more than --max-unparsed of its sentences unparsed.  Columns: subset
    sentences words directed undirected unparsed overlap_right overlap_left.

    With --labeled (PTB trees, no corpus options): labeled brackets scored
    as EVALB with COLLINS.prm does; lines 'all_KEY' and 'le40_KEY' per
    PREDICTED file, after a '# predicted: NAME' line (keys: see
    grind.eval.labeled).

    Examples:

        grind eval --column UPOS --punct ud gold.conllu parsed.conllu | grep '^attach-'
    """
    from grind.cli.common import _given
    from grind.eval.number import set_digits
    set_digits(digits)
    if surface_only and not segmentation:
        raise click.UsageError("--surface-only is an option of --segmentation")
    if not significance and (_given("samples") or _given("seed")):
        raise click.UsageError("--samples and --seed are options of --significance")
    sig = (make_rng(1 if seed is None else seed), samples) if significance else None
    check_not_prediction(gold)
    if labeled:
        if significance:
            raise click.UsageError("--significance tests dependency and segmentation scores, not --labeled")
        report = _labeled_report(gold, predicted, spec, baselines, segmentation, max_unparsed)
        with open_out(output) as f:
            f.writelines(header_lines())
            f.write(report)
        return
    if segmentation:
        report = _segmentation_report(gold, predicted, spec, baselines, sig, surface_only, aggregate, max_unparsed)
        with open_out(output) as f:
            f.writelines(header_lines())
            f.write(report)
        return
    from grind.formats.corpus import detect_format
    if is_stream(gold) and spec.format == "auto":
        raise click.UsageError("reading GOLD from stdin or a pipe needs an explicit --format (it cannot be read twice "
                               "to detect it)")
    fmt = spec.format if spec.format != "auto" else detect_format(gold, _first_line(gold))
    if fmt == "ptb" or fmt == "text":
        if significance:
            raise click.UsageError("--significance tests dependency and segmentation scores, not brackets")
        from grind.eval.brackets import (baseline_scores, evaluate_files, format_baselines, read_gold,
                                         format_spread as bracket_spread)
        gold_trees = read_gold(gold, spec)
        base = baseline_scores(gold_trees[0]) if baselines else None
        blocks = [evaluate_files(gold, p, spec, name=len(predicted) > 1, read_as=fmt, gold=gold_trees, base=base)
                  for p in predicted]
        for p, (_, res) in zip(predicted, blocks):
            check_unparsed(res.get("noparse", 0), res.get("sentences", 0), max_unparsed, f"sentences of {p}")
        report = "".join(text for text, _ in blocks)
        report += spreads(predicted, [res for _, res in blocks], bracket_spread, aggregate)
        if base is not None:
            report += format_baselines(base)
    else:
        from grind.eval.dependencies import (baseline_rows, check_filler_rows, check_parse_punct, evaluate,
                                             format_baselines, format_report, format_spread, significance_rows)
        gold_sents = read_corpus(gold, spec)
        if is_stream(gold):                  # its header is known once it is read
            from grind.formats.corpus import HEADERS_READ
            check_not_prediction(gold, HEADERS_READ.get("<stdin>" if gold == "-" else gold, {}))
        check_not_prediction(gold, sents=gold_sents)
        try:
            base = baseline_rows(gold_sents) if baselines else None
        except InputError as e:
            raise InputError(f"{gold}: {e}") from None
        runs, report, heads = [], "", {}
        for p in predicted:
            check_parse_punct(p, spec.punct)
        for k, p in enumerate(predicted):
            try:
                pred_sents = read_corpus(p, spec)
                if is_stream(p):            # its header is known once it is read
                    from grind.formats.corpus import HEADERS_READ
                    check_parse_punct(p, spec.punct, HEADERS_READ.get("<stdin>" if p == "-" else p, {}))
                check_filler_rows(p, pred_sents, spec.punct)
                rows = evaluate(gold_sents, pred_sents, baselines)
                heads[_unique_name(p, heads)] = [s.heads for s in pred_sents]
            except InputError as e:
                raise InputError(f"{gold} vs {p}: {e}") from None
            unparsed = rows[-1]["unparsed"]
            if unparsed:
                log.warn(f"{p}: {unparsed} of {rows[-1]['sentences']} predicted sentences are unparsed "
                         "(marked '# grind_unparsed', or HEAD '_'); their words are scored 0")
            check_unparsed(unparsed, rows[-1]["sentences"], max_unparsed, f"sentences of {p}")
            runs.append(rows)
            report += format_report(rows, dependency_convention(spec, gold_sents.format) + _gold_heads_note(gold),
                                    base, p, definitions_too=k == 0)
        if base is not None:
            report += "# baselines: attach-right / attach-left trees of GOLD\n" + format_baselines(base)
        report += spreads(predicted, runs, format_spread, aggregate)
        if sig is not None:
            report += _significance_block(significance_rows(gold_sents, heads, *sig, baselines=baselines),
                                          sig[1], "sentence")
    with open_out(output) as f:
        f.writelines(header_lines())
        f.write(report)


def _labeled_report(gold, predicted, spec, baselines, segmentation, max_unparsed=1.0):
    from grind.cli.common import _given
    from grind.eval.labeled import evaluate_labeled, format_report
    from grind.formats.corpus import CorpusSpec
    from grind.formats.trees import read_trees
    if segmentation:
        raise click.UsageError("--labeled and --segmentation exclude each other")
    if spec != CorpusSpec():
        raise click.UsageError("--labeled reads PTB trees as they are: the corpus options do not apply")
    if _given("baselines"):
        raise click.UsageError("--labeled has no baselines")
    gold_name = "<stdin>" if gold == "-" else gold
    gold_lines: list = []
    gold_trees = read_trees(gold, gold_lines)
    if not gold_trees:
        raise InputError(f"{'<stdin>' if gold == '-' else gold}: no trees in GOLD: nothing to score")
    report = ""
    for p in predicted:
        name = "<stdin>" if p == "-" else p
        try:
            pred_lines: list = []
            res = evaluate_labeled(gold_trees, read_trees(p, pred_lines), lines=(gold_lines, pred_lines))
        except InputError as e:
            raise InputError(f"{gold_name} vs {name}: {e}") from None
        if any(res["wordless"]):
            log.warn(f"{gold_name} vs {name}: skipped {res['wordless'][0]} gold and {res['wordless'][1]} predicted "
                     "trees without words (only -NONE- elements): not scored")
        if res["all"]["noparse"]:
            log.warn(f"{name}: {res['all']['noparse']} of {res['all']['sentences']} predicted trees are NOPARSE; "
                     "scored with no bracket")
        check_unparsed(res["all"]["noparse"], res["all"]["sentences"], max_unparsed, f"trees of {name}")
        report += f"# predicted: {one_line(name)}\n" + format_report(res)
    return report


def _unique_name(path, seen) -> str:
    """``path`` as a system name (``<stdin>`` for -); a file given twice gets ``#POSITION`` the second time."""
    name = "<stdin>" if path == "-" else path
    return name if name not in seen else f"{name}#{len(seen) + 1}"


def _significance_block(rows, samples, item) -> str:
    from grind.eval.significance import definition, format_rows
    return definition(samples, item) + format_rows(rows)


def _segmentation_report(gold, predicted, spec, baselines, sig=None, surface_only=False, aggregate=False,
                         max_unparsed=1.0):
    from grind.cli.common import _given
    from grind.formats.corpus import CorpusSpec
    from grind.formats.segmentations import read_segmentations
    from grind.eval import segmentation as seg
    if spec != CorpusSpec():
        raise click.UsageError("--segmentation reads segmentation files: the corpus options do not apply")
    if not baselines and _given("baselines"):
        raise click.UsageError("--segmentation always reports the one-morph and every-character baselines")
    def read(path, name):
        skipped: list[int] = []
        canonical: list | None = [] if surface_only else None
        records = read_segmentations(path, skipped, canonical)
        if skipped:
            log.warn(f"{name}: skipped {len(skipped)} row(s) whose word has whitespace in it (a multi-word entry, "
                     "as grind train/parse --chars skip them), at line(s) "
                     f"{shown(skipped)}")
            notes.append(f"# skipped: {one_line(name)}: {len(skipped)} multi-word row(s) (whitespace in the word), "
                         "not scored\n")
        if canonical:
            log.warn(f"{name}: skipped {len(canonical)} of {len(canonical) + len(records)} row(s) that are not "
                     "surface segmentations of one word (canonical morphs, or a space without '@@'; "
                     f"--surface-only), at line(s) {shown(ln for ln, _ in canonical)}")
            notes.append(f"# skipped: {one_line(name)}: {len(canonical)} of {len(canonical) + len(records)} row(s) "
                         "not a surface segmentation of one word (--surface-only), not scored\n")
            not_surface.update(w for _, w in canonical)
        return records

    not_surface: set[str] = set()                 # words of gold's canonical rows: left out of PRED too

    notes: list[str] = []
    gold_name = "<stdin>" if gold == "-" else gold
    gold_records = read(gold, gold_name)
    not_surface.difference_update(r.word for r in gold_records)       # a word also segmented on the surface stays
    dropped = set(not_surface)
    gold_types = seg.word_types(gold_records, gold_name)
    seg.check_gold(gold_types, gold_name)
    _repeats(gold_name, len(gold_records), len(gold_types), None)      # the "# gold:" line counts them
    if gold_types and all(len(sp) <= 1 for sp in gold_types.values()):
        msg = (f"{gold_name}: no gold word has an internal boundary (every word is one morph): a word list or a "
               "test input without segmentations? Boundary recall is undefined and the one-morph baseline is exact")
        log.warn(msg)
        notes.append(f"# warning: {one_line(msg)}\n")
    base = seg.baseline_rows(gold_types)
    report = "".join(seg.definitions(gold_name, len(gold_records), len(gold_types))) + "".join(notes)
    rows, preds = [], {}
    for p in predicted:
        name = "<stdin>" if p == "-" else p
        notes.clear()
        records = read(p, name)
        if dropped:
            kept = [r for r in records if r.word not in dropped]
            if len(kept) < len(records):
                n = len({r.word for r in records} & dropped)
                log.info(f"{name}: {n} word(s) left out: their gold row is not a surface segmentation "
                         "(--surface-only)")
                notes.append(f"# skipped: {one_line(name)}: {n} word(s) whose gold row is not a surface "
                             "segmentation (--surface-only), not scored\n")
            records = kept
        pred = seg.word_types(records, name)
        _repeats(name, len(records), len(pred), notes)
        report += "".join(notes)
        preds[_unique_name(p, preds)] = pred
        try:
            seg.check_same_words(gold_types, pred, gold_name, name)
        except InputError as e:
            raise InputError(f"{gold_name} vs {name}: {e}") from None
        row = seg.score(gold_types, pred)
        if row["unparsed"]:
            log.warn(f"{name}: {row['unparsed']} of {row['words']} predicted words are unparsed ('_'); they have "
                     "no correct morph and no boundary")
        check_unparsed(row["unparsed"], row["words"], max_unparsed, f"words of {name}")
        rows.append(row)
        report += seg.format_report(row, base, name)
    report += seg.format_baselines(base)
    report += spreads(predicted, rows, seg.format_spread, aggregate)
    if sig is not None:
        report += _significance_block(seg.significance_rows(gold_types, preds, *sig), sig[1], "word type")
    return report


def _repeats(name, n_records, n_types, notes) -> None:
    """Say on stderr and in ``notes`` (unless None) how many rows repeat a word already listed (scored once,
    as a type)."""
    if n_records > n_types:
        msg = f"{name}: {n_records - n_types} row(s) repeat a word listed before, with the same segmentation: " \
              "scored once (words are scored as types)"
        log.info(msg)
        if notes is not None:
            notes.append(f"# repeats: {one_line(msg)}\n")


def _first_line(path):
    from grind.formats.textio import read_lines
    return next((ln for _, ln in read_lines(path) if ln.strip() and not ln.startswith("#")), None)


def _gold_heads_note(path) -> str:
    """The convention line's word on GOLD's heads: re-headed by grind function-heads (its header says so)
    or as annotated in the file (a stream cannot be read twice: not looked at)."""
    from grind.formats.textio import is_stream, read_header
    if is_stream(path):
        return ""
    conversion = read_header(path).get("conversion", "")
    if conversion.startswith("function heads"):
        return "; gold heads: " + conversion.strip()
    return "; gold heads as annotated in GOLD"


#: Header lines of a file grind wrote as a prediction (grind parse, grind baseline).
PREDICTION_KEYS = ("decoder", "baseline")


def check_not_prediction(gold, head=None, sents=None) -> None:
    """GOLD must not be a file grind wrote as a prediction (its header says ``# decoder:`` or ``# baseline:``,
    or, the header lost, its sentences carry grind's marks): an InputError asking whether GOLD and
    PREDICTED were swapped.  ``head``: the header as read already (a stream); by default read from the file."""
    from grind.formats.textio import read_header
    name = "<stdin>" if gold == "-" else gold
    if sents is not None:
        marked = next((s for s in sents if s.mark), None)
        if marked is None:
            return
        why = f"its sentence {marked.number} (line {marked.line}) is marked '{marked.mark}' as grind parse marks them"
    else:
        head = read_header(gold) if head is None else head
        key = next((k for k in PREDICTION_KEYS if k in head), None)
        if key is None:
            return
        why = f"its header says '# {key}: {head[key]}'" + (f" ('# command: {head['command']}')"
                                                            if "command" in head else "")
    raise InputError(f"{name} is a file grind wrote as a prediction ({why}), given as GOLD: did you swap GOLD and "
                     "PREDICTED? (grind eval GOLD PREDICTED...: the treebank first)")


def spreads(paths, results, format_spread, aggregate=False) -> str:
    """The mean and spread of several PREDICTED files' ``results``: of all of them with ``aggregate`` or
    when their headers say they are runs of one configuration (:func:`configuration`); else one block per
    configuration of two or more runs, and a line saying what was not averaged."""
    if len(results) < 2:
        return ""
    if aggregate:
        return format_spread(results)
    groups: dict = {}
    for path, res in zip(paths, results):
        groups.setdefault(configuration(path), []).append((path, res))
    if len(groups) == 1:
        return format_spread(results)
    out = [f"# configurations: {len(groups)} among the {len(results)} PREDICTED files (their headers name other "
           "commands or options than the seed, or none): each averaged apart; --aggregate averages them all\n"]
    for k, members in enumerate(groups.values(), 1):
        names = ", ".join(one_line("<stdin>" if p == "-" else p) for p, _ in members)
        out.append(f"# configuration {k}: {names}\n")
        if len(members) > 1:
            out.append(format_spread([r for _, r in members]))
    return "".join(out)


#: Options that name what a run wrote or its random seed: they do not make another configuration.
NOT_CONFIGURATION = {"seed", "output", "trace_path", "ckpt", "checkpoint_every", "resume", "ln_params",
                     "joint_output", "jobs", "cluster"}


def configuration(path) -> tuple:
    """What made the prediction file ``path``, as its header says (``# command:``, and ``# grammar_made_by:``,
    the command of the grammar it parsed with): the command and its options, but not the seed, the output
    files or (when the grammar's command is known) the input files; a file without a header (or a stream) is
    a configuration of its own."""
    from grind.formats.textio import read_header
    head = read_header(path) if path != "-" else {}
    if "command" not in head:
        return ("file", path)
    from grind.formats.corpus import read_options
    made = head.get("grammar_made_by")
    return (_normalised(head["command"], keep_arguments=made is None, corpus=False),
            read_options(head.get("corpus", "")), _normalised(made, keep_arguments=False) if made else None)


#: The corpus options, as click names them: a prediction's '# corpus:' line says what they came to.
CORPUS_OPTIONS = {"fmt", "column", "punct", "max_length", "min_length", "chars", "types"}


def _normalised(command: str, keep_arguments: bool, corpus: bool = True) -> tuple:
    """A ``# command:`` line as (subcommand, options): the seed, output options, (unless ``corpus``) the
    corpus options and (unless ``keep_arguments``) the positional arguments left out; the line as is when
    it does not parse."""
    import shlex
    ctx = click.get_current_context(silent=True)
    cli = ctx.find_root().command if ctx is not None else None       # the grind group (this is one of its commands)
    if not isinstance(cli, click.Group):
        return (command,)
    try:
        words = shlex.split(command)
    except ValueError:
        return (command,)
    if words[:1] != ["grind"]:
        return (command,)
    words = [w for w in words[1:] if w not in ("-q", "--quiet")]
    cmd, path = cli, []
    while isinstance(cmd, click.Group) and words and cmd.get_command(ctx, words[0]) is not None:
        path.append(words[0])
        cmd = cmd.get_command(ctx, words.pop(0))       # (the grind group imports a command when asked)
    if isinstance(cmd, click.Group):
        return (command,)
    try:                                       # the raw values: no conversion, no checks of the files named
        opts, _, _ = cmd.make_parser(click.Context(cmd, resilient_parsing=True)).parse_args(args=list(words))
    except click.ClickException:
        return (command,)
    arguments = [p.name for p in cmd.params if isinstance(p, click.Argument)]
    left = NOT_CONFIGURATION | set(arguments) | (set() if corpus else CORPUS_OPTIONS)
    options = tuple(sorted((k, str(v)) for k, v in opts.items() if k not in left))
    positional = tuple(str(opts.get(a)) for a in arguments) if keep_arguments else ()
    return (" ".join(path), options, positional)
