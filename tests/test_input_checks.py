"""Inputs that used to give silent wrong answers are refused with one clear line (issue 11, item 4)."""
import re

import numpy as np
import pytest

from conftest import grind
from grind.formats.corpus import CorpusSpec, read_corpus
from grind.grammars.dmv import dmv_grammar, dmv_problem, is_dmv_grammar
from grind.errors import InputError
from grind.grammars.grammar import read_grammar

GRAMMAR = """\
1 S --> NP VP
1 NP --> D N
1 NP --> N
1 VP --> V NP
1 VP --> V
1 D --> the
1 N --> dog
1 N --> dogs
1 V --> saw
1 V --> barks
"""
CORPUS = "the dog saw dogs\ndogs barks\nthe dog barks\n"

CONLLU = """# sent_id = 1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tknew\tknow\tVERB\tVBD\t_\t_\t_\t4:conj\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
2\t,\t,\tPUNCT\t,\t_\t3\tpunct\t_\t_
3\tsir\tsir\tNOUN\tNN\t_\t1\tvocative\t_\t_

"""



def without_rule_count(text: str) -> str:
    """A grind grammar's text without its '# rules:' line, as after editing its rules by hand."""
    return "".join(ln for ln in text.splitlines(True) if not ln.startswith("# rules:"))

def one_line_error(r, *needles):
    """Exit status 1, a single 'grind: error:' line containing every needle, no traceback."""
    assert r.returncode == 1, r.stderr
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("grind: error:")]
    assert len(errs) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert str(n) in errs[0], errs[0]
    return errs[0]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text(CORPUS)
    (tmp_path / "p.txt").write_text(grind("init", tmp_path / "g.txt").stdout)
    return tmp_path


# ----------------------------------------------------------------------------- 1 grammar weights

@pytest.mark.parametrize("cmd", ["loglik", "parse", "estep"])
def test_unnormalised_grammar_is_refused(files, cmd):
    out = files / "out.txt"
    r = grind(cmd, "-o", out, files / "g.txt", files / "c.txt", check=False)
    one_line_error(r, "g.txt", "NP", "sum to 2.0", "grind init", "# weights: Dirichlet pseudo-counts")
    assert not out.exists()


def test_unnormalised_header_is_refused_even_when_sums_are_1(files):
    (files / "u.txt").write_text("# weights: unnormalised (all 1)\n1 S --> a\n")
    (files / "a.txt").write_text("a\n")
    one_line_error(grind("loglik", files / "u.txt", files / "a.txt", check=False), "u.txt", "unnormalised")
    assert grind("init", files / "u.txt").returncode == 0


@pytest.mark.slow
def test_pseudo_counts_and_unused_lhs_are_accepted(files):
    (files / "pc.txt").write_text("# weights: Dirichlet pseudo-counts (posterior)\n"
                                  + GRAMMAR.replace("1 N --> dog\n", "3 N --> dog\n"))
    assert "# perplexity:" in grind("loglik", files / "pc.txt", files / "c.txt").stdout
    edited = without_rule_count(grind("init", files / "g.txt").stdout) + "0 X --> dog\n0 X --> dogs\n"
    (files / "z.txt").write_text(edited)
    assert grind("parse", files / "z.txt", files / "c.txt").returncode == 0


def test_train_normalises_an_unnormalised_grammar_with_a_warning(files):
    r = grind("train", "--iterations", "2", files / "g.txt", files / "c.txt")
    assert "not probabilities" in r.stderr and "grind init" in r.stderr


@pytest.mark.parametrize("cycle,shown", [("1 A --> B\n1 B --> A\n", "A --> B --> A"),
                                         ("1 A --> A\n", "A --> A"),
                                         ("1 A --> B\n1 B --> C\n1 C --> A\n", "A --> B --> C --> A")])
def test_from_file_refuses_unary_cycles(tmp_path, cycle, shown):
    (tmp_path / "g.txt").write_text("1 S --> A\n" + cycle + "1 A --> a\n")
    out = tmp_path / "o.txt"
    one_line_error(grind("make-grammar", "from-file", "-o", out, tmp_path / "g.txt", check=False), "g.txt", shown)
    assert not out.exists()
    (tmp_path / "g0.txt").write_text("1 S --> A\n0 A --> B\n1 B --> A\n1 A --> a\n")   # weight 0: no cycle
    assert grind("make-grammar", "from-file", tmp_path / "g0.txt").returncode == 0


# ----------------------------------------------------------------------------- 2 count files

@pytest.mark.slow
def test_count_files_are_checked(files):
    c = files / "counts.txt"
    grind("estep", "-o", c, files / "p.txt", files / "c.txt")
    text = c.read_text()
    assert "# weights: expected rule counts" in text and "# rules: 10" in text
    assert f"# grammar: {read_grammar(str(files / 'p.txt')).fingerprint()}" in text
    bad = files / "bad.txt"
    for broken, needle in [(re.sub(r"# loglik: .*", "# loglik: nan", text), "'# loglik: nan' must be a finite"),
                           (re.sub(r"# loglik: .*", "# loglik: -inf", text), "'# loglik: -inf' must be a finite"),
                           (text.rsplit("\n", 2)[0] + "\n", "10 rules"),                   # last rule missing
                           (text[:-3] + "\n", "fingerprint"),                             # last rule cut
                           (text.replace("# weights: expected rule counts", "# weights: probabilities"),
                            "'# weights: probabilities'"),
                           (text.rsplit("\n", 2)[0] + "\n-1 " + text.rsplit("\n", 2)[1].split(" ", 1)[1] + "\n",
                            "non-negative"),
                           (text.rsplit("\n", 2)[0] + "\nnan " + text.rsplit("\n", 2)[1].split(" ", 1)[1] + "\n",
                            "non-negative")]:
        bad.write_text(broken)
        one_line_error(grind("mstep", "-o", files / "o.txt", bad, check=False), "bad.txt", needle)
    one_line_error(grind("sum", files / "p.txt", check=False), "p.txt", "not a count file")
    assert not (files / "o.txt").exists()


@pytest.mark.slow
def test_sum_and_mstep_check_the_grammar_fingerprint(files):
    grind("estep", "-o", files / "c1.txt", files / "p.txt", files / "c.txt")
    (files / "p2.txt").write_text(without_rule_count(files.joinpath("p.txt").read_text()) + "0 X --> dog\n")
    grind("estep", "-o", files / "c2.txt", files / "p2.txt", files / "c.txt")
    one_line_error(grind("sum", files / "c1.txt", files / "c2.txt", check=False), "c1.txt", "c2.txt")
    one_line_error(grind("mstep", "--grammar", files / "p2.txt", files / "c1.txt", check=False),
                   "c1.txt", "p2.txt")
    s = grind("sum", files / "c1.txt", files / "c1.txt").stdout
    assert "# sentences: 6" in s


# ----------------------------------------------------------------------------- 3 CoNLL reading

@pytest.mark.parametrize("old,new,needle", [
    ("3\tn't", "4\tn't", "x.conllu:6: token ID 4 where 3"),             # repeat
    ("5\t.\t.", "6\t.\t.", "x.conllu:9: token ID 6 where 5"),          # gap
    ("1\tI\tI", "one\tI\tI", "x.conllu:3: ID 'one'"),                 # not an integer
    ("2-3\tdon't", "3-4\tdon't", "x.conllu:4: multiword-token range 3-4"),
])
def test_conllu_ids_must_run_1_to_n(tmp_path, old, new, needle):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU.replace(old, new, 1))
    with pytest.raises(InputError, match=needle):
        read_corpus(str(p), CorpusSpec(column="UPOS"))
    r = grind("make-grammar", "dmv", "--column", "UPOS", p, check=False)
    one_line_error(r, needle)


def test_byte_order_mark_is_stripped(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_bytes(b"\xef\xbb\xbf" + CONLLU.encode())
    assert [s.tokens for s in read_corpus(str(p), CorpusSpec(column="UPOS"))][0][0] == "PRON"
    g = tmp_path / "g.txt"
    g.write_bytes(b"\xef\xbb\xbf1 S --> a\n")
    assert read_grammar(str(g)).rules == [("S", ("a",))]
    t = tmp_path / "t.txt"
    t.write_bytes(b"\xef\xbb\xbfa b\n")
    assert read_corpus(str(t))[0].tokens == ["a", "b"]


def test_text_with_tabs_is_not_taken_for_a_treebank(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("the\tdog\tbarks\tloudly\tat\tthe\tcat\tall\tday\tlong\n")
    one_line_error(grind("make-grammar", "cnf", "-n", "2", p, check=False), "t.txt", "--format")
    q = tmp_path / "m.txt"
    q.write_text("the\tDT\tnone\n")
    one_line_error(grind("make-grammar", "cnf", "-n", "2", q, check=False), "m.txt", "--format")
    assert grind("make-grammar", "cnf", "-n", "2", "--format", "text", p).returncode == 0


def test_long_lines_are_not_quoted_in_full(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text("1 S --> a\n" + "x" * 5_000_000 + "\n")
    line = one_line_error(grind("make-grammar", "from-file", g, check=False), "g.txt:2")
    assert len(line) < 400 and "5000000 characters" in line


# ----------------------------------------------------------------------------- 4 parse passes CoNLL through

@pytest.mark.slow
def test_parse_writes_every_conll_line_back(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU)
    c = ["--column", "UPOS", "--punct", "ud"]
    grind("make-grammar", "dmv", *c, "-o", tmp_path / "g0.txt", p)
    out = grind("parse", *c, tmp_path / "g0.txt", p).stdout
    assert "# removed_tokens: attached to the root word" in out
    got = [ln.split("\t") for ln in out.splitlines() if ln and not ln.startswith("#")]
    want = [ln.split("\t") for ln in CONLLU.splitlines() if ln and not ln.startswith("#")]
    assert [g[:6] + g[9:] for g in got] == [w[:6] + w[9:] for w in want]      # all lines, original IDs
    assert got[1] == want[1]                                                  # MWT range unchanged
    assert got[5] == want[5][:8] + ["_"] + want[5][9:]                       # empty node: gold DEPS cleared
    assert "# sent_id = 1" in out and "# text = I don't know." in out
    root = next(g[0] for g in got[:7] if g[6] == "0")
    assert got[6][0] == "5" and got[6][6:8] == [root, "punct"]                # removed token: root word
    heads = {g[0]: g[6] for g in got[:7] if g[0].isdigit()}
    assert set(heads.values()) <= {"0", "1", "2", "3", "4"}                   # original IDs
    # the output reads back as the same sentences, and scores like the gold tree format
    (tmp_path / "o.conllu").write_text(out)
    back = read_corpus(str(tmp_path / "o.conllu"), CorpusSpec(column="UPOS", punct="ud"))
    gold = read_corpus(str(p), CorpusSpec(column="UPOS", punct="ud"))
    assert [s.tokens for s in back] == [s.tokens for s in gold]
    noraw = "".join(ln + "\n" for ln in out.splitlines() if not ln.split("\t")[0].count("-")
                    and "." not in ln.split("\t")[0])
    (tmp_path / "n.conllu").write_text(noraw)
    ev = lambda f: [ln for ln in grind("eval", *c, p, f).stdout.splitlines()            # noqa: E731
                    if ln.startswith("all") or ln.startswith("<=")]
    assert ev(tmp_path / "o.conllu") == ev(tmp_path / "n.conllu")


# ----------------------------------------------------------------------------- 5 DMV kernel choice

def test_dmv_names_alone_do_not_choose_the_dmv_kernel(tmp_path):
    full = dmv_grammar([["a", "b"]])
    assert is_dmv_grammar(full) and dmv_problem(full) is None
    # DMV-like names, but a general grammar: no not-STOP rules, no choose rules
    (tmp_path / "g.txt").write_text("1 S --> Y_a\n1 Y_a --> L0_a R0_a\n1 L0_a --> a_l\n1 R0_a --> a_r\n")
    g = read_grammar(str(tmp_path / "g.txt"))
    assert not is_dmv_grammar(g) and "L0_a --> L'_a" in dmv_problem(g)
    (tmp_path / "c.txt").write_text("a_l a_r\n")
    r = grind("loglik", tmp_path / "g.txt", tmp_path / "c.txt")
    assert "general CKY kernel" in r.stderr and "\t2\t0.0" in r.stdout
    bad = grind("loglik", "--kernel", "dmv", tmp_path / "g.txt", tmp_path / "c.txt", check=False)
    one_line_error(bad, "g.txt", "--kernel dmv", "L0_a --> L'_a")


# ----------------------------------------------------------------------------- 6 resource trap

def test_make_dmv_refuses_a_huge_grammar(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU)
    out = tmp_path / "g.txt"
    r = grind("make-grammar", "dmv", "--column", "FORM", "--max-rules", "100", "-o", out, p, check=False)
    one_line_error(r, "x.conllu", "8 head types", "--max-rules 208", "--lexicalized")
    assert not out.exists()
    assert grind("make-grammar", "dmv", "--column", "FORM", "--max-rules", "208", p).returncode == 0


# ----------------------------------------------------------------------------- 7, 8 loglik and parse output

def test_loglik_prints_plain_numbers_and_tiny_probabilities_do_not_underflow(tmp_path):
    (tmp_path / "g.txt").write_text("0.5 S --> S A\n0.5 S --> A\n1e-197 A --> a\n1 A --> b\n")
    (tmp_path / "c.txt").write_text("a a\nb b\n" + " ".join(["a"] * 100) + "\n")
    out = grind("loglik", tmp_path / "g.txt", tmp_path / "c.txt").stdout
    assert "np.float64" not in out
    rows = [ln.split("\t") for ln in out.splitlines() if ln[:1].isdigit()]
    lp = [float(r[2]) for r in rows]
    assert all(np.isfinite(lp)) and lp[2] == pytest.approx(100 * np.log(1e-197) + 99 * np.log(0.5) + np.log(0.5))
    assert "# parsed: 3" in out


def test_parse_pcfg_counts_unparsed_sentences(files):
    (files / "c2.txt").write_text(CORPUS + "the zebra barks\n")
    out = grind("parse", files / "p.txt", files / "c2.txt").stdout
    assert "# unparsed: 1" in out and out.splitlines()[-1] == "(NOPARSE the zebra barks)"


@pytest.mark.slow
def test_make_grammar_refuses_tokens_a_rule_cannot_hold_and_oversized_cnf(tmp_path):
    """A FORM with a space (UD allows '34 470') or an empty UPOS gave grammars that could not be read
    back, with exit 0; make-grammar cnf had no size limit (-n 100000 ran out of memory)."""
    ws = tmp_path / "ws.conllu"
    ws.write_text("1\tthe\tthe\tDET\t_\t_\t2\t_\t_\t_\n2\t34 470\t34 470\tNUM\t_\t_\t0\t_\t_\t_\n\n")
    empty = tmp_path / "em.conllu"
    empty.write_text("1\tthe\tthe\t\t_\t_\t2\t_\t_\t_\n2\tdog\tdog\tNOUN\t_\t_\t0\t_\t_\t_\n\n")
    for args, what in ((["dmv", "--lexicalized", "--column", "LFORM", ws], "sentence 1 (line 1), token 2: '34 470'"),
                       (["dmv", "--column", "FORM", ws], "the FORM value '34 470'"),
                       (["dmv", "--column", "UPOS", empty], "the UPOS value ''"),
                       (["cnf", "-n", "2", "--column", "FORM", ws], "token 2: '34 470' cannot be a grammar symbol")):
        r = grind("make-grammar", *args, check=False)
        assert r.returncode == 1 and what in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = grind("make-grammar", "cnf", "-n", "1000", "--column", "UPOS", ws, check=False)
    assert r.returncode == 1 and "has 1,000,003,000 rules, above the limit of 5,000,000" in r.stderr, r.stderr


def test_init_harmonic_names_the_sentences_it_leaves_out_and_its_corpus(tmp_path):
    """A sentence with a tag the grammar lacks was skipped by the harmonic counts with no word, and the
    header did not name the corpus (helper audit)."""
    row = "{}\tw\tw\tX\t{}\t_\t{}\t_\t_\t_\n"
    ok = row.format(1, "NN", 2) + row.format(2, "VB", 0) + "\n"
    (tmp_path / "ok.conllu").write_text(ok)
    (tmp_path / "mix.conllu").write_text(ok + row.format(1, "XY", 0) + "\n")
    grind("make-grammar", "dmv", "--column", "XPOS", "-o", tmp_path / "g.txt", tmp_path / "ok.conllu")
    r = grind("init", "--harmonic", "--corpus", tmp_path / "mix.conllu", "--column", "XPOS", "-o", tmp_path / "h.txt",
              tmp_path / "g.txt")
    assert "1 of 2 sentences have a XPOS the grammar lacks" in r.stderr and "sentence 2 (line 4) 'XY'" in r.stderr
    head = (tmp_path / "h.txt").read_text()
    assert "# harmonic_corpus: " in head
    assert "1 of the 2 sentences read (1 with a XPOS the grammar lacks left out)" in head
    # and the sentences its length limits left out (the header said '1 of 1' of a 2-sentence file)
    grind("init", "--harmonic", "--corpus", tmp_path / "mix.conllu", "--column", "XPOS", "--min-length", "2",
          "-o", tmp_path / "h2.txt", tmp_path / "g.txt")
    assert ("1 of the 1 sentences read; 1 sentences outside the length limits 2..inf (not counted)"
            in (tmp_path / "h2.txt").read_text())


@pytest.mark.parametrize("start, message", [
    ("PT0", "start symbol 'PT0' is one of the grammar's own symbols"),
    ("X0", "start symbol 'X0' is one of the grammar's own symbols"),
    ("a b", "start symbol 'a b': the rule format cannot hold it"),
    ("", "start symbol '': the rule format cannot hold it"),
])
def test_make_grammar_cnf_checks_its_start_symbol(tmp_path, start, message):
    """'-p 1 --start-symbol PT0' merged the start with a preterminal (one-word sentences derivable), X0 wrote
    'X0 --> X0' (refused only by train), and 'a b' or '' wrote files grind could not read back (API audit)."""
    from grind.errors import InputError
    from grind.grammars.cnf import cnf_grammar
    with pytest.raises(InputError, match=message):
        cnf_grammar(["a", "b"], 2, 1, start)
