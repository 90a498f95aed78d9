"""Learning curves of ``grind train --trace`` files (``grind plot``).

A trace is TSV: ``#`` header lines, a column-name line (step, objective,
sentences, seconds, then extras such as dev_logprob, dev_directed,
dev_perplexity), one row per step; an empty cell is a value not measured at
that step.  :func:`read_trace` parses one; :func:`trace_figure` draws one panel
for the objective and one per ``dev_*`` column present (or the columns asked
for), every trace overlaid, the runs of one label (seeds) as their mean and spread.
matplotlib is imported only by :func:`trace_figure` (an optional extra).
"""
from __future__ import annotations

import math

from grind.errors import InputError
from grind.formats.textio import read_lines

#: The x axes grind plot offers (trace columns).
X_COLUMNS = ("step", "seconds", "sentences")

#: Panel titles of the columns grind train writes; other dev_* columns get their own name.
TITLES = {"objective": "objective", "dev_logprob": "dev log probability", "dev_directed": "dev directed accuracy",
          "dev_perplexity": "dev perplexity", "dev_f1": "dev F1", "dev_parsed": "dev sentences parsed"}


#: Above this many curves the legend goes beside the panels (one for all of them), not over the first.
OUTSIDE_LEGEND = 4

#: Trace columns of text, not numbers (why a run stopped): read past, not plotted.
TEXT_COLUMNS = ("stopped",)


def read_trace(path: str) -> dict[str, list[float]]:
    """Column name -> values (``nan`` where a cell is empty) of a trace file; the text columns
    (:data:`TEXT_COLUMNS`) are left out."""
    name = "<stdin>" if path == "-" else path
    header: list[str] | None = None
    cols: dict[str, list[float]] = {}
    for lineno, line in read_lines(path):
        s = line.rstrip("\r\n")
        if not s.strip() or s.startswith("#"):
            continue
        cells = s.split("\t")
        if header is None:
            header = cells
            if header[:2] != ["step", "objective"]:
                raise InputError(f"{name}:{lineno}: not a grind train --trace file (its columns should start "
                                 f"with 'step<TAB>objective', not {s[:40]!r})")
            cols = {h: [] for h in header if h not in TEXT_COLUMNS}
            continue
        if len(cells) > len(header):
            raise InputError(f"{name}:{lineno}: {len(cells)} cells, but the header names {len(header)} columns")
        cells += [""] * (len(header) - len(cells))
        for h, c in zip(header, cells):
            if h in TEXT_COLUMNS:
                continue
            try:
                cols[h].append(float(c) if c.strip() else math.nan)
            except ValueError:
                raise InputError(f"{name}:{lineno}: column {h}: {c!r} is not a number") from None
    if header is None or not cols.get("step"):
        raise InputError(f"{name}: no steps (an empty trace)")
    return cols


def plotted_columns(traces: list[dict[str, list[float]]]) -> list[str]:
    """``objective`` and every ``dev_*`` column holding a value in some trace, in first-seen order."""
    out = ["objective"]
    for t in traces:
        for k, v in t.items():
            if k.startswith("dev_") and k not in out and any(not math.isnan(x) for x in v):
                out.append(k)
    return out


def parse_reference(text: str) -> tuple[str, float, str]:
    """``COLUMN=VALUE[:LABEL]`` (``dev_directed=0.331:attach-right``) ->
    (column, value, label); ValueError with the reason otherwise."""
    col, sep, rest = text.partition("=")
    value, _, label = rest.partition(":")
    if not sep or not col:
        raise ValueError(f"{text!r} is not COLUMN=VALUE[:LABEL]")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{text!r}: the value must be finite")
    return col, v, label or f"{col}={value}"


def points(trace: dict[str, list[float]], x: str, col: str) -> list[tuple[float, float]]:
    """The ``(x, col)`` pairs of a trace where both have a value."""
    if col not in trace:
        return []
    return [(a, b) for a, b in zip(trace[x], trace[col]) if not (math.isnan(a) or math.isnan(b))]


def mean_band(traces: list[dict[str, list[float]]], x: str, col: str):
    """The curve of several runs (seeds, shuffles): per x value every one of them has a value at,
    ``(x, mean, standard deviation, runs)`` (sd: n - 1 in the denominator, 0 for one run).  An x only
    some runs reached (runs that stop at different points) is left out: no mean of a subset."""
    at: dict[float, list[float]] = {}
    for t in traces:
        for a, b in points(t, x, col):
            at.setdefault(a, []).append(b)
    out = []
    for a in sorted(at):
        v = at[a]
        if len(v) < len(traces):
            continue
        m = sum(v) / len(v)
        sd = math.sqrt(sum((y - m) ** 2 for y in v) / (len(v) - 1)) if len(v) > 1 else 0.0
        out.append((a, m, sd, len(v)))
    return out


def trace_figure(traces: list[dict[str, list[float]]], labels: list[str], x: str = "step",
                 references: tuple | list = (), columns=None, log_x: bool = False):
    """A matplotlib Figure (Agg canvas, no pyplot state): one panel per
    :func:`plotted_columns` entry (or per name of ``columns``), one line per
    trace labelled by ``labels`` -- traces sharing a label are one line, their
    mean where they all have a value, in a band of +- one standard deviation
    (:func:`mean_band`) -- and a
    dashed horizontal line per ``(column, value, label)`` reference (a
    baseline beside the curves) in that column's panel; ``log_x``: a
    logarithmic x axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    if x not in X_COLUMNS:
        raise ValueError(f"x must be one of {X_COLUMNS}")
    cols = list(columns) if columns else plotted_columns(traces)
    groups: dict[str, list] = {}
    for t, label in zip(traces, labels):
        groups.setdefault(label, []).append(t)
    outside = len(groups) > OUTSIDE_LEGEND           # many curves: one legend beside the panels, not over them
    fig = Figure(figsize=(6.4 + 2.8 * outside, 2.6 * len(cols)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(cols), 1, sharex=True, squeeze=False)[:, 0]
    for ax, col in zip(axes, cols):
        for i, (label, members) in enumerate(groups.items()):
            color, style = f"C{i % 10}", ("-", "--", ":")[i // 10 % 3]      # past 10 colours: dashed, dotted
            if len(members) > 1:
                band = mean_band(members, x, col)
                if band:
                    xs, m, sd = [p[0] for p in band], [p[1] for p in band], [p[2] for p in band]
                    ax.plot(xs, m, marker="." if len(xs) < 50 else None, label=f"{label} (mean of {len(members)})",
                            color=color, linestyle=style)
                    ax.fill_between(xs, [a - b for a, b in zip(m, sd)], [a + b for a, b in zip(m, sd)],
                                    color=color, alpha=0.2, linewidth=0)
                continue
            pts = points(members[0], x, col)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if len(pts) < 50 else None,
                        label=label, color=color, linestyle=style)
        refs = [(v, lab) for c, v, lab in references if c == col]
        for k, (v, lab) in enumerate(refs):
            ax.axhline(v, color="0.3", linestyle=("--", ":", "-.")[k % 3], linewidth=1, label=lab)
        if refs and not outside:
            ax.legend(fontsize="small")
        ax.set_title(TITLES.get(col, col.replace("_", " ")), fontsize="medium")
        ax.grid(True, alpha=0.3)
        if log_x:
            ax.set_xscale("log")
    axes[-1].set_xlabel({"step": "step", "seconds": "seconds", "sentences": "sentences"}[x])
    if outside:
        seen: dict = {}
        for ax in axes:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        fig.legend(list(seen.values()), list(seen), loc="outside right upper", fontsize="small")
    elif len(groups) > 1:
        axes[0].legend(fontsize="small")
    return fig
