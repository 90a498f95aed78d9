"""data-recipes/ud: make help and the value checks, every grind call through $(CMD), settings in cell names,
results.py's tables and refusal of missing cells, and induce on the shipped EWT sample."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SAMPLE, grind

UD = REPO / "data-recipes" / "ud"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(*args, shared, check=True):
    r = subprocess.run(["make", "-C", str(UD), f"SHARED={shared}", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(r.stderr)
    return r


@pytest.fixture
def shared(tmp_path):
    """A stand-in for ../shared/data with English-EWT's three (empty) files: for make -n and help."""
    d = tmp_path / "data" / "UD_English-EWT"
    d.mkdir(parents=True)
    for name in ("en_ewt-ud-train.conllu.xz", "en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu"):
        (d / name).write_bytes(b"")
    return tmp_path / "data"


def test_help_checks_and_dry_run(shared):
    h = make("help", shared=shared).stdout
    for var in ("LANGS", "ALGOS", "VARIANTS", "FRAC", "ALPHA", "CMD", "SEEDS"):
        assert f"  {var} " in h
    bad = make("-n", "ALGOS=em gibbs", shared=shared, check=False)
    assert bad.returncode != 0 and "ALGOS: 'gibbs' is not one of: em vb cvb" in bad.stderr
    bad = make("-n", "FRAC=most", shared=shared, check=False)
    assert bad.returncode != 0 and "FRAC: 'most' is not a number > 0" in bad.stderr
    n = make("-n", "LANGS=en", "CMD=LAUNCH", "GRIND=grind", shared=shared).stdout.splitlines()
    calls = [ln for ln in n if "grind " in ln]
    assert calls and all(ln.startswith("LAUNCH 'out/log/en/") and "' grind " in ln for ln in calls)
    trains = [ln for ln in calls if " train " in ln]
    assert len(trains) == 4 + 4 + 4 * 3                      # em, vb: 4 variants; cvb: 4 variants x 3 seeds
    assert any("-o out/en/cvb-a0.1-both_udfunc_ud0.8-m15-i50-s3.txt" in ln for ln in trains)
    other = make("-n", "LANGS=en", "ALPHA=0.5", "GRIND=grind", shared=shared).stdout
    assert "vb-a0.5-plain-m15-i100.txt" in other and "vb-a0.1" not in other     # a setting: new cells


def eval_file(path, scores, right=0.3, left=0.1):
    """A grind eval file of several parses (``scores``: {parse: directed}), a table each."""
    text = "# grind\n"
    for parse, directed in scores.items():
        text += (f"# predicted: {parse}\nsubset\tsentences\twords\tdirected\tundirected\tunparsed\toverlap_right\t"
                 f"overlap_left\nall\t10\t100\t{directed}\t0.5\t0\t0.2\t0.1\n")
    path.write_text(text + "subset\tsentences\twords\tdirected\tundirected\tunparsed\toverlap_right\toverlap_left\n"
                    f"attach-right:all\t10\t100\t{right}\t0.4\t0\t1.0\t0.0\n"
                    f"attach-left:all\t10\t100\t{left}\t0.4\t0\t0.0\t1.0\n")


def test_results_tables(tmp_path):
    cells = []
    for lang, name in (("xx", "X-One"), ("yy", "Y-Two")):
        for split in ("dev", "test") if lang == "xx" else ("test",):
            runs = {f"{lang}-em-0-{split}.conllu": ("em", 0), **{f"{lang}-cvb-{s}-{split}.conllu": ("cvb", s)
                                                                 for s in (1, 2)}}
            scores = tmp_path / f"{lang}.{split}.eval"
            eval_file(scores, {p: 0.5 + 0.1 * s for p, (_, s) in runs.items()})
            cells += [f"{lang}\t{name}\t{a}\tboth\t{s}\t{split}\tcontent\t{scores}\t{p}" for p, (a, s) in runs.items()]
    (tmp_path / "cells.tsv").write_text("\n".join(cells) + "\n")
    out = tmp_path / "R.md"
    cmd = [sys.executable, str(UD / "results.py"), "--cells", str(tmp_path / "cells.tsv"), "--command", "make x",
           "--settings", "S=1", "-o", str(out)]
    subprocess.run(cmd, check=True)
    text = out.read_text()
    assert "| X-One | 10.0 | 30.0 | 50.0 | 65.0 ± 7.1 |" in text          # cvb: mean ± sd over its seeds
    assert "| Y-Two * | 10.0 | 30.0 | 50.0 | 65.0 ± 7.1 |" in text         # no dev split: a held-out language
    assert "| **mean** | 10.0 | 30.0 | 50.0 | 65.0 |" in text
    assert "| em both | +20.0 | +20.0 | +20.0 | +20.0 (X-One) | 2 of 2 |" in text
    eval_file(tmp_path / "yy.test.eval", {"yy-em-0-test.conllu": 0.5, "yy-cvb-1-test.conllu": 0.6})
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode != 0 and "1 cells" in r.stderr                  # yy-cvb-2-test has no table


def test_induce_parses_every_test_sentence(tmp_path):
    train, test = SAMPLE / "en_ewt-ud-train-sample.conllu.gz", SAMPLE / "en_ewt-ud-test-sample.conllu.gz"
    env_grind = str(Path(sys.executable).parent / "grind")
    r = subprocess.run([str(UD / "induce"), str(train), str(test), str(tmp_path / "o")], capture_output=True,
                       text=True, env={"GRIND": env_grind, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    parsed = (tmp_path / "o" / "test.conllu").read_text()
    assert "# unparsed: 0" in parsed         # (the 4 sentences of punctuation only have no word to parse)
    assert "--leaf-tags udfunc" in (tmp_path / "o" / "dmv0.txt").read_text()
    e = grind("eval", "--column", "UPOS", "--punct", "ud", test, tmp_path / "o" / "test.conllu").stdout
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in e.splitlines() if "\t" in ln}
    assert rows["all"][1] == "496"                              # every sentence of the sample with a word
    assert float(rows["all"][3]) > float(rows["attach-right:all"][3]) + 0.15
    bad = subprocess.run([str(UD / "induce"), str(train)], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: induce TRAIN TEST OUTDIR" in bad.stderr
