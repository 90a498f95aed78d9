"""The LN benchmark runs end to end on a tiny corpus."""
from grind.bench import ln as bench


def test_ln_bench_runs(capsys):
    r = bench.main(["--sentences", "40"])
    names = [name for name, _, _ in r["rows"]]
    assert names == ["EM (reference)", "LN-I identity", "SLN TieA, reduced solves", "SLN TieA, full-expert solves"]
    assert all(t > 0 for _, _, t in r["rows"])
    assert "| SLN TieA, reduced solves |" in capsys.readouterr().out


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
