"""The segmentation kernel (grind/kernels/segment.py) against brute-force
enumeration of all segmentations and against the general CKY kernel, on tiny
random template (morphology) grammars."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import oracle
from grind.errors import InputError
from grind.grammars.grammar import Grammar
from grind.kernels.cky import CKYParser
from grind.kernels.segment import SegmentParser, template_problem
from grind.kernels.select import make_parser

SEEDS = range(6)
TOL = 1e-10
NATIVE = [True, False]          # the compiled kernel (must be built: no skip) and the numpy one


def random_template_grammar(seed, zero_frac=0.0):
    """2-3 templates over 2-3 slots; every slot gets a random subset of the
    substrings of 2-4 short random words.  Returns (grammar, words)."""
    rng = np.random.default_rng(seed)
    alphabet = list("abc")
    words = [[str(c) for c in rng.choice(alphabet, size=rng.integers(2, 6))] for _ in range(rng.integers(2, 5))]
    slots = ["Pre", "Stem", "Suf"][: rng.integers(2, 4)]
    subs = sorted({tuple(w[i:j]) for w in words for i in range(len(w)) for j in range(i + 1, len(w) + 1)})
    rules = []
    all_templates = [(s,) for s in slots] + [tuple(p) for k in (2, 3) for p in itertools.product(slots, repeat=k)]
    for t in rng.choice(len(all_templates), size=rng.integers(2, 4), replace=False):
        rules.append(("Word", all_templates[t]))
    rules.append(("Word", ("Stem",)) if ("Word", ("Stem",)) not in rules else ("Word", ("Stem", "Stem")))
    for s in slots:
        for sub in subs:
            if s == "Stem" or rng.random() < 0.6:
                rules.append((s, sub))
    w = rng.gamma(1.0, 1.0, size=len(rules)) + 0.05
    w[rng.random(len(rules)) < zero_frac] = 0.0
    return Grammar(rules, w, "Word"), words


def brute(grammar, weights, word):
    """All derivations of ``word``: (rows, weight), for every template and every
    cut of the word into k non-empty pieces, the product of the weights."""
    lex = {(lhs, rhs): r for r, (lhs, rhs) in enumerate(grammar.rules) if lhs != grammar.start}
    n, out = len(word), []
    for r, (lhs, rhs) in enumerate(grammar.rules):
        if lhs != grammar.start:
            continue
        k = len(rhs)
        for cuts in itertools.combinations(range(1, n), k - 1):
            ends = (0,) + cuts + (n,)
            rows, wt = [(r, 0, n)], weights[r]
            for m, s in enumerate(rhs):
                lr = lex.get((s, tuple(word[ends[m]:ends[m + 1]])))
                if lr is None:
                    break
                rows.append((lr, ends[m], ends[m + 1]))
                wt *= weights[lr]
            else:
                out.append((np.array(rows, dtype=np.int64), wt))
    return out


def exact(grammar, weights, word):
    ds = brute(grammar, weights, word)
    Z = sum(w for _, w in ds)
    counts = np.zeros(len(grammar))
    bound = np.zeros(max(0, len(word) - 1))
    for d, w in ds:
        if Z > 0:
            counts += w / Z * np.bincount(d[:, 0], minlength=len(grammar))
            for e in d[1:-1, 2]:
                bound[e - 1] += w / Z
    return ds, (math.log(Z) if Z > 0 else -math.inf), counts, bound


@pytest.mark.parametrize("native", NATIVE)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("zero_frac", [0.0, 0.3])
def test_against_enumeration_and_cky(seed, zero_frac, native):
    g, words = random_template_grammar(seed, zero_frac)
    assert template_problem(g) is None
    sents = words + [list("ab") + ["z"], []]                  # unknown character, empty word
    seg, cky = SegmentParser(g, sents, native=native), CKYParser(g, sents)
    assert set(seg.failures) == {len(words), len(words) + 1}
    w = g.weights
    counts, logz = seg.inside_outside(w)
    ccounts, clogz = cky.inside_outside(w)
    np.testing.assert_allclose(logz, clogz, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(counts, ccounts, rtol=1e-9, atol=TOL)
    total = np.zeros(len(g))
    vit, vlp = seg.viterbi(w)
    cvit, cvlp = cky.viterbi(w)
    bps = seg.boundary_posteriors(w)
    for s, word in enumerate(words):
        ds, lz, c, bound = exact(g, w, word)
        total += c
        assert logz[s] == pytest.approx(lz, rel=TOL, abs=TOL)
        np.testing.assert_allclose(bps[s], bound, atol=TOL)
        best = max((wt for _, wt in ds), default=0.0)
        if best > 0:
            assert vlp[s] == pytest.approx(math.log(best), rel=TOL, abs=TOL)
            assert vlp[s] == pytest.approx(cvlp[s], rel=TOL, abs=TOL)
            assert any(np.array_equal(vit[s], d) for d, wt in ds if wt >= best * (1 - 1e-9))
            assert oracle.is_derivation_of(g, word, vit[s])
            if sum(wt >= best * (1 - 1e-9) for _, wt in ds) == 1:
                np.testing.assert_array_equal(vit[s], cvit[s])     # same format as CKY
        else:
            assert vit[s] is None and vlp[s] == -np.inf
    np.testing.assert_allclose(counts, total, rtol=1e-9, atol=TOL)
    samples = seg.sample(w, np.random.default_rng(seed))
    for s in seg.failures:
        assert logz[s] == -np.inf and vit[s] is None and samples[s] is None and not bps[s].any()
    for s, word in enumerate(words):
        assert (samples[s] is None) == (logz[s] == -np.inf)
        if samples[s] is not None:
            assert oracle.is_derivation_of(g, word, samples[s])
    # idx selects words and a batch equals the sum of singles
    c1 = sum(seg.inside_outside(w, [s])[0] for s in range(len(sents)))
    np.testing.assert_allclose(c1, counts, rtol=1e-9, atol=TOL)
    sp = seg.span_posteriors(w, [0])[0]
    assert sp.sum() == pytest.approx(counts_morphs(g, w, words[0]), rel=1e-9, abs=TOL)


def counts_morphs(g, w, word):
    ds, _, _, _ = exact(g, w, word)
    Z = sum(wt for _, wt in ds)
    return sum(wt / Z * (len(d) - 1) for d, wt in ds) if Z > 0 else 0.0


@pytest.mark.parametrize("native", NATIVE)
@pytest.mark.parametrize("seed", [0, 3])
def test_sample_chi_square(seed, native):
    g, words = random_template_grammar(seed)
    seg = SegmentParser(g, words, native=native)
    rng = np.random.default_rng(seed)
    s = int(np.argmax([len(brute(g, g.weights, wd)) for wd in words]))
    ds = brute(g, g.weights, words[s])
    Z = sum(wt for _, wt in ds)
    posterior = {oracle.derivation_key(d): wt / Z for d, wt in ds if wt > 0}
    keys = []
    for _ in range(20):
        out = seg.sample(g.weights, rng, [s] * 200)
        keys += [oracle.derivation_key(d) for d in out]
    p, _, outside = oracle.chisquare_gof(keys, posterior)
    assert outside == 0 and p > 1e-4
    # control: a wrong posterior is rejected when there is more than one derivation
    if len(posterior) > 1:
        wrong = {k: 1.0 / len(posterior) for k in posterior}
        assert oracle.chisquare_gof(keys, wrong)[0] < 1e-4 or len(set(posterior.values())) == 1


@pytest.mark.parametrize("native", NATIVE)
def test_samples_do_not_depend_on_the_batching(native):
    """Each word's derivation is drawn from its own seed (as the compiled kernel
    draws): batches of 2 words give the samples of one batch of all."""
    g, words = random_template_grammar(3)
    rng_words = np.random.default_rng(0).integers(len(words), size=60)
    big = SegmentParser(g, words, native=native).sample(g.weights, np.random.default_rng(5), rng_words)
    small = SegmentParser(g, words, native=native, batch=2).sample(g.weights, np.random.default_rng(5), rng_words)
    assert len({oracle.derivation_key(d) for d in big if d is not None}) > 1
    for a, b in zip(big, small):
        assert (a is None and b is None) or np.array_equal(a, b)


@pytest.mark.parametrize("native", NATIVE)
def test_viterbi_ties_go_to_the_shorter_first_slot_in_both_kernels(native):
    """Word -> Stem Suf on 'aaa' with Stem, Suf -> a | a a at 0.5 each: two derivations tie (0.25); both
    kernels take Stem = a, Suf = a a (the numpy one breaking ties on its last argmax passed every test)."""
    rules = [("Word", ("Stem", "Suf")), ("Stem", ("a",)), ("Stem", ("a", "a")), ("Suf", ("a",)), ("Suf", ("a", "a"))]
    g = Grammar(rules, [1.0, 0.5, 0.5, 0.5, 0.5], "Word")
    (d,), logp = SegmentParser(g, [list("aaa")], native=native).viterbi(g.weights)
    assert d.tolist() == [[0, 0, 3], [1, 0, 1], [4, 1, 3]] and logp[0] == pytest.approx(math.log(0.25))


def test_log_space_product_of_the_numpy_kernel():
    """The numpy kernel's log-space branch (a word whose scaled weights leave the linear range) had no test."""
    from grind.kernels.segment import LINEAR_MAX, _product
    got = _product(np.array([720.0, 1.0]), np.array([[1e-313], [0.5]]))
    assert 720.0 > LINEAR_MAX and np.isfinite(got).all()
    np.testing.assert_allclose(got[:, 0], [math.exp(720.0 + math.log(1e-313)), math.exp(1.0) * 0.5], rtol=1e-12)


@pytest.mark.parametrize("native", NATIVE)
def test_long_word_no_underflow(native):
    word = list("ab" * 150)
    rules = [("Word", ("Stem",)), ("Word", ("Stem", "Suf")), ("Stem", tuple(word)), ("Stem", tuple(word[:-2])),
             ("Suf", ("a", "b"))]
    g = Grammar(rules, [0.5, 0.5, 1e-200, 1e-200, 1e-200], "Word")
    seg = SegmentParser(g, [word], native=native)
    assert seg.native == native
    counts, logz = seg.inside_outside(g.weights)
    expect = np.logaddexp(math.log(0.5) + math.log(1e-200), math.log(0.5) + 2 * math.log(1e-200))
    assert logz[0] == pytest.approx(expect, rel=1e-12)
    assert counts.sum() == pytest.approx(2 + np.exp(math.log(0.5) + 2 * math.log(1e-200) - expect), rel=1e-9)


@pytest.mark.parametrize("native", [True])          # the numpy fallback has no log-space second pass
@pytest.mark.parametrize("seed", range(12))
def test_derivations_far_below_the_double_range(seed, native):
    """Every lexical weight but one a slot times 1e-200: most derivations of two or three morphs weigh
    1e-400 or less, below the smallest double, beside rules of ordinary weight in the same slots (so no
    per-slot scale saves them).  log Z, counts, boundary posteriors and Viterbi still equal the
    enumeration's (taken in log space), and samples are derivations; the old per-slot scaling gave -inf
    (a derivable word reported as unparsable), a log Z missing derivations, or NaN counts."""
    g, words = random_template_grammar(seed)
    w = np.array(g.weights, dtype=float)
    rng = np.random.default_rng(100 + seed)
    for r, (lhs, rhs) in enumerate(g.rules):
        if lhs == g.start and len(rhs) == 1:
            w[r] = 0.0                          # every derivation has two or three morphs
    for slot in {lhs for lhs, _ in g.rules if lhs != g.start}:
        rules = [r for r, (lhs, _) in enumerate(g.rules) if lhs == slot]
        keep = rules[rng.integers(len(rules))]
        w[[r for r in rules if r != keep]] *= 1e-200
    seg = SegmentParser(g, words, native=native)
    counts, logz = seg.inside_outside(w)
    assert np.isfinite(counts).all()
    bps = seg.boundary_posteriors(w)
    vit, vlp = seg.viterbi(w)
    total = np.zeros(len(g))
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    for s, word in enumerate(words):
        ds = [(d, x) for d, x in ((d, logw[d[:, 0]].sum()) for d, _ in brute(g, w, word)) if x > -np.inf]
        if not ds:
            assert logz[s] == -np.inf
            continue
        lw = np.array([x for _, x in ds])
        lz = np.logaddexp.reduce(lw)
        assert logz[s] == pytest.approx(lz, rel=TOL)
        bound = np.zeros(max(0, len(word) - 1))
        for (d, _), x in zip(ds, lw):
            p = math.exp(x - lz)
            total += p * np.bincount(d[:, 0], minlength=len(g))
            for e in d[1:-1, 2]:
                bound[e - 1] += p
        np.testing.assert_allclose(bps[s], bound, atol=1e-9)
        assert vlp[s] == pytest.approx(lw.max(), rel=TOL)
        assert oracle.is_derivation_of(g, word, vit[s])
    np.testing.assert_allclose(counts, total, rtol=1e-9, atol=1e-9)
    samples = seg.sample(w, np.random.default_rng(seed))
    for s, word in enumerate(words):
        assert (samples[s] is None) == (logz[s] == -np.inf)
        if samples[s] is not None:
            assert oracle.is_derivation_of(g, word, samples[s])
    one = [seg.sparse_counts(w, s) for s in range(len(words))]          # the one-word kernel (collapsed VB)
    for s, (rules, vals, lz) in enumerate(one):
        assert lz == pytest.approx(logz[s], rel=TOL) or lz == logz[s] == -np.inf
        single = seg.inside_outside(w, [s])[0]
        np.testing.assert_allclose(vals, single[rules], rtol=1e-9, atol=1e-12)
        assert vals.sum() == pytest.approx(single.sum(), rel=1e-9)


def test_template_problem_and_select():
    g, words = random_template_grammar(1)
    assert isinstance(make_parser(g, words), SegmentParser)
    assert isinstance(make_parser(g, words, kernel="segment"), SegmentParser)
    assert isinstance(make_parser(g, words, kernel="cky"), CKYParser)
    bad = Grammar([("Word", ("Stem",)), ("Stem", ("A", "b")), ("A", ("a",))], [1.0, 1.0, 1.0], "Word")
    assert "neither" in template_problem(bad)
    assert "not a template" in template_problem(Grammar([("Word", ("a",))], [1.0], "Word"))
    with pytest.raises(InputError):
        SegmentParser(bad, [["a", "b"]])
    with pytest.raises(InputError):
        make_parser(bad, [["a", "b"]], kernel="segment")
    assert not isinstance(make_parser(bad, [["a", "b"]]), SegmentParser)


@pytest.mark.parametrize("native", NATIVE)
def test_bad_weights_and_idx(native):
    from grind.errors import NumericalError
    g, words = random_template_grammar(2)
    seg = SegmentParser(g, words, native=native)
    for bad in (np.nan, np.inf, -1.0):
        w = g.weights.copy()
        w[-1] = bad
        with pytest.raises(NumericalError):
            seg.inside_outside(w)
    with pytest.raises(ValueError):
        seg.viterbi(g.weights[:-1])
    with pytest.raises(IndexError):
        seg.inside_outside(g.weights, [len(words)])
    c, lz = seg.inside_outside(g.weights, [])
    assert lz.shape == (0,) and not c.any()
