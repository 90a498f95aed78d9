"""Universal rules by posterior regularization (grind.infer.posterior_reg) against brute force: the
projected posterior's expected counts are the KL projection computed by enumerating every tree (its
dual solved here independently), the constraint holds at the solution, and EM / VB with the projected
E-step never decrease the PR objective."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import brentq

from conftest import grind
from grind.errors import InputError
from grind.grammars.dmv import dmv_grammar, harmonic_counts, heads_derivation
from grind.grammars.dmv_constraints import DMVConstraints
from grind.grammars.grammar import Grammar
from grind.infer.cvb import CVB
from grind.infer.em import EM
from grind.infer.posterior_reg import PosteriorRegularizer, read_rules, regularize, rule_mask
from grind.infer.training import ShardedEstep, train
from grind.infer.vb import VB
from grind.kernels.dmv import DMVParser
from test_dmv_constraints import projective_trees

TAGS = ["ADP", "DET", "NOUN", "VERB"]
RULES = [("ROOT", "VERB"), ("VERB", "NOUN"), ("NOUN", "DET"), ("NOUN", "ADP")]
CORPUS = [["DET", "NOUN", "VERB"], ["NOUN", "VERB", "ADP", "NOUN"], ["VERB", "DET", "NOUN"], ["NOUN", "ADP"],
          ["ADP", "DET", "NOUN", "VERB"]]


def enumerated(g, w, sents, follows):
    """Per sentence: (tree weights, phi per tree, rule-count vectors)."""
    out = []
    for tags in sents:
        ws, phis, fs = [], [], []
        for heads in projective_trees(len(tags)):
            try:
                d = heads_derivation(g, tags, heads)
            except KeyError:
                continue
            f = np.bincount(d[:, 0], minlength=len(g)).astype(float)
            ws.append(float(np.prod(w[d[:, 0]])))
            phis.append(float(f[follows].sum()))
            fs.append(f)
        out.append((np.array(ws), np.array(phis), np.array(fs)))
    return out


def projection(trees, lam):
    """Counts, E[phi], sum log Z(lam) and sum log Z(0) of q_lam = p exp(lam phi) / Z(lam), sentence by sentence."""
    counts, phi, lz, lz0 = 0.0, 0.0, 0.0, 0.0
    for ws, ph, fs in trees:
        q = ws * np.exp(lam * ph)
        counts = counts + (q[:, None] * fs).sum(axis=0) / q.sum()
        phi += float((q * ph).sum() / q.sum())
        lz += math.log(q.sum())
        lz0 += math.log(ws.sum())
    return counts, phi, lz, lz0


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.7, 0.85])
@pytest.mark.parametrize("seed", [0, 1])
def test_projection_is_the_enumerated_kl_projection(seed, fraction):
    g = dmv_grammar([], vocabulary=TAGS)
    w = g.normalize(np.random.default_rng(seed).random(len(g)) + 0.05)
    follows = rule_mask(g, RULES)
    pr = PosteriorRegularizer(ShardedEstep(DMVParser(g, CORPUS)), follows, fraction)
    counts, logz = pr(w)
    trees = enumerated(g, w, CORPUS, follows)
    arcs = sum(map(len, CORPUS))
    target = fraction * arcs
    _, phi0, _, lz0 = projection(trees, 0.0)
    if phi0 >= target:                        # p meets the constraint: lambda = 0, no projection
        lam = 0.0
    else:                                     # the dual's stationary point: E_q[phi] = F N
        lam = brentq(lambda x: projection(trees, x)[1] - target, 0.0, 50.0, xtol=1e-12)
    want, phi, lz, _ = projection(trees, lam)
    assert pr.last["pr_lambda"] == pytest.approx(lam, rel=1e-4, abs=1e-9)
    np.testing.assert_allclose(counts, want, rtol=1e-5, atol=1e-7)
    assert pr.last["rule_share"] >= fraction - 1e-6                      # the constraint holds
    # sum of the returned log Z = sum log Z(0) - KL(q || p), KL = lam E_q[phi] - log(Z(lam) / Z(0))
    kl = lam * phi - (lz - lz0)
    assert kl >= -1e-12
    assert logz.sum() == pytest.approx(lz0 - kl, rel=1e-7)
    assert pr.last["rule_share_p"] == pytest.approx(phi0 / arcs, rel=1e-9)


def test_projection_at_a_sentence_subset_and_when_the_share_cannot_be_met():
    g = dmv_grammar([], vocabulary=TAGS)
    w = g.normalize(np.ones(len(g)))
    follows = rule_mask(g, RULES)
    est = ShardedEstep(DMVParser(g, CORPUS))
    pr = PosteriorRegularizer(est, follows, 0.75)
    counts, logz = pr(w, [1, 3])                       # the projection of these two sentences' posterior
    trees = enumerated(g, w, [CORPUS[1], CORPUS[3]], follows)
    lam = brentq(lambda x: projection(trees, x)[1] - 0.75 * 6, 0.0, 50.0, xtol=1e-12)
    assert len(logz) == 2 and pr.last["pr_lambda"] == pytest.approx(lam, rel=1e-6)
    np.testing.assert_allclose(counts, projection(trees, lam)[0], rtol=1e-6, atol=1e-9)
    # "NOUN ADP" and "ADP ... ": at most so many arcs can follow these rules; asking for all of them
    best = sum(max(ph) for _, ph, _ in enumerated(g, w, CORPUS, follows)) / sum(map(len, CORPUS))
    pr1 = PosteriorRegularizer(est, follows, 1.0)
    pr1(w)
    assert pr1.last["pr_lambda"] == 30.0 and pr1.last["rule_share"] <= best + 1e-9 and best < 1.0
    assert pr1.last["rule_share"] == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("cls,alpha", [(EM, 1.0), (VB, 0.5)])
def test_pr_objective_never_decreases(cls, alpha):
    g = dmv_grammar([], vocabulary=TAGS)
    sents = CORPUS * 3 + [["VERB", "NOUN", "NOUN"], ["DET", "ADP", "NOUN", "VERB", "NOUN"]]
    theta0 = g.normalize(harmonic_counts(g, sents))
    against = [("ROOT", "NOUN"), ("NOUN", "VERB"), ("DET", "NOUN"), ("ADP", "NOUN")]    # what the data resist
    est = PosteriorRegularizer(ShardedEstep(DMVParser(g, sents)), rule_mask(g, against), 0.6)
    algo = cls(g, est, np.full(len(g), alpha), theta0, SimpleNamespace(iterations=30, tolerance=0.0))
    trace = train(algo, np.random.default_rng(0))
    obj = [s.objective for s in trace]
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(obj, obj[1:])), obj
    assert all(s.extra["pr_lambda"] > 0 and s.extra["rule_share_p"] < 0.6 for s in trace)
    assert all(s.extra["rule_share"] == pytest.approx(0.6, abs=1e-8) for s in trace)


def test_cvb_with_rules_refits_once_a_sweep():
    g = dmv_grammar([], vocabulary=TAGS)
    theta0 = g.normalize(harmonic_counts(g, CORPUS))
    cfg = SimpleNamespace(iterations=4, tolerance=0.0)
    prior = np.full(len(g), 0.5)
    plain = CVB(g, ShardedEstep(DMVParser(g, CORPUS)), prior, theta0, cfg, np.random.default_rng(2))
    zero = CVB(g, PosteriorRegularizer(ShardedEstep(DMVParser(g, CORPUS)), rule_mask(g, RULES), 0.0), prior, theta0,
               cfg, np.random.default_rng(2))
    ta, tb = train(plain, np.random.default_rng(3)), train(zero, np.random.default_rng(3))
    np.testing.assert_array_equal(plain.alpha_hat, zero.alpha_hat)      # F = 0: lambda 0, plain CVB exactly
    assert [s.objective for s in ta] == [s.objective for s in tb]
    pr = PosteriorRegularizer(ShardedEstep(DMVParser(g, CORPUS)), rule_mask(g, RULES), 0.85)
    ruled = CVB(g, pr, prior, theta0, cfg, np.random.default_rng(2))
    trace = train(ruled, np.random.default_rng(3))
    assert all(s.extra["pr_lambda"] > 0 and s.extra["rule_share"] >= 0.85 - 1e-5 for s in trace)
    share = lambda a: float(a[rule_mask(g, RULES)].sum() - ruled.prior[rule_mask(g, RULES)].sum()) / 16  # noqa: E731
    assert share(ruled.alpha_hat) > share(plain.alpha_hat)


def test_rule_files_and_mask():
    ud, naseem = read_rules("ud"), read_rules("naseem")
    assert ("VERB", "AUX") in ud and ("AUX", "VERB") not in ud and ("ROOT", "AUX") not in ud
    assert ("AUX", "VERB") in naseem and ("ADP", "NOUN") in naseem and len(naseem) == 21
    g = dmv_grammar([], vocabulary=TAGS, constraints=DMVConstraints(leaf=frozenset({"ADP", "DET"})))
    m = rule_mask(g, naseem)
    keys = [k for k, x in zip(g.keys(), m) if x]
    assert "S --> Y_VERB" in keys and "R'_VERB --> R_VERB Y_NOUN" in keys and "L'_NOUN --> Y_DET L_NOUN" in keys
    assert not any(k.startswith(("L'_ADP", "R'_ADP")) for k in keys)          # a leaf heads nothing
    with pytest.raises(InputError, match="another tag set"):
        rule_mask(dmv_grammar([], vocabulary=["NN", "VB"]), naseem)
    _, head = regularize(g, ShardedEstep(DMVParser(g, CORPUS)), "naseem", 0.7)
    assert head["rule_fraction"].startswith("0.7 ") and "21 head>dependent arcs" in head["universal_rules"]


def test_cli(tmp_path, ewt_train):
    c = ("--column", "UPOS", "--punct", "ud", "--max-length", "10")
    grind("make-grammar", "dmv", *c, "--leaf-tags", "udfunc", "-o", tmp_path / "g0.txt", ewt_train)
    grind("init", "--harmonic", "--corpus", ewt_train, *c, "-o", tmp_path / "g1.txt", tmp_path / "g0.txt")
    r = grind("train", "--universal-rules", "--rule-fraction", "0.7", "--iterations", "3", "--trace",
              tmp_path / "t.tsv", *c, "-o", tmp_path / "g.txt", tmp_path / "g1.txt", ewt_train)
    g = Grammar.read(tmp_path / "g.txt")
    assert g.meta["universal_rules"].startswith("ud (universal-rules-ud.txt): 20 head>dependent arcs")
    assert g.meta["rule_fraction"].startswith("0.7 ") and "lambda" in g.meta["rule_share"]
    assert "constraints" in g.meta
    head = [x for x in (tmp_path / "t.tsv").read_text().splitlines() if not x.startswith("#")][0].split("\t")
    assert {"pr_lambda", "rule_share"} <= set(head)
    assert "universal rules ud" in r.stderr
    bad = grind("train", "--rule-fraction", "0.7", *c, tmp_path / "g1.txt", ewt_train, check=False)
    assert bad.returncode == 2 and "give --universal-rules" in bad.stderr
    bad = grind("train", "--algo", "gibbs", "--universal-rules", *c, tmp_path / "g1.txt", ewt_train, check=False)
    assert bad.returncode == 2 and "not of --algo gibbs" in bad.stderr


def test_fit_takes_the_rule_options():
    """grind.fit(universal_rules=, rule_fraction=): the same option table as grind train's, the same checks."""
    import grind as api
    g = dmv_grammar([], vocabulary=TAGS)
    g1 = g.with_weights(g.normalize(harmonic_counts(g, CORPUS)), dict(g.meta))
    r = api.fit(g1, CORPUS, "em", universal_rules="ud", rule_fraction=0.9, iterations=3)
    assert r.grammar.meta["universal_rules"].startswith("ud (universal-rules-ud.txt)")
    assert r.grammar.meta["rule_fraction"].startswith("0.9 ") and "lambda" in r.grammar.meta["rule_share"]
    assert all(s.extra["rule_share"] >= 0.9 - 1e-5 for s in r.trace)
    plain = api.fit(g1, CORPUS, "em", iterations=3)
    assert "universal_rules" not in plain.grammar.meta and "pr_lambda" not in plain.trace[-1].extra
    with pytest.raises(ValueError, match="give universal_rules"):
        api.fit(g1, CORPUS, "em", rule_fraction=0.9)
    with pytest.raises(ValueError, match="not of algo='gibbs'"):
        api.fit(g1, CORPUS, "gibbs", universal_rules="ud", seed=1)
