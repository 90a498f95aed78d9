"""Issue 11: no lost run, no silently changed run.

A ``grind train`` run killed anywhere (between steps, between a checkpoint's
temporary write and its rename, by a real SIGKILL) and resumed ends with an
output byte-identical to the uninterrupted run's (except the ``# command:``
header line, which names --resume); no output file is ever half-written and
the checkpoint always loads.  --resume with a changed option is an error
naming it; a corrupt checkpoint is an error saying so.  Streaming / batch VB
at a tiny alpha never skips a sentence silently.

Kills are injected in-process (an exception no handler catches, raised at the
k-th call of the algorithm's ``step`` or of ``os.replace``), the kill points
drawn from a seeded generator; two real SIGKILLs of a subprocess.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import grind.formats.textio
from grind.cli import ALGORITHMS, main
from grind.infer.training import _read_checkpoint

VOCAB = ["a", "b", "c"]


class Kill(BaseException):
    """Stands for SIGKILL: nothing in grind catches it."""


def run(*args):
    """``grind ARGS`` in-process; the exit status."""
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        return e.code or 0
    return 0


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("faults")
    rng = np.random.default_rng(11)
    sents = [" ".join(rng.choice(VOCAB, size=rng.integers(1, 5))) for _ in range(16)]
    (d / "c.txt").write_text("".join(s + "\n" for s in sents))
    assert run("make-grammar", "dmv", "-o", d / "g0.txt", d / "c.txt") == 0
    assert run("init", "--random", "--seed", "2", "-o", d / "g1.txt", d / "g0.txt") == 0
    return d


#: Per algorithm: options giving 4 short steps on the 16-sentence corpus.
ARGS = {
    "em": [], "vb": [], "cvb": [], "gibbs": [], "ln": [], "mixture": [],
    "hastings": ["--temp-start", "2"],
    "streaming": ["--batch", "4", "--batch-iterations", "2"],
    "stochastic": ["--batch", "4", "--batch-iterations", "2", "--epochs", "1"],
}
assert set(ARGS) == set(ALGORITHMS)


def read_by(algo, *pairs) -> list:
    """The (option, value) pairs that --algo ALGO reads (the others are usage errors), flattened."""
    from grind.infer.registry import UNREAD
    unread = set(UNREAD.get(algo, {})) | ({"alpha"} if algo == "mixture" else set())   # mixture over ln
    return [x for opt, v in pairs if opt[2:] not in unread for x in (opt, v)]


def args_of(d, algo, out, ck, *more):
    return ["train", "--algo", algo, *read_by(algo, ("--alpha", "0.5"), ("--iterations", "4"), ("--tolerance", "0")),
            "--seed", "7", *ARGS[algo], "--checkpoint", ck, "--checkpoint-every", "1", *more, "-o", out,
            d / "g1.txt", d / "c.txt"]


def comparable(path):
    """The output file without its ``# command:`` line (the only one --resume changes)."""
    return [ln for ln in open(path, "rb").read().splitlines() if not ln.startswith(b"# command:")]


_reference = {}


def reference(d, algo):
    if algo not in _reference:
        out = d / f"ref-{algo}.txt"
        assert run(*args_of(d, algo, out, d / f"ref-{algo}.npz")) == 0
        _reference[algo] = comparable(out)
    return _reference[algo]


def kill_at(monkeypatch, obj, name, k, when=lambda *a: True):
    """Make ``obj.name`` raise Kill at its k-th call (counting calls where ``when``)."""
    real, calls = getattr(obj, name), [0]

    def wrapper(*a, **kw):
        if when(*a):
            calls[0] += 1
            if calls[0] == k:
                raise Kill
        return real(*a, **kw)
    monkeypatch.setattr(obj, name, wrapper)


def algo_class(algo):
    from grind.infer.registry import ALGORITHMS as classes
    return classes[algo]


def check_resume(d, algo, tag, ck, out):
    """After a kill: -o absent, the checkpoint (if any) loads; --resume ends bit-identical."""
    assert not out.exists(), "the output was written before the run ended"
    assert not [f for f in os.listdir(d) if f.startswith(".grind-")], "a temporary file was left"
    if ck.exists():
        _read_checkpoint(str(ck))
    resume = ["--resume"] if ck.exists() else []
    assert run(*args_of(d, algo, out, ck), *resume) == 0
    assert comparable(out) == reference(d, algo), f"{algo} {tag}: resumed output differs"


# Seeded kill points: 2 per algorithm between steps (18), and 4 within a
# checkpoint write (between the temporary file and the rename).
_rng = np.random.default_rng(20240611)
STEP_KILLS = [(a, int(k)) for a in ARGS for k in _rng.choice(np.arange(1, 5), size=2, replace=False)]
WRITE_KILLS = [(a, int(_rng.integers(2, 5))) for a in ("vb", "gibbs", "streaming", "ln")]


@pytest.mark.parametrize("algo,k", STEP_KILLS)
def test_killed_between_steps_resumes_bit_identical(data, monkeypatch, algo, k):
    d = data
    ck, out = d / f"s-{algo}-{k}.npz", d / f"s-{algo}-{k}.txt"
    with monkeypatch.context() as m:
        kill_at(m, algo_class(algo), "step", k)
        with pytest.raises(Kill):
            run(*args_of(d, algo, out, ck))
    check_resume(d, algo, f"killed at step call {k}", ck, out)


@pytest.mark.parametrize("algo,k", WRITE_KILLS)
def test_killed_between_checkpoint_write_and_rename(data, monkeypatch, algo, k):
    d = data
    ck, out = d / f"w-{algo}-{k}.npz", d / f"w-{algo}-{k}.txt"
    with monkeypatch.context() as m:
        kill_at(m, grind.formats.textio.os, "replace", k, when=lambda src, dst, *a: str(dst).endswith(".npz"))
        with pytest.raises(Kill):
            run(*args_of(d, algo, out, ck))
    header, _ = _read_checkpoint(str(ck))           # the previous checkpoint is intact
    assert len(header["trace"]) == k - 1
    check_resume(d, algo, f"killed in checkpoint write {k}", ck, out)


def test_killed_while_writing_the_output(data, monkeypatch):
    """A kill between the output's temporary file and its rename leaves no -o
    file; the final checkpoint is complete and --resume writes the output."""
    d = data
    ck, out = d / "o-vb.npz", d / "o-vb.txt"
    with monkeypatch.context() as m:
        kill_at(m, grind.formats.textio.os, "replace", 1, when=lambda src, dst, *a: str(dst).endswith(".txt"))
        with pytest.raises(Kill):
            run(*args_of(d, "vb", out, ck))
    check_resume(d, "vb", "killed writing -o", ck, out)


@pytest.mark.parametrize("algo,delay", [("vb", 0.0), ("gibbs", 0.0)])
def test_real_sigkill(data, algo, delay):
    """SIGKILL a subprocess once its first checkpoint exists (+ a fixed delay)."""
    d = data
    ck, out = d / f"k-{algo}.npz", d / f"k-{algo}.txt"
    args = [str(a) for a in args_of(d, algo, out, ck)]
    p = subprocess.Popen([sys.executable, "-m", "grind.cli", "-q", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = time.monotonic()
    while not ck.exists() and p.poll() is None and time.monotonic() - t < 30:
        time.sleep(0.01)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()
    print(f"SIGKILL after {len(_read_checkpoint(str(ck))[0]['trace'])} checkpointed steps; finished: {out.exists()}")
    if out.exists():            # finished before the kill: complete, and resume must agree
        assert comparable(out) == reference(d, algo)
        out.unlink()
    for f in os.listdir(d):     # a real kill leaves the temporary file of an unfinished write
        if f.startswith(".grind-"):
            os.unlink(d / f)
    check_resume(d, algo, "SIGKILL", ck, out)


# ----------------------------------------------------------------------------- --early-stop

#: A held-out corpus unlike the training one: with --alpha 0.5 --seed 7 its log
#: probability rises, then falls at step 4 (em), 6 (gibbs, stochastic).
DEV = ["c b a", "c c a", "b a", "a a a b", "c"]
EARLY = {"em": [], "gibbs": [], "stochastic": ["--batch", "4", "--batch-iterations", "2", "--epochs", "3"]}


def early_args(d, algo, out, tr, ck):
    dev = d / "dev.txt"
    if not dev.exists():
        dev.write_text("".join(s + "\n" for s in DEV))
    return ["train", "--algo", algo, *read_by(algo, ("--alpha", "0.5"), ("--iterations", "10"), ("--tolerance", "0")),
            "--seed", "7", *EARLY[algo], "--dev", dev, "--eval-every", "1", "--early-stop",
            "--checkpoint", ck, "--checkpoint-every", "1", "--trace", tr, "-o", out, d / "g1.txt", d / "c.txt"]


@pytest.fixture
def frozen_clock(monkeypatch):
    """The trace's wall-time column, 0.000 throughout, so traces compare byte for byte."""
    import types
    import grind.infer.training
    monkeypatch.setattr(grind.infer.training, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))


_early_reference = {}


def early_reference(d, algo):
    if algo not in _early_reference:
        out, tr = d / f"eref-{algo}.txt", d / f"eref-{algo}.tsv"
        assert run(*early_args(d, algo, out, tr, d / f"eref-{algo}.npz")) == 0
        rows = [ln.split(b"\t") for ln in comparable(tr) if not ln.startswith(b"#")]
        assert b"stopped" in rows[0] and rows[-1][rows[0].index(b"stopped")], f"{algo}: no early stop"
        _early_reference[algo] = comparable(out), comparable(tr), len(rows) - 1
    return _early_reference[algo]


# Kill points: early, and at the call of the step whose held-out figure falls
# (a resume that forgot the previous evaluation would run past it).
EARLY_KILLS = [("em", 1), ("em", 3), ("em", 4), ("gibbs", 2), ("gibbs", 5), ("gibbs", 6),
               ("stochastic", 4), ("stochastic", 6)]


@pytest.mark.parametrize("algo,k", EARLY_KILLS)
def test_early_stop_killed_and_resumed_is_bit_identical(data, monkeypatch, frozen_clock, algo, k):
    """The held-out best of an --early-stop run is in the checkpoint: resumed,
    it stops where the uninterrupted run did, with the same grammar and trace."""
    d = data
    ref_out, ref_trace, steps = early_reference(d, algo)
    assert 1 <= k <= steps
    ck, out, tr = d / f"e-{algo}-{k}.npz", d / f"e-{algo}-{k}.txt", d / f"e-{algo}-{k}.tsv"
    with monkeypatch.context() as m:
        kill_at(m, algo_class(algo), "step", k)
        with pytest.raises(Kill):
            run(*early_args(d, algo, out, tr, ck))
    assert not out.exists() and not tr.exists()
    if k > 1:
        header, arrays = _read_checkpoint(str(ck))
        assert len(header["trace"]) == k - 1
        assert header["best"]["dev_logprob"] == header["trace"][-1][4]["dev_logprob"]
        assert any(a.startswith("best:") for a in arrays)
    resume = ["--resume"] if ck.exists() else []
    assert run(*early_args(d, algo, out, tr, ck), *resume) == 0
    assert comparable(out) == ref_out, f"{algo} killed at step call {k}: resumed grammar differs"
    assert comparable(tr) == ref_trace, f"{algo} killed at step call {k}: resumed trace differs"


def test_early_stop_checkpoint_without_best_still_loads(data, monkeypatch, frozen_clock, tmp_path):
    """A checkpoint without the held-out best (an older grind's) resumes as before."""
    import io
    import json
    import zipfile
    d = data
    ck, out, tr = tmp_path / "ck.npz", tmp_path / "o.txt", tmp_path / "t.tsv"
    with monkeypatch.context() as m:
        kill_at(m, algo_class("em"), "step", 3)
        with pytest.raises(Kill):
            run(*early_args(d, "em", out, tr, ck))
    with zipfile.ZipFile(ck) as z:
        files = {n: z.read(n) for n in z.namelist()}
    header = json.loads(str(np.load(io.BytesIO(files["__header__.npy"]))))
    del header["best"]
    arrays = {n[:-4]: np.load(io.BytesIO(b)) for n, b in files.items()
              if n != "__header__.npy" and not n.startswith("best:")}
    np.savez(ck, __header__=np.array(json.dumps(header)), **arrays)
    assert run(*early_args(d, "em", out, tr, ck), "--resume") == 0
    assert out.exists()


# ----------------------------------------------------------------------------- changed options

def test_resume_with_a_changed_option_is_an_error(data, tmp_path, capsys):
    d = data
    ck, out = tmp_path / "ck.npz", tmp_path / "o.txt"
    base = args_of(d, "vb", out, ck)
    short = list(base)
    short[short.index("--iterations") + 1] = "2"
    assert run(*short) == 0
    capsys.readouterr()
    before = out.read_bytes()
    import json
    with np.load(ck) as z:                  # the checkpoint names what made it, as every output's header does
        made_by = json.loads(str(z["__header__"]))["made_by"]
    assert made_by[0].startswith("# grind ") and made_by[1].startswith("# command: grind train")
    for change, what, old, new in [
            (["--alpha", "0.25"], "--alpha", "'0.5'", "'0.25'"),
            (["--seed", "8"], "--seed", "7", "8"),
            (["--kernel", "cky"], "--kernel", "'auto'", "'cky'"),
            (["--max-length", "3"], "--max-length", "the default", "3")]:
        a = list(base)
        i = a.index(change[0]) if change[0] in a else len(a) - 2
        a[i:i + (2 if change[0] in a else 0)] = change
        assert run(*a, "--resume") == 1
        err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
        assert len(err) == 1 and what in err[0] and old in err[0] and new in err[0], err
        assert out.read_bytes() == before
    # allowed to change: --iterations, --jobs, --trace
    assert run(*base, "--resume", "--jobs", "2", "--trace", tmp_path / "t.tsv") == 0


def test_changed_files_are_caught_by_content(data, tmp_path, capsys):
    d = data
    corpus, prior = tmp_path / "c.txt", tmp_path / "prior.txt"
    corpus.write_text((d / "c.txt").read_text())
    prior.write_text((d / "g1.txt").read_text())
    ck, out = tmp_path / "ck.npz", tmp_path / "o.txt"
    a = ["train", "--algo", "vb", "--iterations", "2", "--alpha", prior, "--checkpoint", ck, "-o", out,
         d / "g1.txt", corpus]
    assert run(*a) == 0
    capsys.readouterr()
    lines = prior.read_text().splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
    lines[i] = "0.123 " + lines[i].split(None, 1)[1]
    prior.write_text("".join(lines))
    assert run(*a, "--resume") == 1
    assert "--alpha" in capsys.readouterr().err
    prior.write_text((d / "g1.txt").read_text())
    corpus.write_text((d / "c.txt").read_text() + "a b\n")
    assert run(*a, "--resume") == 1
    assert "corpus" in capsys.readouterr().err
    corpus.write_text((d / "c.txt").read_text())
    assert run(*a, "--resume") == 0


def test_corrupt_and_old_checkpoints(data, tmp_path, capsys):
    d = data
    ck, out = tmp_path / "ck.npz", tmp_path / "o.txt"
    a = ["train", "--algo", "em", "--iterations", "2", "--checkpoint", ck, "-o", out, d / "g1.txt", d / "c.txt"]
    assert run(*a) == 0
    good = ck.read_bytes()
    for bad in (good[:len(good) // 2], good[:10], b"", b"not a checkpoint\n"):
        ck.write_bytes(bad)
        capsys.readouterr()
        assert run(*a, "--resume") == 1
        err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
        assert len(err) == 1 and "not a grind checkpoint (truncated or corrupt)" in err[0], err
    np.save(ck, np.zeros(3))           # a .npy, not an .npz (np.save keeps the given name)
    assert run(*a, "--resume") == 1
    # an older grind's checkpoint: meta without the options -> accepted with a warning
    import json
    import zipfile
    ck.write_bytes(good)
    with zipfile.ZipFile(ck) as z:
        files = {n: z.read(n) for n in z.namelist()}
    import io
    header = json.loads(str(np.load(io.BytesIO(files["__header__.npy"]))))
    header["meta"] = {k: header["meta"][k] for k in ("algorithm", "rules", "corpus")}
    arrays = {n[:-4]: np.load(io.BytesIO(b)) for n, b in files.items() if n != "__header__.npy"}
    np.savez(ck, __header__=np.array(json.dumps(header)), **arrays)
    capsys.readouterr()
    assert run(*a, "--resume") == 0
    assert "older grind" in capsys.readouterr().err


# ----------------------------------------------------------------------------- tiny alpha

def test_tiny_alpha_never_skips_a_sentence_silently(data, tmp_path, capsys):
    """Streaming VB at alpha 1e-4: sentences needing a rule unseen so far have
    weights e^-10000 (0 in float64): counted and named, in stderr and the trace."""
    d = data
    tr = tmp_path / "t.tsv"
    assert run("train", "--algo", "streaming", "--alpha", "1e-4", "--batch", "4", "--batch-iterations", "2",
               "--max-unparsed", "1", "--trace", tr, "-o", tmp_path / "o.txt", d / "g1.txt", d / "c.txt") == 0
    err = capsys.readouterr().err
    assert "underflow to 0 (alpha 0.0001" in err and "were left out" in err
    assert "every derivation needs a rule whose VB weight underflows" in err
    rows = [ln.split("\t") for ln in tr.read_text().splitlines() if not ln.startswith("#")]
    col = rows[0].index("underflow_lost")
    lost = sum(int(r[col]) for r in rows[1:] if r[col])
    parsed = sum(int(r[rows[0].index("parsed")]) for r in rows[1:])
    assert lost > 0 and parsed + lost <= 16


def test_vb_estep_counts_lost_sentences_and_is_exact_otherwise():
    from grind.grammars.dmv import dmv_grammar
    from grind.kernels.select import make_parser
    from grind.infer.training import ShardedEstep
    from grind.infer.vb import vb_estep, vb_weights
    sents = [["a", "b"], ["a"], ["c", "a"]]
    g = dmv_grammar(sents)
    est = ShardedEstep(make_parser(g, sents))
    a = np.full(len(g), 2.0)
    c0, z0 = est(vb_weights(g, a))
    c, z, lost, inexact = vb_estep(est, g, a)
    assert np.array_equal(c, c0) and np.array_equal(z, z0) and len(lost) == len(inexact) == 0
    # the rules only "c a" uses (c's) get alpha_hat 1e-4: it alone is lost, the others are exact
    only = est(np.ones(len(g)), [2])[0] > 0
    only &= ~(est(np.ones(len(g)), [0, 1])[0] > 0)
    a[only] = 1e-4
    c, z, lost, inexact = vb_estep(est, g, a)
    assert list(lost) == [2] and not np.isfinite(z[2]) and len(inexact) == 0
    np.testing.assert_array_equal(z[:2], est(vb_weights(g, a), [0, 1])[1])


def test_a_fresh_run_does_not_overwrite_a_checkpoint(data, tmp_path, capsys):
    """Rerunning without --resume replaced a long run's saved state at its first checkpoint (output audit)."""
    ck, out = tmp_path / "ck.npz", tmp_path / "o.txt"
    base = args_of(data, "vb", out, ck)
    assert run(*base) == 0
    saved = ck.read_bytes()
    capsys.readouterr()
    assert run(*base) == 2
    assert "holds a run's saved state already" in capsys.readouterr().err and ck.read_bytes() == saved
    assert run(*base, "--resume") == 0
