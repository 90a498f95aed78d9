"""The LN benchmark runs end to end on a tiny corpus."""
from grind.bench import ln as bench


def test_ln_bench_runs(capsys):
    r = bench.main(["--sentences", "40"])
    names = [name for name, _, _ in r["rows"]]
    assert names == ["EM (reference)", "LN-I identity", "SLN TieA, reduced solves", "SLN TieA, full-expert solves"]
    assert all(t > 0 for _, _, t in r["rows"])
    assert "| SLN TieA, reduced solves |" in capsys.readouterr().out
