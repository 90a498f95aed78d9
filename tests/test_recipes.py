"""The recipes (data-recipes/NAME/Makefile, data-recipes/README.md): the quick recipe run for real, twice (the
second run does nothing), into a directory with a space in its name; `make -n` with a launcher prefix on every
grind call; values refused before any work; `make help` of every recipe; the launchers (local.sh, and slurm.sh,
sge.sh, pbs.sh through stand-in sbatch / srun / qsub)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

RECIPES = REPO / "data-recipes"
NAMES = sorted(p.parent.name for p in RECIPES.glob("*/Makefile"))
ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make(recipe, *args, env=None):
    return subprocess.run(["make", "-C", str(RECIPES / recipe), *map(str, args)], capture_output=True, text=True,
                          env=env or ENV)


def grind_lines(text):
    return [ln for ln in text.splitlines() if re.search(r"(^| )grind ", ln)]


# ----------------------------------------------------------------------------------------- the quick recipe
@pytest.mark.slow
def test_quick_runs_resumes_and_writes_its_results(tmp_path):
    out = tmp_path / "my out"                                   # a space in OUT
    r = make("quick", "-j2", f"OUT={out}")
    assert r.returncode == 0, r.stderr
    runs = ["em-i20-random-s1", "em-i20-random-s2", "vb-a0.1-i20-random-s1", "vb-a0.1-i20-random-s2"]
    assert sorted(p.stem for p in out.glob("*.eval")) == runs
    for cell in ("dmv0.txt", "init-random-s1.txt", *(f"{x}.{ext}" for x in runs for ext in ("txt", "conllu"))):
        assert (out / cell).exists(), cell                      # no cell is deleted as an intermediate file
    log = (out / "log" / f"{runs[0]}.txt.log").read_text()
    assert log.startswith("# command: grind train --algo em ") and "# host: " in log and "# start: " in log
    assert re.search(r"# end: .*\n# seconds: [0-9.]+\n# exit: 0\n$", log)
    again = make("quick", "-j2", f"OUT={out}")                  # the second run does nothing
    assert again.returncode == 0 and "Nothing to be done" in again.stdout and not grind_lines(again.stdout)
    assert make("quick", "-q", f"OUT={out}").returncode == 0
    (out / f"{runs[3]}.eval").unlink()                          # an interrupted run: only what is missing
    assert [re.search(r" grind (\S+)", ln)[1] for ln in grind_lines(make("quick", "-n", f"OUT={out}").stdout)] == \
        ["eval"]
    r = make("quick", "results", f"OUT={out}", f"RESULTS={tmp_path / 'R.md'}")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "R.md").read_text()
    assert "`make -C data-recipes/quick results`" in text and "| EM | — | 20 | random | 2 |" in text
    assert re.search(r"\| \*\*attach-right\*\* \(baseline\) \|.*\| 33\.1 / 31\.5 / 31\.3 \|", text)
    # a changed setting makes exactly the cells it names, and RESULTS says the command with it
    n = grind_lines(make("quick", "-n", f"OUT={out}", "ALPHA=0.5").stdout)
    assert len(n) == 6 and all("vb-a0.5-i20-random-s" in ln for ln in n)


def test_quick_make_n_shows_the_launcher_on_every_grind_call_and_writes_nothing(tmp_path):
    r = make("quick", "-n", f"OUT={tmp_path / 'o'}", "CMD=my-launcher --queue q")
    lines = grind_lines(r.stdout)
    assert r.returncode == 0 and len(lines) == 1 + 2 + 4 * 3
    assert all(re.match(r"my-launcher --queue q '[^']*/o/log/[^']+\.log' grind ", ln) for ln in lines), lines
    assert not (tmp_path / "o").exists()
    r = make("quick", "-n", f"OUT={tmp_path / 'o'}", "CMD=")          # no launcher: grind itself
    assert all(ln.startswith("grind ") for ln in grind_lines(r.stdout))


@pytest.mark.parametrize("args,message", [
    (["OUT={tmp}/it's"], "has the character ' in it"),
    (['OUT={tmp}/a"b'], "has the character \" in it"),
    (["OUT={tmp}/a$$b"], "has the character $ in it"),
    (["ALPHA=x"], "ALPHA: 'x' is not a number > 0"),
    (["ALPHA=0"], "ALPHA: '0' is not a number > 0"),
    (["ALPHA=1#x"], "ALPHA: '1#x' is not a number > 0"),
    (["ALPHA=0.1 0.2"], "give one number > 0"),
    (["SEEDS=1 two"], "SEEDS: 'two' is not a whole number >= 0"),
    (["ALGOS=em cvb"], "ALGOS: 'cvb' is not one of: em vb"),
    (["INIT=harmonic random"], "give one of: random harmonic"),
    (["GRIND=no-such-grind"], "no-such-grind not found"),
])
def test_bad_values_are_refused_before_any_work(tmp_path, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = [] if any(a.startswith("OUT=") for a in args) else [f"OUT={tmp_path / 'o'}"]
    r = make("quick", *out, *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not grind_lines(r.stdout) and os.listdir(tmp_path) == []


def test_a_failed_cell_stops_make_with_its_status_and_leaves_no_output(tmp_path):
    r = make("quick", f"OUT={tmp_path / 'o'}", f"GRIND={sys.executable} -m grind.cli --no-such-option")
    assert r.returncode == 2 and "local.sh: exit 2:" in r.stderr and "the end of " in r.stderr
    assert not (tmp_path / "o" / "dmv0.txt").exists()
    assert "# exit: 2" in (tmp_path / "o" / "log" / "dmv0.txt.log").read_text()


def test_out_holding_another_recipe_is_refused_and_clean_removes_only_a_recipe_out(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / ".recipe").write_text("bayes\n")
    r = make("quick", "-n", f"OUT={tmp_path / 'o'}")
    assert r.returncode == 2 and "holds the cells of the recipe 'bayes'" in r.stderr
    r = make("quick", "clean", f"OUT={tmp_path / 'o'}")
    assert r.returncode == 2 and "not removed" in r.stderr and (tmp_path / "o").exists()
    (tmp_path / "o" / ".recipe").write_text("quick\n")
    assert make("quick", "clean", f"OUT={tmp_path / 'o'}").returncode == 0 and not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------- every recipe
@pytest.mark.parametrize("recipe", NAMES)
def test_every_recipe_has_help_readme_and_results(recipe):
    r = make(recipe, "help")
    assert r.returncode == 0, r.stderr
    assert f"data-recipes/{recipe}: " in r.stdout and "Variables (default" in r.stdout
    for var in ("OUT", "CMD", "GRIND", "RESULTS"):
        assert re.search(rf"^  {var} +\S", r.stdout, re.M), var
    assert "default: ../launch/local.sh" in r.stdout
    for f in ("README.md", "RESULTS.md", "results.py"):
        assert (RECIPES / recipe / f).exists(), f
    assert f"[{recipe}/]({recipe}/)" in (RECIPES / "README.md").read_text() or f"`{recipe}/`" in \
        (RECIPES / "README.md").read_text()


@pytest.mark.parametrize("recipe", NAMES)
def test_every_grind_call_of_a_recipe_goes_through_cmd(recipe, tmp_path):
    """make -n with a marked launcher: every line that runs grind starts with it (needs ../shared/data for the
    recipes that read it)."""
    r = make(recipe, "-n", f"OUT={tmp_path / 'o'}", "CMD=LAUNCH", "GRIND=grind")
    if r.returncode and "../shared/data" in r.stderr:
        pytest.skip("needs ../shared/data")
    assert r.returncode == 0, r.stderr
    lines = grind_lines(r.stdout)
    assert (lines or recipe == "ewt-sample") and all(ln.startswith("LAUNCH '") for ln in lines), lines
    assert not [ln for ln in r.stdout.splitlines() if ln.startswith("rm ")]    # no cell deleted as an intermediate
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------- the launchers
LAUNCH = RECIPES / "launch"
STAND_IN = {
    # sbatch: records its options, runs the script on stdin at once, exits with its status (as --wait does)
    "sbatch": 'echo "$@" >> "$STAND_IN_LOG"; s=$(mktemp); cat > "$s"; sh "$s"; rc=$?; rm -f "$s"; echo 42; exit $rc',
    # srun: records its options, runs the command after them
    "srun": 'echo "$@" >> "$STAND_IN_LOG"; while [[ $1 == -* ]]; do shift; done; exec "$@"',
    # qsub (SGE -sync y, PBS -W block=true): records its options, runs the script on stdin, exits with its status
    "qsub": 'echo "$@" >> "$STAND_IN_LOG"; s=$(mktemp); cat > "$s"; (cd / && sh "$s"); rc=$?; rm -f "$s"; exit $rc',
}


@pytest.fixture()
def cluster(tmp_path):
    """PATH with stand-in sbatch, srun and qsub; their options are written to the file returned."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, body in STAND_IN.items():
        (bin_ / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_ / name).chmod(0o755)
    record = tmp_path / "submitted"
    env = dict(ENV, PATH=f"{bin_}{os.pathsep}{ENV['PATH']}", STAND_IN_LOG=str(record))
    return env, record


def test_local_launcher_writes_the_log_and_returns_the_status(tmp_path):
    log = tmp_path / "a dir" / "x.log"
    r = subprocess.run([LAUNCH / "local.sh", log, "sh", "-c", "echo out; echo err >&2; exit 3"],
                       capture_output=True, text=True)
    assert r.returncode == 3 and "local.sh: exit 3:" in r.stderr
    text = log.read_text()
    assert text.startswith("# command: sh -c echo\\ out") and f"# cwd: {os.getcwd()}" in text
    assert "\nout\nerr\n" in text and re.search(r"# seconds: [0-9.]+\n# exit: 3\n$", text)
    assert subprocess.run([LAUNCH / "local.sh", log, "true"]).returncode == 0
    assert subprocess.run([LAUNCH / "local.sh", log]).returncode == 2          # usage


@pytest.mark.parametrize("launcher,submit,expect", [
    ("slurm.sh", "sbatch", "--wait --parsable --output={log}.slurm --job-name=grind-x --partition=short "
                           "--time=1:00:00 --mem=2G --cpus-per-task=2 --account=a"),
    ("slurm.sh", "srun", "--job-name=grind-x --partition=short --time=1:00:00 --mem=2G --cpus-per-task=2 --account=a"),
    ("sge.sh", "", "-sync y -V -S /bin/sh -N grind-x -j y -o {log}.sge -q short -l h_rt=1:00:00 -l h_vmem=2G "
                   "-pe smp 2 --account=a"),
    ("pbs.sh", "", "-W block=true -V -N grind-x -j oe -o {log}.pbs -q short -l walltime=1:00:00 "
                   "-l select=1:ncpus=2:mem=2G --account=a"),
])
def test_cluster_launchers_submit_wait_and_return_the_status(cluster, tmp_path, launcher, submit, expect):
    env, record = cluster
    env = dict(env, JOB_QUEUE="short", JOB_TIME="1:00:00", JOB_MEM="2G", JOB_CPUS="2", JOB_OPTIONS="--account=a",
               JOB_SUBMIT=submit or "sbatch")
    log = tmp_path / "logs" / "x.log"
    for status in (0, 3):
        r = subprocess.run([LAUNCH / launcher, log, "sh", "-c", f"echo 'it ran'; exit {status}"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
        assert r.returncode == status, r.stderr
        text = log.read_text()                         # written by local.sh on the "node", in the submit directory
        assert "it ran" in text and f"# exit: {status}\n" in text and f"# cwd: {tmp_path}\n" in text
    assert record.read_text().splitlines()[0].startswith(expect.format(log=log))


@pytest.mark.slow
def test_sharded_recipe_runs_its_estep_cells_through_slurm(cluster, tmp_path):
    """The sharded recipe with CMD=../launch/slurm.sh: every grind call a job (stand-in sbatch), the E-steps of an
    iteration as separate jobs; the grammar equals grind train's."""
    env, record = cluster
    out = tmp_path / "run dir"
    r = make("sharded", "-j2", f"OUT={out}", "CMD=../launch/slurm.sh", "RUNS=vb:0.5", "SHARDS=2", "ITERATIONS=1",
             "check", "all", env=env)
    assert r.returncode == 0, r.stderr
    jobs = record.read_text().splitlines()
    for step in (0, 1):                                  # VB's initialisation and one iteration: 2 E-step jobs each
        assert sum(bool(re.search(rf"--job-name=grind-c{step}\.[12]\.txt( |$)", j)) for j in jobs) == 2, jobs
    assert all(ln.startswith("../launch/slurm.sh '") for ln in grind_lines(r.stdout))
    got = [ln for ln in (out / "vb-a0.5-k2" / "grammar.txt").read_text().splitlines() if not ln.startswith("#")]
    want = [ln for ln in (out / "vb-a0.5-k2" / "train-i1.txt").read_text().splitlines() if not ln.startswith("#")]
    assert [ln.split(None, 1)[1] for ln in got] == [ln.split(None, 1)[1] for ln in want]
    assert all(abs(float(a.split()[0]) / float(b.split()[0]) - 1) < 1e-12 for a, b in zip(got, want))
