"""What the recipes' results scripts share (standard library only, so any python3 runs them): the settings
`make results` passes, readers of grind's output files and of the launchers' logs, number formatting and
markdown tables, and the frame of a RESULTS.md file.

A results script (data-recipes/NAME/results.py), run as `python3 ../tables.py results.py NAME=VALUE...`, has

    import tables as t

    def main(argv):
        s = t.Settings(argv)                     # NAME=VALUE and NAME.default=VALUE pairs from common.mk
        ... read the cells under s.out ...
        return t.document(s, [t.section("title", s.command(), body), ...], cells_read)
"""
from __future__ import annotations

import math
import os
import re
import shlex
import statistics
import sys

#: A score within this of a baseline's is "within a point" of it (grind.eval.number.NEAR; the same rule).
NEAR = 0.01
SUBSETS = ("<=10", "<=20", "all")


class Settings:
    """The recipe's variables as `make results` passes them: NAME=VALUE, NAME.default=VALUE, MACHINE_VARS=...
    (the variables that change no result: left out of a table's command), RECIPE=..."""

    def __init__(self, argv: list[str]):
        self.values: dict[str, str] = {}
        self.defaults: dict[str, str] = {}
        for a in argv:
            k, _, v = a.partition("=")
            if k.endswith(".default"):
                self.defaults[k[: -len(".default")]] = v
            else:
                self.values[k] = v
        self.recipe = self.values.pop("RECIPE")
        self.machine = set(self.values.pop("MACHINE_VARS").split())
        self.out = self.values["OUT"]

    def __getitem__(self, name: str) -> str:
        return self.values[name]

    def words(self, name: str) -> list[str]:
        return self.values[name].split()

    def path(self, *parts: str) -> str:
        return os.path.join(self.out, *parts)

    def given(self) -> dict[str, str]:
        """The settings that change results and differ from their defaults."""
        return {k: v for k, v in self.values.items()
                if k not in self.machine and " ".join(v.split()) != " ".join(self.defaults.get(k, "").split())}

    def command(self, target: str = "results", **extra: str) -> str:
        """The command (from the repository) that makes this table again: make -C data-recipes/NAME TARGET
        with every setting given otherwise than its default, and EXTRA."""
        given = dict(self.given(), **extra)
        words = [f"make -C data-recipes/{self.recipe}", target]
        words += [f"{k}={shlex.quote(v) if v.strip() != v or ' ' in v or not v else v}" for k, v in given.items()]
        return " ".join(words)

    def describe(self) -> str:
        """Every setting that changes a result, NAME=VALUE, as one line."""
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in self.values.items() if k not in self.machine)


# ------------------------------------------------------------------------------------------------ readers
def header(path: str) -> dict[str, str]:
    """The '# key: value' lines at the top of a file grind wrote (the first of each key), and 'grind': its
    version from the '# grind X' line."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                break
            text = line[1:].strip()
            if text.startswith("grind ") and "grind" not in out:
                out["grind"] = text.split()[1]
                continue
            k, sep, v = text.partition(":")
            if sep:
                out.setdefault(k.strip(), v.strip())
    return out


def blocks(path: str) -> list[tuple[list[str], list[str], list[list[str]]]]:
    """The TSV blocks of a grind report: (the comment lines before it, its header row, its rows)."""
    out: list[tuple[list[str], list[str], list[list[str]]]] = []
    comments: list[str] = []
    head: list[str] | None = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or not line.strip():
                if head is not None:
                    head = None
                    comments = []
                if line.startswith("#"):
                    comments.append(line[1:].strip())
                continue
            fields = line.split("\t")
            if head is None:
                head = fields
                out.append((comments, head, []))
            else:
                out[-1][2].append(fields)
    return out


class DepEval:
    """A `grind eval` report of dependencies: runs[i] = (name, {subset: {column: value}}) for each PREDICTED
    file, baselines = {'attach-right:<=10': {...}, ...}, significance = [row dicts], notes = ['# note:' texts]."""

    def __init__(self, path: str):
        self.path = path
        self.header = header(path)
        self.runs: list[tuple[str, dict[str, dict[str, str]]]] = []
        self.baselines: dict[str, dict[str, str]] = {}
        self.significance: list[dict[str, str]] = []
        self.notes: list[str] = []
        name = self.header.get("predicted", os.path.basename(path))
        for comments, head, rows in blocks(path):
            named = [c.split(":", 1)[1].strip() for c in comments if c.startswith("predicted:")]
            if named:
                name = named[-1]
            dicts = [dict(zip(head, r)) for r in rows]
            if head[:2] == ["system", "against"]:
                self.significance = dicts
            elif head[0] == "subset" and dicts and ":" in dicts[0]["subset"]:
                self.baselines = {d["subset"]: d for d in dicts}
            elif head[0] == "subset" and "directed" in head:
                self.runs.append((name, {d["subset"]: d for d in dicts}))
        with open(path, encoding="utf-8") as f:
            self.notes = [ln[len("# note:"):].strip() for ln in f if ln.startswith("# note:")]

    def score(self, subset: str, column: str = "directed", run: int = 0) -> float:
        return float(self.runs[run][1][subset][column])

    def baseline(self, which: str, subset: str, column: str = "directed") -> float:
        return float(self.baselines[f"attach-{which}:{subset}"][column])

    def unparsed(self, subset: str = "all", run: int = 0) -> int:
        return int(self.runs[run][1][subset]["unparsed"])

    def p_against(self, against: str, measure: str = "directed:all", run: int = 0) -> str | None:
        """The significance test's p of run RUN against AGAINST (e.g. attach-right), or None if not run."""
        name = self.runs[run][0]
        for r in self.significance:
            if r["against"] == against and r["measure"] == measure and os.path.basename(r["system"]) == \
                    os.path.basename(name):
                return r["p"]
        return None


def tsv(path: str) -> list[dict[str, str]]:
    """A TSV file with '#' comment lines and a header row (grind train --trace, grind eval --labeled ...)."""
    rows: list[dict[str, str]] = []
    head: list[str] | None = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if head is None:
                head = fields
            else:
                rows.append(dict(zip(head, fields)))
    return rows


def keyvalues(path: str) -> dict[str, str]:
    """KEY<TAB>VALUE lines (grind eval --labeled) after the comments."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or "\t" not in line:
                continue
            k, v = line.rstrip("\n").split("\t", 1)
            out.setdefault(k, v)
    return out


def launcher_log(path: str) -> dict[str, str]:
    """The '# key: value' lines a launcher writes around a command (command, host, start, end, seconds, exit)."""
    out: dict[str, str] = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"# (command|cwd|host|start|end|seconds|exit): (.*)$", line.rstrip("\n"))
            if m:
                out[m[1]] = m[2]
    return out


def seconds(log: str) -> float:
    """Wall seconds of the command a launcher log records (nan if the log has none: CMD was empty)."""
    s = launcher_log(log).get("seconds")
    return float(s) if s is not None else math.nan


def cell_log(out: str, cell: str) -> str:
    """The launcher's log of the cell OUT/CELL (common.mk's LOG)."""
    return os.path.join(out, "log", cell + ".log")


# ------------------------------------------------------------------------------------------------ numbers
def pct(x: float, digits: int = 1) -> str:
    """A fraction as a percentage ('—' for nan: undefined)."""
    return "—" if x != x else f"{100 * x:.{digits}f}"


def mean_sd(xs: list[float], digits: int = 1, scale: float = 100.0) -> str:
    """One value as it is; several as mean±sample sd (scaled: fractions to percentages by default)."""
    if not xs:
        return "—"
    if any(x != x for x in xs):
        return "—"
    if len(xs) == 1:
        return f"{scale * xs[0]:.{digits}f}"
    return f"{scale * statistics.mean(xs):.{digits}f}±{scale * statistics.stdev(xs):.{digits}f}"


def near(x: float, y: float, within: float = NEAR) -> bool:
    """|x - y| <= within (grind.eval.number.near: 1e-12 of slack); False for nan."""
    return not (math.isnan(x) or math.isnan(y)) and abs(x - y) <= within + 1e-12


def near_note(baseline: str, subsets: list[str]) -> str:
    """'within 1 point of attach-right (≤10, all)' for the SUBSETS where a score is near BASELINE's, or ''."""
    if not subsets:
        return ""
    return f"within 1 point of attach-{baseline} ({', '.join(k.replace('<=', '≤') for k in subsets)})"


def p_text(p: str | None) -> str:
    """A p-value as the tables write it ('< 1e-4' below that, '—' when the test was not run)."""
    return "—" if p is None else ("< 1e-4" if float(p) < 1e-4 else p)


def seconds_text(s: float) -> str:
    return "—" if s != s else f"{s:.1f}"


# ------------------------------------------------------------------------------------------------ markdown
def table(head: list[str], rows: list[list[str]], align: str = "") -> str:
    """A markdown table; ALIGN holds 'l' or 'r' per column (default left)."""
    marks = ["---:" if (align[i:i + 1] == "r") else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def section(title: str, command: str, body: str) -> str:
    return f"## {title}\n\n`{command}`\n\n{body.strip()}\n"


def versions(paths: list[str]) -> str:
    """The grind versions that wrote PATHS (their '# grind X' header lines)."""
    vs = sorted({header(p).get("grind", "?") for p in paths if os.path.exists(p)})
    return ", ".join(vs) if vs else "?"


KEPT = "<!-- kept: the sections below are not written by make results (it keeps them; a section it writes replaces "\
    "the kept one of the same title) -->"


def kept_sections(path: str) -> list[tuple[str, str]]:
    """The (title, text) of each '## ' section after the KEPT line of the file PATH (none if it has no such line)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if KEPT not in text:
        return []
    out: list[tuple[str, str]] = []
    for part in re.split(r"(?m)^(?=## )", text.split(KEPT, 1)[1]):
        if part.startswith("## "):
            out.append((part.split("\n", 1)[0][3:].strip(), part.rstrip() + "\n"))
    return out


def document(s: Settings, sections: list[str], made_from: list[str], intro: str = "") -> str:
    """RESULTS.md: a short frame (which recipe, which grind, the settings), the sections, and the sections kept from
    the RESULTS file already there (after its KEPT line) whose titles no section here has."""
    head = (f"# Results: data-recipes/{s.recipe}\n\n"
            f"Written by `make results` from the recipe's cells (grind {versions(made_from)}); do not edit by hand: "
            "each table names the command, run from the repository, that makes it again (cells already made are "
            "reused). What the recipe reproduces, its protocol and its data: [README.md](README.md).\n\n"
            f"Settings: `{s.describe()}`\n")
    parts = [head]
    if intro:
        parts.append(intro.strip() + "\n")
    parts += sections
    titles = {sec.split("\n", 1)[0][3:].strip() for sec in sections}
    kept = [text for title, text in kept_sections(s["RESULTS"]) if title not in titles]
    if kept:
        parts.append(KEPT + "\n")
        parts += kept
    return "\n".join(parts)


def run(script: str, argv: list[str]) -> None:
    """Write to stdout what SCRIPT's main(argv) returns; a missing cell is a clear error, not a traceback."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("results", script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        sys.stdout.write(module.main(argv))
    except FileNotFoundError as e:
        sys.exit(f"results: {e.filename} not found: run make (the cells) first")


if __name__ == "__main__":       # common.mk's write_results: python3 ../tables.py results.py NAME=VALUE...
    run(sys.argv[1], sys.argv[2:])
