"""data-recipes/words-alone: the dry run (one cell a run, the protocol's options, a setting in its cells' names),
the seeded shuffle, and RESULTS.md made from traces."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED, shared_path

RECIPE = Path(__file__).resolve().parent.parent / "data-recipes" / "words-alone"


def make(*args):
    if shutil.which("make") is None:
        pytest.skip("no make")
    return subprocess.run(["make", "-C", str(RECIPE), "--no-print-directory", *args], capture_output=True, text=True)


def test_dry_run_makes_one_cell_a_run_with_the_protocols_options(tmp_path):
    shared_path("UD_English-CHILDES", "en_childes-derived-train.conllu.xz")
    shared_path("UD_English-EWT", "en_ewt-ud-train.conllu.xz")
    r = make("-n", f"OUT={tmp_path}/out", f"SHARED={SHARED}", "CMD=LAUNCH", "GRIND=grind")
    assert r.returncode == 0, r.stderr
    trains = [ln for ln in r.stdout.splitlines() if " grind train " in ln]
    assert len(trains) == 4 * 2 * 5 + 3 * 2 * 5 and all(ln.startswith("LAUNCH '") for ln in trains)
    assert sum("--algo cvb" in ln and "--cvb-init random" in ln for ln in trains) == 5
    assert all("--eval-at log:10" in ln and "--alpha 1 " in ln for ln in trains)
    streaming = [ln for ln in trains if "--algo streaming" in ln]
    assert all("--first-batch 10000 --batch 1 --batch-iterations 1" in ln for ln in streaming)
    assert all("--eval-at log:10,10001,10010,10100,11000" in ln for ln in streaming)
    assert sum("peak.py" in ln for ln in trains) == 3 * 2 * 5                # the scale run's peak memory
    r = make("-n", f"OUT={tmp_path}/out", f"SHARED={SHARED}", "KAPPA=0.7", "results")
    assert "kappa0.7" in r.stdout and "kappa0.9" not in r.stdout           # a setting is in its cells' names
    r = make("-n", f"OUT={tmp_path}/out", f"SHARED={SHARED}", "EWT_GENRES=email,blogs")
    assert r.returncode == 2 and "EWT_GENRES: 'blogs' is not one of" in r.stderr


CONLL = "".join(f"# sent_id = {g}-{k}\n1\tw{k}\tw{k}\tX\tX\t_\t0\troot\t_\t_\n\n"
                for k, g in enumerate(["email", "weblog", "answers", "reviews", "email", "weblog"]))


def test_shuffle_is_seeded_and_keeps_genres(tmp_path):
    src = tmp_path / "a.conllu"
    src.write_text(CONLL)

    def run(*args):
        out = tmp_path / "o.conllu"
        subprocess.run([sys.executable, str(RECIPE / "shuffle.py"), *args, "-o", str(out), str(src)], check=True)
        return [ln for ln in out.read_text().splitlines() if ln.startswith("# sent_id")]
    assert run() == [ln for ln in CONLL.splitlines() if ln.startswith("# sent_id")]
    assert run("--seed", "3") == run("--seed", "3") != run("--seed", "4")
    assert sorted(run("--seed", "3")) == sorted(run())
    assert run("--genres", "email,answers") == ["# sent_id = email-0", "# sent_id = answers-2", "# sent_id = email-4"]


SETTINGS = dict(SHUFFLES="1 2", ALGOS="vb streaming", INITS="harmonic uniform", ALPHA="1", MIN_LEN="4",
                MAX_LEN="15", TOL="1e-5", VB_CAP="1000", CVB_CAP="60", FIRST="50", SVB_BATCH="10000", EPOCHS="15",
                KAPPA="0.9", TAU="1", PER_DECADE="10", FIG="words-alone.png", SCALE_ALGOS="streaming",
                EWT_GENRES="email,answers", SCALE_FIG="words-alone-scale.png", SCALE_FIG_ALGOS="streaming",
                FISHER="664000")


def trace(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "step\tobjective\tsentences\tseconds\tdev_directed\tdev_logprob\n"
    path.write_text("# grind 0.1.0\n" + head + "".join(
        f"{k}\t-1.0\t{x}\t0.1\t{d}\t{lp}\n" if d is not None else f"{k}\t-1.0\t{x}\t0.1\t\t\n"
        for k, (x, d, lp) in enumerate(rows, 1)))


def test_results_page_from_traces(tmp_path):
    out = tmp_path / "out"
    (out / "len4-15").mkdir(parents=True)
    (out / "len4-15" / "baselines.tsv").write_text(
        "# grind 0.1.0\nsubset\tsentences\twords\tdirected\tundirected\n"
        "attach-right:all\t5\t20\t0.300000\t0.4\nattach-left:all\t5\t20\t0.100000\t0.4\n")
    runs = {"vb": ("vb-tol1e-5-cap1000", [(100, 0.40, -50.0), (200, None, None), (300, 0.44, -45.0)]),
            "streaming": ("streaming-first50-b1-k1", [(50, 0.35, -52.0), (51, 0.34, -53.0), (100, 0.38, -49.0)])}
    for d, algos in (("len4-15", ("vb", "streaming")), ("scale-len4-15", ("streaming",))):
        for algo in algos:
            cell, rows = runs[algo]
            for s, bump in ((1, 0.0), (2, 0.02)):
                for init in ("harmonic", "uniform"):
                    trace(out / d / "a1" / f"{cell}-ev10-{init}-s{s}.tsv",
                          [(x, None if a is None else a + bump, lp) for x, a, lp in rows])
    values = dict(SETTINGS, OUT=str(out), CMD="", GRIND="grind", PYTHON="python3",
                  RESULTS=str(tmp_path / "RESULTS.md"), SHARED="x")
    argv = [f"{k}={v}" for k, v in values.items()] + [f"{k}.default={v}" for k, v in values.items()]
    r = subprocess.run([sys.executable, str(RECIPE.parent / "tables.py"), str(RECIPE / "results.py"), *argv,
                        "MACHINE_VARS=OUT CMD GRIND PYTHON RESULTS SHARED", "RECIPE=words-alone"],
                       capture_output=True, text=True, cwd=RECIPE)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "attach-right (each word's head its right neighbour: the left-branching tree) **30.0**" in text
    assert "**At one pass over the training text (100 sentences parsed)**" in text
    assert "| batch VB | harmonic | 300 | 45.0 ± 1.4 | +15.0 | -45 ± 0 |" in text
    assert "| streaming VB | uniform | 100 | 39.0 ± 1.4 | +9.0 | -49 ± 0 |" in text
    assert ("uniform: -52.0 after the first minibatch (50 sentences), -53.0 at 51, lowest after it -53.0, -49.0 at "
            "the end.  A drop, as in the paper.") in text
    assert "batch VB 45.0 vs 45.0 (within a point; log probability -45 vs -45)" in text
    assert "Here: not so -- the best minibatch runs end at 39.0, batch VB at 45.0 directed" in text
    assert "## Scale run: more words than CHILDES train" in text and "Fisher-sized" not in text.split("## Scale")[0]
