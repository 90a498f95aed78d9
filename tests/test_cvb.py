"""Collapsed VB: equal to the subtract/parse/add computation by hand and to a
dense float64 reference; sparse float32 count storage under 1 KB a DMV
sentence; bit-identical checkpoint/resume; the CLI."""
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import grind
from grind.infer.cvb import CVB, CountPool
from grind.grammars.dmv import dmv_grammar
from grind.grammars.grammar import read_grammar
from grind.grammars.cnf import cnf_grammar
from grind.kernels.select import make_parser
from grind.infer.training import ShardedEstep, train

VOCAB = ["a", "b", "c"]


def corpus(rng, vocab, n, lo=2, hi=6):
    return [list(rng.choice(vocab, size=rng.integers(lo, hi + 1))) for _ in range(n)]


def make_case(kind, n=6, seed=0, unknown=False):
    """Grammar, sentences (one unparseable if ``unknown``), theta0."""
    rng = np.random.default_rng(seed)
    sents = corpus(rng, VOCAB, n)
    g = cnf_grammar(VOCAB, 3, 2) if kind == "cnf" else dmv_grammar(sents)
    if unknown:
        sents.insert(2, ["a", "zzz", "b"])
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    return g, sents, theta0


def make_cvb(g, sents, theta0, alpha=1.0, iterations=3, seed=7, init="grammar", full_refresh=None):
    rng = np.random.default_rng(seed)
    cfg = SimpleNamespace(iterations=iterations, tolerance=0.0, cvb_init=init)
    algo = CVB(g, ShardedEstep(make_parser(g, sents)), np.full(len(g), alpha), theta0, cfg, rng)
    if full_refresh is not None:
        algo.full_refresh_rules = full_refresh
    return algo, rng


def f32(x):
    return x.astype(np.float32).astype(np.float64)


def reference(g, sents, theta0, alpha, iterations, seed=7, init="grammar"):
    """CVB with dense float64 per-sentence counts, theta normalised in full."""
    rng = np.random.default_rng(seed)
    parser = make_parser(g, sents)
    ok = [i for i in range(len(sents)) if i not in parser.failures]
    f = np.zeros((len(sents), len(g)))
    for i in ok:
        w = theta0 if init == "grammar" else theta0 * np.exp(rng.standard_normal(len(g)))
        f[i] = parser.inside_outside(w, [i])[0]
    ah, objectives = alpha + f.sum(axis=0), []
    for _ in range(iterations):
        obj = 0.0
        for i in rng.permutation(len(sents)):
            if i in parser.failures:
                continue
            ah -= f[i]
            f[i], z = parser.inside_outside(g.normalize(ah), [i])
            ah += f[i]
            obj += z[0]
        objectives.append(obj)
    return ah, objectives


def test_one_sentence_equals_subtract_parse_add_by_hand():
    g, sents, theta0 = make_case("cnf", n=1)
    alpha = np.full(len(g), 0.5)
    parser = make_parser(g, sents)
    algo, rng = make_cvb(g, sents, theta0, alpha=0.5, iterations=1)
    f0 = f32(parser.inside_outside(theta0, [0])[0])
    assert np.array_equal(algo.alpha_hat, alpha + f0)             # initial E-step under theta0
    ah = (alpha + f0) - f0                                        # subtract f_hat^(0)
    theta = g.normalize(ah)                                       # posterior mean of the rest
    f1, z = parser.inside_outside(theta, [0])                     # parse
    trace = train(algo, rng)
    np.testing.assert_allclose(algo.alpha_hat, alpha + f32(f1), rtol=1e-6, atol=1e-12)   # add back
    assert trace[0].objective == pytest.approx(z[0], rel=1e-10)
    assert trace[0].sentences == 1 and trace[0].extra["parsed"] == 1


@pytest.mark.parametrize("init", ["grammar", "random"])
@pytest.mark.parametrize("kind", ["cnf", "dmv"])
def test_equals_dense_reference(kind, init):
    g, sents, theta0 = make_case(kind, n=8, seed=1, unknown=True)
    algo, rng = make_cvb(g, sents, theta0, alpha=0.3, iterations=3, init=init)
    trace = train(algo, rng)
    ah, objectives = reference(g, sents, theta0, 0.3, 3, init=init)
    np.testing.assert_allclose(algo.alpha_hat, ah, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([s.objective for s in trace], objectives, rtol=1e-6)
    assert [s.sentences for s in trace] == [8, 16, 24]               # the unparseable one skipped
    assert len(algo.pool.get(2)[0]) == 0
    np.testing.assert_allclose(algo.mean(), g.normalize(ah), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
def test_incremental_theta_refresh_equals_full(kind):
    g, sents, theta0 = make_case(kind, n=10, seed=2)
    full, rf = make_cvb(g, sents, theta0, alpha=0.2, full_refresh=10**9)
    part, rp = make_cvb(g, sents, theta0, alpha=0.2, full_refresh=0)
    tf, tp = train(full, rf), train(part, rp)
    np.testing.assert_allclose(part.alpha_hat, full.alpha_hat, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose([s.objective for s in tp], [s.objective for s in tf], rtol=1e-9)


def test_random_init_gives_sentence_specific_valid_counts():
    g, sents, theta0 = make_case("cnf", n=5, seed=3)
    a, _ = make_cvb(g, sents, theta0, init="random")
    b, _ = make_cvb(g, sents, theta0, init="grammar")
    root = np.array([lhs == g.start for lhs, _ in g.rules])
    for i in range(len(sents)):
        (ri, vi), (rb, vb) = a.pool.get(i), b.pool.get(i)
        assert vi[root[ri]].sum() == pytest.approx(1.0, abs=1e-6)        # one root a tree
        assert not (np.array_equal(ri, rb) and np.allclose(vi, vb))


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
def test_tiny_alpha_stays_finite(kind):
    g, sents, theta0 = make_case(kind, n=12, seed=4)
    algo, rng = make_cvb(g, sents, theta0, alpha=1e-5, iterations=5)
    trace = train(algo, rng)
    assert np.all(np.isfinite(algo.alpha_hat)) and np.all(algo.alpha_hat >= 1e-5)
    assert all(np.isfinite(s.objective) for s in trace)
    assert np.all(np.isfinite(algo.mean()))


@pytest.mark.parametrize("full_refresh", [None, 0])
def test_checkpoint_resume_is_bit_identical(tmp_path, full_refresh):
    g, sents, theta0 = make_case("dmv", n=10, seed=5)
    ck = str(tmp_path / "ck.npz")
    whole, rw = make_cvb(g, sents, theta0, iterations=4, init="random", full_refresh=full_refresh)
    tw = train(whole, rw)
    first, r1 = make_cvb(g, sents, theta0, iterations=2, init="random", full_refresh=full_refresh)
    train(first, r1, checkpoint=ck, checkpoint_every=1)
    rest, r2 = make_cvb(g, sents, theta0, iterations=4, seed=99, init="random", full_refresh=full_refresh)
    tr = train(rest, r2, checkpoint=ck, resume=True)
    assert np.array_equal(rest.alpha_hat, whole.alpha_hat)
    assert [s.objective for s in tr] == [s.objective for s in tw]
    for k, v in whole.get_state().items():
        assert np.array_equal(rest.get_state()[k], v), k


def test_dmv_storage_under_1kb_per_sentence():
    rng = np.random.default_rng(6)
    tags = [f"T{i}" for i in range(35)]
    sents = corpus(rng, tags, 400, 4, 15)
    g = dmv_grammar(sents)
    parser = make_parser(g, sents)
    algo, r = make_cvb(g, sents, g.weights, iterations=1)
    assert algo.bytes_per_sentence() <= 1024
    for i in (0, 1, 399):                      # the pool holds exactly the float32 counts
        c = parser.inside_outside(g.weights, [i])[0]
        rules, vals = algo.pool.get(i)
        assert np.array_equal(rules, np.flatnonzero(c)) and np.array_equal(vals, c[rules].astype(np.float32))
    train(algo, r)
    assert algo.bytes_per_sentence() <= 1024


def test_count_pool_relocates_and_compacts():
    rng = np.random.default_rng(8)
    n, R = 50, 300
    pool, truth = CountPool(n, R), {}
    for _ in range(600):
        i = int(rng.integers(n))
        rules = np.sort(rng.choice(R, size=rng.integers(0, 40), replace=False))
        vals = rng.random(len(rules)).astype(np.float32) + 0.1
        pool.put(i, rules, vals)
        truth[i] = (rules, vals)
    for i, (rules, vals) in truth.items():
        got = pool.get(i)
        assert np.array_equal(got[0], rules) and np.array_equal(got[1], vals)
    total = np.zeros(R)
    for rules, vals in truth.values():
        total[rules] += vals
    np.testing.assert_allclose(pool.add_to(np.zeros(R)), total, rtol=1e-12)
    pool.trim()
    assert len(pool.idx) == sum(len(r) for r, _ in truth.values())
    assert all(np.array_equal(pool.get(i)[1], v) for i, (_, v) in truth.items())


def test_count_pool_resizes_in_place():
    """Growing and trimming the pool never holds the old and the new pool at
    once (at Fisher size that copy was CVB's peak memory): the traced peak
    stays near the larger of the two sizes, not their sum."""
    import tracemalloc
    pool = CountPool(4, 1 << 20)
    rules = np.arange(1 << 20, dtype=np.int64)
    vals = np.ones(1 << 20, dtype=np.float32)
    tracemalloc.start()
    try:
        pool.put(0, rules, vals, growth=2)              # grows from 0 to 1M entries (8 MB)
        pool.put(1, rules[:1 << 19], vals[:1 << 19], growth=2)
        c0, base = len(pool.idx), tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        pool._resize(3 * c0)                             # grow to 3x ...
        pool._resize(pool.top)                           # ... and trim
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 8 bytes an entry (int32 + float32): in place the peak is the grown pool, 16 c0
    # bytes above the start; a copy holds the old pool beside the new one (24 c0)
    assert peak - base <= 16 * c0 + (1 << 20)
    assert np.array_equal(pool.get(0)[0], rules) and np.array_equal(pool.get(1)[1], vals[:1 << 19])


@pytest.mark.slow
def test_cli_train_cvb(tmp_path, ewt_train):
    c = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
    g0, g1, out, tr = (tmp_path / x for x in ("g0.txt", "g1.txt", "post.txt", "trace.tsv"))
    grind("make-grammar", "dmv", *c, "-o", g0, ewt_train)
    grind("init", "--harmonic", "--corpus", ewt_train, *c, "-o", g1, g0)
    r = grind("train", "--algo", "cvb", "--iterations", "2", "--alpha", "0.1", "--seed", "1", *c,
              "--trace", tr, "-o", out, g1, ewt_train)
    assert "step    2" in r.stderr
    post = read_grammar(str(out))
    assert post.meta["weights"].startswith("Dirichlet pseudo-counts")
    assert np.all(post.weights >= 0.1) and post.weights.sum() > 0.1 * len(post)
    rows = [ln.split("\t") for ln in tr.read_text().splitlines() if not ln.startswith("#")]
    assert rows[0][:3] == ["step", "objective", "sentences"] and len(rows) == 3
    assert all(np.isfinite(float(row[1])) for row in rows[1:])


def test_per_lhs_refresh_updates_the_lhs_the_previous_visit_added_to():
    """On the per-LHS path (more rules than full_refresh_rules) a visit must refresh theta on
    the LHSs the previous visit *added* to, not only on those it removes from: with theta0 zero
    on every rule whose RHS holds X2, no initial count lands on X2's rules, so X2's LHS is
    first touched by an add and a stale theta there shows in the next parse.  Both paths must
    give the dense reference (theta normalised in full before every parse)."""
    rng = np.random.default_rng(0)
    sents = corpus(rng, VOCAB, 6)
    g = cnf_grammar(VOCAB, 3, 2)
    theta0 = np.exp(rng.standard_normal(len(g)))
    theta0[[r for r, (_, rhs) in enumerate(g.rules) if "X2" in rhs]] = 0.0
    theta0 = g.normalize(theta0)
    ah, objectives = reference(g, sents, theta0, 0.2, 2)
    for full_refresh in (10**9, 0):
        algo, rng_ = make_cvb(g, sents, theta0, alpha=0.2, iterations=2, full_refresh=full_refresh)
        trace = train(algo, rng_)
        np.testing.assert_allclose([s.objective for s in trace], objectives, rtol=1e-6)
        np.testing.assert_allclose(algo.alpha_hat, ah, rtol=1e-5, atol=1e-6)


def test_random_init_of_a_large_grammar_draws_noise_for_each_sentences_rules_only(monkeypatch):
    """On the local-theta path (a large grammar) sentence i's random initial counts are its
    posterior under theta0 * exp(z) with z drawn for the rules it can read only (in the order
    of ``local_rules``): O(n^2) numbers a sentence, not one per rule of the grammar."""
    monkeypatch.setattr(CVB, "full_refresh_rules", 0)
    g, sents, theta0 = make_case("dmv", n=6, seed=8)
    algo, _ = make_cvb(g, sents, theta0, init="random")
    assert algo.lhs_tot is not None
    rng, parser = np.random.default_rng(7), make_parser(g, sents)
    for i in range(len(sents)):
        r = parser.local_rules(i)
        w = theta0.copy()
        w[r] = theta0[r] * np.exp(rng.standard_normal(len(r)))
        c = parser.inside_outside(w, [i])[0]
        rules, vals = algo.pool.get(i)
        assert np.array_equal(rules, np.flatnonzero(c))
        np.testing.assert_array_equal(vals, c[rules].astype(np.float32))
