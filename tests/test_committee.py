"""Committee decoding: grammars drawn from the logistic-normal prior, reproducible by seed."""
import numpy as np
import pytest

from conftest import grind
from grind.infer.committee import PriorSampler, committee_heads
from grind.eval.dependencies import format_spread
from grind.grammars.dmv import dmv_grammar
from grind.kernels.dmv import DMVParser
from grind.infer.ln import Packing, save_ln, softmax_weights

SENTS = [["DET", "NOUN", "VERB"], ["NOUN", "VERB", "ADV", "ADJ"], ["VERB", "NOUN"]]


def ln_file(tmp_path, g, scale):
    pk = Packing(g)
    rng = np.random.default_rng(0)
    mu = np.where(pk.mask, rng.standard_normal((pk.K, pk.D)), 0.0)
    Sigma = np.broadcast_to(scale * np.eye(pk.D), (pk.K, pk.D, pk.D)).copy()
    p = tmp_path / "ln.txt"
    save_ln(str(p), g, mu, Sigma)
    return str(p), softmax_weights(pk, mu)


def test_zero_covariance_draws_softmax_mu(tmp_path):
    g = dmv_grammar(SENTS)
    path, theta = ln_file(tmp_path, g, 1e-14)
    np.testing.assert_allclose(PriorSampler(g, path).draw(np.random.default_rng(1)), theta, rtol=1e-5)


def test_draws_vary_and_are_proper_distributions(tmp_path):
    g = dmv_grammar(SENTS)
    path, _ = ln_file(tmp_path, g, 1.0)
    s = PriorSampler(g, path)
    a, b = s.draw(np.random.default_rng(1)), s.draw(np.random.default_rng(2))
    assert not np.allclose(a, b)
    np.testing.assert_allclose(g.lhs_totals(a)[g.lhs >= 0], 1.0)


def test_committee_member_is_reproducible_by_seed(tmp_path):
    g = dmv_grammar(SENTS)
    path, _ = ln_file(tmp_path, g, 1.0)
    parser = DMVParser(g, SENTS)
    run = lambda seed: committee_heads(parser, PriorSampler(g, path), np.random.default_rng(seed))  # noqa: E731
    a, b = run(5), run(5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert len(a) == len(SENTS) and all(len(h) == len(s) for h, s in zip(a, SENTS))


def test_spread_of_runs():
    rows = lambda d: [{"subset": "all", "directed": d, "undirected": d}]  # noqa: E731
    out = format_spread([rows(0.2), rows(0.4)])
    assert "all\t0.3000\t0.1414\t0.3000\t0.1414" in out


@pytest.mark.slow
def test_committee_cli(tmp_path):
    g = dmv_grammar(SENTS)
    gp = tmp_path / "g.txt"
    from grind.grammars.grammar import rule_lines
    gp.write_text("".join(rule_lines(g.rules, g.weights)))
    path, _ = ln_file(tmp_path, g, 1.0)
    c = tmp_path / "c.txt"
    c.write_text("\n".join(" ".join(s) for s in SENTS) + "\n")
    m1 = grind("parse", "--committee", path, "--seed", "3", gp, c).stdout
    m2 = grind("parse", "--committee", path, "--seed", "3", gp, c).stdout
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith("#")]  # noqa: E731
    assert strip(m1) == strip(m2) and len([ln for ln in strip(m1) if ln]) == 9
