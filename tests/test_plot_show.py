"""grind show (a parse drawn as text) and grind plot (learning curves of --trace files)."""
from __future__ import annotations

import sys

import pytest

import grind.cli
from grind.eval.show import draw_dependencies, draw_tree

CONLL = ("# sent_id = 1\n"
         "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"
         "2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
         "3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
         "\n"
         "1\tHi\thi\tINTJ\tUH\t_\t_\t_\t_\t_\n"
         "2\tthere\tthere\tADV\tRB\t_\t_\t_\t_\t_\n"
         "\n")

DRAWN = ("          root\n"
         " ┌──┐┌───┐│\n"
         " ▼  │▼   │▼\n"
         "The dog barks\n")

TREE = "(S (NP (DT The) (NN dog)) (VP (VBZ barks)))\n(NOPARSE a b)\n"

OUTLINE = ("S\n"
           "├── NP\n"
           "│   ├── DT The\n"
           "│   └── NN dog\n"
           "└── VP\n"
           "    └── VBZ barks\n")


def run(capsys, *args):
    """grind in-process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        grind.cli.main([str(a) for a in args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return e.value.code or 0, out, err


def test_show_conll(tmp_path, capsys):
    (tmp_path / "a.conllu").write_text(CONLL, encoding="utf-8")
    status, out, err = run(capsys, "show", tmp_path / "a.conllu")
    assert (status, out) == (0, DRAWN), err
    status, out, _ = run(capsys, "show", "--sentence", "1", "--column", "UPOS", tmp_path / "a.conllu")
    assert out.splitlines()[-1] == "DET NOUN VERB"


def test_show_unparsed_sentence(tmp_path, capsys):
    (tmp_path / "a.conllu").write_text(CONLL, encoding="utf-8")
    assert run(capsys, "show", "--sentence", "2", tmp_path / "a.conllu")[:2] == (0, "no parse\nHi there\n")


def test_show_sentence_out_of_range(tmp_path, capsys):
    (tmp_path / "a.conllu").write_text(CONLL, encoding="utf-8")
    status, out, err = run(capsys, "show", "--sentence", "3", tmp_path / "a.conllu")
    assert (status, out) == (1, "")
    assert err == f"grind: error: {tmp_path / 'a.conllu'}: no sentence 3 (the file has 2)\n"


def test_show_tree(tmp_path, capsys):
    (tmp_path / "t.mrg").write_text(TREE, encoding="utf-8")
    assert run(capsys, "show", tmp_path / "t.mrg")[:2] == (0, OUTLINE)
    assert run(capsys, "show", "-n", "2", tmp_path / "t.mrg")[:2] == (0, "no parse\na b\n")
    tags = run(capsys, "show", "--column", "XPOS", "-o", tmp_path / "o.txt", tmp_path / "t.mrg")
    assert tags[:2] == (0, "")
    assert (tmp_path / "o.txt").read_text(encoding="utf-8").splitlines()[2] == "│   ├── DT"


def test_draw_tree_and_crossing_arcs():
    assert draw_tree(("S", ("NP", ("DT", "The"), ("NN", "dog")), ("VP", ("VBZ", "barks")))) == OUTLINE
    # a non-projective tree: the arc b <- d crosses the arc a <- c
    drawn = draw_dependencies(["a", "b", "c", "d"], [3, 4, 0, 3])
    assert "┼" in drawn and drawn.endswith("a b  c  d\n")
    assert drawn.splitlines()[-2].count("▼") == 4      # one arrow per word (three arcs and the root)


TRACE_EM = ("# grind 0.1.0\nstep\tobjective\tsentences\tseconds\tdev_directed\tdev_logprob\n"
            "1\t-100.5\t10\t0.100\t0.3\t-50.0\n2\t-90.2\t10\t0.200\t\t\n3\t-85.0\t10\t0.300\t0.4\t-45.0\n")
TRACE_VB = "step\tobjective\tsentences\tseconds\n1\t-110.0\t10\t0.100\n2\t-95.0\t10\t0.200\n"


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "em.trace").write_text(TRACE_EM)
    (tmp_path / "vb.trace").write_text(TRACE_VB)
    status, _, err = run(capsys, "plot", "--x", "seconds", "--label", "em", "--label", "vb",
                         tmp_path / "em.trace", tmp_path / "vb.trace", "-o", tmp_path / "c.png")
    assert status == 0, err
    png = (tmp_path / "c.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"# grind " in png and b"# command: grind plot --x seconds" in png     # what made it, in its text chunk
    from grind.eval.plot import plotted_columns, read_trace
    assert plotted_columns([read_trace(str(tmp_path / "em.trace"))]) == ["objective", "dev_directed", "dev_logprob"]


def test_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    (tmp_path / "em.trace").write_text(TRACE_EM)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, out, err = run(capsys, "plot", tmp_path / "em.trace", "-o", tmp_path / "c.png")
    assert (status, out, err) == (1, "", "grind: error: grind plot needs matplotlib: pip install 'grind[plot]'\n")
    assert not (tmp_path / "c.png").exists()


def test_reference_lines_are_parsed_and_checked():
    from grind.eval.plot import parse_reference
    assert parse_reference("dev_directed=0.331:attach-right") == ("dev_directed", 0.331, "attach-right")
    assert parse_reference("objective=-5") == ("objective", -5.0, "objective=-5")
    for bad in ("dev_directed", "=0.3", "dev_directed=abc", "dev_directed=nan"):
        with pytest.raises(ValueError):
            parse_reference(bad)


def test_reference_line_is_drawn_in_its_panel():
    pytest.importorskip("matplotlib")
    from grind.eval.plot import trace_figure
    t = {"step": [1.0, 2.0], "objective": [-3.0, -2.0], "dev_directed": [0.2, 0.25]}
    fig = trace_figure([t], ["em"], "step", [("dev_directed", 0.33, "attach-right")])
    obj, dev = fig.axes
    assert [ln.get_label() for ln in dev.get_lines()] == ["em", "attach-right"]
    assert list(dev.get_lines()[1].get_ydata()) == [0.33, 0.33]
    assert [ln.get_label() for ln in obj.get_lines()] == ["em"]


def test_a_trace_with_a_stopped_column_is_read(tmp_path):
    """ln and early-stopped runs write why they stopped as text in the last step's 'stopped' cell."""
    from grind.eval.plot import read_trace
    f = tmp_path / "ln.trace"
    f.write_text("step\tobjective\tsentences\tseconds\tstopped\n1\t-10.5\t3\t0.1\t\n"
                 "2\t-9.25\t6\t0.2\treached the cap of 2 iterations before converging (tolerance 1e-05)\n")
    t = read_trace(str(f))
    assert t["objective"] == [-10.5, -9.25] and "stopped" not in t


def test_a_reference_to_a_column_no_trace_has_is_a_usage_error(tmp_path, capsys):
    """A mistyped --reference column drew no line and said nothing (CLI audit); checked before matplotlib."""
    (tmp_path / "em.trace").write_text(TRACE_EM)
    status, out, err = run(capsys, "plot", "--reference", "dev_direct=0.3", tmp_path / "em.trace",
                           "-o", tmp_path / "c.png")
    assert status == 2 and "'dev_direct' is not a plotted column of these traces (objective, dev_directed" in err
    assert not (tmp_path / "c.png").exists()


def test_every_root_of_a_forest_gets_its_arrow():
    """Only the last HEAD-0 word got the root arrow; the others were drawn with no head (decode audit)."""
    drawn = draw_dependencies(["the", "long", "word"], [0, 1, 0]).splitlines()
    assert drawn[0] == "root      root"
    assert drawn[-2].count("▼") == 3 and drawn[-1] == "the long word"     # two roots and 'long''s head end
    assert draw_dependencies(["a", "bb"], [0, 0]).splitlines()[-2] == "▼ ▼"


def test_plot_refuses_to_write_an_image_to_a_terminal(tmp_path, capsys, monkeypatch):
    (tmp_path / "em.trace").write_text(TRACE_EM)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    status, _, err = run(capsys, "plot", tmp_path / "em.trace")
    assert status == 2 and "give -o FILE.png" in err


def test_traces_sharing_a_label_are_one_curve_with_a_band():
    """Runs of one setting (seeds, shuffles) given one label: the mean at each x they all reached, a
    band of +- one standard deviation; --columns picks the panels, --log-x the scale."""
    pytest.importorskip("matplotlib")
    from grind.eval.plot import mean_band, trace_figure
    a = {"step": [1.0, 2.0], "sentences": [10.0, 100.0], "objective": [-3.0, -2.0], "dev_directed": [0.2, 0.4]}
    b = {"step": [1.0, 2.0], "sentences": [10.0, 100.0], "objective": [-3.0, -2.0], "dev_directed": [0.4, 0.4]}
    c = {"step": [1.0], "sentences": [10.0], "objective": [-1.0], "dev_directed": [0.3]}
    assert mean_band([a, b, c], "sentences", "dev_directed") == [(10.0, pytest.approx(0.3), pytest.approx(0.1), 3)]
    sd = pytest.approx(0.1 * 2 ** 0.5)
    assert mean_band([a, b], "sentences", "dev_directed") == [(10.0, pytest.approx(0.3), sd, 2),
                                                              (100.0, 0.4, 0.0, 2)]    # only where all runs have one
    fig = trace_figure([a, b, c], ["vb", "vb", "em"], "sentences", [("dev_directed", 0.25, "attach-right")],
                       columns=["dev_directed"], log_x=True)
    (dev,) = fig.axes
    assert [ln.get_label() for ln in dev.get_lines()] == ["vb (mean of 2)", "em", "attach-right"]
    assert list(dev.get_lines()[0].get_ydata()) == pytest.approx([0.3, 0.4])
    assert len(dev.collections) == 1 and dev.get_xscale() == "log"


def test_plot_columns_option(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "em.trace").write_text(TRACE_EM)
    status, _, err = run(capsys, "plot", "--columns", "dev_logprob", "--log-x", "--label", "em", "--label", "em",
                         tmp_path / "em.trace", tmp_path / "em.trace", "-o", tmp_path / "c.png")
    assert status == 0, err
    status, _, err = run(capsys, "plot", "--columns", "dev_f1", tmp_path / "em.trace", "-o", tmp_path / "d.png")
    assert status == 2 and "'dev_f1' is not a column to plot of these traces" in err
