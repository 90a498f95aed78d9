"""Stochastic VB never holds the corpus (issue 15): the corpus indexed on disk
(grind.infer.corpus_index: one pass, tokens spooled to a temporary file, a
minibatch's parser at a time) gives the in-memory path's results bit for bit
-- DMV and general CFG, unparseable sentences, one and several epochs, resume,
the CLI on a .gz corpus and on standard input -- and its traced peak does not
grow with the corpus beyond a few bytes a sentence (the in-memory path's does)."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from grind.errors import InputError
from grind.formats import spool as spool_mod
from grind.formats.corpus import CorpusSpec
from grind.formats.spool import TokenSpool
from grind.grammars.cnf import cnf_grammar
from grind.grammars.dmv import dmv_grammar
from grind.infer import corpus_index
from grind.infer.corpus_index import FileEstep
from grind.infer.stochastic import StochasticVB, index_corpus
from grind.infer.training import ShardedEstep, fingerprint_sentences, train
from grind.kernels.select import make_parser

VOCAB = ["a", "b", "c"]
SAMPLE = os.path.join(os.path.dirname(__file__), "..", "data", "ewt", "en_ewt-ud-train-sample.conllu.gz")


def corpus(seed=3, n=40, lo=1, hi=6):
    rng = np.random.default_rng(seed)
    return [list(rng.choice(VOCAB, size=rng.integers(lo, hi + 1))) for _ in range(n)]


def with_unknown(sents):
    """``sents`` with sentences the grammars cannot parse (an unknown word) among them."""
    out = list(sents)
    for k, pos in enumerate((0, 7, 8, 23, len(out))):
        out.insert(pos + k, ["a", "zz", "b"][: 1 + k % 3] + ["zz"])
    return out


def write_text(path, sents):
    with open(path, "w") as f:
        f.writelines(" ".join(s) + "\n" for s in sents)
    return str(path)


def theta0(g, seed=0):
    return g.normalize(np.exp(np.random.default_rng(seed).standard_normal(len(g))))


def cfg(**kw):
    base = dict(epochs=1, batch=6, batch_iterations=2, tau=1.0, kappa=0.7, update="hoffman")
    return SimpleNamespace(**{**base, **kw})


def in_memory(g, sents, c, seed=5, kernel="auto", jobs=1):
    est = ShardedEstep(make_parser(g, sents, kernel), jobs)
    return StochasticVB(g, est, np.full(len(g), 0.5), theta0(g), c, np.random.default_rng(seed))


def on_disk(g, path, c, seed=5, kernel="auto", jobs=1):
    index = index_corpus(g, path, CorpusSpec(), kernel)
    algo = StochasticVB(g, FileEstep(index, jobs), np.full(len(g), 0.5), theta0(g), c, np.random.default_rng(seed))
    return algo, index


def same_run(a, ta, b, tb):
    assert np.array_equal(a.alpha_hat, b.alpha_hat)
    assert [(s.step, s.objective, s.sentences, s.extra) for s in ta] == \
        [(s.step, s.objective, s.sentences, s.extra) for s in tb]


# ------------------------------------------------------------------ the spool

def test_spool_reads_back_every_sentence_in_any_order(monkeypatch):
    monkeypatch.setattr(spool_mod, "CHUNK", 3)          # offsets over several chunks
    sents = [["a", "b"], [], [""], ["é", "日本", ""], ["x"] * 50, ["  spaced form "], ["\r", "\x0b"], ["z"]]
    with TokenSpool() as sp:
        for s in sents:
            sp.add(s)
        sp.close_writing()
        assert len(sp) == len(sents) and sp.offsets.dtype == np.int64 and len(sp.offsets) == len(sents) + 1
        order = [5, 0, 7, 1, 3, 2, 6, 4, 0]
        assert sp.read(order) == [sents[i] for i in order]
        fd = sp._file.fileno()
    with pytest.raises(OSError):                         # closed: the unnamed file is gone
        os.fstat(fd)
    with TokenSpool() as sp, pytest.raises(InputError, match="tab"):
        sp.add(["a\tb"])


def test_index_finds_what_the_whole_parser_finds(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_index, "CHUNK", 7)
    sents = corpus()
    g = dmv_grammar(sents)
    data = with_unknown(sents)
    path = write_text(tmp_path / "c.txt", data)
    with index_corpus(g, path, CorpusSpec()) as index:
        parser = make_parser(g, data)
        assert index.n == len(data) and index.failed == len(parser.failures) == 5
        assert index.pool.tolist() == [i for i in range(len(data)) if i not in parser.failures]
        assert index.fingerprint == fingerprint_sentences(data)
        ref = in_memory(g, data, cfg())
        assert np.array_equal(index.totals, ref.corpus_events)
        assert index.spool.read(index.pool[::-1]) == [data[i] for i in index.pool[::-1]]


# ------------------------------------------------------------------ bit-identical to the in-memory path

@pytest.mark.parametrize("kind", ["dmv", "cnf"])
@pytest.mark.parametrize("epochs,batch", [(1, 6), (3, 7), (2, 1000)])
def test_on_disk_is_bit_identical_to_in_memory(tmp_path, monkeypatch, kind, epochs, batch):
    monkeypatch.setattr(corpus_index, "CHUNK", 9)       # the index's pass over several parsers
    sents = corpus()
    g = dmv_grammar(sents) if kind == "dmv" else cnf_grammar(VOCAB, 3, 2)
    data = with_unknown(sents)
    c = cfg(epochs=epochs, batch=batch)
    ref = in_memory(g, data, c)
    t_ref = train(ref, ref.rng)
    algo, index = on_disk(g, write_text(tmp_path / "c.txt", data), c)
    with index:
        t = train(algo, algo.rng)
        same_run(algo, t, ref, t_ref)
        assert algo.events is None and algo.pool.dtype == np.int32
        assert t[-1].sentences == epochs * len(algo.pool)        # the pool: what some weights can parse
        assert len(algo.pool) <= len(sents) and len(algo.pool) == len(ref.pool)
        assert algo.estep.parser is not None and len(algo.estep.parser.sentences) <= batch


@pytest.mark.parametrize("kernel,jobs,update", [("cky", 1, "pate-johnson"), ("dmv", 2, "hoffman")])
def test_on_disk_kernels_threads_and_update_forms(tmp_path, kernel, jobs, update):
    sents = corpus(n=30)
    g = dmv_grammar(sents)
    data = with_unknown(sents)
    c = cfg(epochs=2, batch=5, update=update)
    ref = in_memory(g, data, c, kernel=kernel)
    t_ref = train(ref, ref.rng)
    algo, index = on_disk(g, write_text(tmp_path / "c.txt", data), c, kernel=kernel, jobs=jobs)
    with index:
        same_run(algo, train(algo, algo.rng), ref, t_ref)


class Interrupt(Exception):
    pass


def interrupted(algo, after):
    step, n = algo.step, [0]

    def limited():
        if n[0] == after:
            raise Interrupt
        n[0] += 1
        return step()
    algo.step = limited
    return algo


@pytest.mark.parametrize("first,then", [("disk", "disk"), ("memory", "disk"), ("disk", "memory")])
@pytest.mark.parametrize("after", [2, 5])
def test_resume_on_disk_is_bit_identical(tmp_path, first, then, after):
    """A checkpoint of either path resumes on either, as the uninterrupted in-memory run."""
    sents = corpus(n=30)
    g = dmv_grammar(sents)
    data = with_unknown(sents)
    path = write_text(tmp_path / "c.txt", data)
    c = cfg(epochs=3, batch=7)
    ref = in_memory(g, data, c)
    t_ref = train(ref, ref.rng)
    ck, meta = str(tmp_path / "ck.npz"), {"algorithm": "stochastic", "rules": len(g), "corpus": "c"}
    make = {"memory": lambda: (in_memory(g, data, c), None), "disk": lambda: on_disk(g, path, c)}
    cut, ix1 = make[first]()
    with pytest.raises(Interrupt):
        train(interrupted(cut, after), cut.rng, checkpoint=ck, checkpoint_every=1, meta=meta)
    resumed, ix2 = make[then]()
    t = train(resumed, resumed.rng, checkpoint=ck, checkpoint_every=1, resume=True, meta=meta)
    same_run(resumed, t, ref, t_ref)
    for ix in (ix1, ix2):
        if ix is not None:
            ix.close()


def test_on_disk_with_no_parseable_sentence_is_an_input_error(tmp_path):
    g = dmv_grammar(corpus())
    with pytest.raises(InputError, match="no sentence"):
        on_disk(g, write_text(tmp_path / "c.txt", [["zz"], ["zz", "a"]]), cfg())


# ------------------------------------------------------------------ the CLI

def run(*args, memory=False, stdin=None):
    env = dict(os.environ)
    env.pop("GRIND_STOCHASTIC_IN_MEMORY", None)
    if memory:
        env["GRIND_STOCHASTIC_IN_MEMORY"] = "1"
    r = subprocess.run([sys.executable, "-m", "grind.cli", *map(str, args)], capture_output=True, text=True,
                       env=env, input=stdin)
    assert r.returncode == 0, r.stderr
    return r


def body(path):
    """A grammar or trace file without its ``# command`` line (the output names differ) and
    the trace's wall seconds."""
    out = []
    for ln in open(path):
        if ln.startswith("# command"):
            continue
        cols = ln.rstrip("\n").split("\t")
        out.append("\t".join(cols[:3] + cols[4:]) if len(cols) > 4 else ln)
    return out


def warnings(stderr):
    return [ln for ln in stderr.splitlines() if "warning" in ln]


@pytest.mark.slow
@pytest.mark.parametrize("epochs", [1, 3])
def test_cli_dmv_on_a_gz_corpus_as_in_memory(tmp_path, epochs):
    """A compressed CoNLL-U corpus, a DMV without PUNCT: --punct none leaves
    sentences with PUNCT that cannot be parsed; same grammar, trace, warnings."""
    sub = tmp_path / "sub.conllu"
    import gzip
    with gzip.open(SAMPLE, "rt") as f, open(sub, "w") as out:
        out.writelines(ln for _, ln in zip(range(4000), f))
    g0 = tmp_path / "g0.txt"
    run("make-grammar", "dmv", "--column", "UPOS", "--punct", "ud", "-o", g0, sub)
    # its '# corpus:' line would have train read with --punct ud (issue 38): a grammar that does not say
    g0.write_text("".join(ln for ln in g0.read_text().splitlines(True) if not ln.startswith("# corpus:")))
    outs = {}
    for memory in (False, True):
        o, tr = tmp_path / f"g{memory}.txt", tmp_path / f"t{memory}.tsv"
        r = run("train", "--algo", "stochastic", "--batch", "150", "--epochs", epochs, "--batch-iterations", "2",
                "--seed", "4", "--column", "UPOS", "--max-unparsed", "1", "--trace", tr, "-o", o, g0, SAMPLE,
                memory=memory)
        outs[memory] = (body(o), body(tr), warnings(r.stderr), r.stderr)
    assert outs[False][:3] == outs[True][:3]
    assert "have no parse and were left out" in outs[False][3]
    assert "spooled to a temporary file" in outs[False][3] and "spooled" not in outs[True][3]


@pytest.mark.slow
def test_cli_cfg_on_standard_input_as_in_memory(tmp_path):
    sents = with_unknown(corpus(n=60, lo=2))
    text = "".join(" ".join(s) + "\n" for s in sents)
    g = cnf_grammar(VOCAB, 3, 2)
    gp = tmp_path / "g.txt"
    with open(gp, "w") as f:                  # random weights: all 1 would be a symmetric start (refused)
        f.writelines(g.rule_text(np.random.default_rng(5).uniform(0.5, 1.5, len(g))))
    outs = {}
    for memory in (False, True):
        o, tr = tmp_path / f"g{memory}.txt", tmp_path / f"t{memory}.tsv"
        r = run("train", "--algo", "stochastic", "--batch", "9", "--epochs", "2", "--seed", "2", "--trace", tr,
                "-o", o, gp, "-", memory=memory, stdin=text)
        outs[memory] = (body(o), body(tr), warnings(r.stderr))
    assert outs[False] == outs[True]
    assert any("5 of 65 sentences have no parse" in w for w in outs[False][2])


@pytest.mark.slow
def test_cli_resume_on_disk(tmp_path):
    """--epochs 1 with a checkpoint, resumed with --epochs 3: the uninterrupted in-memory run's grammar."""
    sents = with_unknown(corpus(n=50))
    path = write_text(tmp_path / "c.txt", sents)
    g = dmv_grammar(corpus(n=50))
    gp = tmp_path / "g.txt"
    with open(gp, "w") as f:
        f.writelines(g.rule_text(g.weights))
    common = ["train", "--algo", "stochastic", "--batch", "8", "--batch-iterations", "2", "--seed", "9"]
    ref = tmp_path / "ref.txt"
    run(*common, "--epochs", "3", "-o", ref, gp, path, memory=True)
    ck, out = tmp_path / "ck.npz", tmp_path / "out.txt"
    run(*common, "--epochs", "1", "--checkpoint", ck, "-o", out, gp, path)
    run(*common, "--epochs", "3", "--checkpoint", ck, "--resume", "-o", out, gp, path)
    assert body(out) == body(ref)


# ------------------------------------------------------------------ memory

_MEASURE = textwrap.dedent("""
    import gc, json, os, sys, tracemalloc
    import numpy as np
    from types import SimpleNamespace
    from grind.formats.corpus import CorpusSpec, read_corpus_tokens
    from grind.grammars.dmv import dmv_grammar
    from grind.infer.corpus_index import FileEstep
    from grind.infer.stochastic import StochasticVB, index_corpus
    from grind.infer.training import ShardedEstep, train
    from grind.kernels.select import make_parser

    where, N, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(0)
    vocab = [f"T{i}" for i in range(40)]
    with open(path, "w") as f:
        for _ in range(N):
            f.write(" ".join(vocab[i] for i in rng.integers(0, 40, size=int(rng.integers(1, 9)))) + "\\n")
        f.write("T1 UNKNOWN T2\\n")                     # one sentence the grammar cannot parse
    g = dmv_grammar([vocab], vocabulary=vocab)
    prior, theta = np.full(len(g), 1.0), g.weights.copy()
    small = make_parser(g, [vocab[:5]] * 20)              # warm up: the grammar's index, the kernel
    ShardedEstep(small)(theta)
    del small
    cfg = SimpleNamespace(epochs=1, batch=500, batch_iterations=1, tau=1.0, kappa=0.7, update="hoffman")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    if where == "disk":
        with index_corpus(g, path, CorpusSpec()) as index:
            algo = StochasticVB(g, FileEstep(index), prior, theta, cfg, np.random.default_rng(0))
            train(algo, algo.rng)
    else:
        sents = read_corpus_tokens(path, CorpusSpec())
        est = ShardedEstep(make_parser(g, [s.tokens for s in sents]))
        algo = StochasticVB(g, est, prior, theta, cfg, np.random.default_rng(0))
        train(algo, algo.rng)
    print(json.dumps({"peak": tracemalloc.get_traced_memory()[1] - base, "sum": float(algo.alpha_hat.sum())}))
""")


def measure(where, n, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", _MEASURE, where, str(n), str(tmp_path / f"{where}{n}.txt")],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


#: Bytes a sentence the on-disk run may grow by: 8 of offsets (16 while they are joined), 4 of the
#: parseable sentences, 4 of the epoch's permutation (and its copy while drawn).
PER_SENTENCE = 32


@pytest.mark.slow
def test_stochastic_peak_does_not_grow_with_the_corpus(tmp_path):
    small, large = 5_000, 50_000
    disk = {n: measure("disk", n, tmp_path) for n in (small, large)}
    grow = (disk[large]["peak"] - disk[small]["peak"]) / (large - small)
    print({n: d["peak"] for n, d in disk.items()}, f"{grow:.1f} bytes a sentence")
    assert grow <= PER_SENTENCE, f"on disk: the peak grows {grow:.1f} bytes a sentence: {disk}"
    # a test that cannot fail is a defect: the in-memory path (the corpus's tokens and parser) fails it
    memory = {n: measure("memory", n, tmp_path) for n in (small, large)}
    assert memory[large]["sum"] == disk[large]["sum"]
    grow_mem = (memory[large]["peak"] - memory[small]["peak"]) / (large - small)
    print({n: d["peak"] for n, d in memory.items()}, f"in memory: {grow_mem:.1f} bytes a sentence")
    assert grow_mem > 4 * PER_SENTENCE, memory
    gc.collect()


def test_api_fit_given_a_path_indexes_it_on_disk(tmp_path):
    import grind
    sents = with_unknown(corpus(n=30))
    path = write_text(tmp_path / "c.txt", sents)
    g = dmv_grammar(corpus(n=30))
    opts = dict(alpha=0.5, seed=3, batch=6, epochs=2, batch_iterations=2)
    a = grind.fit(g, path, "stochastic", **opts)                  # on disk
    b = grind.fit(g, sents, "stochastic", **opts)                 # in memory
    assert np.array_equal(a.grammar.weights, b.grammar.weights)
    assert [s.objective for s in a.trace] == [s.objective for s in b.trace]


@pytest.mark.slow
def test_sentences_no_weights_can_parse_leave_the_pool_and_are_named(tmp_path):
    """A one-word sentence under a CNF grammar stayed in the pool and in N, unnamed (only the trace's
    'parsed' column showed it), on disk and in memory alike (VB audit)."""
    (tmp_path / "g.txt").write_text("0.5 S --> A B\n0.5 S --> B A\n0.6 A --> a\n0.5 B --> b\n0.4 A --> b\n"
                                    "0.5 B --> a\n")           # A and B not alike: not a symmetric start
    (tmp_path / "c.txt").write_text("a b\nb\nb a\na b\na\nb b\n")
    outs = {}
    for memory in (False, True):
        r = run("train", "--algo", "stochastic", "--kernel", "cky", "--batch", "2", "--epochs", "1", "--seed", "3",
                "-o", tmp_path / f"g{memory}.txt", tmp_path / "g.txt", tmp_path / "c.txt", memory=memory)
        assert r.stderr.count("the grammar has no derivation of it under any weights") == 2, r.stderr
        assert "2 of 6 sentences have no parse and were left out" in r.stderr
        assert "# unparsed: 2 of 6 sentences without a parse under the initial grammar (left out)" in \
            (tmp_path / f"g{memory}.txt").read_text()
        outs[memory] = body(tmp_path / f"g{memory}.txt")
    assert outs[False] == outs[True]
