"""data-recipes/words-alone: the Makefile's help and dry run (every grind call through CMD, one cell a run),
the seeded shuffle, and RESULTS.md made from traces."""
import shutil
import subprocess
import sys

import pytest

from conftest import SHARED, shared_path



@pytest.fixture
def recipe():
    from pathlib import Path
    return Path(__file__).resolve().parent.parent / "data-recipes" / "words-alone"


def make(recipe, *args):
    if shutil.which("make") is None:
        pytest.skip("no make")
    return subprocess.run(["make", "-C", str(recipe), "--no-print-directory", *args], capture_output=True, text=True)


def test_help_lists_the_settings_and_defaults(recipe):
    r = make(recipe, "help")
    assert r.returncode == 0, r.stderr
    for var, default in (("SHUFFLES", "1 2 3 4 5"), ("KAPPA", "0.9"), ("FIRST", "10000"), ("TOL", "1e-5")):
        line = next(ln for ln in r.stdout.splitlines() if ln.split()[:1] == [var])
        assert default in line


def test_dry_run_makes_one_cell_a_run_each_grind_call_through_cmd(recipe, tmp_path):
    shared_path("UD_English-CHILDES", "en_childes-derived-train.conllu.xz")
    shared_path("UD_English-EWT", "en_ewt-ud-train.conllu.xz")
    r = make(recipe, "-n", f"OUT={tmp_path}/out", f"DATA={SHARED}", "CMD=LAUNCH", "all")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    calls = [ln for ln in lines if " grind " in f" {ln} " and "-m grind.bench" not in ln]
    assert calls and all(ln.startswith("LAUNCH ") for ln in calls)
    trains = [ln for ln in lines if "grind train" in ln]
    assert len(trains) == 4 * 2 * 5 + 3 * 2 * 5                    # the grid, the scale run
    assert sum("--algo cvb" in ln and "--cvb-init random" in ln for ln in trains) == 5
    assert all("--eval-at log:10" in ln and "--alpha 1 " in ln for ln in trains)
    streaming = [ln for ln in trains if "--algo streaming" in ln]
    assert all("--first-batch 10000 --batch 1 --batch-iterations 1" in ln for ln in streaming)
    r = make(recipe, "-n", f"OUT={tmp_path}/out", f"DATA={SHARED}", "KAPPA=0.7", "runs")
    assert "kappa0.7" in r.stdout and "kappa0.9" not in r.stdout           # a setting is in its cells' names


CONLL = "".join(f"# sent_id = {g}-{k}\n1\tw{k}\tw{k}\tX\tX\t_\t0\troot\t_\t_\n\n"
                for k, g in enumerate(["email", "weblog", "answers", "reviews", "email", "weblog"]))


def test_shuffle_is_seeded_and_keeps_genres(recipe, tmp_path):
    src = tmp_path / "a.conllu"
    src.write_text(CONLL)

    def run(*args):
        out = tmp_path / "o.conllu"
        subprocess.run([sys.executable, str(recipe / "shuffle.py"), *args, "-o", str(out), str(src)], check=True)
        return [ln for ln in out.read_text().splitlines() if ln.startswith("# sent_id")]
    assert run() == [ln for ln in CONLL.splitlines() if ln.startswith("# sent_id")]
    assert run("--seed", "3") == run("--seed", "3") != run("--seed", "4")
    assert sorted(run("--seed", "3")) == sorted(run())
    assert run("--genres", "email,answers") == ["# sent_id = email-0", "# sent_id = answers-2", "# sent_id = email-4"]


def trace(path, rows):
    head = "step\tobjective\tsentences\tseconds\tdev_directed\tdev_logprob\n"
    path.write_text("# grind\n" + head + "".join(f"{k}\t-1.0\t{x}\t0.1\t{d}\t{lp}\n" if d is not None else
                                                 f"{k}\t-1.0\t{x}\t0.1\t\t\n"
                                                 for k, (x, d, lp) in enumerate(rows, 1)))


def test_results_page_from_traces(recipe, tmp_path):
    base = tmp_path / "baselines.tsv"
    base.write_text("subset\tsentences\twords\tdirected\n"
                    "attach-right:all\t5\t20\t0.300000\t0.4\nattach-left:all\t5\t20\t0.100000\t0.4\n")
    runs = []
    for s, bump in ((1, 0.0), (2, 0.02)):
        for algo, rows in (("vb", [(100, 0.40, -50.0), (200, None, None), (300, 0.44 + bump, -45.0)]),
                           ("streaming", [(50, 0.35, -52.0), (51, 0.34, -53.0), (100, 0.38 + bump, -49.0)])):
            for init in ("harmonic", "uniform"):
                p = tmp_path / f"{algo}-x-ev10-{init}-s{s}.tsv"
                trace(p, rows)
                runs.append(str(p))
    r = subprocess.run([sys.executable, str(recipe / "results.py"), "--baselines", str(base), "--first", "50",
                        *runs], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "attach-right (each word's head is its right neighbour: the left-branching tree) **30.0**" in out
    assert "## At one pass over the training data (100 sentences parsed)" in out
    assert "| batch VB | harmonic | 300 | 45.0 ± 1.4 | +15.0 | -45 ± 0 |" in out
    assert "| streaming VB | uniform | 100 | 39.0 ± 1.4 | +9.0 | -49 ± 0 |" in out
    assert ("uniform: -52.0 after the first minibatch (50 sentences), -53.0 at 51, lowest after it -53.0, -49.0 at "
            "the end.  A drop, as in the paper.") in out
    assert "batch VB 45.0 vs 45.0 (within a point; log probability -45 vs -45)" in out
    assert "Here: not so -- the best minibatch run ends at 39.0, batch VB at 45.0 directed" in out
