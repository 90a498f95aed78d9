"""Morphology (issue 13): character corpora, the sigmorphon format, morph grammars, planted morphology."""
from pathlib import Path

import numpy as np
import pytest

from conftest import grind
from grind.errors import InputError
from grind.formats.corpus import CorpusSpec, read_corpus
from grind.grammars.grammar import read_grammar
from grind.grammars.morph import (builtin_templates, check_templates, morph_grammar, morph_size, parse_templates,
                                  segmentation, substrings)
from grind.grammars.planted import planted_inventory, planted_words
from grind.kernels.cky import CKYParser

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "morph"
CHARS = CorpusSpec(chars=True)


def test_chars_nfc_and_errors(tmp_path):
    p = tmp_path / "w.txt"
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    p.write_text(f"{composed}\n{decomposed}\nab\n", encoding="utf-8")
    s = read_corpus(str(p), CHARS)
    assert s[0].tokens == s[1].tokens == ["c", "a", "f", "\u00e9"]
    assert s[2].tokens == ["a", "b"] and s[2].line == 3
    assert [x.tokens for x in read_corpus(str(p), CorpusSpec(chars=True, types=True))] == [list("café"), list("ab")]
    assert read_corpus(str(p), CorpusSpec(chars=True, max_length=3))[0].tokens == ["a", "b"]
    p.write_text("abc\nab cd\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"w\.txt:2: .*whitespace"):
        read_corpus(str(p), CHARS)
    p.write_text("abc\n\nde\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"w\.txt:2: empty word"):
        read_corpus(str(p), CHARS)


def test_sigmorphon_reading(tmp_path):
    p = tmp_path / "x.tsv"
    p.write_text("abdikovat\tab @@dik @@ova @@t\nabdomen\tabdomen\nstáti (se)\tstá @@ti (se)\n", encoding="utf-8")
    s = read_corpus(str(p), CHARS)                  # .tsv + --chars: sigmorphon
    assert len(s) == 2                               # the multi-word row is skipped with a warning
    assert s[0].tokens == list("abdikovat") and s[0].gold_morphs == ["ab", "dik", "ova", "t"]
    assert s[1].gold_morphs == ["abdomen"]
    assert segmentation(s[0].tokens, s[0].gold_morphs) == [(0, 2), (2, 5), (5, 8), (8, 9)]
    p.write_text("abc\ta @@bc\nabd\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"x\.tsv:2: no segmentation column"):
        read_corpus(str(p), CHARS)
    p.write_text("abc\nabd\ta @@bd\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"x\.tsv:2: .*segmentation column"):
        read_corpus(str(p), CHARS)
    p.write_text("abc\nabd\n", encoding="utf-8")
    assert [x.gold_morphs for x in read_corpus(str(p), CorpusSpec(format="sigmorphon", chars=True))] == [None, None]
    with pytest.raises(InputError, match="--chars"):
        read_corpus(str(p), CorpusSpec(format="sigmorphon"))
    sample = read_corpus(str(SAMPLE / "ces-train-sample.tsv"), CHARS)
    assert len(sample) == 300
    assert all("".join(x.gold_morphs) == "".join(x.tokens) for x in sample)


def test_hand_worked_counts():
    words = [list("abc"), list("abd"), list("bc")]
    subs = substrings(words)
    # abc: a ab abc b bc c; abd adds abd bd d; bc adds nothing
    assert len(subs) == 9
    czech = builtin_templates("czech")
    assert len(czech) == 8
    g = morph_grammar(words, czech)
    assert len(g) == morph_size(czech, subs) == 8 + 3 * 9
    assert g.start == "Word" and ("Stem", ("a", "b", "d")) in g.rules
    tot = g.lhs_totals(g.weights)
    assert np.allclose(tot, 1.0)
    ses = builtin_templates("sesotho")
    assert len(morph_grammar(words, ses)) == 5 + 5 * 9
    # --max-morph-length 2: a ab b bc c bd d
    assert len(substrings(words, 2)) == 7
    assert len(morph_grammar(words, czech, max_morph_length=2)) == 8 + 3 * 7


def test_czech_long_templates_reach_eight_morphs():
    """czech-long = Pre{0..2} Stem Suf{0..5}: 18 explicit rules; a word can be cut into up
    to 8 morphs (czech's limit is 5), and the CLI offers every built-in set."""
    from grind.cli.grammar_cmds import TEMPLATE_SET_NAMES
    from grind.grammars.morph import TEMPLATE_SETS
    from grind.kernels.segment import SegmentParser
    assert TEMPLATE_SET_NAMES == list(TEMPLATE_SETS)
    long_ = builtin_templates("czech-long")
    assert len(long_) == 18 and len(set(long_)) == 18
    assert {rhs for _, rhs in long_} == {("Pre",) * p + ("Stem",) + ("Suf",) * k
                                         for p in range(3) for k in range(6)}
    word = list("abcdefgh")
    for name, most in (("czech", 5), ("czech-long", 8)):
        g = morph_grammar([word], builtin_templates(name), max_morph_length=1)
        # single characters only: the word parses iff a template has 8 slots
        _, logz = SegmentParser(g, [word]).inside_outside(g.weights)
        assert (most >= 8) == np.isfinite(logz[0]), name


def test_per_slot_positional_rule():
    words = [list("abc"), list("abd"), list("bc")]
    g = morph_grammar(words, builtin_templates("czech"), shared=False)
    by = {}
    for lhs, rhs in g.rules:
        by.setdefault(lhs, set()).add("".join(rhs))
    # Pre: always first, never last -> word-initial, not whole words
    assert by["Pre"] == {"a", "ab", "b"}
    # Suf: never first -> substrings occurring non-initially somewhere
    assert by["Suf"] == {"b", "bc", "c", "bd", "d"}
    assert len(by["Stem"]) == 9
    assert len(g) == morph_size(builtin_templates("czech"), substrings(words), shared=False) == 8 + 3 + 5 + 9


def rules_by_slot(g):
    by = {}
    for lhs, rhs in g.rules:
        by.setdefault(lhs, set()).add("".join(rhs))
    return by


def test_per_slot_always_last_slot_gets_word_final_substrings_only():
    # sesotho: M is last in every template it occurs in and never first, so of abc (a ab abc b bc c)
    # it gets the non-initial word-final ones, bc and c (not the inner b)
    by = rules_by_slot(morph_grammar([list("abc")], builtin_templates("sesotho"), shared=False))
    assert by["M"] == {"bc", "c"}


def test_per_slot_slot_of_a_nested_template_gets_every_substring():
    # Stem stands alone under Word (first and last) but also in Base --> Stem Suf: all 6 substrings of abc
    t = parse_templates([(1, "Word --> Stem | Pre Base"), (2, "Base --> Stem Suf")])
    by = rules_by_slot(morph_grammar([list("abc")], t, shared=False))
    assert by["Stem"] == {"a", "ab", "abc", "b", "bc", "c"}


def test_unary_template_cycle_not_through_the_start_is_refused():
    # Word --> A --> B --> A: the cycle A -> B -> A is two rules long and does not pass through Word
    t = parse_templates([(1, "Word --> A | Stem"), (2, "A --> B"), (3, "B --> A | Stem")])
    with pytest.raises(InputError, match="a cycle of one-symbol templates through A"):
        check_templates(t)


def test_templates_file_and_errors(tmp_path):
    t = parse_templates([(1, "# comment"), (2, "Word --> A | A B  # two"), (3, "Word --> Pre A")])
    assert t == [("Word", ("A",)), ("Word", ("A", "B")), ("Word", ("Pre", "A"))]
    with pytest.raises(InputError, match="t:2: duplicate"):
        parse_templates([(1, "Word --> A"), (2, "Word --> A")], "t")
    with pytest.raises(InputError, match="also template symbols"):
        morph_grammar([list("aVb")], builtin_templates("sesotho"))


@pytest.mark.slow
def test_cli_make_grammar_morph(tmp_path):
    w = tmp_path / "w.txt"
    w.write_text("abc\nabd\nbc\nabc\n", encoding="utf-8")
    out = tmp_path / "g.txt"
    r = grind("make-grammar", "morph", "--chars", "--types", "-o", out, w)
    assert "9 distinct substrings, 35 rules" in r.stderr
    g = read_grammar(str(out))
    assert len(g) == 35 and g.meta["model"] == "morph" and g.meta["substrings"] == "9"
    assert g.meta["weights"].startswith("probabilities")
    r = grind("make-grammar", "morph", "--chars", "--max-rules", "34", w, check=False)
    assert r.returncode == 1 and "35 rules" in r.stderr and "--max-rules 35" in r.stderr
    tf = tmp_path / "t.txt"
    tf.write_text("Word --> P S\n", encoding="utf-8")
    r = grind("make-grammar", "morph", "--chars", "--templates", tf, "--per-slot", "--max-morph-length", "2", w)
    assert "7 distinct substrings" in r.stderr
    r = grind("make-grammar", "morph", w, check=False)
    assert r.returncode == 2 and "--chars" in r.stderr
    grind("train", "--algo", "em", "--iterations", "1", "--chars", "-o", tmp_path / "g1.txt", out, w)


def test_planted_corpus_parses_with_true_segmentation():
    pre, stems, suf = planted_inventory(7, n_prefixes=3, n_stems=8, n_suffixes=4)
    data = planted_words(60, 7, pre, stems, suf)
    assert data == planted_words(60, 7, pre, stems, suf)                      # deterministic given the seed
    assert all("".join(m) == w for w, m in data)
    words = [list(w) for w in dict.fromkeys(w for w, _ in data)]
    g = morph_grammar(words, builtin_templates("czech"))
    parser = CKYParser(g, words)
    _, logz = parser.inside_outside(g.weights)
    assert np.all(np.isfinite(logz))
    role_slot = {1: ("Stem",), 2: None, 3: ("Pre", "Stem", "Suf")}
    for morphs, z in zip(dict((w, m) for w, m in data).values(), logz):
        slots = role_slot.get(len(morphs)) or (("Pre", "Stem") if morphs[0] in pre and morphs[1] in stems
                                               else ("Stem", "Suf"))
        rules = [("Word", slots)] + [(s, tuple(m)) for s, m in zip(slots, morphs)]
        lp = sum(np.log(g.weights[g.index[f"{a} --> {' '.join(b)}"]]) for a, b in rules)
        assert np.isfinite(lp) and lp <= z + 1e-9


@pytest.mark.parametrize("templates, msg", [
    ("Word --> Word | Stem", "a cycle of one-symbol templates through Word"),
    ("Word --> Stem\nStem --> Root\nRoot --> Stem", "no slot"),
    ("Word --> Stem Word", "Word derives no word"),
])
def test_templates_that_derive_no_word_are_refused(tmp_path, templates, msg):
    from conftest import grind
    t, w = tmp_path / "t.txt", tmp_path / "w.txt"
    t.write_text(templates + "\n")
    w.write_text("abc\nabd\n")
    r = grind("make-grammar", "morph", "--chars", "--templates", t, w, check=False)
    assert r.returncode == 1 and msg in r.stderr
    t.write_text("Word --> Pres Stem | Stem\nPres --> Pre | Pre Pres\n")          # recursion with a way out
    assert grind("make-grammar", "morph", "--chars", "--templates", t, w).returncode == 0


def test_builtin_templates_whose_slots_are_letters_of_the_words_say_how_to_rename_them(tmp_path):
    """The sesotho set's slots M, T, V are capital letters of English words; 'rename the slots' could not be
    done with a built-in set (morphology audit)."""
    from conftest import grind
    f = tmp_path / "w.txt"
    f.write_text("Mama\nTeVe\nabc\n", encoding="utf-8")
    r = grind("make-grammar", "morph", "--chars", "--template-set", "sesotho", f, check=False)
    assert r.returncode == 1 and "M, T, V" in r.stderr and "give --templates FILE" in r.stderr
