"""The harmonic initialiser's two variants (grind.grammars.dmv.harmonic_counts) on
hand-worked sentences, `grind init --harmonic --variant`, and the
logistic-normal stopping rule (relative change of the bound, or the cap)."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

from grind.infer import ln
from grind.grammars.dmv import HARMONIC_DEFAULT, dmv_grammar, harmonic_counts
from grind.errors import InputError
from grind.kernels.select import make_parser
from grind.infer.training import ShardedEstep, train

from conftest import grind


def stops(c, k, h, side):
    """(STOP v0, not-STOP v0, STOP v1, not-STOP v1) counts of head h on side L / R."""
    t = f"{h}_{side.lower()}"
    return tuple(c[k[x]] for x in (f"{side}0_{h} --> {t}", f"{side}0_{h} --> {side}'_{h}",
                                   f"{side}_{h} --> {t}", f"{side}_{h} --> {side}'_{h}"))


def test_km_global_on_two_words():
    # "a b", smoothing s = 0.1.  Root 1/2 each (+0.1).  Attachments weigh (n-1)/n = 1/2:
    # choose(a | b, left) = choose(b | a, right) = 1/2 + 0.1; every other choose rule 0.1.
    # Per (head, side): a has one token (N = 1), a word on its right (N_R = 1) expecting
    # E_R = 1/2 dependents; b likewise on its left.  Ratios (E + s)/N_D = 0.6 and
    # (N + s)/N_D = 1.1, so f = 0.9 * 0.6 = 0.54:
    #   a, right: STOP0 = 1 + .1 - .54 = .56, not-STOP0 = STOP1 = .1 + .54 = .64, not-STOP1 = .5 + .1 - .54 = .06
    #   a, left (no word there): STOP0 = 1.1, the other three 0.1.
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"]], "km-global")
    k = g.index
    assert c[k["S --> Y_a"]] == pytest.approx(0.6) and c[k["S --> Y_b"]] == pytest.approx(0.6)
    assert c[k["L'_b --> Y_a L_b"]] == pytest.approx(0.6) and c[k["R'_a --> R_a Y_b"]] == pytest.approx(0.6)
    assert c[k["R'_b --> R_b Y_a"]] == pytest.approx(0.1) and c[k["L'_a --> Y_a L_a"]] == pytest.approx(0.1)
    assert stops(c, k, "a", "R") == pytest.approx((0.56, 0.64, 0.64, 0.06))
    assert stops(c, k, "b", "L") == pytest.approx((0.56, 0.64, 0.64, 0.06))
    assert stops(c, k, "a", "L") == pytest.approx((1.1, 0.1, 0.1, 0.1))
    assert stops(c, k, "b", "R") == pytest.approx((1.1, 0.1, 0.1, 0.1))
    p = g.normalize(c)
    assert p[k["R0_a --> a_r"]] == pytest.approx(0.56 / 1.2)     # P(STOP | a, right, v0)


def test_km_global_attachment_weights_on_three_words():
    # "a b c": word 0 attaches to 1 and 2 with weights 1 : 1/2 -> 2/3, 1/3, times (n-1)/n = 2/3;
    # word 1 to 0 and 2 with 1/2 each, times 2/3.  No smoothing here.
    g = dmv_grammar([["a", "b", "c"]])
    c = harmonic_counts(g, [["a", "b", "c"]], "km-global", smoothing=0.0)
    k = g.index
    assert c[k["L'_b --> Y_a L_b"]] == pytest.approx(4 / 9)
    assert c[k["L'_c --> Y_a L_c"]] == pytest.approx(2 / 9)
    assert c[k["R'_a --> R_a Y_b"]] == pytest.approx(1 / 3)
    # E: head a expects 1/3 + 2/9 = 5/9 right dependents; head c 1/3 + 2/9 = 5/9 left ones;
    # b 4/9 on each side.  The smallest E_D / N_D is b's 4/9, so f = 0.9 * 4/9 = 0.4.
    assert stops(c, k, "b", "L") == pytest.approx((0.6, 0.4, 0.4, 4 / 9 - 0.4))
    assert stops(c, k, "a", "R") == pytest.approx((0.6, 0.4, 0.4, 5 / 9 - 0.4))
    assert stops(c, k, "a", "L") == pytest.approx((1.0, 0.0, 0.0, 0.0))


def test_independent_on_two_words():
    # "a b": each word attaches to the other with p = 1 (no (n-1)/n factor, no smoothing).
    # a, right: P0 = 1 - 1 = 0, E = 1 -> STOP0 = 0, not-STOP0 = STOP1 = 1, not-STOP1 = 0.
    # a, left: no candidate, P0 = 1 -> STOP0 = 1, the rest 0.  Root 1/2 each.
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"]], "independent")
    k = g.index
    assert c[k["S --> Y_a"]] == pytest.approx(0.5)
    assert c[k["R'_a --> R_a Y_b"]] == pytest.approx(1.0) and c[k["R'_b --> R_b Y_a"]] == 0
    assert stops(c, k, "a", "R") == pytest.approx((0, 1, 1, 0))
    assert stops(c, k, "a", "L") == pytest.approx((1, 0, 0, 0))
    assert stops(c, k, "b", "L") == pytest.approx((0, 1, 1, 0))


def test_independent_stop_counts_on_three_words():
    # "a b c", head a, right: b attaches to a with p = 1 / (1 + 1) = 1/2, c with (1/2) / (1/2 + 1) = 1/3.
    # P0 = (1 - 1/2)(1 - 1/3) = 1/3, E = 1/2 + 1/3 = 5/6:
    # STOP0 = 1/3, not-STOP0 = STOP1 = 2/3, not-STOP1 = 5/6 - 2/3 = 1/6.
    g = dmv_grammar([["a", "b", "c"]])
    c = harmonic_counts(g, [["a", "b", "c"]], "independent")
    assert stops(c, g.index, "a", "R") == pytest.approx((1 / 3, 2 / 3, 2 / 3, 1 / 6))


def test_km_global_counts_one_word_sentences_as_tokens():
    # "a b" as in test_km_global_on_two_words plus "a" alone: a has N = 2 tokens, still one with a word
    # on its right (N_R = 1, E_R = 1/2), so f = 0.9 * 0.6 = 0.54 as there, and
    # a, right: STOP0 = 2 + .1 - .54 = 1.56; a, left: STOP0 = N + .1 = 2.1.
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"], ["a"]], "km-global")
    k = g.index
    assert c[k["R0_a --> a_r"]] == pytest.approx(1.56) and c[k["L0_a --> a_l"]] == pytest.approx(2.1)
    assert stops(c, k, "a", "R") == pytest.approx((1.56, 0.64, 0.64, 0.06))


@pytest.mark.parametrize("variant", ["km-global", "independent"])
def test_sentences_with_an_unknown_word_are_skipped(variant):
    # "a z": z is not in the grammar, the whole sentence is left out (a alone is not counted either)
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"], ["a", "z"]], variant)
    assert np.array_equal(c, harmonic_counts(g, [["a", "b"]], variant))
    assert c[g.index["S --> Y_a"]] == pytest.approx(0.6 if variant == "km-global" else 0.5)


def test_km_global_first_kid_share_is_capped_at_one():
    # smoothing 1: ratios (E + s)/N_D = 1.5 and (N + s)/N_D = 2 for a, right and b, left; the cap 1 is
    # smaller, so f = 0.9 * 1 = 0.9 and a, right: STOP0 = 1 + 1 - .9 = 1.1, not-STOP0 = STOP1 = 1 + .9 = 1.9,
    # not-STOP1 = .5 + 1 - .9 = .6
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"]], "km-global", smoothing=1.0)
    assert stops(c, g.index, "a", "R") == pytest.approx((1.1, 1.9, 1.9, 0.6))


def test_independent_adds_smoothing_when_given():
    # test_independent_on_two_words's counts + 0.5 on every rule: a, right (0, 1, 1, 0) -> (.5, 1.5, 1.5, .5);
    # the rules that got nothing (choose(a | b, right)) get 0.5
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"]], "independent", smoothing=0.5)
    k = g.index
    assert c.min() == 0.5 and c[k["R'_b --> R_b Y_a"]] == 0.5 and c[k["S --> Y_a"]] == pytest.approx(1.0)
    assert stops(c, k, "a", "R") == pytest.approx((0.5, 1.5, 1.5, 0.5))


def test_default_variant_is_km_global_in_the_api_and_the_cli(tmp_path):
    # the API default: the counts of test_km_global_on_two_words (S --> Y_a 0.6; independent gives 0.5)
    assert HARMONIC_DEFAULT == "km-global"
    g = dmv_grammar([["a", "b"]])
    c = harmonic_counts(g, [["a", "b"]])
    assert np.array_equal(c, harmonic_counts(g, [["a", "b"]], "km-global"))
    assert c[g.index["S --> Y_a"]] == pytest.approx(0.6)
    # the CLI repeats the default as a literal: it must write what --variant HARMONIC_DEFAULT writes
    corpus, g0 = tmp_path / "c.conllu", tmp_path / "g0.txt"
    corpus.write_text("1\tx\t_\tNN\tNN\t_\t2\t_\t_\t_\n2\ty\t_\tVB\tVB\t_\t0\t_\t_\t_\n\n")
    grind("make-grammar", "dmv", "--column", "XPOS", "-o", g0, corpus)
    opts = ("init", "--harmonic", "--corpus", corpus, "--column", "XPOS")
    default = grind(*opts, g0).stdout
    explicit = grind(*opts, "--variant", HARMONIC_DEFAULT, g0).stdout
    assert f"# harmonic_variant: {HARMONIC_DEFAULT}" in default

    def weights(text):
        return [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert weights(default) == weights(explicit)


def test_smoothed_variant_gives_every_rule_positive_weight():
    sents = [["a", "b", "c"], ["c", "a"], ["b"]]
    g = dmv_grammar(sents, vocabulary=["a", "b", "c", "z"])          # z never occurs in training
    for variant, positive in (("km-global", True), ("independent", False)):
        c = harmonic_counts(g, sents, variant)
        assert (c >= 0).all()
        assert bool((c > 0).all()) is positive
        if positive:
            assert (g.normalize(c) > 0).all()
    with pytest.raises(InputError):
        harmonic_counts(g, sents, "nope")


@pytest.mark.slow
def test_init_variant_option(tmp_path):
    c = tmp_path / "c.conllu"
    c.write_text("1\tx\t_\tNN\tNN\t_\t2\t_\t_\t_\n2\ty\t_\tVB\tVB\t_\t0\t_\t_\t_\n\n")
    g0 = tmp_path / "g0.txt"
    grind("make-grammar", "dmv", "--column", "XPOS", "-o", g0, c)
    out = {v: grind("init", "--harmonic", "--variant", v, "--corpus", c, "--column", "XPOS", g0).stdout
           for v in ("km-global", "independent")}
    assert out["km-global"] != out["independent"]
    assert "# harmonic_variant: km-global" in out["km-global"]
    default = grind("init", "--harmonic", "--corpus", c, "--column", "XPOS", g0).stdout
    assert "# harmonic_variant: km-global" in default
    r = grind("init", "--variant", "independent", g0, check=False)
    assert r.returncode == 2 and "--variant is for --harmonic" in r.stderr


def ln_run(iterations, tolerance, seed=0):
    rng = np.random.default_rng(seed)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(2, 5))) for _ in range(5)]
    g = dmv_grammar(sents)
    cfg = SimpleNamespace(iterations=iterations, tolerance=tolerance)
    a = ln.LogisticNormal(g, ShardedEstep(make_parser(g, sents)), None, g.normalize(harmonic_counts(g, sents)), cfg)
    return train(a, rng)


def test_ln_stops_at_convergence_and_says_so():
    # (the bound keeps creeping up as Sigma shrinks, so a small corpus needs a loose tolerance)
    trace = ln_run(200, 1e-3)
    assert 10 < len(trace) < 200
    last = trace[-1]
    assert re.match(r"converged at iteration \d+: relative change of the bound .* <= tolerance 0.001",
                    last.extra["stopped"])
    rel = abs(last.objective - trace[-2].objective) / abs(trace[-2].objective)
    assert rel <= 1e-3
    assert all("stopped" not in s.extra for s in trace[:-1])
    assert all(abs(b.objective - a.objective) > 1e-3 * abs(a.objective) for a, b in zip(trace[:-1], trace[1:-1]))


def test_ln_cap_says_so():
    trace = ln_run(3, 0.0)
    assert len(trace) == 3 and trace[-1].extra["stopped"].startswith("reached the cap of 3 iterations")


@pytest.mark.slow
def test_train_ln_defaults_run_to_convergence(tmp_path):
    c = tmp_path / "c.conllu"
    c.write_text("1\tx\t_\tNN\tNN\t_\t2\t_\t_\t_\n2\ty\t_\tVB\tVB\t_\t0\t_\t_\t_\n\n"
                 "1\ty\t_\tVB\tVB\t_\t0\t_\t_\t_\n2\tx\t_\tNN\tNN\t_\t1\t_\t_\t_\n\n")
    g0, g1, tr = tmp_path / "g0.txt", tmp_path / "g1.txt", tmp_path / "t.tsv"
    grind("make-grammar", "dmv", "--column", "XPOS", "-o", g0, c)
    grind("init", "--harmonic", "--corpus", c, "--column", "XPOS", "-o", g1, g0)
    # --tolerance given, --iterations not: the ln cap (1000), not the other algorithms' 50, applies
    r = grind("train", "--algo", "ln", "--tolerance", "1e-3", "--column", "XPOS", "--trace", tr, g1, c)
    m = re.search(r"stopped converged at iteration (\d+): relative change of the bound .* <= tolerance 0.001",
                  r.stderr)
    rows = [ln_.split("\t") for ln_ in tr.read_text().splitlines() if not ln_.startswith("#")]
    assert m and "stopped" in rows[0] and 50 < int(m.group(1)) == len(rows) - 1 < 1000
    # --iterations given, --tolerance not: the ln tolerance 1e-5 applies
    r = grind("train", "--algo", "ln", "--iterations", "2", "--column", "XPOS", g1, c)
    assert "stopped reached the cap of 2 iterations before converging (tolerance 1e-05)" in r.stderr
    r = grind("train", "--algo", "em", "--iterations", "2", "--column", "XPOS", g1, c)      # em: its own 1e-6
    assert "stopped reached the cap of 2 iterations before converging (tolerance 1e-06)" in r.stderr


def test_init_harmonic_on_a_corpus_outside_the_vocabulary(tmp_path):
    a, b = tmp_path / "a.conllu", tmp_path / "b.conllu"
    a.write_text("1\tx\t_\tNN\tNN\t_\t0\t_\t_\t_\n\n")
    b.write_text("1\ty\t_\tVB\tVB\t_\t0\t_\t_\t_\n\n")
    g0 = tmp_path / "g0.txt"
    grind("make-grammar", "dmv", "--column", "XPOS", "-o", g0, a)
    r = grind("init", "--harmonic", "--corpus", b, "--column", "XPOS", g0, check=False)
    assert r.returncode != 0 and "no sentence of the corpus fits the grammar's vocabulary" in r.stderr
    assert "Traceback" not in r.stderr
