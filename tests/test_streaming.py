"""Streaming VB (Pate & Johnson 2016, Alg. 2): one minibatch = batch VB, the
posterior accumulates over minibatches, the corpus is read as a stream, and a
resumed run is bit-identical; iter_corpus is lazy and equals read_corpus."""
from types import SimpleNamespace

import numpy as np
import pytest

import grind.formats.corpus as corpus_mod
from conftest import grind
from grind.formats.corpus import CorpusSpec, iter_corpus, read_corpus
from grind.grammars.dmv import dmv_grammar
from grind.grammars.cnf import cnf_grammar
from grind.kernels.select import make_parser
from grind.infer.streaming import StreamingVB
from grind.infer.training import ShardedEstep, train
from grind.infer.vb import VB, kl_dirichlet, vb_weights

VOCAB = ["a", "b", "c"]


def corpus(seed=3, n=15, lo=1, hi=6):
    rng = np.random.default_rng(seed)
    return [list(rng.choice(VOCAB, size=rng.integers(lo, hi + 1))) for _ in range(n)]


def write(tmp_path, sents, name="c.txt"):
    p = tmp_path / name
    p.write_text("".join(" ".join(s) + "\n" for s in sents))
    return str(p)


def grammar(kind, sents):
    return cnf_grammar(VOCAB, 3, 2) if kind == "cnf" else dmv_grammar(sents)


def theta0(g, seed=0):
    return g.normalize(np.exp(np.random.default_rng(seed).standard_normal(len(g))))


def streaming(g, path, alpha=1.0, batch=1000, first=None, k=3):
    cfg = SimpleNamespace(corpus=path, spec=CorpusSpec(), batch=batch, first_batch=first,
                          batch_iterations=k, kernel="auto", jobs=1)
    return StreamingVB(g, None, np.full(len(g), alpha), theta0(g), cfg, np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
@pytest.mark.parametrize("k", [1, 4])
def test_one_minibatch_holding_the_corpus_is_batch_vb(tmp_path, kind, k):
    sents = corpus()
    g = grammar(kind, sents)
    vb = VB(g, ShardedEstep(make_parser(g, sents)), np.full(len(g), 0.5), theta0(g),
            SimpleNamespace(iterations=k, tolerance=0))
    vb_trace = train(vb, np.random.default_rng(0))
    algo = streaming(g, write(tmp_path, sents), alpha=0.5, k=k)
    trace = train(algo, np.random.default_rng(0))
    assert len(trace) == 1 and trace[0].sentences == len(sents)
    np.testing.assert_allclose(algo.alpha_hat, vb.alpha_hat, rtol=1e-12, atol=0)
    assert trace[0].objective == pytest.approx(vb_trace[-1].objective, rel=1e-12)


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
def test_posterior_accumulates_over_minibatches(tmp_path, kind):
    """alpha_hat after two minibatches = Alg. 2 by hand: minibatch b is VB with
    alpha_hat (not alpha) as its prior, and its result is the next alpha_hat."""
    sents = corpus()
    g, k = grammar(kind, sents), 2
    prior = np.full(len(g), 1.0)
    algo = streaming(g, write(tmp_path, sents), batch=9, k=k)
    trace = train(algo, np.random.default_rng(0))
    a_hat = prior
    for n, b in enumerate([sents[:9], sents[9:]]):
        est = ShardedEstep(make_parser(g, b))
        a = a_hat + est(theta0(g))[0] if n == 0 else a_hat
        for _ in range(k):
            counts, logz = est(vb_weights(g, a))
            bound = logz[np.isfinite(logz)].sum() - kl_dirichlet(g, a, a_hat)
            a = a_hat + counts
        a_hat = a
        assert trace[n].objective == pytest.approx(bound, rel=1e-12)
    np.testing.assert_allclose(algo.alpha_hat, a_hat, rtol=1e-12)
    assert [s.sentences for s in trace] == [9, 15]


def test_first_batch_then_batch(tmp_path):
    sents = corpus()
    algo = streaming(dmv_grammar(sents), write(tmp_path, sents), batch=5, first=4, k=1)
    trace = train(algo, np.random.default_rng(0))
    assert [s.extra["batch"] for s in trace] == [4, 5, 5, 1]
    assert [s.sentences for s in trace] == [4, 9, 14, 15]


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
def test_tiny_alpha_gives_no_nan(tmp_path, kind):
    sents = corpus(n=30)
    g = grammar(kind, sents)
    algo = streaming(g, write(tmp_path, sents), alpha=1e-5, batch=4, k=3)
    trace = train(algo, np.random.default_rng(0))
    assert all(np.isfinite(s.objective) for s in trace)
    assert np.all(np.isfinite(algo.alpha_hat)) and np.all(algo.alpha_hat > 0)
    assert np.all(np.isfinite(algo.mean()))


class Interrupt(Exception):
    pass


def interrupted(algo, after):
    step, done = algo.step, [0]

    def limited():
        if done[0] == after:
            raise Interrupt
        done[0] += 1
        return step()
    algo.step = limited
    return algo


@pytest.mark.parametrize("every,after", [(1, 2), (2, 3)])
def test_resume_is_bit_identical(tmp_path, every, after):
    sents = corpus(n=30)
    g, path, ck = dmv_grammar(sents), write(tmp_path, sents), str(tmp_path / "ck.npz")
    full = streaming(g, path, batch=4, first=6)
    ref = train(full, np.random.default_rng(0))
    meta = {"algorithm": "streaming", "rules": len(g), "corpus": path}
    with pytest.raises(Interrupt):
        train(interrupted(streaming(g, path, batch=4, first=6), after), np.random.default_rng(0),
              checkpoint=ck, checkpoint_every=every, meta=meta)
    resumed = streaming(g, path, batch=4, first=6)
    trace = train(resumed, np.random.default_rng(0), checkpoint=ck, checkpoint_every=every,
                  resume=True, meta=meta)
    assert np.array_equal(resumed.alpha_hat, full.alpha_hat)
    assert [(s.objective, s.sentences) for s in trace] == [(s.objective, s.sentences) for s in ref]


def test_stream_is_read_lazily_never_whole(tmp_path, monkeypatch):
    sents = corpus(n=200)
    path = write(tmp_path, sents)
    read = []
    real = corpus_mod.read_lines

    def counting(p):
        for x in real(p):
            read.append(x)
            yield x

    def boom(*a, **k):
        raise AssertionError("streaming VB read the whole corpus")
    monkeypatch.setattr(corpus_mod, "read_lines", counting)
    monkeypatch.setattr(corpus_mod, "read_corpus", boom)
    algo = streaming(dmv_grammar(sents), path, batch=5, k=1)
    algo.step()
    assert len(read) <= 6
    trace = train(algo, np.random.default_rng(0))
    assert trace[-1].sentences == 200 and len(read) == 200


def test_unparseable_sentences_are_reported_and_skipped(tmp_path, capsys):
    sents = corpus()
    g = dmv_grammar(sents)
    path = write(tmp_path, sents[:3] + [["a", "zz", "b"]] + sents[3:])
    algo = streaming(g, path, batch=8, k=2)
    trace = train(algo, np.random.default_rng(0))
    err = capsys.readouterr().err
    assert "sentence 4 (line 4) has no parse: unknown word 'zz'" in err
    assert "1 of 8 sentences of this minibatch have no parse" in err
    assert [s.extra["parsed"] for s in trace] == [7, 8] and trace[-1].sentences == 16
    assert np.all(np.isfinite(algo.alpha_hat))


def test_a_minibatch_with_no_parse_changes_nothing(tmp_path, capsys):
    """A first minibatch none of whose sentences parses is reported and leaves
    alpha_hat at the prior; the next one is then the first to fit, from theta0
    (it was fitted from the prior, as a later minibatch is)."""
    sents = corpus()
    g = dmv_grammar(sents)
    bad = write(tmp_path, [["a", "zz", "b"]] * 5 + sents, "bad.txt")
    good = write(tmp_path, sents, "good.txt")
    a, b = streaming(g, bad, batch=5, k=2), streaming(g, good, batch=5, k=2)
    ta, tb = train(a, np.random.default_rng(0)), train(b, np.random.default_rng(0))
    assert "5 of 5 sentences of this minibatch have no parse" in capsys.readouterr().err
    assert [s.extra["parsed"] for s in ta] == [0] + [s.extra["parsed"] for s in tb]
    np.testing.assert_array_equal(a.alpha_hat, b.alpha_hat)


def test_iter_corpus_is_lazy_and_equals_read_corpus(ewt_train, monkeypatch):
    spec = CorpusSpec(column="UPOS", punct="ud", max_length=10)
    key = lambda ss: [(s.tokens, s.number, s.line, s.heads, s.rows, s.comments) for s in ss]  # noqa: E731
    assert key(iter_corpus(ewt_train, spec)) == key(read_corpus(ewt_train, spec))
    read = []
    real = corpus_mod.read_lines
    monkeypatch.setattr(corpus_mod, "read_lines", lambda p: (read.append(x) or x for x in real(p)))
    first = next(iter_corpus(ewt_train, spec))
    assert len(read) < first.line + 50 < 10_000


def test_empty_stream_is_an_error(tmp_path):
    from grind.errors import InputError
    p = tmp_path / "e.txt"
    p.write_text("\n")
    algo = streaming(dmv_grammar(corpus()), str(p))
    with pytest.raises(InputError, match="no sentences"):
        algo.step()


@pytest.mark.slow
def test_cli_streaming_on_ewt(tmp_path, ewt_train):
    C = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
    g0, g1, out, tr = (str(tmp_path / f) for f in ("g0.txt", "g1.txt", "post.txt", "trace.tsv"))
    grind("make-grammar", "dmv", *C, "-o", g0, ewt_train)
    grind("init", "--harmonic", "--corpus", ewt_train, *C, "-o", g1, g0)
    r = grind("train", "--algo", "streaming", "--batch", "200", "--batch-iterations", "2", *C,
              "--trace", tr, "-o", out, g1, ewt_train)
    assert "step    4" in r.stderr
    rows = [ln.rstrip("\n").split("\t") for ln in open(tr) if not ln.startswith("#")]
    assert rows[0][:3] == ["step", "objective", "sentences"]
    assert [int(x[2]) for x in rows[1:]] == [200, 400, 600, 669]
    stopped = rows[0].index("stopped")                  # the step that drew the last minibatch says so
    assert [x[stopped] for x in rows[1:]] == ["", "", "", "'the last minibatch of the last epoch'"]
    assert all(np.isfinite(float(x[1])) for x in rows[1:])
    text = open(out).read()
    assert "# stopped: after step 4: the last minibatch of the last epoch" in text
    assert "# weights: Dirichlet pseudo-counts (posterior)" in text and "# algorithm: streaming" in text
    parsed = grind("parse", *C, out, ewt_train).stdout
    assert parsed.count("\n\n") == 2000            # every sentence (1331 outside <= 10, marked); the header: comments
    assert parsed.count("\n# grind_left_out = ") == 1331


# -- the sparse update (one-sentence minibatches touch only their rules) ------------------------------

WORDS = [f"w{i}" for i in range(40)]


def word_corpus(seed=5, n=40, lo=2, hi=7):
    """Sentences of words from a Zipf-like vocabulary: a lexicalized DMV where a sentence reads few rules."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    return [list(rng.choice(WORDS, size=rng.integers(lo, hi + 1), p=p / p.sum())) for _ in range(n)]


def run_streaming(monkeypatch, g, path, share, **kw):
    """A streaming run with the sparse update always (share inf) or never (share 0) taken."""
    import grind.infer.streaming as streaming_mod
    monkeypatch.setattr(streaming_mod, "SPARSE_SHARE", share)
    algo = streaming(g, path, **kw)
    trace = train(algo, np.random.default_rng(0))
    return algo, trace


@pytest.mark.parametrize("first,batch,k,alpha", [(6, 1, 1, 1.0), (1, 1, 3, 0.5), (10, 3, 2, 1.0), (5, 1, 1, 0.05)])
def test_sparse_update_equals_the_dense_one(tmp_path, monkeypatch, first, batch, k, alpha):
    """The sparse update (only the minibatch's rules and their LHSs' sums) gives the dense
    update's alpha_hat, per-LHS sums and bound at every step, to rounding."""
    sents = word_corpus()
    g = dmv_grammar(sents, lexicalized=True)
    path = write(tmp_path, sents)
    kw = dict(alpha=alpha, batch=batch, first=first, k=k)
    sparse, ts = run_streaming(monkeypatch, g, path, np.inf, **kw)
    dense, td = run_streaming(monkeypatch, g, path, 0.0, **kw)
    assert len(ts) == len(td) > 10
    np.testing.assert_allclose(sparse.alpha_hat, dense.alpha_hat, rtol=1e-12, atol=0)
    np.testing.assert_allclose(sparse.lhs_tot, g.lhs_sums(dense.alpha_hat), rtol=1e-12, atol=0)
    for a, b in zip(ts, td):
        assert (a.sentences, a.extra["parsed"]) == (b.sentences, b.extra["parsed"])
        assert a.objective == pytest.approx(b.objective, rel=1e-12, abs=1e-12)


def test_one_sentence_minibatches_touch_no_vector_over_all_rules(tmp_path, monkeypatch):
    """After the first minibatch, a one-sentence minibatch of a lexicalized DMV never computes
    the VB weights, the E-step or the KL term over the whole grammar (what made it slow)."""
    import grind.infer.streaming as streaming_mod
    sents = word_corpus(n=80, hi=5)
    g = dmv_grammar(sents, lexicalized=True)
    assert 10 * 5 + 5 * 5 <= streaming_mod.SPARSE_SHARE * len(g)
    algo = streaming(g, write(tmp_path, sents), batch=1, first=10, k=1)
    algo.step()

    def whole(*a, **k):
        raise AssertionError("a pass over all the rules for a one-sentence minibatch")
    for name in ("vb_estep", "kl_dirichlet"):
        monkeypatch.setattr(streaming_mod, name, whole)
    monkeypatch.setattr(type(g), "lhs_sums", whole)
    steps = 0
    while algo.step() is not None and steps < 40:
        steps += 1
    assert steps == 40


def test_sparse_update_falls_back_to_the_dense_one_on_underflow(tmp_path, monkeypatch):
    """At a tiny alpha the VB weights of unseen rules underflow: those minibatches take the dense
    update (which accounts for them), with the same results as a dense run."""
    sents = word_corpus(n=20)
    g = dmv_grammar(sents, lexicalized=True)
    path = write(tmp_path, sents)
    kw = dict(alpha=1e-5, batch=1, first=3, k=2)
    sparse, ts = run_streaming(monkeypatch, g, path, np.inf, **kw)
    dense, td = run_streaming(monkeypatch, g, path, 0.0, **kw)
    np.testing.assert_allclose(sparse.alpha_hat, dense.alpha_hat, rtol=1e-12)
    assert [s.objective for s in ts] == pytest.approx([s.objective for s in td], rel=1e-12)


def test_sparse_update_resumes_bit_identically(tmp_path, monkeypatch):
    import grind.infer.streaming as streaming_mod
    monkeypatch.setattr(streaming_mod, "RESUM", 4)          # a fresh sum of the LHS totals inside the run
    sents = word_corpus(n=30)
    g, path, ck = dmv_grammar(sents, lexicalized=True), write(tmp_path, sents), str(tmp_path / "ck.npz")
    full, ref = run_streaming(monkeypatch, g, path, np.inf, batch=1, first=5, k=1)
    meta = {"algorithm": "streaming", "rules": len(g), "corpus": path}
    with pytest.raises(Interrupt):
        train(interrupted(streaming(g, path, batch=1, first=5, k=1), 7), np.random.default_rng(0),
              checkpoint=ck, checkpoint_every=3, meta=meta)
    resumed = streaming(g, path, batch=1, first=5, k=1)
    trace = train(resumed, np.random.default_rng(0), checkpoint=ck, resume=True, meta=meta)
    assert np.array_equal(resumed.alpha_hat, full.alpha_hat) and np.array_equal(resumed.lhs_tot, full.lhs_tot)
    assert [(s.objective, s.sentences) for s in trace] == [(s.objective, s.sentences) for s in ref]
