"""The benchmarks run end to end on tiny inputs, and every one of them answers --help without running."""
import importlib

import pytest

from grind.bench import ln as bench
from grind.bench.__main__ import BENCHES


@pytest.mark.parametrize("name", BENCHES + ("fisher",))
def test_every_bench_takes_help(name, capsys):
    mod = importlib.import_module(f"grind.bench.{name}")
    with pytest.raises(SystemExit) as e:
        mod.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m grind.bench.{name}") and "--help" in out


@pytest.mark.slow
def test_ln_bench_runs(capsys):
    r = bench.main(["--sentences", "40", "--large", "60", "--numpy-sentences", "10"])
    names = [name for name, _, _ in r["rows"]]
    assert names == ["EM (reference)", "LN-I identity", "LN-I families", "SLN TieA families",
                     "LN-I identity, the numpy E-step (first 10 sentences, scaled)"]
    assert all(t > 0 for _, _, t in r["rows"]) and r["goal_ratio"] > 0
    assert "EWT sample <= 10 (XPOS)" in r["ratios"]          # shipped: measured everywhere
    assert r["goal_ratio"] == max(r["ratios"].values())
    assert [m["n"] for m in r["model2"]] == [40, 60]
    assert [name for name, _, _ in r["model2"][1]["rows"]] == [
        "EM (reference)", "LN-II identity, 5 cycles from the prior",
        "LN-II identity, 1 cycle, warm start (first parse reused)"]
    assert all(t > 0 for m in r["model2"] for _, _, t in m["rows"])
    out = capsys.readouterr().out
    assert "| SLN TieA families |" in out and "Model II (theta drawn once for the corpus), 60 sentences" in out
    assert "Goal: an LN-I iteration <= 100 EM iterations:" in out


def test_morph_bench_runs_on_the_shipped_sample(monkeypatch, capsys):
    from pathlib import Path

    from grind.bench import morph
    sample = Path(__file__).resolve().parent.parent / "data" / "morph" / "ces-train-sample.tsv"
    monkeypatch.setenv("GRIND_CES_TRAIN", str(sample))
    r = morph.main(["--proposal-batch", "64", "--sub", "20"])
    assert r["words"] == 300 and all(r[k] > 0 for k in ("em", "h1", "hN", "cvb"))
    assert "Hastings sweep, --proposal-batch 64" in capsys.readouterr().out


def test_latent_tree_bench_runs_on_synthetic_trees(capsys):
    from grind.bench import latent_tree
    r = latent_tree.main(["--synthetic", "40", "--h", "2", "--ref-trees", "5", "--reps", "1"])
    assert [row["h"] for row in r["rows"]] == [2] and r["source"] == "40 synthetic random trees"
    assert all(row["tps"] > 0 and row["ref_tps"] > 0 and row["diff"] < 1e-9 for row in r["rows"])
    assert "| 2 |" in capsys.readouterr().out


def test_dmv_bench_cky_column_keeps_to_its_time_budget(monkeypatch):
    import time

    import numpy as np

    import grind.kernels.cky
    from grind.bench import dmv
    from grind.grammars.dmv import dmv_grammar
    rng = np.random.default_rng(0)
    sents, _ = dmv.tag_corpus(rng, 200, 10, n_tags=5)
    g = dmv_grammar(sents)
    rate, note, bound = dmv.cky_rate(g, sents, g.weights, 0.5)
    k, word, *rest = note.split()
    assert rate > 0 and not bound and word in ("sentence", "sentences,") and 1 <= int(k) <= 200

    class Stuck:
        """A parser whose one-sentence call outlasts any budget: the column must stop it."""
        def __init__(self, grammar, sentences):
            pass

        def inside_outside(self, weights, idx=None):
            time.sleep(60)

    monkeypatch.setattr(grind.kernels.cky, "CKYParser", Stuck)
    rate, note, bound = dmv.cky_rate(g, sents, g.weights, 0.3)
    assert bound and rate == 1 / 0.3 and note == "no sentence finished in the 0.3 s budget"
    row = dict(label="x", n=200, rules=len(g), build=0.0, dmv=1e5, target=None, cky=rate, note=note, bound=True)
    assert "| < 3.3 (no sentence finished in the 0.3 s budget) | > 30,000x |" in dmv.table([row])
    row.update(cky=0.5, note="1 sentence, best of 1 call", bound=False)
    assert "| 0.5 (1 sentence, best of 1 call) | 200,000x |" in dmv.table([row])


def test_streaming_bench_runs_and_prints_the_ratio_to_batch_vb(capsys):
    from grind.bench import streaming
    r = streaming.main(["--sentences", "300", "--types", "200", "--first", "50", "--stream", "40", "--dense", "5",
                        "--vb-iterations", "1"])
    assert all(r[k] > 0 for k in ("vb", "sparse", "dense"))
    out = capsys.readouterr().out
    assert "| streaming VB, sparse update | 40 |" in out and "cost per sentence / batch VB's" in out
