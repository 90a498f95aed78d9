"""Stochastic VB (Hoffman et al. 2010; Pate & Johnson 2016, Alg. 3): eta = 1 with
the whole corpus as the batch is batch VB, both update forms follow their
definitions, the DMV event ratios, shuffled epochs, and bit-identical resume."""
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import grind
from grind.grammars.dmv import CHOOSE_L, CHOOSE_R, SLOT, dmv_grammar, dmv_index
from grind.errors import InputError
from grind.grammars.cnf import cnf_grammar
from grind.kernels.select import make_parser
from grind.infer.stochastic import StochasticConfig, StochasticVB
from grind.infer.training import ShardedEstep, train
from grind.infer.vb import VB, kl_dirichlet, vb_weights

VOCAB = ["a", "b", "c"]


def corpus(seed=3, n=15, lo=2, hi=6):
    rng = np.random.default_rng(seed)
    return [list(rng.choice(VOCAB, size=rng.integers(lo, hi + 1))) for _ in range(n)]


def grammar(kind, sents):
    return cnf_grammar(VOCAB, 3, 2) if kind == "cnf" else dmv_grammar(sents)


def theta0(g, seed=0):
    return g.normalize(np.exp(np.random.default_rng(seed).standard_normal(len(g))))


def stochastic(g, sents, alpha=1.0, batch=1000, epochs=1, k=1, tau=0.0, kappa=0.7, update="hoffman",
               seed=0, estep=None):
    cfg = StochasticConfig(epochs=epochs, batch=batch, batch_iterations=k, tau=tau, update=update)
    cfg.kappa = kappa        # set after the range check: kappa = 0 (eta = 1) is a test device, not an option
    estep = estep or ShardedEstep(make_parser(g, sents))
    return StochasticVB(g, estep, np.full(len(g), alpha), theta0(g), cfg, np.random.default_rng(seed))


def batch_vb(g, sents, iterations, alpha=1.0):
    vb = VB(g, ShardedEstep(make_parser(g, sents)), np.full(len(g), alpha), theta0(g),
            SimpleNamespace(iterations=iterations, tolerance=0))
    return vb, train(vb, np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
@pytest.mark.parametrize("update", ["hoffman", "pate-johnson"])
def test_eta_one_on_the_whole_corpus_is_one_batch_vb_step(kind, update):
    sents = corpus()
    g = grammar(kind, sents)
    vb, vb_trace = batch_vb(g, sents, 1, alpha=0.3)
    algo = stochastic(g, sents, alpha=0.3, tau=0.0, update=update)
    trace = train(algo, np.random.default_rng(0))
    assert len(trace) == 1 and trace[0].extra["eta"] == 1.0
    assert trace[0].objective == pytest.approx(vb_trace[0].objective, rel=1e-12)
    if update == "hoffman":
        np.testing.assert_allclose(algo.alpha_hat, vb.alpha_hat, rtol=1e-12, atol=0)
    else:                                   # eta = 1 drops the prior: alpha_hat = E[f]
        np.testing.assert_allclose(algo.alpha_hat, np.maximum(vb.alpha_hat - 0.3, 0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
def test_eta_one_with_local_iterations_and_epochs_is_batch_vb(kind):
    sents = corpus()
    g = grammar(kind, sents)
    vb, vb_trace = batch_vb(g, sents, 6)
    algo = stochastic(g, sents, k=2, epochs=3, tau=0.0, kappa=0.0)      # eta_t = 1 for every t
    trace = train(algo, np.random.default_rng(0))
    np.testing.assert_allclose(algo.alpha_hat, vb.alpha_hat, rtol=1e-12, atol=0)
    assert [s.objective for s in trace] == pytest.approx([s.objective for s in vb_trace[1::2]], rel=1e-12)
    assert [s.sentences for s in trace] == [15, 30, 45]


@pytest.mark.parametrize("update", ["hoffman", "pate-johnson"])
def test_update_forms_by_hand(update):
    """Whole corpus as the batch, tau = 1, kappa = 1: eta_1 = 1/2, eta_2 = 1/3.
    Hoffman:        alpha_hat <- (1 - eta) alpha_hat + eta (alpha + E_pi[f])
    Pate-Johnson:   alpha_hat <- (1 - eta) alpha_hat + eta E_pi[f]
    with alpha_hat_0 = alpha + E_theta0[f] and pi = vb_weights(alpha_hat)."""
    sents = corpus()
    g, alpha = dmv_grammar(sents), 0.5
    algo = stochastic(g, sents, alpha=alpha, epochs=2, tau=1.0, kappa=1.0, update=update)
    train(algo, np.random.default_rng(0))
    est, prior = ShardedEstep(make_parser(g, sents)), np.full(len(g), alpha)
    hoffman = update == "hoffman"
    state = est(theta0(g))[0] + prior
    for eta in (1 / 2, 1 / 3):
        pi = vb_weights(g, state)
        counts = est(pi)[0]
        state = (1 - eta) * state + eta * ((prior if hoffman else 0) + counts)
    np.testing.assert_allclose(algo.stat, state, rtol=1e-12)


def test_the_forms_differ_by_the_decaying_prior():
    sents = corpus(n=40)
    g = dmv_grammar(sents)
    a, b = (stochastic(g, sents, batch=6, epochs=2, k=2, tau=1.0, update=u, seed=7)
            for u in ("hoffman", "pate-johnson"))
    ta, tb = train(a, np.random.default_rng(7)), train(b, np.random.default_rng(7))
    assert [s.extra["eta"] for s in ta] == [s.extra["eta"] for s in tb]
    # Pate-Johnson keeps prod(1 - eta) of the prior, Hoffman all of it: totals differ by about that.
    keep = np.prod([1 - s.extra["eta"] for s in ta])
    gap = a.alpha_hat.sum() - b.alpha_hat.sum()
    assert gap == pytest.approx((1 - keep) * a.prior.sum(), rel=0.2)


def rule_classes(g):
    kind = dmv_index(g).kind
    words = np.isin(kind, [SLOT[k] for k in ("Y", "stopL0", "nostopL0", "stopR0", "nostopR0")])
    deps = np.isin(kind, [SLOT[k] for k in ("stopL1", "nostopL1", "stopR1", "nostopR1")] + [CHOOSE_L, CHOOSE_R])
    return kind == SLOT["root"], words, deps


def test_dmv_event_ratios():
    sents = [["a"], ["b", "a"], ["a", "c", "b"], ["c", "b", "b", "a"]]   # 4 sentences, 10 words, 6 dependents
    g = dmv_grammar(sents)
    algo = stochastic(g, sents)
    assert np.array_equal(algo.scale([0, 1, 2, 3]), np.ones(len(g)))
    s = algo.scale([0, 1])                          # 2 sentences, 3 words, 1 dependent
    root, words, deps = rule_classes(g)
    assert root.sum() == 3 and words.sum() == 15 and deps.sum() == 12 + 18
    assert np.all(s[root] == 4 / 2) and np.all(s[words] == 10 / 3) and np.all(s[deps] == 6 / 1)
    assert np.array_equal(algo.scale([0]), np.where(deps, 0.0, np.where(root, 4.0, 10.0)))
    pcfg = cnf_grammar(VOCAB, 2, 0)
    assert np.array_equal(stochastic(pcfg, sents).scale([1, 3]), np.full(len(pcfg), 2.0))


@pytest.mark.parametrize("kernel", ["dmv", "cky"])
def test_dmv_event_numbers_are_fixed_by_sentence_length(kernel):
    """The derivation behind the ratios: under any weights, the expected counts
    of each event type sum to the same function of the sentence lengths."""
    sents = corpus(n=12, lo=1)
    g = dmv_grammar(sents)
    w = theta0(g, seed=4)
    counts, _ = make_parser(g, sents, kernel).inside_outside(w)
    S, T = len(sents), sum(map(len, sents))
    kind = dmv_index(g).kind
    total = lambda *ks: counts[np.isin(kind, ks)].sum()  # noqa: E731
    assert total(SLOT["root"]) == pytest.approx(S)
    assert total(SLOT["Y"]) == pytest.approx(T)
    assert total(SLOT["stopL0"], SLOT["nostopL0"]) == pytest.approx(T)
    assert total(SLOT["stopR0"], SLOT["nostopR0"]) == pytest.approx(T)
    assert total(SLOT["stopL1"], SLOT["nostopL1"], SLOT["stopR1"], SLOT["nostopR1"]) == pytest.approx(T - S)
    assert total(CHOOSE_L, CHOOSE_R) == pytest.approx(T - S)
    est = ShardedEstep(make_parser(g, sents, kernel))
    algo = stochastic(g, sents, estep=est)
    assert np.array_equal(algo.events.sum(axis=0), [S, T, T - S])


@pytest.mark.parametrize("kind", ["cnf", "dmv"])
@pytest.mark.parametrize("update", ["hoffman", "pate-johnson"])
def test_tiny_alpha_gives_no_nan(kind, update):
    sents = corpus(n=30)
    g = grammar(kind, sents)
    algo = stochastic(g, sents, alpha=1e-5, batch=4, epochs=2, k=2, tau=1.0, update=update)
    trace = train(algo, np.random.default_rng(0))
    assert all(np.isfinite(s.objective) for s in trace)
    assert np.all(np.isfinite(algo.alpha_hat)) and np.all(algo.alpha_hat > 0)
    assert np.all(np.isfinite(algo.mean()))


def test_tiny_alpha_never_skips_a_sentence_silently(capsys):
    """alpha 1e-4: a minibatch sentence needing a rule unseen so far has VB
    weight e^-10000 (0 in float64); it is counted (trace underflow_lost) and
    named in a warning, as in batch and streaming VB (grind.infer.vb.vb_estep)."""
    sents = corpus(seed=11, n=16, lo=1, hi=4)
    g = dmv_grammar(sents)
    algo = stochastic(g, sents, alpha=1e-4, batch=4, epochs=1, k=2, tau=1.0)
    trace = train(algo, np.random.default_rng(0))
    err = capsys.readouterr().err
    assert "underflow to 0 (alpha 0.0001" in err and "were left out" in err and "stochastic step" in err
    lost = [s.extra.get("underflow_lost", 0) for s in trace]
    assert sum(lost) > 0
    for s in trace:      # every DMV sentence has a derivation: parsed or lost, none vanishes silently
        assert s.extra["parsed"] + s.extra.get("underflow_lost", 0) == 4
    # by hand with the plain VB weights: the lost are exactly the sentences with
    # log Z = -inf, and the result is unchanged (they had no counts before either)
    ref = stochastic(g, sents, alpha=1e-4, batch=4, epochs=1, k=2, tau=1.0)
    for s in trace:
        b = ref._next_batch()
        sc = ref.scale(b)
        if ref.stat is None:
            ref._start(b, sc)
        a = ref.alpha_hat
        for _ in range(2):
            counts, logz = ref.estep(vb_weights(g, a), b)
            a = ref.prior + sc * counts
        assert int(np.sum(~np.isfinite(logz))) == s.extra.get("underflow_lost", 0)
        ref.t += 1
        eta = (ref.tau + ref.t) ** -ref.kappa
        ref.stat = np.maximum((1 - eta) * ref.stat + eta * a, np.finfo(np.float64).tiny)
    np.testing.assert_array_equal(ref.alpha_hat, algo.alpha_hat)


class Recorder:
    """An E-step that records the sentences of each call."""

    def __init__(self, est):
        self.est, self.parser, self.calls = est, est.parser, []

    def __call__(self, w, idx=None):
        self.calls.append(np.asarray(idx).tolist())
        return self.est(w, idx)


def test_epochs_shuffle_and_cover_the_corpus_once():
    sents = corpus(n=15)
    g = dmv_grammar(sents)
    rec = Recorder(ShardedEstep(make_parser(g, sents)))
    trace = train(stochastic(g, sents, batch=4, epochs=3, estep=rec), np.random.default_rng(0))
    batches = rec.calls[1:]                         # calls[0]: the start, under theta0
    assert len(trace) == 12 and len(batches) == 12
    assert [len(b) for b in batches] == [4, 4, 4, 3] * 3
    epochs = [sorted(sum(batches[i:i + 4], [])) for i in (0, 4, 8)]
    assert all(e == list(range(15)) for e in epochs)
    assert batches[:4] != batches[4:8]
    assert [s.extra["epoch"] for s in trace] == [1] * 4 + [2] * 4 + [3] * 4
    assert [s.sentences for s in trace][-1] == 45
    assert [s.extra["eta"] for s in trace] == [(0.0 + t) ** -0.7 for t in range(1, 13)]


def test_unparseable_sentences_are_left_out():
    sents = corpus()
    g = dmv_grammar(sents)
    data = sents + [["a", "zz"]]
    rec = Recorder(ShardedEstep(make_parser(g, data)))
    algo = stochastic(g, data, batch=4, estep=rec)
    trace = train(algo, np.random.default_rng(0))
    assert 15 not in sum(rec.calls, []) and trace[-1].sentences == 15
    with pytest.raises(InputError, match="no sentence"):
        stochastic(g, [["zz"]])


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("every,after", [(1, 5), (2, 3), (3, 4)])
@pytest.mark.parametrize("update", ["hoffman", "pate-johnson"])
def test_resume_is_bit_identical(tmp_path, every, after, update):
    sents = corpus(n=15)
    g, ck = dmv_grammar(sents), str(tmp_path / "ck.npz")
    make = lambda: stochastic(g, sents, batch=4, epochs=3, k=2, tau=1.0, update=update)  # noqa: E731
    full = make()
    ref = train(full, np.random.default_rng(11))
    meta = {"algorithm": "stochastic", "rules": len(g), "corpus": "c"}
    cut, step, n = make(), None, [0]
    step = cut.step

    def limited():
        if n[0] == after:
            raise Interrupt
        n[0] += 1
        return step()
    cut.step = limited
    with pytest.raises(Interrupt):
        train(cut, cut.rng, checkpoint=ck, checkpoint_every=every, meta=meta)
    resumed = make()
    trace = train(resumed, resumed.rng, checkpoint=ck, checkpoint_every=every, resume=True, meta=meta)
    assert np.array_equal(resumed.alpha_hat, full.alpha_hat)
    assert [(s.objective, s.sentences, s.extra) for s in trace] == [(s.objective, s.sentences, s.extra) for s in ref]


@pytest.mark.slow
def test_cli_stochastic_on_ewt(tmp_path, ewt_train):
    C = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
    g0, g1, tr = (str(tmp_path / f) for f in ("g0.txt", "g1.txt", "trace.tsv"))
    grind("make-grammar", "dmv", *C, "-o", g0, ewt_train)
    grind("init", "--harmonic", "--corpus", ewt_train, *C, "-o", g1, g0)
    args = ["train", "--algo", "stochastic", "--batch", "200", "--epochs", "2", "--batch-iterations", "2",
            "--seed", "1", *C, g1, ewt_train]
    out = grind(*args[:-2], "--trace", tr, *args[-2:]).stdout
    assert "# algorithm: stochastic" in out and "# weights: Dirichlet pseudo-counts (posterior)" in out
    rows = [ln.rstrip("\n").split("\t") for ln in open(tr) if not ln.startswith("#")]
    head, rows = rows[0], rows[1:]
    assert [int(r[2]) for r in rows] == [200, 400, 600, 669, 869, 1069, 1269, 1338]
    eta = [float(r[head.index("eta")]) for r in rows]
    assert eta == pytest.approx([(1.0 + t) ** -0.7 for t in range(1, 9)])
    assert grind(*args).stdout.split("\n", 3)[3] == out.split("\n", 3)[3]       # same seed, same result
    pj = grind(*args[:1], "--update", "pate-johnson", *args[1:]).stdout
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith("#")]  # noqa: E731
    a = np.array([float(ln.split()[0]) for ln in strip(out)])
    b = np.array([float(ln.split()[0]) for ln in strip(pj)])
    assert a.shape == b.shape and not np.allclose(a, b, rtol=1e-6)


def test_minibatch_objective_and_start_are_scaled_to_the_corpus():
    """N = 15 parseable sentences, minibatches of 5: s = N / |b| = 3 for every rule of a PCFG.
    By hand, for the first minibatch b (K = 1, tau = 1: eta_1 = 2^-0.7):
        start       a = alpha + 3 E_theta0[f on b]
        objective   3 sum_{s in b} log Z_s(vb_weights(a)) - KL(Dir(a) || Dir(alpha))
        state       (1 - eta_1) a + eta_1 (alpha + 3 E_{vb_weights(a)}[f on b])."""
    sents = corpus()
    g, alpha = grammar("cnf", sents), 0.3
    est = ShardedEstep(make_parser(g, sents))
    assert not est.parser.failures
    rec = Recorder(est)
    algo = stochastic(g, sents, alpha=alpha, batch=5, tau=1.0, estep=rec)
    st = algo.step()
    b = rec.calls[0]                                 # the start's minibatch, then the local iteration's
    assert len(b) == 5 and rec.calls == [b, b]
    prior = np.full(len(g), alpha)
    a = prior + 3.0 * est(theta0(g), b)[0]
    counts, logz = est(vb_weights(g, a), b)
    assert np.all(np.isfinite(logz))
    assert st.objective == pytest.approx(3.0 * logz.sum() - kl_dirichlet(g, a, prior), rel=1e-12)
    eta = 2.0 ** -0.7
    assert st.extra["eta"] == pytest.approx(eta, rel=1e-15)
    np.testing.assert_allclose(algo.stat, (1 - eta) * a + eta * (prior + 3.0 * counts), rtol=1e-12)
