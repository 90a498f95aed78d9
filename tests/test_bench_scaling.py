"""The scaling benchmark: the power-law fit, a quick end-to-end run, the plot with and without matplotlib."""
import math
import sys

import numpy as np
import pytest

from grind.bench import scaling


@pytest.mark.parametrize("b", [1.0, 2.0, 3.0, 2.5, -0.5])
@pytest.mark.parametrize("c", [1e-6, 3.0])
def test_fit_recovers_the_exponent_of_an_exact_power_law(b, c):
    x = np.array([5, 7, 10, 14, 20, 28, 40], dtype=float)
    a, fitted, r2 = scaling.fit_power(x, c * x**b)
    assert fitted == pytest.approx(b, abs=1e-10)
    assert a == pytest.approx(math.log(c), abs=1e-9)
    assert r2 == pytest.approx(1.0, abs=1e-12)


def test_fit_of_a_noisy_or_mixed_law():
    rng = np.random.default_rng(0)
    x = np.geomspace(10, 1000, 12)
    a, b, r2 = scaling.fit_power(x, 2e-5 * x**3 * np.exp(rng.normal(0, 0.05, x.size)))
    assert abs(b - 3) < 0.05 and 0.99 < r2 < 1
    # L^2 + L^3 / 20: the slope climbs from 2 to 3, so the fit over the upper half lies between
    up = scaling.upper_half(x)
    _, b, r2 = scaling.fit_power(x[up], x[up]**2 + x[up]**3 / 20)
    assert 2.5 < b < 3 and r2 < 1
    # a flat series fits b = 0 exactly (R² is defined as 1 when nothing varies)
    assert scaling.fit_power([1, 2, 4], [5.0, 5.0, 5.0])[1:] == pytest.approx((0.0, 1.0))
    for bad in (([3, 3], [1.0, 2.0]), ([1, 2], [1.0, 0.0]), ([1, 2, 3], [1.0, 2.0])):
        with pytest.raises(ValueError):
            scaling.fit_power(*bad)


def test_upper_half_is_from_the_geometric_middle():
    assert scaling.upper_half([5, 7, 10, 14, 20, 28, 40]).tolist() == [False] * 4 + [True] * 3
    assert scaling.upper_half([250, 500, 1000, 2000, 4000, 8000]).tolist() == [False] * 3 + [True] * 3
    assert scaling.upper_half([10, 20, 40]).tolist() == [False, True, True]


def test_quick_run_prints_the_table_and_skips_the_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib -> ImportError
    tsv, png = tmp_path / "points.tsv", tmp_path / "scaling.png"
    r = scaling.main(["--quick", "--tsv", str(tsv), "--plot", str(png)])
    out = capsys.readouterr().out
    assert r["plotted"] is False and not png.exists()
    assert "Plot skipped: matplotlib is not installed" in out

    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert rows[0].startswith("| kernel | variable | fixed | range | fitted on | b (fitted) | b expected |")
    assert len(rows) == 2 + len(scaling.SCANS)
    assert all(line.count("|") == rows[0].count("|") == 10 for line in rows)
    names = [(s["name"], s["variable"]) for s in r["scans"]]
    assert names == [("CKY dense", "length"), ("CKY sparse", "length"), ("CKY dense", "nonterminals"),
                     ("CKY sparse", "nonterminals"), ("CKY dense", "sentences"), ("DMV", "length"),
                     ("DMV", "sentences")]
    for s in r["scans"]:
        assert len(s["points"]) == 3 and [p["fitted"] for p in s["points"]] == [False, True, True]
        assert all(p["seconds"] > 0 and p["sentences"] > 0 for p in s["points"])
        assert math.isfinite(s["b"]) and s["r2"] == pytest.approx(1.0)      # two points: an exact line
    work = {(s["name"], s["variable"]): s["work_b"] for s in r["scans"]}
    # the sparse kernel's own multiply-add count: 4 per binary rule (4 N^3 of them) and split ((L+1) L (L-1) / 6)
    assert work["CKY sparse", "nonterminals"] == pytest.approx(3.0, abs=1e-9)
    assert work["CKY sparse", "length"] == pytest.approx(math.log2(21 * 20 * 19 / (11 * 10 * 9)), abs=1e-9)
    assert work["CKY dense", "sentences"] == pytest.approx(1.0, abs=1e-9)
    assert work["DMV", "length"] is None

    lines = tsv.read_text().splitlines()
    assert lines[0].split("\t")[:7] == ["kernel", "path", "variable", "fixed", "x", "sentences", "cpu_seconds"]
    assert len(lines) == 1 + 3 * len(scaling.SCANS)
    assert all(len(line.split("\t")) == len(lines[0].split("\t")) for line in lines)


def _synthetic_scans():
    def pts(xs, b):
        return [dict(x=x, seconds=1e-6 * x**b * (2.0 if x == xs[0] else 1.0), wall=0.0, sentences=10, work=None)
                for x in xs]
    return [scaling.fit_scan("CKY", "dense", "length", "N = 10", 3, pts([5, 10, 20, 40], 2.5)),
            scaling.fit_scan("DMV", "", "length", "35 tags", 3, pts([5, 10, 20, 40, 60], 3.0)),
            scaling.fit_scan("CKY", "sparse", "nonterminals", "L = 10", 3, pts([5, 10, 20], 3.0)),
            scaling.fit_scan("DMV", "", "sentences", "L = 10", 1, pts([1000, 4000, 16000], 1.0))]


def test_fit_scan_ignores_the_overhead_of_the_small_sizes():
    scans = _synthetic_scans()
    assert [s["b"] for s in scans] == pytest.approx([2.5, 3.0, 3.0, 1.0], abs=1e-9)
    assert [s["fit_from"] for s in scans] == [20, 20, 10, 4000]


def test_plot_has_one_panel_per_variable(tmp_path):
    pytest.importorskip("matplotlib")
    scans = _synthetic_scans()
    fig = scaling.scaling_figure(scans)
    assert [ax.get_title() for ax in fig.axes] == ["E-step time vs length", "E-step time vs nonterminals",
                                                   "E-step time vs sentences"]
    assert all(ax.get_xscale() == ax.get_yscale() == "log" for ax in fig.axes)
    png = tmp_path / "s.png"
    assert scaling.write_plot(str(png), scans) is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
