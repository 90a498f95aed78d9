"""The Python API (grind/api.py): the session of docs/tutorials/api.md runs verbatim, grind.fit
equals grind train bit for bit, ``import grind`` is cheap and side-effect free,
files written from Python record the call."""
import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest

import grind
from conftest import REPO, SAMPLE, grind as run_grind

OPTS = dict(column="UPOS", punct="ud", max_length=10)
CLI_OPTS = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]


API_PAGE = REPO / "docs" / "tutorials" / "api.md"


def readme_example() -> str:
    text = API_PAGE.read_text(encoding="utf-8")
    m = re.search(r"<!-- api-example -->\s*```python\n(.*?)```\s*<!-- /api-example -->", text, re.S)
    assert m, "docs/tutorials/api.md: no ```python block between <!-- api-example --> and <!-- /api-example -->"
    return m.group(1)


def test_readme_session_runs_verbatim(tmp_path, monkeypatch, capsys):
    (tmp_path / "data").symlink_to(REPO / "data")
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example(), "docs/tutorials/api.md (the session)", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "20 steps" in out and "directed" in out
    head = (tmp_path / "out" / "dmv-vb.txt").read_text().splitlines()[:5]
    assert head[1].startswith("# call: grind.fit(") and "algo='vb'" in head[1]
    assert "# seed: 1" in head


def test_import_grind_sets_no_environment_variables():
    code = "import os; before = dict(os.environ); import grind; assert dict(os.environ) == before"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_a_level_set_before_first_use_silences_grind():
    """logging.getLogger("grind").setLevel(WARNING) right after import grind (grind.log not loaded yet) holds:
    grind.fit's progress lines stay off (grind.log set INFO over it on its first import)."""
    code = ("import logging, grind; logging.getLogger('grind').setLevel(logging.WARNING); "
            "grind.fit(grind.read_grammar(sys.argv[1]), [['a', 'b']], 'em', iterations=1)")
    cnf = "1 S --> A B\n1 A --> a\n1 B --> b\n"
    r = subprocess.run([sys.executable, "-c", "import sys; " + code, "-"], input=cnf, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "training" not in r.stderr, r.stderr


def test_import_grind_is_lazy():
    code = ("import sys, grind; heavy = [m for m in sys.modules if m.startswith(('grind.infer', 'grind.api', "
            "'grind.kernels', 'grind.eval'))]; assert not heavy, heavy; assert 'numpy' not in sys.modules; "
            "grind.fit; assert 'grind.api' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert set(grind.__all__) >= {"read_grammar", "read_corpus", "fit", "FitResult", "parse", "evaluate", "estep",
                                  "Counts"}
    assert "fit" in dir(grind)
    with pytest.raises(AttributeError):
        getattr(grind, "no_such_thing")  # noqa: B009 (the attribute access is the test)


def test_the_cli_sets_the_blas_thread_variables():
    code = "import os, grind.cli; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True).stdout
    assert out.split() == ["1", "1"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc"
                    or tuple(map(int, platform.libc_ver()[1].split(".")[:2])) < (2, 33),
                    reason="mallopt / mallinfo2 are glibc's (2.33+)")
def test_ln_training_keeps_freed_blocks_instead_of_mapping_them_afresh():
    """grind maps every block >= 128 KiB afresh (fix_mmap_threshold); for the
    logistic normal's ~20 MB temporaries keep_freed_blocks puts them on the heap
    (glibc's mallinfo2: no mapped block while one is held) and keeps them there
    when freed (free heap bytes), for the next allocation to reuse."""
    code = ("import ctypes, sys, numpy as np\n"
            "from grind.cli.threads import fix_mmap_threshold, keep_freed_blocks\n"
            "class Info(ctypes.Structure):\n"
            "    _fields_ = [(f, ctypes.c_size_t) for f in ('arena ordblks smblks hblks hblkhd usmblks fsmblks '\n"
            "                                              'uordblks fordblks keepcost').split()]\n"
            "info = ctypes.CDLL(None).mallinfo2\n"
            "info.restype = Info\n"
            "fix_mmap_threshold()\n"
            "print(keep_freed_blocks() if sys.argv[1] == 'keep' else False)\n"
            "a = np.ones(2_500_000)\n"
            "print(info().hblkhd >= a.nbytes)\n"
            "del a\n"
            "print(info().fordblks >= 2_500_000 * 8)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def run(mode, **extra):
        return subprocess.run([sys.executable, "-c", code, mode], check=True, env=dict(env, **extra),
                              capture_output=True, text=True).stdout.split()
    assert run("fix") == ["False", "True", "False"]       # mapped while held, returned when freed
    assert run("keep") == ["True", "False", "True"]       # on the heap, kept when freed
    # a setting in the environment wins: nothing changes
    assert run("keep", MALLOC_TRIM_THRESHOLD_="131072")[0] == "False"


@pytest.fixture(scope="module")
def dmv_files(tmp_path_factory):
    """A harmonic-initialised DMV of the EWT sample (as a file) and the training sample."""
    from grind.grammars.dmv import dmv_grammar, harmonic_counts
    d = tmp_path_factory.mktemp("api")
    train = str(SAMPLE / "en_ewt-ud-train-sample.conllu.gz")
    sents = grind.read_corpus(train, **OPTS)
    g = dmv_grammar([], vocabulary=sorted({t for s in sents for t in s.tokens}))
    g = g.with_weights(g.normalize(harmonic_counts(g, [s.tokens for s in sents])), meta={"weights": "probabilities"})
    g.write(d / "dmv1.txt")
    return d, str(d / "dmv1.txt"), train


@pytest.mark.slow
@pytest.mark.parametrize("algo,extra", [("em", ["--alpha", "1.0"]), ("vb", ["--alpha", "0.1"])])
def test_fit_equals_grind_train_bit_for_bit(dmv_files, algo, extra):
    d, gpath, train = dmv_files
    out = d / f"{algo}.txt"
    run_grind("train", "--algo", algo, "--iterations", "4", "--seed", "3", *extra, *CLI_OPTS, gpath, train,
              "-o", out)
    cli = grind.read_grammar(out)
    res = grind.fit(gpath, grind.read_corpus(train, **OPTS), algo, alpha=float(extra[1]), iterations=4, seed=3)
    assert isinstance(res, grind.FitResult) and res.algorithm == algo and len(res.trace) == 4
    assert res.grammar.keys() == cli.keys()
    assert np.array_equal(res.grammar.weights, cli.weights)            # bit for bit
    assert res.grammar.weight_kind() == cli.weight_kind()
    # written from Python it reads back the same, and the header names the call
    res.grammar.write(d / f"{algo}-api.txt")
    assert np.array_equal(grind.read_grammar(d / f"{algo}-api.txt").weights, cli.weights)
    head = (d / f"{algo}-api.txt").read_text().splitlines()[:3]
    assert head[1].startswith("# call: grind.fit(") and f"algo='{algo}'" in head[1] and "# seed: 3" in head
    assert (d / f"{algo}.txt").read_text().splitlines()[1].startswith("# command: grind train")


def test_fit_from_token_lists_and_a_path_agree(dmv_files):
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)
    a = grind.fit(grind.Grammar.read(gpath), [s.tokens for s in sents], "em", iterations=2)
    b = grind.fit(gpath, sents, "em", iterations=2)
    assert np.array_equal(a.grammar.weights, b.grammar.weights)
    with pytest.raises(TypeError, match="no_such_option"):
        grind.fit(gpath, sents, "em", no_such_option=1)


def test_parse_evaluate_estep_merge(dmv_files):
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)
    g = grind.read_grammar(gpath)
    heads = grind.parse(g, sents)
    assert len(heads) == len(sents) and all(len(h) == len(s) for h, s in zip(heads, sents))
    scores = grind.evaluate(sents, heads)
    assert 0 <= scores["directed"] <= scores["undirected"] <= 1
    assert [r["subset"] for r in scores["rows"]] == ["<=10", "<=20", "all"]
    right = grind.evaluate(sents, [list(range(2, len(s) + 1)) + [0] for s in sents])
    assert right["directed"] == scores["baselines"]["right"][-1]["directed"]
    whole = grind.estep(g, sents)
    half = grind.estep(g, sents[:100]).merge(grind.estep(g, sents[100:]))
    assert np.allclose(whole.values, half.values)
    assert whole.stats["sentences"] == half.stats["sentences"] == len(sents)
    other = grind.Counts(whole.rules[:3], whole.values[:3])
    with pytest.raises(grind.api.InputError, match="not of the same grammar"):
        whole.merge(other)


@pytest.mark.slow
def test_parse_average_equals_the_cli(dmv_files, tmp_path):
    """grind.parse(..., average=[...]) decodes as grind parse --mbr --average does."""
    d, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)
    g = grind.read_grammar(gpath)
    em = grind.fit(g, sents, "em", iterations=3).grammar
    em.write(tmp_path / "em.txt")
    heads = grind.parse(g, sents, "mbr", average=[em])
    assert heads != grind.parse(g, sents, "mbr") and heads != grind.parse(em, sents, "mbr")
    out = tmp_path / "avg.conllu"
    run_grind("parse", "--mbr", *CLI_OPTS, "--average", tmp_path / "em.txt", gpath, train, "-o", out)
    assert [[int(x) for x in s.heads] for s in grind.read_corpus(str(out), **OPTS)] == heads
    with pytest.raises(ValueError, match="average needs decoder='mbr'"):
        grind.parse(g, sents, average=[em])


def test_parse_a_pcfg_gives_trees(tmp_path):
    (tmp_path / "g.txt").write_text("1 S --> NP V\n0.5 NP --> D N\n0.5 NP --> N\n1 D --> the\n1 N --> dog\n"
                                    "1 V --> barks\n")
    trees = grind.parse(str(tmp_path / "g.txt"), [["the", "dog", "barks"], ["dog", "barks"], ["barks"]])
    assert trees[0] == ("S", ("NP", ("D", "the"), ("N", "dog")), ("V", "barks"))
    assert trees[2] is None


def test_each_written_result_records_its_own_call_and_seed(dmv_files, tmp_path):
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)
    r1 = grind.fit(gpath, sents, "vb", alpha=0.3, iterations=2, seed=5)
    r2 = grind.fit(gpath, sents, "vb", alpha=0.3, iterations=2, seed=6)
    grind.estep(gpath, sents)                                      # another call in between
    with pytest.raises(ValueError):
        grind.fit(gpath, sents, "nope")
    for r, seed in ((r1, 5), (r2, 6)):
        r.grammar.write(tmp_path / "g.txt")
        head = (tmp_path / "g.txt").read_text().splitlines()
        assert f"seed={seed})" in head[1] and f"# seed: {seed}" in head and "# algorithm: vb" in head
        assert "# steps: 2" in head and any(h.startswith("# objective: ") for h in head)
    again = grind.read_grammar(tmp_path / "g.txt")                 # read back and written: the same call
    again.write(tmp_path / "h.txt")
    assert (tmp_path / "h.txt").read_text().splitlines()[1:3] == (tmp_path / "g.txt").read_text().splitlines()[1:3]
    other = again.with_weights(again.weights)                      # other weights were not made by that call
    assert "call" not in other.meta and "seed" not in other.meta


def test_fit_refuses_what_the_command_line_refuses(dmv_files):
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)[:20]
    for bad, exc, msg in [(dict(iterations=2.5), ValueError, "iterations must be an integer"),
                          (dict(kernel="bad"), ValueError, "kernel must be one of"),
                          (dict(seed=-1), ValueError, "seed must be a non-negative integer"),
                          (dict(alpha=[0.1]), grind.api.InputError, r"alpha \[0.1\]: a number"),
                          (dict(alpha="0.1,S=x"), grind.api.InputError, "neither a number")]:
        with pytest.raises(exc, match=msg):
            grind.fit(gpath, sents, "em", **{"iterations": 1, **bad})
    with pytest.raises(TypeError, match="sentence 21 of the corpus is 'NOUN VERB'"):
        grind.fit(gpath, [s.tokens for s in sents] + ["NOUN VERB"], "em", iterations=1)
    with pytest.raises(TypeError, match="a corpus is a path"):
        grind.fit(gpath, 42, "em", iterations=1)


def test_fit_takes_the_command_line_option_names(dmv_files):
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)[:30]
    a = grind.fit(gpath, sents, "ln", iterations=1, cov="families")
    b = grind.fit(gpath, sents, "ln", iterations=1, ln_cov="families")
    assert a.options["ln_cov"] == "families" and np.array_equal(a.grammar.weights, b.grammar.weights)
    with pytest.raises(TypeError, match="name the same option"):
        grind.fit(gpath, sents, "ln", iterations=1, cov="families", ln_cov="identity")


@pytest.mark.slow
def test_estep_counts_are_the_cli_counts(dmv_files, tmp_path):
    _, gpath, train = dmv_files
    grind.estep(gpath, grind.read_corpus(train, **OPTS)).write(tmp_path / "api.txt")
    run_grind("estep", *CLI_OPTS, "-o", tmp_path / "cli.txt", gpath, train)
    body = lambda p: [ln for ln in p.read_text().splitlines() if not ln.startswith("#")]   # noqa: E731
    assert body(tmp_path / "api.txt") == body(tmp_path / "cli.txt")                         # bit for bit
    assert "# estep: probabilities" in (tmp_path / "api.txt").read_text()


def test_fit_says_which_sentences_it_leaves_out(dmv_files, capfd):
    _, gpath, train = dmv_files
    sents = [s.tokens for s in grind.read_corpus(train, **OPTS)[:10]] + [["FOO", "NOUN"]]
    grind.fit(gpath, sents, "em", iterations=1)
    assert "grind.fit: 1 of 11 sentences have no parse and are left out (sentence 11: " in capfd.readouterr().err


def test_the_api_names_the_command_line_options_as_the_command_line_does():
    from grind.api import FLAG_NAMES
    from grind.cli.train import train
    from grind.infer.registry import CONFIG_OF
    fields = {n for c in CONFIG_OF.values() for n in c.names()}
    differ = {o[2:].replace("-", "_"): p.name for p in train.params for o in getattr(p, "opts", [])
              if o.startswith("--") and o[2:].replace("-", "_") != p.name and p.name in fields}
    assert differ == FLAG_NAMES


def test_fit_says_when_the_annealing_did_not_finish(dmv_files, capsys):
    """As grind train: a sampler stopped while T > 1 left a tempered state (warning, meta)."""
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)[:40]
    res = grind.fit(gpath, sents, "gibbs", alpha=0.5, iterations=2, seed=1, temp_start=10, anneal_sweeps=5)
    assert res.grammar.meta["temperature"] == "7.75 (the annealing had not reached 1)"
    assert "before the annealing" in capsys.readouterr().err
    res = grind.fit(gpath, sents, "gibbs", alpha=0.5, iterations=5, seed=1, temp_start=10, anneal_sweeps=5)
    assert "temperature" not in res.grammar.meta


@pytest.mark.slow
@pytest.mark.parametrize("algo,extra", [("ln", []), ("mixture", []), ("mixture", ["--base", "vb"]), ("vb", [])])
def test_train_keeps_freed_blocks_for_ln_only(tmp_path, monkeypatch, algo, extra):
    """grind train calls keep_freed_blocks for ln and mixture over ln (their E-step's large
    temporaries), and leaves the CLI's malloc settings alone for everything else."""
    import grind.cli.threads as threads
    from conftest import sample_dmv
    from grind.cli.main import main
    calls = []
    monkeypatch.setattr(threads, "keep_freed_blocks", lambda *a, **k: calls.append(algo) or True)
    monkeypatch.setattr(threads, "fix_mmap_threshold", lambda *a, **k: True)
    c = ["--column", "UPOS", "--punct", "ud", "--max-length", "5"]
    d, train_path = sample_dmv(tmp_path, c)
    try:
        main(["train", "--algo", algo, *extra, *c, "--iterations", "1", "-o", str(tmp_path / "g.txt"),
              str(d / "g1.txt"), train_path])
    except SystemExit as e:
        assert e.code in (0, None)
    assert (tmp_path / "g.txt").exists()
    assert calls == ([algo] if algo == "ln" or (algo == "mixture" and not extra) else [])


def test_a_random_algorithm_without_a_seed_draws_and_records_one(dmv_files, tmp_path):
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)
    res = grind.fit(gpath, sents, "gibbs", alpha=0.5, iterations=2)
    drawn = res.options["seed"]
    assert isinstance(drawn, int)
    res.grammar.write(tmp_path / "g.txt")
    head = (tmp_path / "g.txt").read_text().splitlines()
    assert f"# seed: {drawn} (drawn: no seed given)" in head and "seed=" not in head[1]
    again = grind.fit(gpath, sents, "gibbs", alpha=0.5, iterations=2, seed=drawn)    # the drawn seed repeats it
    assert np.array_equal(again.grammar.weights, res.grammar.weights)
    det = grind.fit(gpath, sents, "vb", alpha=0.5, iterations=2)                     # no random choices: None
    assert det.options["seed"] is None and det.grammar.meta["seed"] == "None"


def test_a_treebank_path_points_to_read_corpus(tmp_path):
    """The CLI's '--column' advice does not help a Python caller (README audit)."""
    from grind.errors import InputError
    (tmp_path / "t.conllu").write_text("1\ta\ta\tNOUN\tNN\t_\t0\troot\t_\t_\n\n")
    (tmp_path / "g.txt").write_text("1 S --> a\n")
    with pytest.raises(InputError, match=r"grind.read_corpus\(path, column="):
        grind.estep(str(tmp_path / "g.txt"), str(tmp_path / "t.conllu"))


@pytest.mark.slow
def test_evaluate_refuses_a_parse_file_written_under_another_punct(dmv_files, tmp_path):
    """grind.evaluate scored a --punct ud parse without punct= (0.2382 over 697 words, the removed
    tokens' filler arcs counted as predictions) where grind eval refuses (API audit)."""
    _, gpath, _ = dmv_files
    dev = str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz")
    out = tmp_path / "p.conllu"
    run_grind("parse", "--column", "UPOS", "--punct", "ud", "-o", out, gpath, dev)
    with pytest.raises(grind.api.InputError, match="written with punct-removed=ud .* score it with --punct ud"):
        grind.evaluate(dev, str(out), column="UPOS")
    assert 0 < grind.evaluate(dev, str(out), column="UPOS", punct="ud")["directed"] < 1


def test_parse_names_the_sentences_it_cannot_parse(dmv_files, capsys):
    """The README says so; grind.parse returned None in silence (API audit)."""
    _, gpath, _ = dmv_files
    out = grind.parse(gpath, [["NOUN", "FOO"], ["NOUN", "VERB"]])
    err = capsys.readouterr().err
    assert out[0] is None and out[1] is not None
    assert "grind.parse: sentence 1 has no parse: unknown word 'FOO'" in err and "1 of 2 sentences" in err


def test_a_file_written_from_python_claims_no_command_and_no_finished_call(tmp_path):
    """A grammar written by a script said '# command: grind <the script's arguments>', and one written after
    grind.fit said '# call: grind.fit(...)' (API audit)."""
    script = tmp_path / "rt.py"
    script.write_text("import sys, grind\nfrom grind.grammars.dmv import dmv_grammar\n"
                      "g = dmv_grammar([['a', 'b']])\ng.write(sys.argv[1])\n"
                      "r = grind.fit(g, [['a', 'b']], 'em', iterations=1)\ng.write(sys.argv[2])\n"
                      "r.grammar.write(sys.argv[3])\n")
    out = [tmp_path / f"g{k}.txt" for k in (1, 2, 3)]
    subprocess.run([sys.executable, str(script), *map(str, out)], check=True, capture_output=True, cwd=REPO)
    heads = [p.read_text().splitlines()[1] for p in out]
    assert heads[0] == heads[1] == "# call: the grind library, from Python (rt.py)"
    assert heads[2].startswith("# call: grind.fit(algo='em'")


def test_fit_says_why_it_stopped_and_keeps_an_early_stop_honest(dmv_files):
    """grind.fit's grammar had no '# stopped:' and, early-stopped, the discarded step's steps (API audit)."""
    _, gpath, train = dmv_files
    dev = str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz")
    sents = grind.read_corpus(train, **OPTS)
    r = grind.fit(gpath, sents, "em", iterations=200, dev=grind.read_corpus(dev, **OPTS), eval_every=1,
                  early_stop=True, patience=3)
    last = r.trace[-1]
    assert r.grammar.meta["steps"] == str(last.extra["kept_step"]) == str(last.step - 3)
    assert r.grammar.meta["stopped"].startswith(f"after step {last.step}: held-out log probability below its best")


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["em", "stochastic"])
def test_fit_counts_unparsed_sentences_in_the_header_as_grind_train(dmv_files, tmp_path, algo):
    """grind.fit warned about sentences without a parse, but its grammar's header did not count them."""
    _, gpath, train = dmv_files
    sents = [s.tokens for s in grind.read_corpus(train, **OPTS)][:20] + [["NOUN", "ZZZ"]]
    path = tmp_path / "c.txt"
    path.write_text("".join(" ".join(s) + "\n" for s in sents))
    out = tmp_path / "g.txt"
    budget = ["--iterations", "2"] if algo == "em" else ["--epochs", "1", "--batch", "5"]
    run_grind("train", "--algo", algo, *budget, "--seed", "1", gpath, str(path), "-o", out)
    cli = grind.read_grammar(out).meta["unparsed"]
    assert cli.startswith("1 of 21 sentences without a parse")
    options = dict(iterations=2) if algo == "em" else dict(epochs=1, batch=5)
    assert grind.fit(gpath, sents, algo, seed=1, **options).grammar.meta["unparsed"] == cli


def test_fit_header_counts_the_sentences_the_corpus_reader_left_out(dmv_files):
    """A Corpus read with length limits carries what it dropped; grind train's header says it, grind.fit's did not."""
    _, gpath, train = dmv_files
    sents = grind.read_corpus(train, **OPTS)
    assert sents.left_out == 1331
    meta = grind.fit(gpath, sents, "em", iterations=1, seed=1).grammar.meta
    assert meta["left_out"] == ("1329 sentences outside the length limits 1..10 (not trained on); 2 sentences of "
                                "punctuation only, no token left after its removal (not trained on)")
    assert "left_out" not in grind.fit(gpath, [s.tokens for s in sents], "em", iterations=1).grammar.meta


@pytest.mark.parametrize("algo,kw,flag", [("stochastic", dict(iterations=3), "--iterations"),
                                          ("gibbs", dict(tolerance=0.1), "--tolerance"),
                                          ("ln", dict(alpha=0.5), "--alpha"),
                                          ("mixture", dict(base="vb", cov="families"), "--cov")])
def test_fit_refuses_an_option_the_algorithm_does_not_read_as_grind_train_does(dmv_files, algo, kw, flag):
    """grind.fit ran stochastic VB with iterations=3, gibbs with a tolerance, ln with an alpha: ignored in silence."""
    _, gpath, train = dmv_files
    with pytest.raises(TypeError, match=f"does not read {flag[2:]}=: "):
        grind.fit(gpath, [["NOUN", "VERB"]], algo, seed=1, **kw)
    r = run_grind("train", "--algo", algo, flag, str(kw[flag[2:]]), *(["--base", "vb"] if "base" in kw
                  else []), gpath, train, check=False)
    assert r.returncode == 2 and f"does not read {flag}:" in r.stderr


def test_fit_ln_header_has_no_alpha(dmv_files):
    _, gpath, _ = dmv_files
    assert "alpha" not in grind.fit(gpath, [["NOUN", "VERB"]], "ln", iterations=1).grammar.meta
    assert grind.fit(gpath, [["NOUN", "VERB"]], "vb", iterations=1).grammar.meta["alpha"] == "1.0"
