"""Full disks for every kind of output grind writes: grammars, traces, checkpoints, shards, count files,
parses, log-likelihoods, plots.  ``/dev/full`` as the output, and a disk that fills while a file is
written (a file-size limit, ``ulimit -f``: the write fails as on a full disk, with EFBIG).  Each case: exit
1 with one line naming the file, the previous content of every output of the command kept (a group --
train's -o and --trace, split's shards -- replaced all or none), no temporary file left.  Also: the sharded
recipe interrupted and run again gives the grammar an uninterrupted run gives (iterations never mix)."""
import importlib.util
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLE, grind

#: A and B differ (grind train refuses a symmetric start, whose two nonterminals EM never tells apart).
GRAMMAR = "0.5 S --> A B\n0.5 S --> B A\n0.75 A --> a\n0.25 A --> b\n0.25 B --> a\n0.75 B --> b\n"
HAVE_PLOT = importlib.util.find_spec("matplotlib") is not None

#: Output kind -> the command writing it to OUT (run in a directory holding g.txt, c.txt, k.txt, t0.tsv).
KINDS = {
    "grammar (init)": ["init", "--random", "--seed", "1", "-o", "OUT", "g.txt"],
    "grammar (train)": ["train", "--iterations", "2", "-o", "OUT", "g.txt", "c.txt"],
    "grammar (mstep)": ["mstep", "-o", "OUT", "k.txt"],
    "grammar (make-grammar)": ["make-grammar", "dmv", "-o", "OUT", "c.txt"],
    "trace": ["train", "--iterations", "2", "--trace", "OUT", "-o", "other.txt", "g.txt", "c.txt"],
    "checkpoint": ["train", "--iterations", "2", "--checkpoint", "OUT", "-o", "other.txt", "g.txt", "c.txt"],
    "counts (estep)": ["estep", "-o", "OUT", "g.txt", "c.txt"],
    "counts (sum)": ["sum", "-o", "OUT", "k.txt", "k.txt"],
    "parses": ["parse", "-o", "OUT", "g.txt", "c.txt"],
    "loglik": ["loglik", "-o", "OUT", "g.txt", "c.txt"],
    "plot": ["plot", "-o", "OUT", "t0.tsv"],
}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    (d / "g.txt").write_text(GRAMMAR)
    (d / "c.txt").write_text("a b\nb a\na b\nb a\n" * 100)
    grind("estep", "-o", d / "k.txt", d / "g.txt", d / "c.txt")
    grind("train", "--iterations", "2", "--trace", d / "t0.tsv", "-o", d / "g0.txt", d / "g.txt", d / "c.txt")
    return d


def args_for(kind, out):
    if kind == "plot" and not HAVE_PLOT:
        pytest.skip("matplotlib is not installed (pip install 'grind[plot]')")
    return [out if a == "OUT" else a for a in KINDS[kind]]


def one_line(r, *needles):
    assert r.returncode == 1, (r.returncode, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("grind: error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in errors[0], (n, r.stderr)


def in_process(args, cwd, capsys):
    """grind ARGS run in this process (fast) in directory ``cwd``: a CompletedProcess-like result."""
    import types

    from grind.cli import main
    here = os.getcwd()
    os.chdir(cwd)
    try:
        main(list(map(str, args)))
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        os.chdir(here)
    return types.SimpleNamespace(returncode=code, stderr=capsys.readouterr().err)


@pytest.mark.parametrize("kind", list(KINDS))
def test_dev_full_as_the_output(work, kind, capsys):
    r = in_process(args_for(kind, "/dev/full"), work, capsys)
    if kind == "checkpoint":        # written again and again, and read back: a regular file only, refused at once
        one_line(r, "--checkpoint /dev/full", "not a regular file")
    else:
        one_line(r, "cannot write /dev/full: No space left on device")


def grind_filling(limit, *args, cwd):
    """grind ARGS where a file cannot grow past ``limit`` bytes: a write beyond it fails with EFBIG, as on a
    disk that is full (SIGXFSZ ignored, as a disk full sends no signal)."""
    def fill():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, "-m", "grind.cli", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=fill, cwd=cwd, timeout=120)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_disk_that_fills_keeps_the_previous_outputs(work, tmp_path, kind):
    for name in ("g.txt", "c.txt", "k.txt", "t0.tsv"):
        shutil.copy(work / name, tmp_path / name)
    args = args_for(kind, "out")
    for name in ("out", "other.txt"):
        (tmp_path / name).write_text("previous\n")
    r = grind_filling(300, *args, cwd=tmp_path)
    one_line(r, "cannot write", "File too large")
    assert (tmp_path / "out").read_text() == "previous\n" and (tmp_path / "other.txt").read_text() == "previous\n"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".grind-")]


def test_a_disk_that_fills_while_split_writes_keeps_every_previous_shard(work, tmp_path):
    shutil.copy(work / "c.txt", tmp_path / "c.txt")
    for i in (1, 2, 3):
        (tmp_path / f"s.{i}.txt").write_text(f"previous {i}\n")
    r = grind_filling(300, "split", "-n", "3", "-o", "s", "c.txt", cwd=tmp_path)
    one_line(r, "cannot write s.", "File too large")
    assert [(tmp_path / f"s.{i}.txt").read_text() for i in (1, 2, 3)] == [f"previous {i}\n" for i in (1, 2, 3)]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".grind-")]


def test_stdout_to_a_full_disk(work):
    for kind in ("counts (estep)", "parses"):
        args = [a for a in args_for(kind, "-") if a not in ("-o", "-")]
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "grind.cli", *args], stdout=full, stderr=subprocess.PIPE,
                               text=True, cwd=work)
        one_line(r, "cannot write <stdout>: No space left on device")


# ----------------------------------------------------------------------------- sharded runs interrupted

@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_sharded_recipe_killed_and_run_again_gives_the_uninterrupted_grammar(tmp_path):
    """The sharded recipe (data-recipes/sharded) killed in its second iteration (grind SIGKILLed while it
    writes a shard's counts, make stopped), then run again: its grammar is grind train's, within 1e-12 (no
    count file of one iteration is summed with another's, no half-written file is read)."""
    train = SAMPLE / "en_ewt-ud-train-sample.conllu.gz"
    opts = ["--column", "UPOS", "--punct", "ud", "--max-length", "8"]
    grind("make-grammar", "dmv", *opts, "-o", tmp_path / "g0.txt", train)
    grind("init", "--harmonic", "--corpus", train, *opts, "-o", tmp_path / "g1.txt", tmp_path / "g0.txt")
    killer = tmp_path / "grind-killed-once"
    killer.write_text(f"""#!/usr/bin/env bash
# grind, but the estep that writes iteration 2's counts of shard 2 is killed (once) while it runs
if [[ " $* " == *"c2.2.txt"* && ! -e {tmp_path}/killed ]]; then
    touch {tmp_path}/killed
    {sys.executable} -m grind.cli "$@" & pid=$!
    sleep 0.3; kill -9 $pid; wait $pid; exit 137
fi
exec {sys.executable} -m grind.cli "$@"
""")
    killer.chmod(0o755)

    def make():
        return subprocess.run(["make", "-j2", "-C", str(REPO / "data-recipes" / "sharded"), f"GRIND={killer}", "CMD=",
                               f"GRAMMAR={tmp_path / 'g1.txt'}", f"CORPUS={train}", "SHARDS=2", "ITERATIONS=3",
                               "RUNS=em", f"CORPUS_OPTIONS={' '.join(opts)}", f"OUT={tmp_path / 'run'}"],
                              capture_output=True, text=True, timeout=600)
    first = make()
    assert first.returncode != 0 and (tmp_path / "killed").exists(), first.stderr
    assert not [p for p in os.listdir(tmp_path / "run" / "em-k2" / "counts") if p.startswith(".grind-")]
    again = make()
    assert again.returncode == 0, again.stderr
    grind("train", "--algo", "em", "--iterations", "3", "--tolerance", "0", *opts, "-o", tmp_path / "want.txt",
          tmp_path / "g1.txt", train)
    import numpy as np

    from grind.grammars.grammar import read_grammar
    got = read_grammar(str(tmp_path / "run" / "em-k2" / "grammar.txt"))
    want = read_grammar(str(tmp_path / "want.txt"))
    assert got.rules == want.rules
    np.testing.assert_allclose(got.weights, want.weights, rtol=1e-12, atol=0)
