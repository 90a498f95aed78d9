"""Sharded training: ``grind split`` -> ``estep`` per shard -> ``sum`` -> ``mstep``,
looped, gives the grammar and the objectives ``grind train`` gives (EM, MAP-EM, VB),
and the sharded recipe (data-recipes/sharded/Makefile) runs it with make -j.

Bit for bit with one shard (the same sentences summed in the same order, in
blocks of 256 as grind train sums them); within 1e-12 relative with 2 and 3
shards, whose sentences (interleaved by the cost balancing) are added in
another order: floating-point addition is not associative.
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, SAMPLE, grind
from grind.cli import main
from grind.formats.corpus import CorpusSpec, corpus_blocks, read_corpus
from grind.formats.counts import read_counts
from grind.formats.textio import read_lines
from grind.grammars.grammar import read_grammar

TRAIN = str(SAMPLE / "en_ewt-ud-train-sample.conllu.gz")
SHORT = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
#: The CNF setting: UPOS sentences of 2..6 tags (a CNF grammar has no derivation of one word).
CNF = ["--column", "UPOS", "--punct", "ud", "--min-length", "2", "--max-length", "6"]
ALGOS = {"em": "1", "map": "2", "vb": "0.5"}
ITERATIONS = 3


def run(*args):
    """grind ARGS in-process (the E-steps of many shards would spend most of their time starting Python)."""
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        raise AssertionError(f"grind {' '.join(map(str, args))} exited with {e.code}") from None


def header(path) -> dict:
    out = {}
    for _, ln in read_lines(str(path)):
        if not ln.startswith("#"):
            break
        k, _, v = ln[1:].partition(":")
        out.setdefault(k.strip(), v.strip())
    return out


def trace_objectives(path) -> list[float]:
    rows = [ln.rstrip("\n").split("\t") for ln in open(path, encoding="utf-8") if not ln.startswith("#")]
    col = rows[0].index("objective")
    return [float(r[col]) for r in rows[1:]]


@pytest.fixture(scope="module")
def grammars(tmp_path_factory):
    """(directory, {name: (initial grammar, corpus options)}): the harmonic DMV
    and a randomly initialised CNF grammar over the shipped sample."""
    d = tmp_path_factory.mktemp("grammars")
    grind("make-grammar", "dmv", *SHORT, "-o", d / "dmv0.txt", TRAIN)
    grind("init", "--harmonic", "--corpus", TRAIN, *SHORT, "-o", d / "dmv.txt", d / "dmv0.txt")
    grind("make-grammar", "cnf", *CNF, "-n", "3", "-o", d / "cnf0.txt", TRAIN)
    grind("init", "--random", "--seed", "4", "-o", d / "cnf.txt", d / "cnf0.txt")
    return d, {"dmv": (d / "dmv.txt", SHORT), "cnf": (d / "cnf.txt", CNF)}


def sharded(d, grammar, opts, algo, alpha, k, iterations):
    """The sharded path in ``d``: split -n k, then (VB: an initialisation round
    and) ``iterations`` rounds of estep per shard, sum in shard order, mstep.
    Returns the grammar files after steps 0..iterations (0: the start)."""
    run("split", *opts, "-n", k, "-o", d / "shard", TRAIN)
    shards = [d / f"shard.{i}.conllu.gz" for i in range(1, k + 1)]
    g = [grammar]
    rounds = iterations + (algo == "vb")
    for r in range(rounds):
        counts = []
        for i, s in enumerate(shards, 1):
            counts.append(d / f"c{r}.{i}.txt")
            run("-q", "estep", "--algo", algo, *opts, "-o", counts[-1], g[-1], s)
        run("sum", "-o", d / f"c{r}.txt", *counts)
        g.append(d / f"g{r + 1}.txt")
        run("mstep", "--algo", algo, "--alpha", alpha, "--grammar", g[-2], "-o", g[-1], d / f"c{r}.txt")
    return g[1:] if algo == "vb" else g


def trained(d, grammar, opts, algo, alpha, iterations):
    out, trace = d / f"train-{algo}.txt", d / f"train-{algo}.tsv"
    run("-q", "train", "--algo", "vb" if algo == "vb" else "em", "--alpha", alpha, "--iterations", iterations,
        "--tolerance", "0", *opts, "--trace", trace, "-o", out, grammar, TRAIN)
    return out, trace


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dmv", "cnf"])
@pytest.mark.parametrize("algo", list(ALGOS))
def test_sharded_training_equals_grind_train(grammars, tmp_path, model, algo):
    d0, models = grammars
    grammar, opts = models[model]
    alpha = ALGOS[algo]
    (d0 / model).mkdir(exist_ok=True)
    ref, trace = trained(d0 / model, grammar, opts, algo, alpha, ITERATIONS)
    want = read_grammar(str(ref))
    objectives = trace_objectives(trace)
    assert len(objectives) == ITERATIONS
    ref_head = header(ref)
    for k in (1, 2, 3):
        d = tmp_path / f"k{k}"
        d.mkdir()
        steps = sharded(d, grammar, opts, algo, alpha, k, ITERATIONS)
        got = read_grammar(str(steps[-1]))
        head = header(steps[-1])
        for key in ("weights", "start", "algorithm", "alpha", "steps", "corpus"):
            assert head[key] == ref_head[key], (k, key)
        # the sentences the length limits left out, counted per shard and summed, as grind train counts them
        # (train's line counts the punctuation-only ones apart, issue 38: the totals agree)
        total = sum(int(n) for n in re.findall(r"([0-9]+) sentences", ref_head["left_out"]))
        assert int(head["left_out"].split()[0]) == total > 0
        assert sum(int(header(d / f"c{ITERATIONS - (algo != 'vb')}.{i}.txt").get("left_out", 0))
                   for i in range(1, k + 1)) == total
        objs = [float(header(g)["objective"]) for g in steps[1:]]
        if k == 1:     # the same sentences in the same order: bit for bit
            assert np.array_equal(got.weights, want.weights)
            assert objs == objectives and head["objective"] == ref_head["objective"]
        else:
            np.testing.assert_allclose(got.weights, want.weights, rtol=1e-12, atol=0)
            np.testing.assert_allclose(objs, objectives, rtol=1e-12, atol=0)


def blocks_of(path, spec):
    return [tuple(b.lines) for b in corpus_blocks(str(path), spec)[1]]


@pytest.mark.slow
def test_split_is_deterministic_partitions_the_corpus_and_balances_cost(tmp_path):
    spec = CorpusSpec(column="UPOS", punct="ud", max_length=10)
    whole = blocks_of(TRAIN, spec)
    assert len(set(whole)) == len(whole)           # sent_id comments make every block distinct
    where = {b: i for i, b in enumerate(whole)}
    run("split", *SHORT, "-n", 3, "-o", tmp_path / "a", TRAIN)
    first = [(tmp_path / f"a.{i}.conllu.gz").read_bytes() for i in (1, 2, 3)]
    run("split", *SHORT, "-n", 3, "-o", tmp_path / "a", TRAIN)
    assert [(tmp_path / f"a.{i}.conllu.gz").read_bytes() for i in (1, 2, 3)] == first
    seen, costs, sentences = [], [], []
    for i in (1, 2, 3):
        path = tmp_path / f"a.{i}.conllu.gz"
        pos = [where[b] for b in blocks_of(path, spec)]
        assert pos == sorted(pos)                  # each shard keeps the file's order
        seen += pos
        h = header(path)
        costs.append(int(h["cost"].split()[0]))
        sents = read_corpus(str(path), spec)
        assert int(h["sentences"]) == len(sents)
        assert costs[-1] == sum(len(s) ** 3 for s in sents)
        sentences += [tuple(s.tokens) for s in sents]
    assert sorted(seen) == list(range(len(whole)))    # every block once: merged by position, the file
    kept = read_corpus(TRAIN, spec)
    assert sorted(sentences) == sorted(tuple(s.tokens) for s in kept)
    assert sum(costs) == sum(len(s) ** 3 for s in kept)
    assert max(costs) - min(costs) <= max(len(s) ** 3 for s in kept)   # greedy: within one sentence
    with gzip.open(tmp_path / "a.1.conllu.gz", "rt", encoding="utf-8") as f:
        assert "\n# cost: " in f.read(2000)


TEXT = """# a header line, not a sentence
the dog barks

# this line is a sentence: the header ended at the blank line
a cat saw the dog
( not a tree )
dogs barks
the dog barks
a b c d e f g h
"""


def test_split_text_keeps_every_sentence_whatever_it_begins_with(tmp_path):
    (tmp_path / "c.txt").write_text(TEXT)
    spec = CorpusSpec()
    whole = [s.tokens for s in read_corpus(str(tmp_path / "c.txt"), spec)]
    assert len(whole) == 7
    run("split", "-n", 3, "-o", tmp_path / "s", tmp_path / "c.txt")
    parts = [[s.tokens for s in read_corpus(str(tmp_path / f"s.{i}.txt"), spec)] for i in (1, 2, 3)]
    assert sorted(map(tuple, sum(parts, []))) == sorted(map(tuple, whole))
    assert parts[0] == [whole[1]] and whole[1][0] == "#"   # the costliest sentence first, read as one
    assert parts[1] == [list("abcdefgh")]
    # --types: every occurrence of a sentence in one shard, so the shards read with --types hold the corpus's types
    r = grind("split", "--types", "--max-length", "5", "-n", 2, "-o", tmp_path / "t", tmp_path / "c.txt",
              check=False)        # shard 2 would begin with '( not a tree )', which --format auto reads as PTB
    assert r.returncode == 1 and "pass --format text" in r.stderr and not list(tmp_path.glob("t.*"))
    run("split", "--format", "text", "--types", "--max-length", "5", "-n", 2, "-o", tmp_path / "t",
        tmp_path / "c.txt")
    types = CorpusSpec(format="text", types=True, max_length=5)
    got = [tuple(s.tokens) for i in (1, 2) for s in read_corpus(str(tmp_path / f"t.{i}.txt"), types)]
    assert sorted(got) == sorted(tuple(s.tokens) for s in read_corpus(str(tmp_path / "c.txt"), types))
    assert sum(len(read_corpus(str(tmp_path / f"t.{i}.txt"), CorpusSpec(format="text"))) for i in (1, 2)) == 7
    one = [(tmp_path / f"t.{i}.txt").read_text().count("the dog barks") for i in (1, 2)]
    assert sorted(one) == [0, 2]


def test_split_ptb_keeps_trees_whole(tmp_path):
    trees = ("( (S (NP (DT the) (NN dog))\n    (VP (VBZ barks))) )\n"
             "(S (NP (NNS dogs)) (VP (VBD saw) (NP (PRP it)))) (S (NP (PRP it)) (VP (VBZ is)))\n"
             "# a comment\n(S (NP (-NONE- *)) (VP (VB go)))\n(S (INTJ (UH yes)))\n")
    (tmp_path / "t.mrg").write_text(trees)
    spec = CorpusSpec(column="XPOS")
    run("split", "--column", "XPOS", "-n", 2, "-o", tmp_path / "s", tmp_path / "t.mrg")
    parts = [read_corpus(str(tmp_path / f"s.{i}.mrg"), spec) for i in (1, 2)]
    assert sorted(tuple(s.tokens) for p in parts for s in p) == sorted(
        tuple(s.tokens) for s in read_corpus(str(tmp_path / "t.mrg"), spec))
    first = (tmp_path / "s.1.mrg").read_text()
    assert "(S (NP (NNS dogs)) (VP (VBD saw) (NP (PRP it)))) (S (NP (PRP it)) (VP (VBZ is)))\n" in first


def test_split_refuses_more_shards_than_sentences(tmp_path):
    (tmp_path / "c.txt").write_text("a b\nc d e\n")
    r = grind("split", "-n", 3, "-o", tmp_path / "s", tmp_path / "c.txt", check=False)
    assert r.returncode == 1 and "at most 2 shards" in r.stderr
    assert not list(tmp_path.glob("s.*"))


def test_split_of_exactly_k_sentences_makes_k_shards(tmp_path):
    (tmp_path / "c.txt").write_text("a b\nc d e\n")
    run("split", "-n", 2, "-o", tmp_path / "s", tmp_path / "c.txt")
    parts = [[s.tokens for s in read_corpus(str(tmp_path / f"s.{i}.txt"), CorpusSpec())] for i in (1, 2)]
    assert parts == [[["c", "d", "e"]], [["a", "b"]]]


def test_split_deals_blocks_of_cost_0_to_the_shards_with_fewest_blocks(tmp_path):
    # kept: 'a b c' (27) to shard 1, 'd e' (8) and 'f' (1) to shard 2; then the four sentences over
    # --max-length one by one to the shard with the fewest blocks: 1, 1 (tie), 2, 1
    (tmp_path / "c.txt").write_text("a b c\nd e\nf\n" + "".join(f"{w} " * 5 + w + "\n" for w in "xyzw"))
    run("split", "--max-length", 5, "-n", 2, "-o", tmp_path / "s", tmp_path / "c.txt")
    heads = [header(tmp_path / f"s.{i}.txt") for i in (1, 2)]
    assert [h["blocks"] for h in heads] == ["4", "3"]
    lines = [(tmp_path / f"s.{i}.txt").read_text().splitlines() for i in (1, 2)]
    body = [[ln for ln in part if ln and not ln.startswith("#")] for part in lines]
    assert [ln.split()[0] for ln in body[0]] == ["a", "x", "y", "w"]
    assert [ln.split()[0] for ln in body[1]] == ["d", "f", "z"]


def test_split_types_headers_count_each_type_once(tmp_path):
    (tmp_path / "c.txt").write_text("the dog\nthe dog\na cat sat\n")
    run("split", "--types", "-n", 2, "-o", tmp_path / "s", tmp_path / "c.txt")
    types = CorpusSpec(types=True)
    heads = [header(tmp_path / f"s.{i}.txt") for i in (1, 2)]
    assert [h["cost"].split("(")[0].strip() for h in heads] == ["27 of 35", "8 of 35"]
    assert [h["sentences"] for h in heads] == ["1", "1"] and [h["blocks"] for h in heads] == ["1", "2"]
    for i, h in zip((1, 2), heads):
        assert int(h["sentences"]) == len(read_corpus(str(tmp_path / f"s.{i}.txt"), types))


@pytest.mark.slow
def test_counts_of_different_steps_are_refused(grammars, tmp_path):
    d0, models = grammars
    grammar, opts = models["dmv"]
    g = sharded(tmp_path, grammar, opts, "vb", "0.5", 2, 1)        # g[0]: the initialisation, g[1]: step 1
    run("-q", "estep", "--algo", "vb", *opts, "-o", tmp_path / "late.txt", g[1], tmp_path / "shard.2.conllu.gz")
    r = grind("sum", tmp_path / "c1.1.txt", tmp_path / "late.txt", check=False)     # shard 1 of step 1, 2 of step 2
    assert r.returncode == 1 and "different E-steps" in r.stderr
    r = grind("mstep", "--algo", "vb", "--alpha", "0.5", "--grammar", g[1], tmp_path / "c1.txt", check=False)
    assert r.returncode == 1 and "not made with the weights of" in r.stderr
    r = grind("mstep", "--algo", "vb", "--alpha", "0.5", "--grammar", g[0], tmp_path / "c0.txt", check=False)
    assert r.returncode == 1 and "estep: probabilities" in r.stderr     # the init counts against a VB grammar
    r = grind("mstep", "--algo", "vb", "--alpha", "0.5", tmp_path / "c1.txt", check=False)
    assert r.returncode == 2 and "--grammar" in r.stderr
    run("-q", "estep", *opts, "-o", tmp_path / "e0.txt", g[0], TRAIN)
    grind("mstep", "--algo", "map", "--alpha", "2", "--grammar", g[0], tmp_path / "e0.txt")
    for algo in ("em", "map"):      # only warned, and a MAP nonterminal at 0/0 fell back to the stale grammar
        r = grind("mstep", "--algo", algo, "--alpha", "2", "--grammar", g[1], tmp_path / "e0.txt", check=False)
        assert r.returncode == 1 and "not made with the weights of" in r.stderr and not r.stdout
    r = grind("mstep", "--algo", "em", "--grammar", g[0], tmp_path / "c1.txt", check=False)
    assert r.returncode == 1 and "use --algo vb" in r.stderr
    c = read_counts(str(tmp_path / "c1.txt"))
    assert c.meta["estep"] == "vb" and c.stats["sentences"] == len(read_corpus(TRAIN, CorpusSpec(
        column="UPOS", punct="ud", max_length=10)))


# ----------------------------------------------------------------------------- the sharded recipe
RECIPE = REPO / "data-recipes" / "sharded"
MAKE_ENV = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")


def recipe(*args):
    return subprocess.run(["make", "-C", str(RECIPE), *map(str, args)], capture_output=True, text=True, env=MAKE_ENV)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("algo,alpha", [("em", "1"), ("vb", "0.5")])
def test_sharded_recipe_equals_grind_train(grammars, tmp_path, algo, alpha):
    d0, models = grammars
    grammar, opts = models["dmv"]
    run_ = "em" if algo == "em" else f"vb:{alpha}"
    r = recipe("-j2", f"GRAMMAR={grammar}", f"CORPUS={TRAIN}", "SHARDS=2", "ITERATIONS=2", f"RUNS={run_}",
               f"CORPUS_OPTIONS={' '.join(opts)}", f"OUT={tmp_path / 'run'}")
    assert r.returncode == 0, r.stderr
    assert re.search(r"estep --algo .*shards-k2/corpus\.2\.conllu\.gz", r.stdout)
    out = tmp_path / "run" / (f"{algo}-k2" if algo == "em" else f"{algo}-a{alpha}-k2")
    got = out / "grammar.txt"
    run("-q", "train", "--algo", algo, "--alpha", alpha, "--iterations", 2, "--tolerance", "0", *opts,
        "--trace", tmp_path / "t.tsv", "-o", tmp_path / "want.txt", grammar, TRAIN)
    np.testing.assert_allclose(read_grammar(str(got)).weights, read_grammar(str(tmp_path / "want.txt")).weights,
                               rtol=1e-12, atol=0)
    assert header(got)["weights"] == header(tmp_path / "want.txt")["weights"]
    rows = [ln.split("\t") for ln in (out / "trace.tsv").read_text().splitlines() if not ln.startswith("#")]
    assert rows[0][:2] == ["step", "objective"]
    np.testing.assert_allclose([float(r[1]) for r in rows[1:]], trace_objectives(tmp_path / "t.tsv"),
                               rtol=1e-12, atol=0)
    assert os.path.exists(out / "g2.txt")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_sharded_recipe_trains_a_latent_treebank_grammar(tmp_path):
    """TREES=1: the E-steps are grind estep --trees, and the run equals grind train --trees (make check)."""
    (tmp_path / "t.mrg").write_text(
        "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)) )\n"
        "( (S (NP-SBJ (PRP It)) (VP (VBD ran) (ADVP (RB away))) (. .)) )\n"
        "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD ran) (PP (IN to) (NP (DT the) (NN cat)))) (. .)) )\n")
    run("make-grammar", "treebank", "--rare", "0", "--subtypes", "2", "--seed", "3", "-o", tmp_path / "g.txt",
        tmp_path / "t.mrg")
    r = recipe("-j2", "TREES=1", f"CORPUS={tmp_path / 't.mrg'}", f"GRAMMAR={tmp_path / 'g.txt'}", "RUNS=em", "SHARDS=2",
               "ITERATIONS=2", f"OUT={tmp_path / 'run'}", "all", "check")
    assert r.returncode == 0, r.stderr
    assert re.search(r"grind estep --algo em --trees .*corpus\.2\.mrg", r.stdout)
    out = tmp_path / "run" / "em-k2-trees"
    np.testing.assert_allclose(read_grammar(str(out / "grammar.txt")).weights,
                               read_grammar(str(out / "train-i2.txt")).weights, rtol=1e-12, atol=0)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_sharded_recipe_follows_its_settings(grammars, tmp_path):
    """ITERATIONS lowered kept the longer run's grammar.txt; another (older) corpus or other options on the same OUT
    said 'Nothing to be done' (sharding audit); quoted corpus options made a run impossible to resume; a
    non-numeric alpha was found after a full E-step round (issue 38): now cells say their settings, a changed
    setting makes its cells again, and values are checked before any work."""
    d0, models = grammars
    grammar, opts = models["dmv"]
    out = tmp_path / "run"
    quoted = " ".join(opts).replace("UPOS", "'UPOS'")          # the shell reads it as the same options
    base = (f"GRAMMAR={grammar}", f"CORPUS={TRAIN}", "RUNS=em", "SHARDS=2", f"CORPUS_OPTIONS={quoted}", f"OUT={out}")
    assert recipe(*base, "ITERATIONS=2").returncode == 0
    again = recipe(*base, "ITERATIONS=2")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout
    assert recipe(*base, "ITERATIONS=1").returncode == 0
    run_dir = out / "em-k2"
    assert (run_dir / "grammar.txt").read_bytes() == (run_dir / "g1.txt").read_bytes()
    assert len([ln for ln in (run_dir / "trace.tsv").read_text().splitlines() if not ln.startswith("#")]) == 2
    more = recipe(*base, "ITERATIONS=3", "-n").stdout           # more iterations go on from the last grammar
    assert "split" not in more and "c3.1.txt" in more and "c2.1.txt" not in more
    for changed in (f"CORPUS={SAMPLE / 'en_ewt-ud-dev-sample.conllu.gz'}", "CORPUS_OPTIONS=" + " ".join(opts)):
        n = recipe(*base, "ITERATIONS=1", changed, "-n").stdout    # made again, never reused
        assert "grind split" in n and "c1.2.txt" in n, changed
    assert "shards-k3" in recipe(*base, "ITERATIONS=1", "SHARDS=3", "-n").stdout
    for bad, message in (("SHARDS=x", "'x' is not a whole number >= 1"), ("SHARDS=0", "'0' is not a whole number"),
                         ("ITERATIONS=0", "'0' is not a whole number >= 1"), ("RUNS=vb:x", "'x' is not a number > 0"),
                         ("RUNS=vb", "needs an alpha"), ("RUNS=em:2", "takes no alpha"),
                         (f"OUT={tmp_path}/it's", "has the character ' in it")):
        r = recipe(*base, "ITERATIONS=1", bad)
        ran = [ln for ln in r.stdout.splitlines() if not ln.startswith("make")]      # not make's "Entering directory"
        assert r.returncode == 2 and message in r.stderr and not any("grind" in ln for ln in ran), bad
    assert recipe(*base, "clean").returncode == 0 and not out.exists()


@pytest.mark.slow
def test_a_missing_a_repeated_or_a_foreign_shard_is_refused(grammars, tmp_path):
    """Counts of one shard too few, one shard twice or shards of two splits were summed and turned into a
    grammar with exit 0 (sharding audit): the counts now say which shards of which split they hold."""
    d0, models = grammars
    grammar, opts = models["dmv"]
    sharded(tmp_path, grammar, opts, "em", "1", 3, 1)              # c0.1 .. c0.3 of one split of 3
    assert "# shards: 1 of 3 (split " in (tmp_path / "c0.1.txt").read_text()
    assert "# shards: 1,2,3 of 3 (split " in (tmp_path / "c0.txt").read_text()
    grind("sum", "-o", tmp_path / "two.txt", tmp_path / "c0.1.txt", tmp_path / "c0.2.txt")
    r = grind("mstep", "--grammar", grammar, tmp_path / "two.txt", check=False)
    assert r.returncode == 1 and "shard(s) 3 missing" in r.stderr and not r.stdout
    r = grind("sum", tmp_path / "c0.1.txt", tmp_path / "c0.2.txt", tmp_path / "c0.1.txt", check=False)
    assert r.returncode == 1 and "shard 1 of 3 is counted twice" in r.stderr
    run("split", *opts, "-n", 2, "-o", tmp_path / "other", TRAIN)
    run("-q", "estep", *opts, "-o", tmp_path / "o1.txt", grammar, tmp_path / "other.1.conllu.gz")
    r = grind("sum", tmp_path / "c0.1.txt", tmp_path / "o1.txt", check=False)
    assert r.returncode == 1 and "shards of different splits" in r.stderr
    run("-q", "estep", *opts, "-o", tmp_path / "whole.txt", grammar, TRAIN)
    r = grind("sum", tmp_path / "c0.1.txt", tmp_path / "whole.txt", check=False)
    assert r.returncode == 1 and "is of a grind split shard and the other is not" in r.stderr


# ----------------------------------------------------------------------------- what the sharded path refuses (audit)

@pytest.mark.slow
def test_a_shard_read_with_other_options_than_its_split_is_refused(grammars, tmp_path):
    """estep --types on shards split without it counted a repeat once per shard that held it (77
    sentences for a corpus of 50 types, sharding audit); other length limits likewise."""
    d0, models = grammars
    grammar, opts = models["dmv"]
    run("split", *opts, "-n", 2, "-o", tmp_path / "s", TRAIN)
    shard = tmp_path / "s.1.conllu.gz"
    for other in (["--types"], ["--max-length", "12"]):
        extra = [o for o in opts if o not in ("--max-length", "10")] if "--max-length" in other else opts
        r = grind("estep", *extra, *other, grammar, shard, check=False)
        assert r.returncode == 1 and "grind split cut this shard with the corpus options" in r.stderr, r.stderr
        assert "give the split's options" in r.stderr and not r.stdout
    assert grind("estep", "--format", "conllu", *opts, grammar, shard).stdout       # a named format is the detected one


@pytest.mark.slow
def test_the_split_id_covers_the_corpus_text(grammars, tmp_path):
    """Two corpora split by the same command line had one split ID, so shard 1 of one and shard 2 of the
    other summed into a grammar (sharding audit)."""
    d0, models = grammars
    grammar, opts = models["dmv"]
    ids = []
    for name, src in (("a", TRAIN), ("b", str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz"))):
        (tmp_path / name).mkdir()
        shutil.copy(src, tmp_path / name / "corpus.conllu.gz")
        subprocess.run([sys.executable, "-m", "grind.cli", "split", *opts, "-n", "2", "-o", "s", "corpus.conllu.gz"],
                       cwd=tmp_path / name, check=True, capture_output=True)
        k = 1 if name == "a" else 2
        run("-q", "estep", *opts, "-o", tmp_path / f"{name}.txt", grammar, tmp_path / name / f"s.{k}.conllu.gz")
        ids.append(header(tmp_path / f"{name}.txt")["shards"])
    assert ids[0].split("(")[1] != ids[1].split("(")[1]
    r = grind("sum", tmp_path / "a.txt", tmp_path / "b.txt", check=False)
    assert r.returncode == 1 and "shards of different splits" in r.stderr


@pytest.mark.slow
def test_counts_say_their_start_symbol(grammars, tmp_path):
    """estep --start X on one shard was summed with the others and updated (sharding audit)."""
    d0, models = grammars
    grammar, opts = models["dmv"]
    run("split", *opts, "-n", 2, "-o", tmp_path / "s", TRAIN)
    run("-q", "estep", *opts, "-o", tmp_path / "c1.txt", grammar, tmp_path / "s.1.conllu.gz")
    run("-q", "estep", *opts, "--start", "R_NOUN", "--max-unparsed", 1, "-o", tmp_path / "c2.txt", grammar,
        tmp_path / "s.2.conllu.gz")
    assert header(tmp_path / "c1.txt")["estep-start"] == "S"
    r = grind("sum", tmp_path / "c1.txt", tmp_path / "c2.txt", check=False)
    assert r.returncode == 1 and "'# estep-start: S' and '# estep-start: R_NOUN'" in r.stderr
    run("-q", "estep", *opts, "-o", tmp_path / "c.txt", grammar, TRAIN)
    r = grind("mstep", "--grammar", grammar, "--start", "R_NOUN", tmp_path / "c.txt", check=False)
    assert r.returncode == 1 and "made with the start symbol 'S'" in r.stderr and not r.stdout
    assert "# start: S" in grind("mstep", tmp_path / "c.txt").stdout        # without --grammar: the counts' start


@pytest.mark.slow
def test_mstep_without_grammar_refuses_a_left_hand_side_without_counts(grammars, tmp_path):
    """Without --grammar an LHS no sentence used got 0 on every rule, written as probabilities (audit)."""
    d0, models = grammars
    grammar, opts = models["dmv"]
    short = [o if o != "10" else "3" for o in opts]
    run("-q", "estep", *short, "-o", tmp_path / "c.txt", grammar, TRAIN)
    r = grind("mstep", tmp_path / "c.txt", check=False)
    assert r.returncode == 1 and "has no count (no sentence used it), so its MAP probabilities are 0/0" in r.stderr
    assert not r.stdout
    r = grind("mstep", "--alpha", "0.5", tmp_path / "c.txt", check=False)
    assert r.returncode == 1 and "MAP probabilities are 0/0" in r.stderr and not r.stdout
    assert "# weights: probabilities" in grind("mstep", "--alpha", "2", tmp_path / "c.txt").stdout
    assert grind("mstep", "--grammar", grammar, tmp_path / "c.txt").stdout       # keeps the previous ones


def test_mstep_says_unparsed_sentences_and_warns_of_changed_settings(tmp_path):
    (tmp_path / "g.txt").write_text("0.5 S --> a\n0.5 S --> S S\n")
    (tmp_path / "c.txt").write_text("a a\nb\na\n")
    run("-q", "estep", "-o", tmp_path / "n.txt", tmp_path / "g.txt", tmp_path / "c.txt")
    r = grind("mstep", "--grammar", tmp_path / "g.txt", "-o", tmp_path / "g1.txt", tmp_path / "n.txt")
    assert header(tmp_path / "g1.txt")["unparsed"].startswith("1 of 3 sentences without a parse")
    run("-q", "estep", "-o", tmp_path / "n1.txt", tmp_path / "g1.txt", tmp_path / "c.txt")
    r = grind("mstep", "--grammar", tmp_path / "g1.txt", "--alpha", "1", tmp_path / "n1.txt")
    assert "warning" not in r.stderr                                           # 1 is the 1.0 it was made with
    r = grind("mstep", "--grammar", tmp_path / "g1.txt", "--alpha", "2", tmp_path / "n1.txt")
    assert "g1.txt was made with --alpha 1.0, this step uses 2" in r.stderr
    run("-q", "estep", "--max-length", "1", "-o", tmp_path / "n2.txt", tmp_path / "g1.txt", tmp_path / "c.txt")
    r = grind("mstep", "--grammar", tmp_path / "g1.txt", tmp_path / "n2.txt")
    assert "was trained on a corpus read as" in r.stderr and "length=1..1" in r.stderr
    assert header(tmp_path / "n2.txt")["left_out"] == "1"


def test_split_keeps_a_comment_block_that_stands_alone_between_sentences(tmp_path):
    """'# newdoc id = d2' between two blank lines was dropped although split promises every block whole."""
    row = "1\tc\tc\tNOUN\tNN\t_\t0\troot\t_\t_\n"
    text = f"# sent_id = 1\n{row}\n# newdoc id = d2\n\n# sent_id = 2\n{row}\n# sent_id = 3\n{row}\n"
    (tmp_path / "c.conllu").write_text(text)
    run("split", "--column", "UPOS", "-n", 2, "-o", tmp_path / "s", tmp_path / "c.conllu")
    got = "".join((tmp_path / f"s.{k}.conllu").read_text() for k in (1, 2))
    assert got.count("# newdoc id = d2\n") == 1
    assert sum(len(read_corpus(str(tmp_path / f"s.{k}.conllu"), CorpusSpec(column="UPOS"))) for k in (1, 2)) == 3
