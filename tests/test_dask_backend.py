"""``grind train --cluster``: the E-step's shards as Dask tasks (grind.infer.dask_backend).

The grammar must be the single-process one bit for bit: the same shards of
256 sentences, each computed by the same kernel on a worker, summed on the
client in shard order.  Checked on a real ``LocalCluster`` with 2 worker
processes: ``--cluster local:2`` (the command starts and stops it) for em and
vb, and ``--cluster tcp://...`` (a cluster this module starts) for
stochastic VB, ln --model 2 (also --joint) and --model 1, mixture over ln and vb, --trees and a resume.  The tests
that need Dask skip without it; the option checks run either way.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, grind, sample_dmv
from grind.cli import main
from grind.grammars.grammar import read_grammar

HAVE_DASK = importlib.util.find_spec("distributed") is not None
needs_dask = pytest.mark.skipif(not HAVE_DASK, reason="dask[distributed] is not installed (pip install 'grind[dask]')")
SHORT = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
TREES = """
( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)) )
( (S (NP-SBJ (DT A) (NN cat)) (VP (VBD saw) (NP (DT the) (JJ big) (NN dog))) (. .)) )
( (S (NP-SBJ (PRP It)) (VP (VBD ran) (ADVP (RB away))) (. .)) )
( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD ran) (PP (IN to) (NP (DT the) (NN cat)))) (. .)) )
( (S (NP-SBJ (DT The) (JJ big) (NN cat)) (VP (VBD saw) (NP (PRP it))) (. .)) )
"""


def run(*args) -> tuple[int, str]:
    """grind ARGS in this process: (exit status, stderr)."""
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def same_grammar(a, b):
    """Bit for bit: the same rules with the same float64 weights (headers aside)."""
    ga, gb = read_grammar(str(a)), read_grammar(str(b))
    assert ga.rules == gb.rules
    assert ga.weights.tobytes() == gb.weights.tobytes(), np.max(np.abs(ga.weights - gb.weights))


def objectives(path):
    rows = [ln.rstrip("\n").split("\t") for ln in open(path) if not ln.startswith("#")]
    return [r[rows[0].index("objective")] for r in rows[1:]]          # as written: repr of the float


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return sample_dmv(tmp_path_factory.mktemp("dask"), SHORT)


@pytest.fixture(scope="module")
def scheduler():
    """The address of a LocalCluster with 2 worker processes, for --cluster tcp://..."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


# ----------------------------------------------------------------------------- the acceptance test

@needs_dask
@pytest.mark.parametrize("algo", ["em", "vb"])
def test_local_cluster_gives_the_single_process_grammar_bit_for_bit(sample, algo):
    """em as the command runs (``python -m grind.cli``: the workers are spawned processes), vb in this process."""
    d, train = sample
    base = ["train", "--algo", algo, "--iterations", "3", "--tolerance", "0", *SHORT]
    assert run(*base, "--trace", d / f"{algo}.tsv", "-o", d / f"{algo}.txt", d / "g1.txt", train)[0] == 0
    dask = [*base, "--cluster", "local:2", "--trace", d / f"{algo}-dask.tsv", "-o", d / f"{algo}-dask.txt",
            d / "g1.txt", train]
    code, err = (0, grind(*dask).stderr) if algo == "em" else run(*dask)
    assert code == 0 and "Traceback" not in err, err
    assert "E-step on 2 Dask workers, in shards of 256 sentences (3 for the whole corpus)" in err
    same_grammar(d / f"{algo}.txt", d / f"{algo}-dask.txt")
    assert objectives(d / f"{algo}.tsv") == objectives(d / f"{algo}-dask.tsv")


# ----------------------------------------------------------------------------- the other algorithms, tcp://

@needs_dask
@pytest.mark.parametrize("args", [
    ["--algo", "stochastic", "--batch", "300", "--batch-iterations", "2", "--seed", "4"],
    ["--algo", "ln", "--model", "2", "--iterations", "2", "--ln-cycles", "1"],
    ["--algo", "ln", "--model", "1", "--iterations", "2", "--ln-cycles", "1"],
    ["--algo", "mixture", "--base", "ln", "--iterations", "2", "--ln-cycles", "1", "--constraints", "RA+VAR+SD,LC"],
    ["--algo", "mixture", "--base", "vb", "--iterations", "3"],
], ids=["stochastic", "ln-model-2", "ln-model-1", "mixture-ln", "mixture-vb"])
def test_tcp_cluster_gives_the_single_process_grammar(sample, scheduler, tmp_path, args):
    d, train = sample
    assert run("train", *args, *SHORT, "-o", tmp_path / "one.txt", d / "g1.txt", train)[0] == 0
    code, err = run("train", *args, *SHORT, "--cluster", scheduler, "-o", tmp_path / "dask.txt", d / "g1.txt", train)
    assert code == 0, err
    same_grammar(tmp_path / "one.txt", tmp_path / "dask.txt")


@needs_dask
def test_joint_ln_on_a_cluster(sample, scheduler, tmp_path):
    d, train = sample
    args = ["train", "--algo", "ln", "--model", "2", "--iterations", "1", "--ln-cycles", "1", *SHORT,
            "--joint", d / "g1.txt", train]
    assert run(*args, "--joint-output", tmp_path / "b1.txt", "-o", tmp_path / "a1.txt", d / "g1.txt", train)[0] == 0
    code, err = run(*args, "--cluster", scheduler, "--joint-output", tmp_path / "b2.txt", "-o", tmp_path / "a2.txt",
                    d / "g1.txt", train)
    assert code == 0, err
    same_grammar(tmp_path / "a1.txt", tmp_path / "a2.txt")
    same_grammar(tmp_path / "b1.txt", tmp_path / "b2.txt")


@needs_dask
def test_trees_on_a_cluster(scheduler, tmp_path):
    (tmp_path / "train.mrg").write_text(TREES)
    assert run("make-grammar", "treebank", "--rare", "0", "--subtypes", "2", "--seed", "3", "-o", tmp_path / "g.txt",
               tmp_path / "train.mrg")[0] == 0
    for algo in ("em", "vb"):
        base = ["train", "--trees", "--algo", algo, "--iterations", "4", "--tolerance", "0"]
        assert run(*base, "-o", tmp_path / "one.txt", tmp_path / "g.txt", tmp_path / "train.mrg")[0] == 0
        code, err = run(*base, "--cluster", scheduler, "-o", tmp_path / "dask.txt", tmp_path / "g.txt",
                        tmp_path / "train.mrg")
        assert code == 0, err
        same_grammar(tmp_path / "one.txt", tmp_path / "dask.txt")


@needs_dask
def test_a_cluster_run_resumes_without_the_cluster(sample, scheduler, tmp_path):
    """--cluster does not change the result, so it may differ on --resume."""
    d, train = sample
    base = ["train", "--algo", "vb", "--tolerance", "0", *SHORT]
    assert run(*base, "--iterations", "3", "-o", tmp_path / "one.txt", d / "g1.txt", train)[0] == 0
    code, err = run(*base, "--iterations", "2", "--cluster", scheduler, "--checkpoint", tmp_path / "c.npz",
                    "-o", tmp_path / "half.txt", d / "g1.txt", train)
    assert code == 0, err
    code, err = run(*base, "--iterations", "3", "--resume", "--checkpoint", tmp_path / "c.npz",
                    "-o", tmp_path / "resumed.txt", d / "g1.txt", train)
    assert code == 0, err
    same_grammar(tmp_path / "one.txt", tmp_path / "resumed.txt")


@needs_dask
def test_dask_estep_equals_sharded_estep_on_any_sentences(sample, scheduler):
    """Subsets of sentences (minibatches), unnormalised weights, a lost recipe; the workers' parsers are
    dropped at close."""
    import functools

    import distributed

    from grind.cli.common import load
    from grind.formats.corpus import CorpusSpec
    from grind.infer.dask_backend import DaskEstep, forget
    from grind.infer.training import ShardedEstep
    from grind.kernels.select import make_parser
    d, train = sample
    g, sents, parser = load(str(d / "g1.txt"), train, CorpusSpec(column="UPOS", punct="ud", max_length=10))
    rng = np.random.default_rng(0)
    with distributed.Client(scheduler) as client:
        with DaskEstep(parser, functools.partial(make_parser, g, [s.tokens for s in sents]), client) as est:
            assert est.check() == 2
            local = ShardedEstep(parser)
            for idx in (None, np.arange(5, 600, 3), np.array([7]), np.sort(rng.permutation(len(sents))[:400])):
                w = g.probabilities() * rng.uniform(0.5, 1.0, len(g))
                for a, b in zip(local(w, idx), est(w, idx)):
                    assert a.tobytes() == b.tobytes()
            client.cancel(est._build)                       # as when every worker that held the recipe is gone
            assert est(w)[0].tobytes() == local(w)[0].tobytes()
            key = est.key
        assert not any(client.run(forget, key).values())      # close() dropped them already


SMALL = [["a", "b"], ["b", "a", "a"], ["b"], ["a", "a", "b"]]


@needs_dask
def test_check_refuses_a_worker_parser_with_other_failures(scheduler):
    """The same number of sentences, but one the worker cannot parse (another corpus)."""
    import functools

    import distributed

    from grind.errors import InputError
    from grind.grammars.dmv import dmv_grammar
    from grind.infer.dask_backend import DaskEstep
    from grind.kernels.select import make_parser
    g = dmv_grammar(SMALL)
    other = [list(s) for s in SMALL]
    other[1][1] = "zz"                                  # no such tag: a failure on the worker only
    assert set(make_parser(g, other).failures) == {1}
    with distributed.Client(scheduler) as client:
        with DaskEstep(make_parser(g, SMALL), functools.partial(make_parser, g, SMALL), client) as est:
            assert est.check() == 2
        with DaskEstep(make_parser(g, SMALL), functools.partial(make_parser, g, other), client) as est:
            with pytest.raises(InputError, match="built a parser of 4 sentences \\(1 without a parse\\), this "
                                                 "process's has 4 \\(0\\)"):
                est.check()


@needs_dask
def test_a_workers_grind_error_passes_and_each_estep_has_its_own_task_keys(scheduler, monkeypatch):
    import functools

    import distributed

    from grind.errors import NumericalError
    from grind.grammars.dmv import dmv_grammar
    from grind.infer.dask_backend import DaskEstep
    from grind.kernels.select import make_parser
    g = dmv_grammar(SMALL)
    parser = make_parser(g, SMALL)
    w = g.normalize(np.ones(len(g)))
    from grind.infer.dask_backend import shard_estep
    with distributed.Client(scheduler) as client:
        keys = []
        real = client.submit

        def spy(fn, *args, **kw):
            if fn is shard_estep:
                keys.append(kw["key"])
            return real(fn, *args, **kw)
        monkeypatch.setattr(client, "submit", spy)
        with DaskEstep(parser, functools.partial(make_parser, g, SMALL), client, shard=2) as est:
            a = est(w)
            first = list(keys)
            b = est(w)
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
            assert len(first) == 2 and len(keys) == 4
            assert not set(first) & set(keys[2:])          # a task of an earlier E-step is never reused
            with pytest.raises(NumericalError, match="non-finite"):
                est(np.full(len(g), np.nan))


# ----------------------------------------------------------------------------- a worker lost

def _slow_shard(parser, idx, seconds):
    """An E-step's shard work that takes ``seconds`` (the worker can be taken away meanwhile)."""
    import time
    time.sleep(seconds)
    return len(idx)


def _workers(pid):
    """The process ids of a --cluster local:N run's Dask workers (its spawned children)."""
    out = subprocess.run(["ps", "-ww", "--ppid", str(pid), "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [int(ln.split()[0]) for ln in out.splitlines() if "spawn_main" in ln]


def _train_until(args, step):
    """``grind train ARGS`` in a subprocess, once its stderr has said step ``step``: (process, stderr lines)."""
    import threading
    import time
    p = subprocess.Popen([sys.executable, "-m", "grind.cli", "train", *map(str, args)], stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    lines: list = []
    threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True).start()
    t0 = time.monotonic()
    while not any(f"step {step:4d}" in ln for ln in lines) and p.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    return p, lines


def _stop(p):
    import os
    import signal
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@needs_dask
@pytest.mark.slow
def test_a_worker_killed_mid_run_recovers_with_the_single_process_grammar(sample, tmp_path):
    """SIGKILL of one worker of --cluster local:2 hung 3 runs of 7 and failed one ("Stream is closed"):
    the run finishes with the grammar of a run without a cluster, or stops with a message naming the lost
    worker and --resume -- never a hang (the test fails after 180 s) or another grammar."""
    import os
    import signal
    d, train = sample
    base = ["--algo", "em", "--iterations", "150", "--tolerance", "0", *SHORT]
    assert run("train", *base, "-o", tmp_path / "ref.txt", d / "g1.txt", train)[0] == 0
    p, lines = _train_until([*base, "--cluster", "local:2", "-o", tmp_path / "dask.txt", d / "g1.txt", train], 3)
    try:
        workers = _workers(p.pid)
        assert workers and p.poll() is None, "".join(lines)
        os.kill(workers[0], signal.SIGKILL)
        p.wait(timeout=180)
    finally:
        _stop(p)
    err = "".join(lines)
    assert "Traceback" not in err, err
    if p.returncode == 0:
        same_grammar(tmp_path / "ref.txt", tmp_path / "dask.txt")
    else:
        assert p.returncode == 1 and "lost" in err and "--resume" in err, err


@needs_dask
@pytest.mark.slow
def test_sigterm_stops_a_run_that_lost_a_worker(sample, tmp_path):
    import os
    import signal
    import time
    d, train = sample
    p, lines = _train_until(["--algo", "em", "--iterations", "100000", "--tolerance", "0", *SHORT, "--cluster",
                             "local:2", "-o", tmp_path / "out.txt", d / "g1.txt", train], 2)
    try:
        os.kill(_workers(p.pid)[0], signal.SIGKILL)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    finally:
        _stop(p)
    assert p.returncode == 143 and "grind: terminated" in "".join(lines) and not (tmp_path / "out.txt").exists()


@needs_dask
def test_an_estep_whose_workers_are_gone_stops_in_bounded_time_naming_them(monkeypatch):
    """No worker left (batch jobs ended, none replaced): the E-step waited forever; now, once a worker was
    lost and no shard finished for GRIND_DASK_PATIENCE seconds, an InputError names it and --resume."""
    import functools
    import threading

    import distributed

    from grind.errors import InputError
    from grind.grammars.dmv import dmv_grammar
    from grind.infer.dask_backend import DaskEstep
    from grind.kernels.select import make_parser
    monkeypatch.setenv("GRIND_DASK_PATIENCE", "2")
    g = dmv_grammar(SMALL)
    got: list = []
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        est = DaskEstep(make_parser(g, SMALL), functools.partial(make_parser, g, SMALL), client, shard=1)
        lost = list(client.nthreads())[0]

        def estep():
            try:
                got.append(est.map_shards(_slow_shard, 3.0))
            except Exception as e:
                got.append(e)

        t = threading.Thread(target=estep, daemon=True)
        t.start()
        threading.Timer(1.0, lambda: cluster.scale(0)).start()
        t.join(60)
        assert not t.is_alive(), "the E-step still waits for a cluster without workers"
    assert isinstance(got[0], InputError), got
    assert lost in str(got[0]) and "--resume" in str(got[0])


# ----------------------------------------------------------------------------- what --cluster refuses (no Dask needed)

@pytest.mark.parametrize("args, message", [
    (["--algo", "cvb"], "not --algo cvb: its E-step updates one sentence at a time"),
    (["--algo", "gibbs"], "not --algo gibbs"),
    (["--algo", "hastings"], "not --algo hastings"),
    (["--algo", "streaming"], "not --algo streaming"),
    (["--algo", "mixture", "--ln-warm"], "--cluster runs mixture over ln --model 1 with cold starts"),
    (["--algo", "ln", "--ln-warm"], "--cluster runs ln --model 1 with cold starts and the plain M-step: --ln-warm"),
    (["--algo", "ln", "--ln-mstep", "newton"], "plain M-step: --ln-mstep newton keeps every sentence's posterior"),
    (["--jobs", "2"], "leave out --jobs"),
])
def test_cluster_refuses_what_it_cannot_run(sample, args, message):
    d, train = sample
    code, err = run("train", *args, *SHORT, "--cluster", "local:2", d / "g1.txt", train)
    assert code == 2 and message in err, err


@pytest.mark.parametrize("spec", ["local:0", "local:x", "local:", "tcp://nohost", "localhost:8786", "2", ""])
def test_bad_cluster_address_is_a_usage_error(sample, spec):
    d, train = sample
    code, err = run("train", *SHORT, "--cluster", spec, d / "g1.txt", train)
    assert code == 2 and "--cluster" in err and "Traceback" not in err, err


def test_without_dask_cluster_is_a_one_line_error(sample, monkeypatch):
    d, train = sample
    monkeypatch.setitem(sys.modules, "distributed", None)            # import distributed -> ImportError
    code, err = run("train", *SHORT, "--cluster", "local:2", d / "g1.txt", train)
    assert code == 1 and err == "grind: error: --cluster needs Dask: pip install 'grind[dask]'\n", err


@pytest.mark.slow
def test_dask_is_imported_only_for_cluster(sample):
    d, train = sample
    code = ("import sys; from grind.cli.main import main\n"
            f"try: main(['train', '--iterations', '1', *{SHORT!r}, '-o', {str(d / 'x.txt')!r}, "
            f"{str(d / 'g1.txt')!r}, {train!r}])\n"
            "except SystemExit as e: assert not e.code, e.code\n"
            "print(sorted(m for m in ('dask', 'distributed') if sys.modules.get(m) is not None))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and r.stdout == "[]\n", r.stderr


def test_help_documents_cluster():
    """--help has the one line; the set-up (dask-jobqueue, the extra) moved to the reference page."""
    r = grind("train", "--help")
    text = " ".join(r.stdout.split())
    assert "--cluster ADDRESS E-step on Dask: local:N or tcp://HOST:PORT." in text
    page = " ".join(open(os.path.join(REPO, "docs", "reference", "train.md"), encoding="utf-8").read().split())
    assert "`--cluster ADDRESS`" in page and "dask-jobqueue" in page and "grind[dask]" in page
    assert "GRIND_DASK_PATIENCE seconds (default 60)" in page.replace("\\_", "_")
    from grind.infer.dask_backend import LOST_WORKER_PATIENCE
    assert LOST_WORKER_PATIENCE == 60


@needs_dask
def test_ctrl_c_on_a_local_cluster_run_is_one_line_not_every_workers_traceback(sample):
    """Ctrl-C (SIGINT to the terminal's process group) on --cluster local:2 printed dozens of
    tracebacks (every worker's KeyboardInterrupt, the client's cancelled futures) around
    'grind: interrupted'; the workers now ignore SIGINT and the grind process shuts them down."""
    import os
    import signal
    d, train = sample
    p = subprocess.Popen([sys.executable, "-m", "grind.cli", "train", "--algo", "vb", "--iterations", "100000",
                          "--tolerance", "0", *SHORT, "--cluster", "local:2", "-o", str(d / "int.txt"),
                          str(d / "g1.txt"), train], stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in p.stderr:
        lines.append(line)
        if "step    2" in line:
            break
    os.killpg(p.pid, signal.SIGINT)
    lines += p.stderr.read().splitlines(keepends=True)
    p.wait(timeout=60)
    err = "".join(lines)
    assert "grind: interrupted" in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err
