"""Shared logistic normal (Cohen & Smith 2010 §3.3): partition structures,
their file format, the averaging of Definition 1, and bilingual tying."""
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import grind
from grind.infer import ln
from grind.grammars.dmv import dmv_grammar
from grind.kernels.dmv import DMVParser
from grind.errors import InputError
from grind.grammars.grammar import rule_lines
from grind.infer.sln import (JointParser, Structure, joint_grammar, read_structure, split_joint, tie_structure,
                       write_structure)
from grind.infer.sln import tie_structure as tie_structure_
from grind.infer.training import ShardedEstep, train

SENTS = [["NOUN", "VERB", "PROPN", "NOUN"], ["ADJ", "NOUN", "AUX", "VERB"], ["VERB", "CCONJ", "VERB"],
         ["SCONJ", "PROPN", "VERB", "NOUN"], ["AUX", "ADJ"]]
SENTS2 = [["PROPN", "VERB", "NOUN"], ["NOUN", "AUX", "ADJ"], ["VERB", "NOUN", "NOUN"]]
UPOS = ln.read_families("upos")


def shared(st):
    return {n: sorted(st.pk.lhs[k] for k in ks) for n, ks in st.experts if len(ks) > 1}


def test_tie_structures_on_a_dmv_grammar():
    """--tie-what choose: the choose multinomials only (the structure before choose+stop)."""
    g = dmv_grammar(SENTS)
    pk = ln.Packing(g)
    tie_structure = partial(tie_structure_, what="choose")
    V = shared(tie_structure(g, pk, "V", UPOS))
    assert V == {"tie:verb:left": ["L'_AUX", "L'_VERB"], "tie:verb:right": ["R'_AUX", "R'_VERB"]}
    N = shared(tie_structure(g, pk, "TieN", UPOS))
    assert N == {"tie:nominal:left": ["L'_NOUN", "L'_PROPN"], "tie:nominal:right": ["R'_NOUN", "R'_PROPN"]}
    assert shared(tie_structure(g, pk, "VN", UPOS)) == {**V, **N}
    A = shared(tie_structure(g, pk, "A", UPOS))
    assert A == {**V, **N, "tie:conjunction:left": ["L'_CCONJ", "L'_SCONJ"],
                 "tie:conjunction:right": ["R'_CCONJ", "R'_SCONJ"]}
    st = tie_structure(g, pk, "A", UPOS)
    assert len(st.experts) == pk.K + 6 and st.n_cover.max() == 2
    for gr in st.groups:                      # a group's experts cover disjoint multinomials
        t = gr.tgt[gr.mask]
        assert len(np.unique(t)) == len(t)
    with pytest.raises(InputError, match="unknown tying"):
        tie_structure(g, pk, "X", UPOS)


@pytest.mark.parametrize("power", [1, 2])
def test_structure_add_is_combine_after_one_group_changed(power):
    """Structure.add(total, gi, delta, power) = combine(xs with xs[gi] + delta, power): each
    coordinate of group gi adds delta / |J_k|^power to its multinomial's rule (TieV: L'_AUX,
    L'_VERB, R'_AUX, R'_VERB, and their stop multinomials, are each covered by 2 experts)."""
    g = dmv_grammar(SENTS)
    pk = ln.Packing(g)
    st = tie_structure_(g, pk, "V", UPOS)
    rng = np.random.default_rng(0)
    xs = [np.where(gr.mask, rng.standard_normal(gr.mask.shape), 0.0) for gr in st.groups]
    for gi, gr in enumerate(st.groups):
        delta = np.where(gr.mask, rng.standard_normal(gr.mask.shape), 0.0)
        got = st.add(st.combine(xs, power), gi, delta, power)
        want = st.combine([x + delta if j == gi else x for j, x in enumerate(xs)], power)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    # by hand, a shared expert (every coordinate of a multinomial covered twice): delta / 2^power
    gi, e = next((gi, e) for gi, gr in enumerate(st.groups) for e, j in enumerate(gr.members)
                 if st.experts[j][0] == "tie:verb:left")
    gr = st.groups[gi]
    delta = np.zeros(gr.mask.shape)
    delta[e, 0] = 1.0
    k, i = divmod(int(gr.tgt[e, 0]), pk.D)
    assert st.n_cover[k] == 2
    diff = st.add(st.combine(xs, power), gi, delta, power) - st.combine(xs, power)
    assert diff[k, i] == pytest.approx(0.5 ** power, rel=1e-12)
    assert np.count_nonzero(diff) == 1


def test_structure_file_roundtrip_and_errors(tmp_path):
    g = dmv_grammar(SENTS)
    pk = ln.Packing(g)
    st = tie_structure(g, pk, "A", UPOS)
    p = tmp_path / "s.txt"
    write_structure(str(p), st)
    assert read_structure(str(p), pk).experts == st.experts
    text = p.read_text()
    assert "own yes\n" in text and "expert tie:verb:left L'_AUX L'_VERB\n" in text
    p.write_text("own yes\nexpert ok L'_AUX L'_VERB\nexpert bad L'_AUX L'_NOPE\n")
    with pytest.raises(InputError, match=r"s.txt:3: .L'_NOPE. is not a left-hand side"):
        read_structure(str(p), pk)
    p.write_text("own yes\nexpert ok L'_AUX\nexpet x L'_AUX\n")
    with pytest.raises(InputError, match=r"s.txt:3: expected 'expert NAME LHS...'"):
        read_structure(str(p), pk)
    p.write_text("own no\nexpert only L'_AUX L'_VERB\n")
    with pytest.raises(InputError, match="covered by no expert"):
        read_structure(str(p), pk)
    p.write_text("expert twice L'_AUX L'_AUX\n")
    with pytest.raises(InputError, match="distinct multinomials"):
        read_structure(str(p), pk)


def test_averaging_with_a_degenerate_shared_expert_is_a_rescaled_ln():
    """Definition 1: with a shared expert pinned at 0 (Sigma -> 0), a tied
    multinomial is eta_own / 2, i.e. a plain LN with prior N(mu/2, Sigma/4);
    the E-step bounds agree (KL is invariant under the rescaling)."""
    g = dmv_grammar(SENTS)
    est = ShardedEstep(DMVParser(g, SENTS))
    cfg = SimpleNamespace(iterations=1, tolerance=0, tie="V", families=UPOS, ln_cycles=4)
    tied = ln.LogisticNormal(g, est, None, g.weights, cfg)
    plain = ln.LogisticNormal(g, est, None, g.weights, SimpleNamespace(iterations=1, tolerance=0, ln_cycles=4))
    rng = np.random.default_rng(3)
    G = len(plain.st.groups)                 # the own experts form the same groups in both
    assert [g.members for g in tied.st.groups[:G]] == [g.members for g in plain.st.groups]
    tied.mu, tied.Sigma, plain.mu, plain.Sigma = [], [], [], []
    for gi, gr in enumerate(tied.st.groups):
        if gi >= G:                           # shared experts pinned at 0
            tied.mu.append(np.zeros((gr.E, gr.L)))
            tied.Sigma.append(np.broadcast_to(1e-12 * np.eye(gr.L), (gr.E, gr.L, gr.L)).copy())
            continue
        mu = np.where(gr.mask, rng.standard_normal(gr.mask.shape), 0.0)
        A = rng.standard_normal((gr.E, gr.L, gr.L)) * 0.4
        S = A @ np.swapaxes(A, 1, 2) + 0.5 * np.eye(gr.L)
        tied.mu.append(mu)
        tied.Sigma.append(S)
        scale = np.where(gr.mask, gr.w, 1.0)          # 1/|J_k|: 1/2 on tied multinomials
        plain.mu.append(mu * scale)
        plain.Sigma.append(S * scale[:, :, None] * scale[:, None, :])
    idx = np.arange(len(SENTS))
    bt = tied.e_step(tied._io_sentences(idx), len(idx), tied._prior_terms())[-1]
    bp = plain.e_step(plain._io_sentences(idx), len(idx), plain._prior_terms())[-1]
    np.testing.assert_allclose(bt, bp, rtol=1e-6)
    np.testing.assert_allclose(tied.weights(), plain.weights(), rtol=1e-12)
    assert np.any(tied.st.n_cover == 2)


def test_joint_parser_matches_separate_parsers():
    g1, g2 = dmv_grammar(SENTS), dmv_grammar(SENTS2)
    jg = joint_grammar([g1, g2], ["1", "2"])
    p1, p2 = DMVParser(g1, SENTS), DMVParser(g2, SENTS2)
    jp = JointParser(jg, [p1, p2])
    rng = np.random.default_rng(0)
    w = jg.normalize(np.exp(rng.standard_normal(len(jg))))
    w1, w2 = jp.split_weights(w)
    c, z = jp.inside_outside(w)
    c1, z1 = p1.inside_outside(w1)
    c2, z2 = p2.inside_outside(w2)
    np.testing.assert_allclose(c, np.concatenate([c1, c2]))
    np.testing.assert_allclose(z, np.concatenate([z1, z2]))
    c, z = jp.inside_outside(w, [1, 6])
    np.testing.assert_allclose(z, [z1[1], z2[1]])
    parts = split_joint(jg)
    assert [p.rules for p in parts] == [g1.rules, g2.rules]
    assert ln.rule_dependents(jg) == ln.rule_dependents(g1) + ln.rule_dependents(g2)
    # bilingual TieA: every family's expert spans both languages
    st = tie_structure(jg, ln.Packing(jg), "A", UPOS)
    sh = shared(st)
    assert sh["tie:nominal:left"] == ["1|L'_NOUN", "1|L'_PROPN", "2|L'_NOUN", "2|L'_PROPN"]
    assert sh["tie:adjective:right"] == ["1|R'_ADJ", "2|R'_ADJ"]   # one tag a family: tied across languages
    assert sh["tie:conjunction:left"] == ["1|L'_CCONJ", "1|L'_SCONJ"]


def _write(tmp_path, name, g, sents):
    gp, cp = tmp_path / f"{name}.txt", tmp_path / f"{name}.sents"
    gp.write_text("".join(rule_lines(g.rules, g.weights)))
    cp.write_text("\n".join(" ".join(s) for s in sents) + "\n")
    return gp, cp


@pytest.mark.slow
def test_bilingual_training_cli(tmp_path):
    g1, c1 = _write(tmp_path, "a", dmv_grammar(SENTS), SENTS)
    g2, c2 = _write(tmp_path, "b", dmv_grammar(SENTS2), SENTS2)
    o1, o2, lnp = tmp_path / "o1.txt", tmp_path / "o2.txt", tmp_path / "ln.txt"
    r = grind("train", "--algo", "ln", "--iterations", "2", "--tie", "A", "--tie-warmup", "0", "--cov", "families",
              "--joint", g2, c2, "--joint-output", o2, "--ln-params", lnp, "-o", o1, g1, c1)
    assert "8 sentences" in r.stderr
    from grind.grammars.grammar import read_grammar
    a, b = read_grammar(str(o1)), read_grammar(str(o2))
    assert a.rules == dmv_grammar(SENTS).rules and b.rules == dmv_grammar(SENTS2).rules
    for x in (a, b):
        np.testing.assert_allclose(x.lhs_totals(x.weights)[x.lhs], 1.0)
    assert "# structure:" in o1.read_text()
    assert "# expert tie:verb:left: 1|L'_AUX 1|L'_VERB 2|L'_AUX 2|L'_VERB" in lnp.read_text()
    s = grind("make-structure", "--tie", "A", g1, g2).stdout
    assert "expert tie:verb:left 1|L'_AUX 1|L'_VERB 2|L'_AUX 2|L'_VERB" in s
    # each language's grammar parses its own corpus
    grind("parse", "--mbr", o2, c2)
    bad = grind("train", "--algo", "ln", "--joint", g2, c2, g1, c1, check=False)
    assert bad.returncode != 0 and "--joint-output" in bad.stderr and "Traceback" not in bad.stderr
    bad = grind("train", "--algo", "em", "--tie", "V", g1, c1, check=False)
    assert bad.returncode != 0 and "--tie is for --algo ln" in bad.stderr


@pytest.mark.slow
def test_tie_file_cli_and_errors(tmp_path):
    g1, c1 = _write(tmp_path, "a", dmv_grammar(SENTS), SENTS)
    s = tmp_path / "s.txt"
    s.write_text(grind("make-structure", "--tie", "V", g1).stdout)
    r = grind("train", "--algo", "ln", "--iterations", "1", "--tie", s, "--tie-warmup", "0", g1, c1)
    assert "experts (6 shared)" in r.stdout          # verb: choose left/right, stop left/right x valence 0/1
    s.write_text(grind("make-structure", "--tie", "V", "--tie-what", "choose", g1).stdout)
    r = grind("train", "--algo", "ln", "--iterations", "1", "--tie", s, "--tie-warmup", "0", g1, c1)
    assert "experts (2 shared)" in r.stdout
    s.write_text("own yes\nexpert x L'_VERB L'_GONE\n")
    bad = grind("train", "--algo", "ln", "--iterations", "1", "--tie", s, g1, c1, check=False)
    assert bad.returncode != 0 and "s.txt:2:" in bad.stderr and "Traceback" not in bad.stderr
    # a tie that ties nothing says so
    g3, c3 = _write(tmp_path, "c", dmv_grammar([["NOUN", "ADJ"]]), [["NOUN", "ADJ"]])
    r = grind("train", "--algo", "ln", "--iterations", "1", "--tie", "V", g3, c3)
    assert "plain logistic normal" in r.stderr
    r = grind("make-structure", "--tie", "V", g3)
    assert "plain logistic normal" in r.stderr and "(0 shared)" in r.stdout


def test_committee_sampler_on_a_tied_prior(tmp_path):
    from grind.infer.committee import PriorSampler
    g = dmv_grammar(SENTS)
    est = ShardedEstep(DMVParser(g, SENTS))
    a = ln.LogisticNormal(g, est, None, g.weights,
                          SimpleNamespace(iterations=2, tolerance=0, tie="A", families=UPOS))
    train(a, np.random.default_rng(0))
    a.Sigma = [np.broadcast_to(1e-14 * np.eye(gr.L), (gr.E, gr.L, gr.L)).copy() for gr in a.st.groups]
    p = tmp_path / "ln.txt"
    a.save(str(p))
    s = PriorSampler(g, str(p))
    assert s.st.experts == a.st.experts
    np.testing.assert_allclose(s.draw(np.random.default_rng(1)), a.weights(), rtol=1e-5)
    assert Structure.plain(a.pk).is_plain is True and a.st.is_plain is False


def test_warm_tied_cli_bound_never_decreases(tmp_path):
    g1, c1 = _write(tmp_path, "a", dmv_grammar(SENTS), SENTS)
    tr = tmp_path / "t.tsv"
    grind("train", "--algo", "ln", "--iterations", "5", "--tie", "A", "--tie-warmup", "0", "--ln-warm", "--trace", tr,
          g1, c1)
    rows = [ln.split("\t") for ln in tr.read_text().splitlines() if not ln.startswith("#")]
    b = np.array([float(r[rows[0].index("objective")]) for r in rows[1:]])
    assert len(b) == 5 and np.all(np.diff(b) >= -1e-7 * np.abs(b[:-1])), b


@pytest.mark.slow
def test_ln_init_cli_restarts_from_a_params_file(tmp_path):
    g1, c1 = _write(tmp_path, "a", dmv_grammar(SENTS), SENTS)
    p, o1, o2 = tmp_path / "p.txt", tmp_path / "o1.txt", tmp_path / "o2.txt"
    grind("train", "--algo", "ln", "--iterations", "2", "--tie", "A", "--tie-warmup", "0", "--ln-params", p,
          "-o", o1, g1, c1)
    r = grind("train", "--algo", "ln", "--iterations", "1", "--ln-init", p, "-o", o2, g1, c1)
    assert "experts (18 shared)" in o2.read_text()   # verb, nominal, conjunction: 2 choose + 4 stop each
    bad = grind("train", "--algo", "ln", "--ln-init", p, "--tie", "V", g1, c1, check=False)
    assert bad.returncode == 2 and "leave out --tie" in bad.stderr
    del r


# the complete tag sets: every tag must be in a family
PTB_TAGS = ["CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP", "NNPS", "PDT",
            "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP",
            "VBZ", "WDT", "WP", "WP$", "WRB", "#", "$", "``", "''", ",", ".", ":", "-LRB-", "-RRB-"]
UPOS_TAGS = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
             "SCONJ", "SYM", "VERB", "X"]


@pytest.mark.parametrize("name,tags", [("ptb", PTB_TAGS), ("upos", UPOS_TAGS)])
def test_family_maps_cover_the_whole_tag_set(name, tags):
    fam = ln.read_families(name)
    assert len(tags) == len(set(tags)) == {"ptb": 45, "upos": 17}[name]
    assert sorted(set(fam) - {"CONJ"}) == sorted(tags)          # CONJ: UD v1's CCONJ, kept for old treebanks
    assert fam["VB" if name == "ptb" else "VERB"] == "verb"
    det = ["DT", "PDT", "WDT"] if name == "ptb" else ["DET"]
    assert {fam[t] for t in det} == {"determiner"}


def test_family_file_escapes_and_duplicates(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("# a comment\n\\# symbol\n$ symbol\nNN noun\n")
    assert ln.read_families(str(p)) == {"#": "symbol", "$": "symbol", "NN": "noun"}
    p.write_text("NN noun\nNNS noun\nNN verb\n")
    with pytest.raises(InputError, match=r"f.txt:3: tag 'NN' is already in family noun"):
        ln.read_families(str(p))


def test_choose_and_stop_structure():
    """choose+stop (the default): per family, besides the choose experts, one
    expert per direction and valence over the heads' stop multinomials, each
    segment its multinomial's rules in order; every own expert kept."""
    g = dmv_grammar(SENTS)
    pk = ln.Packing(g)
    st = tie_structure(g, pk, "V", UPOS)
    assert shared(st) == {"tie:verb:left": ["L'_AUX", "L'_VERB"], "tie:verb:right": ["R'_AUX", "R'_VERB"],
                          "tie:verb:stop:left:0": ["L0_AUX", "L0_VERB"], "tie:verb:stop:left:1": ["L_AUX", "L_VERB"],
                          "tie:verb:stop:right:0": ["R0_AUX", "R0_VERB"],
                          "tie:verb:stop:right:1": ["R_AUX", "R_VERB"]}
    assert st.experts[:pk.K] == [(a, (k,)) for k, a in enumerate(pk.lhs)]
    ex = dict(st.experts)
    # the coordinates of tie:verb:stop:left:0: L0_AUX's two rules, then L0_VERB's
    gi, e = next((gi, e) for gi, gr in enumerate(st.groups) for e, j in enumerate(gr.members)
                 if st.experts[j][0] == "tie:verb:stop:left:0")
    gr = st.groups[gi]
    rules = [g.rules[pk.rows.ravel()[t]] for t in gr.tgt[e][gr.mask[e]]]
    assert rules == [("L0_AUX", ("AUX_l",)), ("L0_AUX", ("L'_AUX",)), ("L0_VERB", ("VERB_l",)),
                     ("L0_VERB", ("L'_VERB",))]
    assert [pk.lhs[k] for k in ex["tie:verb:stop:right:1"]] == ["R_AUX", "R_VERB"]
    covered = {pk.lhs[k] for k in np.flatnonzero(st.n_cover == 2)}
    assert covered == {f"{p}_{h}" for p in ("L'", "R'", "L0", "L", "R0", "R") for h in ("AUX", "VERB")}
    assert st.n_cover[pk.lhs.index("S")] == 1 and st.n_cover[pk.lhs.index("Y_VERB")] == 1
    # TieV&N and TieA: the same six experts for every tied family
    vn = shared(tie_structure(g, pk, "VN", UPOS))
    assert vn["tie:nominal:stop:right:0"] == ["R0_NOUN", "R0_PROPN"] and len(vn) == 12
    a = shared(tie_structure(g, pk, "A", UPOS))
    assert a["tie:conjunction:stop:left:1"] == ["L_CCONJ", "L_SCONJ"] and len(a) == 18
    # choose only: no stop expert
    assert not any(":stop:" in n for n in shared(tie_structure(g, pk, "A", UPOS, what="choose")))
    with pytest.raises(InputError, match="unknown --tie-what"):
        tie_structure(g, pk, "V", UPOS, what="stop")


def test_joint_choose_and_stop_structure_and_make_structure(tmp_path):
    g1, g2 = dmv_grammar(SENTS), dmv_grammar(SENTS2)
    jg = joint_grammar([g1, g2], ["1", "2"])
    st = tie_structure(jg, ln.Packing(jg), "V", UPOS)
    sh = shared(st)
    assert sh["tie:verb:stop:left:0"] == ["1|L0_AUX", "1|L0_VERB", "2|L0_AUX", "2|L0_VERB"]
    assert sh["tie:verb:right"] == ["1|R'_AUX", "1|R'_VERB", "2|R'_AUX", "2|R'_VERB"]
    assert len(sh) == 6
    a, _ = _write(tmp_path, "a", g1, SENTS)
    b, _ = _write(tmp_path, "b", g2, SENTS2)
    out = grind("make-structure", "--tie", "V", "--families", "upos", a, b).stdout
    p = tmp_path / "s.txt"
    p.write_text(out)
    assert read_structure(str(p), ln.Packing(jg)).experts == st.experts
    assert "expert tie:verb:stop:right:1 1|R_AUX 1|R_VERB 2|R_AUX 2|R_VERB\n" in out
    assert "# tie_what: choose+stop" in out


@pytest.mark.slow
def test_tie_warmup_cli(tmp_path):
    g1, c1 = _write(tmp_path, "a", dmv_grammar(SENTS), SENTS)
    lnp = tmp_path / "ln.txt"
    r = grind("train", "--algo", "ln", "--iterations", "3", "--tie", "V", "--tie-warmup", "2", "--ln-params", lnp,
              g1, c1)
    assert "after 2 untied iterations the tied structure takes over" in r.stderr
    assert "experts (6 shared)" in r.stdout and "# expert tie:verb:stop:left:1: L_AUX L_VERB" in lnp.read_text()
    r = grind("train", "--algo", "ln", "--iterations", "2", "--tie", "V", g1, c1)     # default warm-up: 5
    assert "never takes over" in r.stderr and "experts (0 shared)" in r.stdout
    bad = grind("train", "--algo", "ln", "--tie-warmup", "2", g1, c1, check=False)
    assert bad.returncode == 2 and "--tie-warmup needs --tie" in bad.stderr


@pytest.mark.parametrize("extra, why", [
    (["--joint-output", "jo.txt"], "--joint-output is the second language's grammar of --joint"),
    (["--tie-what", "choose"], "--tie-what needs --tie"),
    (["--families", "ptb"], "--families is read by --cov families and --tie"),
    (["--checkpoint-every", "3"], "--checkpoint-every needs --checkpoint FILE"),
])
def test_options_that_would_do_nothing_are_usage_errors(tmp_path, extra, why):
    """Each was accepted and ignored (--joint-output left a stale file in place; CLI audit)."""
    g1, c1 = _write(tmp_path, "a", dmv_grammar(SENTS), SENTS)
    bad = grind("train", "--algo", "ln", "--iterations", "1", *extra, g1, c1, check=False, cwd=tmp_path)
    assert bad.returncode == 2 and why in bad.stderr and not (tmp_path / "jo.txt").exists()
