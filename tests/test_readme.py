"""The README and the tutorials say nothing a test does not keep true.

- Every ```sh / ```bash block of README.md runs as written, in order, from a copy of the repository root with
  grind on PATH and no ../shared beside it; so does every ```python block (the API). The set-up block (the one
  after the ``<!-- set-up`` comment: ``make demo`` and ``make test`` themselves) is the one left out.
- The same for each page of docs/tutorials/ (a fresh copy per page).
- The demo's excerpts in README.md are lines ``bin/demo`` prints, in that order.
- Each ```text block after an ``<!-- output -->`` comment is lines the runnable block before it prints, in order.
- Every ``--option`` the README, docs/ and CONTRIBUTING.md name is an option of a grind command, and in a
  ``grind COMMAND ...`` line an option of that command.
- The planted data of data/planted/ is what its make.py writes.
- README.md stays at most 200 lines, with no dates, commit hashes or issue numbers.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TUTORIALS = REPO / "docs" / "tutorials"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SETUP = "<!-- set-up"
OUTPUT = "<!-- output -->"      # before a ```text block: lines the runnable block before it prints, in order
RUNS = ("sh", "bash", "python")


def fenced(path: Path) -> list[tuple[int, str, str, str]]:
    """(line, language, text, the line before the fence) of each fenced block of PATH."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2),
             text[:m.start()].rstrip().rsplit("\n", 1)[-1]) for m in FENCE.finditer(text)]


def blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line, language, text) of each block of PATH that runs: sh, bash, python; not the set-up block."""
    return [(line, lang, text) for line, lang, text, before in fenced(path)
            if lang in RUNS and not before.startswith(SETUP)]


def in_order(excerpt: str, printed: str) -> str | None:
    """None when every line of EXCERPT (whitespace aside) is a line of PRINTED, in that order; else the first
    line that is not."""
    lines = [ln.split() for ln in printed.splitlines()]
    at = 0
    for want in (ln.split() for ln in excerpt.splitlines() if ln.strip()):
        if want not in lines[at:]:
            return " ".join(want)
        at = lines.index(want, at) + 1
    return None


def workdir(tmp: Path) -> Path:
    """A stand-in for the repository root: the repository's entries linked, data-recipes copied (recipes write
    into their directories), no out/ or demo-out/, and no ../shared beside it."""
    root = tmp / "repo"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name in ("out", "demo-out", ".git") or entry.name.startswith(".pytest"):
            continue
        if entry.name == "data-recipes":
            shutil.copytree(entry, root / entry.name, ignore=shutil.ignore_patterns("out", "__pycache__"))
        else:
            (root / entry.name).symlink_to(entry)
    assert not (tmp / "shared").exists()
    return root


def environment() -> dict[str, str]:
    """The venv active (its bin first on PATH), nothing that points at ../shared."""
    env = {k: v for k, v in os.environ.items() if k not in ("SHARED", "GRIND_SHARED_DATA", "OUT", "CMD")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = os.path.dirname(os.path.dirname(sys.executable))
    return env


def run_block(lang: str, text: str, cwd: Path, where: str) -> str:
    """Run one block; its standard output."""
    cmd = ["bash", "-euo", "pipefail", "-c", text] if lang != "python" else [sys.executable, "-c", text]
    r = subprocess.run(cmd, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{where} exits {r.returncode}:\n{text}\n--- stderr (end) ---\n{r.stderr[-3000:]}"
    return r.stdout


def run_page(path: Path, tmp: Path) -> None:
    """Every runnable block of PATH in order, in one copy of the repository; each ``<!-- output -->`` text
    block checked against the output of the block before it."""
    cwd = workdir(tmp)
    printed = ""
    for line, lang, text, before in fenced(path):
        where = f"{path.relative_to(REPO)}:{line}"
        if lang in RUNS and not before.startswith(SETUP):
            printed = run_block(lang, text, cwd, where)
        elif before == OUTPUT:
            missing = in_order(text, printed)
            assert missing is None, f"{where}: {missing!r} is not what the block before prints:\n{printed}"


# ----------------------------------------------------------------------------- the README

def test_the_readme_is_short_and_has_no_history():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for pattern, what in ((r"\b20\d\d-\d\d-\d\d\b", "a date"), (r"\b[0-9a-f]{7,40}\b", "a commit hash"),
                          (r"(?i)\bissue \d+|#\d+\b", "an issue number")):
        m = re.search(pattern, text)
        assert not m, f"README.md holds {what}: {m.group(0)!r} (history goes to CHANGELOG.md)"


def test_the_readme_has_its_set_up_block_and_runnable_blocks():
    text = README.read_text(encoding="utf-8")
    setup = text.split(SETUP, 1)[1]
    setup = FENCE.search(setup).group(2)
    assert [ln.split("#")[0].split() for ln in setup.splitlines()] == [
        ["make", "demo"], ["source", ".venv/bin/activate"], ["make", "test"]]
    langs = [lang for _, lang, _ in blocks(README)]
    assert langs.count("python") >= 1 and len(langs) >= 8


@pytest.mark.slow
def test_every_readme_block_runs_as_written(tmp_path):
    """The sh and python blocks, in order, in one copy of the repository (later blocks read what earlier ones
    wrote, as they say)."""
    run_page(README, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(p.name for p in TUTORIALS.glob("*.md")))
def test_every_tutorial_block_runs_as_written(page, tmp_path):
    run_page(TUTORIALS / page, tmp_path)


def excerpts() -> list[str]:
    """The README's ```text blocks under 'What the demo prints'."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## What the demo prints", 1)[1].split("\n## ", 1)[0]
    return [m.group(2) for m in FENCE.finditer(section) if m.group(1) == "text"]


@pytest.mark.slow
def test_the_demo_excerpts_are_what_the_demo_prints(tmp_path):
    env = dict(environment(), DEMO_OUT=str(tmp_path / "demo-out"))
    r = subprocess.run(["bash", str(REPO / "bin" / "demo")], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    found = excerpts()
    assert len(found) >= 2
    missing = in_order("\n".join(found), r.stdout)
    assert missing is None, f"README's demo line {missing!r} is not in bin/demo's output (in order):\n{r.stdout}"


# ----------------------------------------------------------------------------- options named in the docs

def pages() -> list[Path]:
    docs = [p for p in (REPO / "docs").rglob("*.md") if "reference" not in p.parts or p.name == "formats.md"]
    return [README, REPO / "CONTRIBUTING.md", REPO / "data-recipes" / "README.md"] + sorted(docs)


def commands() -> dict[tuple[str, ...], set[str]]:
    """{command path (without 'grind'): its option names}; the group's own options are under ()."""
    from grind.cli import docs
    return {tuple(path[1:]): {o for p in cmd.get_params(ctx) for o in p.opts + p.secondary_opts}
            for path, cmd, ctx in docs.contexts()}


NOT_GRIND = {"--fix", "--wait"}   # ruff's and sbatch's (an --UPPER word is a placeholder: not checked)


def grind_lines(text: str):
    """Each 'grind COMMAND ...' command line in TEXT (code blocks and `code` spans), up to a pipe, ';', '&&' or
    a comment, as a list of words."""
    spans = [m.group(2) for m in FENCE.finditer(text)] + re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    for span in spans:
        for line in span.replace("\\\n", " ").splitlines():
            for m in re.finditer(r"(?:^|[\s$(])grind((?:\s+[^\s|;&#`)]+)+)", line):
                try:
                    yield shlex.split(m.group(1))
                except ValueError:
                    yield m.group(1).split()


def bench_options() -> set[str]:
    """The options of the benchmarks (python -m grind.bench.NAME), which the speed pages name."""
    return {o for f in (REPO / "grind" / "bench").glob("*.py")
            for o in re.findall(r"add_argument\(\"(--[a-z][\w-]*)\"", f.read_text(encoding="utf-8"))}


def test_every_option_the_docs_name_exists():
    cmds = commands()
    every = set().union(*cmds.values()) | bench_options()
    wrong = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for opt in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))):
            if opt not in every and opt not in NOT_GRIND:
                wrong.append(f"{page.relative_to(REPO)}: {opt} is no grind option")
        for words in grind_lines(text):
            path: tuple[str, ...] = ()
            rest = list(words)
            while rest and (rest[0].startswith("-") and not path or path + (rest[0],) in cmds):
                w = rest.pop(0)
                if w.startswith("-"):
                    if w.split("=", 1)[0] not in cmds[()]:
                        wrong.append(f"{page.relative_to(REPO)}: grind has no option {w}")
                else:
                    path += (w,)
            if not path:
                continue
            for w in rest:
                opt = w.split("=", 1)[0]
                if re.fullmatch(r"--?[a-z][\w-]*", opt) and opt not in cmds[path]:
                    wrong.append(f"{page.relative_to(REPO)}: grind {' '.join(path)} has no option {opt}")
    assert not wrong, "\n".join(wrong)


# ----------------------------------------------------------------------------- the planted data

def test_the_planted_data_is_what_make_py_writes(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "data" / "planted" / "make.py"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == ["morph-dev.tsv", "morph-train.tsv", "pp-dev.mrg", "pp-test.mrg", "pp-train.mrg"]
    for name in made:
        assert (tmp_path / name).read_bytes() == (REPO / "data" / "planted" / name).read_bytes(), name
