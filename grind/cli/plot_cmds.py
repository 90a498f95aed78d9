"""``grind plot`` (learning curves of train --trace files) and ``grind show``
(one parse drawn as text)."""
from __future__ import annotations

import itertools
import os
import sys

import click

from grind.cli.options import GroupedCommand, option

from grind.errors import InputError, raise_if_out_of_memory
from grind.formats.textio import header_lines, open_out
from grind.cli.common import output_option


@click.command("plot", cls=GroupedCommand)
@option("--x", "x", type=click.Choice(["step", "seconds", "sentences"]), default="step", show_default=True,
        metavar="COLUMN", help="The x axis: step, seconds or sentences.",
        doc="The x axis: the trace column to plot against (sentences: cumulative, counted per algorithm "
            "as grind train --trace says; parsed ones for cvb/gibbs/hastings, all for em/vb/ln).")
@option("--label", "labels", multiple=True, metavar="TEXT", help="Legend label of each TRACE, in order.",
        doc="Legend label of a TRACE, once per TRACE in order (default: the file names); TRACEs sharing a label "
            "are drawn as one curve: their mean where all have a value, in a band of +- one standard deviation.")
@option("--columns", default=None, metavar="COL,COL", help="The panels to draw.",
        doc="The panels to draw, e.g. dev_directed,dev_logprob [default: objective and every dev_* column].")
@option("--log-x", is_flag=True, help="A logarithmic x axis.",
        doc="A logarithmic x axis (learning curves against sentences parsed).")
@option("--reference", "references", multiple=True, metavar="COL=VALUE[:LABEL]",
        help="A dashed line in COL's panel (a baseline).",
        doc="A dashed horizontal line in COLUMN's panel, e.g. a baseline: "
            "--reference dev_directed=0.331:attach-right (repeatable).")
@output_option
@click.argument("traces", nargs=-1, required=True)
def plot(traces, x, labels, columns, log_x, references, output):
    """Learning curves (PNG) of 'grind train --trace' files: one panel for the
    objective per step, one per dev column present (dev log probability,
    directed accuracy, perplexity...), every TRACE overlaid.  Needs matplotlib
    (pip install 'grind[plot]').

    \b
    Example:
      grind plot --label em --label vb em.trace vb.trace -o curves.png
      grind plot --reference dev_directed=0.331:attach-right em.trace -o em.png
      grind plot --x sentences --log-x --columns dev_directed --label vb --label vb vb1.tsv vb2.tsv -o vb.png
    """
    if output == "-" and sys.stdout.isatty():
        raise click.UsageError("grind plot writes a PNG image: give -o FILE.png (standard output is a terminal)")
    if labels and len(labels) != len(traces):
        raise click.UsageError(f"{len(labels)} --label for {len(traces)} TRACE files: give one per file, or none")
    from grind.eval.plot import parse_reference, plotted_columns, read_trace, trace_figure
    try:
        refs = [parse_reference(r) for r in references]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--reference'") from None
    data = [read_trace(t) for t in traces]
    panels = plotted_columns(data)
    if columns is not None:
        asked = [c.strip() for c in columns.split(",") if c.strip()]
        present = {k for t in data for k in t}
        missing = [c for c in asked if c not in present or c in ("step", "sentences", "seconds")]
        if missing or not asked:
            raise click.BadParameter(f"{missing[0] if missing else columns!r} is not a column to plot of these "
                                     f"traces ({', '.join(panels)})", param_hint="'--columns'")
        panels = asked
    for col, _, _ in refs:                    # a mistyped column drew no line, silently
        if col not in panels:
            raise click.BadParameter(f"{col!r} is not a plotted column of these traces ({', '.join(panels)})",
                                     param_hint="'--reference'")
    try:
        import matplotlib
    except ImportError as e:
        raise_if_out_of_memory(e, "matplotlib")
        raise InputError("grind plot needs matplotlib: pip install 'grind[plot]'") from None
    matplotlib.use("Agg")
    fig = trace_figure(data, list(labels) or ["<stdin>" if t == "-" else os.path.basename(t) for t in traces], x,
                       refs, panels, log_x)
    made_by = [ln.rstrip("\n") for ln in header_lines()]       # the header every text output starts with
    with open_out(output, binary=True) as f:
        fig.savefig(f, format="png", dpi=100, metadata={"Software": made_by[0][2:], "Comment": "\n".join(made_by)})


@click.command("show", cls=GroupedCommand)
@option("--sentence", "-n", "number", type=click.IntRange(1), default=1, show_default=True, metavar="N",
        help="Which sentence (or tree) of FILE, from 1.")
@option("--column", type=click.Choice(["FORM", "LFORM", "UPOS", "XPOS"]), default="FORM", show_default=True,
        metavar="COLUMN", help="The column that labels the words.",
        doc="CoNLL: the column that labels the words; trees: FORM/LFORM draw the words, "
            "UPOS/XPOS only the tags.")
@option("--format", "fmt", type=click.Choice(["auto", "conllu", "conllx", "malt", "ptb"]), default="auto",
        show_default=True, metavar="FORMAT", help="FILE's format (auto: by extension/content).")
@output_option
@click.argument("file")
def show(file, number, column, fmt, output):
    """Draw one parse of FILE as text: CoNLL dependency arcs above the words
    (▼ = the dependent's end, │ = the head's; 'root' points at the root word;
    crossing arcs drawn as they are), or a bracketed tree as an indented outline.
    A sentence without a parse (HEAD '_', or a NOPARSE tree) is shown as
    'no parse' and its words.

    \b
    Examples:
      grind show --sentence 3 --column UPOS parsed.conllu
      grind show -n 1 test.trees
    """
    from grind.eval.show import draw_dependencies, draw_tree, draw_unparsed
    from grind.formats.corpus import CorpusSpec, detect_format, iter_corpus
    from grind.formats.textio import read_lines
    name = "<stdin>" if file == "-" else file
    if fmt == "auto":
        if file == "-":
            raise click.UsageError("reading FILE from stdin needs an explicit --format")
        first = next((ln for _, ln in read_lines(file) if ln.strip() and not ln.startswith("#")), None)
        fmt = detect_format(file, first)
        if fmt == "text":
            raise InputError(f"{name}: plain text (one sentence a line) holds no parse to show: "
                             "give a CoNLL file or bracketed trees")
    if fmt == "ptb":
        from grind.formats.trees import LEFTOUT, NOPARSE, map_leaves, read_trees
        trees = read_trees(file)
        if number > len(trees):
            raise InputError(f"{name}: no sentence {number} (the file has {len(trees)})")
        t = trees[number - 1]
        if t[0] in (NOPARSE, LEFTOUT):
            text = draw_unparsed(list(t[1:]))
        elif column in ("UPOS", "XPOS"):
            text = draw_tree(t, words=False)
        else:
            text = draw_tree(map_leaves(t, str.lower) if column == "LFORM" else t)
    else:
        sents = list(itertools.islice(iter_corpus(file, CorpusSpec(fmt, column)), number))
        if len(sents) < number:
            raise InputError(f"{name}: no sentence {number} (the file has {len(sents)})")
        s = sents[-1]
        text = draw_unparsed(s.tokens) if s.heads is None else draw_dependencies(s.tokens, s.heads)
    with open_out(output) as f:
        f.write(text)
