"""The reference pages, man pages and file-format page: made from the commands, and true.

A committed page that is not what ``make docs`` writes now is stale: regenerate it (``make docs``)."""
import json
import os
import re
import shutil
import subprocess
import sys

import click
import numpy as np
import pytest

from conftest import grind as run_grind
from grind.cli import docs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")


@pytest.fixture(scope="module")
def generated():
    return docs.generated()


def test_every_reference_and_man_page_is_up_to_date(generated):
    stale = []
    for rel, text in generated.items():
        path = os.path.join(DOCS, rel)
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
            stale.append(rel)
    assert not stale, f"stale or missing: {', '.join(stale)}: run `make docs`"
    for folder, suffix in ((docs.REFERENCE, ".md"), (docs.MAN, ".1")):
        made = {os.path.basename(r) for r in generated if r.startswith(folder + "/")}
        extra = {f for f in os.listdir(os.path.join(DOCS, folder)) if f.endswith(suffix)} - made - {"formats.md"}
        assert not extra, f"pages of no command: {sorted(extra)}"


def test_a_page_per_command_with_its_options_and_their_long_explanations(generated):
    for path, cmd in docs.commands():
        page = generated[f"{docs.REFERENCE}/{docs.page_name(path)}.md"]
        assert page.startswith(f"# {' '.join(path)}\n")
        for p in cmd.params:
            if isinstance(p, click.Option) and p.name != "help":
                assert f"`{p.opts[0]}" in page or f", {p.opts[0]}" in page, (path, p.opts)
    train = generated[f"{docs.REFERENCE}/train.md"]
    # what left --help is here: the algorithm table, the Dask set-up, the per-algorithm defaults
    for text in ("inside-outside EM / MAP-EM", "dask-jobqueue", "grind[dask]", "default: 50; ln: 1000; mixture: 20",
                 "### ln (logistic normal)", "`--tie-warmup N` (integer x>=0; default: 5 with --tie)"):
        assert text in train, text


def test_every_page_is_linked_from_the_index(generated):
    index = generated[f"{docs.REFERENCE}/README.md"]
    for path, _ in docs.commands():
        assert f"]({docs.page_name(path)}.md)" in index
    assert "](formats.md)" in index


def test_make_man_writes_the_man_pages(tmp_path):
    r = subprocess.run([sys.executable, "-m", "grind.cli.docs", "--man", str(tmp_path)], capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    pages = sorted(os.listdir(tmp_path / "man"))
    assert "grind.1" in pages and "grind-train.1" in pages and "grind-make-grammar-dmv.1" in pages
    assert not (tmp_path / "reference").exists()


@pytest.mark.parametrize("page", ["grind.1", "grind-train.1", "grind-parse.1", "grind-make-grammar-dmv.1"])
def test_man_pages_render(page, generated):
    text = generated[f"{docs.MAN}/{page}"]
    assert text.startswith('.TH "') and "\n.SH NAME\n" in text and "\n.SH OPTIONS\n" in text
    assert not re.search(r"^[.'](?!TH|SH|SS|TP|PP|RS|RE|nf|fi|B |\\\")", text, re.M), "a text line read as a request"
    if shutil.which("groff") is None:
        pytest.skip("no groff here: the structural checks above only")
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=text, capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    out = subprocess.run(["groff", "-man", "-Tascii"], input=text, capture_output=True, text=True).stdout
    plain = re.sub(r".\x08", "", out)
    assert "NAME" in plain and "OPTIONS" in plain and "--help" in plain.replace("\u2010", "-")


def test_the_shell_completion_script_is_produced():
    env = dict(os.environ, _GRIND_COMPLETE="bash_source")
    r = subprocess.run([sys.executable, "-m", "grind"], env=env, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "_grind_completion" in r.stdout and "complete " in r.stdout and "_GRIND_COMPLETE" in r.stdout
    # and it completes: the subcommands after 'grind tr', the options after 'grind train --ti'
    env = dict(os.environ, _GRIND_COMPLETE="bash_complete", COMP_WORDS="grind tr", COMP_CWORD="1")
    r = subprocess.run([sys.executable, "-m", "grind"], env=env, capture_output=True, text=True, cwd=REPO)
    assert "plain,train" in r.stdout.split(), r.stdout
    env.update(COMP_WORDS="grind train --tie-w", COMP_CWORD="2")
    r = subprocess.run([sys.executable, "-m", "grind"], env=env, capture_output=True, text=True, cwd=REPO)
    assert "plain,--tie-what" in r.stdout.split() and "plain,--tie-warmup" in r.stdout.split(), r.stdout


# ----------------------------------------------------------------------------- formats.md

def examples():
    """{name: text} of the ``<!-- example: NAME -->`` blocks of docs/reference/formats.md."""
    text = open(os.path.join(DOCS, "reference", "formats.md"), encoding="utf-8").read()
    return {m.group(1): m.group(2) for m in re.finditer(r"<!-- example: ([\w-]+) -->\n```text\n(.*?)```", text, re.S)}


def test_formats_md_has_an_example_of_each_format():
    assert set(examples()) == {"header", "grammar", "counts", "trace", "trees", "segmentation",
                               "segmentation-sigmorphon", "checkpoint", "config"}


def test_the_format_examples_read(tmp_path):
    from grind.eval.plot import read_trace
    from grind.formats.counts import read_counts
    from grind.formats.rules import parse_header_meta
    from grind.formats.segmentations import read_segmentations
    from grind.formats.trees import read_trees
    from grind.grammars.grammar import read_grammar
    ex = examples()
    for name, text in ex.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    meta: dict = {}
    for line in ex["header"].splitlines():
        assert line.startswith("# ")
        parse_header_meta(line, meta)
    assert ex["header"].startswith("# grind ") and {"command", "seed", "unparsed"} <= set(meta)
    g = read_grammar(str(tmp_path / "grammar"))
    assert len(g) == 10 and g.start == "S" and np.allclose(g.lhs_totals(g.weights), 1.0)
    c = read_counts(str(tmp_path / "counts"))
    assert c.rules == g.rules and c.stats["sentences"] == 3 and c.fingerprint() == g.fingerprint()
    t = read_trace(str(tmp_path / "trace"))
    assert t["step"] == [1.0, 2.0] and len(t["objective"]) == 2
    assert len(read_trees(str(tmp_path / "trees"))) == 2
    plain = read_segmentations(str(tmp_path / "segmentation"))
    assert [s.morphs for s in plain] == [("ab", "dik", "ova", "t"), ("walk", "ed"), ("talks",)]
    sig = read_segmentations(str(tmp_path / "segmentation-sigmorphon"))
    assert [s.word for s in sig] == ["abdikovat", "walked", "talks"] and sig[-1].morphs is None


@pytest.mark.slow
def test_the_format_examples_are_what_grind_writes(tmp_path):
    """The grammar, counts and trace examples are the output of the commands their headers name (bar the
    trace's timing), and a checkpoint holds what formats.md says."""
    ex = examples()
    (tmp_path / "g0.txt").write_text("".join(f"1 {ln.split(' ', 1)[1]}\n" for ln in ex["grammar"].splitlines()
                                             if not ln.startswith("#")))
    (tmp_path / "c.txt").write_text("the dog saw the cat\ncat barks\nthe cat saw dog\n")
    for name, args in (("grammar", ["init", "g0.txt"]), ("counts", ["estep", "g1.txt", "c.txt"])):
        out = run_grind(*args, cwd=tmp_path).stdout
        assert out == ex[name], name
        (tmp_path / ("g1.txt" if name == "grammar" else "counts.txt")).write_text(out)
    run_grind("train", "--algo", "vb", "--alpha", "0.5", "--iterations", "3", "--trace", "t.tsv", "g1.txt", "c.txt",
              cwd=tmp_path)
    strip = lambda t: [re.sub(r"\t\d+\.\d+\t", "\tS\t", ln) for ln in t.splitlines()]   # noqa: E731
    assert strip((tmp_path / "t.tsv").read_text()) == strip(ex["trace"])
    third = "(S (NP (D the) (N cat)) (VP (V saw) (NP (N dog))))"
    assert run_grind("parse", "g1.txt", "c.txt", cwd=tmp_path).stdout.splitlines() == \
        ex["header"].splitlines() + ex["trees"].splitlines() + [third]
    run_grind("train", "--algo", "vb", "--alpha", "0.5", "--iterations", "3", "--checkpoint", "ck.npz", "g1.txt",
              "c.txt", cwd=tmp_path)
    z = np.load(tmp_path / "ck.npz")
    head = json.loads(str(z["__header__"]))
    assert set(head) == {"meta", "scalars", "rng", "trace", "made_by"} and sorted(z.files) == ["__header__",
                                                                                                "alpha_hat"]
    assert head["scalars"] == {"it": 2, "prev": head["trace"][-1][1], "done": True} and z["alpha_hat"].shape == (10,)
