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
