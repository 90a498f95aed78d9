"""grind function-heads: UD content heads re-headed so that function words head their phrases."""
import random

import pytest

from conftest import grind, shared_path
from grind.formats.function_heads import function_heads, is_function_relation


def test_adposition_and_localizer_chain_up_left_outer_at_equal_distance():
    # 在 桌子 上 放: 在 (case) and 上 (case) both depend on 桌子, which is an nmod of 放
    assert function_heads([2, 4, 2, 0], ["case", "nmod", "case", "root"]) == \
        ([4, 3, 1, 0], ["nmod", "case", "case", "root"])


def test_auxiliaries_chain_farthest_on_top_and_the_root_moves():
    # would have been eating: the farthest auxiliary becomes the root
    assert function_heads([4, 4, 4, 0], ["aux", "aux", "aux", "root"]) == \
        ([0, 1, 2, 3], ["root", "aux", "aux", "aux"])


def test_a_dependent_a_function_word_separates_from_its_head_moves_to_it():
    # she(nsubj->4) will(aux->4) quickly(advmod->4) run(root) home(obl->4) after(case->7) dinner(obl->4):
    # 'she' is cut off from 'run' by 'will' and moves to it; 'quickly' and 'home' stay on 'run'
    heads = [4, 4, 4, 0, 4, 7, 4]
    rels = ["nsubj", "aux", "advmod", "root", "obl", "case", "obl"]
    new_heads, new_rels = function_heads(heads, rels)
    assert new_heads == [2, 0, 4, 2, 4, 4, 6]
    assert new_rels == ["nsubj", "root", "advmod", "aux", "obl", "obl", "case"]
    # two auxiliaries: the subject goes to the outermost one between it and the verb (he would have eaten)
    assert function_heads([4, 4, 4, 0], ["nsubj", "aux", "aux", "root"])[0] == [2, 0, 2, 3]
    # a modifier between the two auxiliaries goes to the inner one (would soon have eaten)
    assert function_heads([4, 4, 4, 0], ["aux", "advmod", "aux", "root"])[0] == [0, 3, 1, 3]


def test_labels_match_exactly_and_name_star_adds_the_subtypes():
    assert is_function_relation("case", {"case"}) and not is_function_relation("case:dec", {"case"})
    assert is_function_relation("case:dec", {"case:*"}) and is_function_relation("case", {"case:*"})
    assert not is_function_relation("case", {"case:dec"})
    assert not is_function_relation("nmod:case", {"case:*"})
    # 我 的 书: with case:dec the possessive marker heads the possessor; by default (exact labels) nothing moves
    assert function_heads([3, 1, 0], ["nmod:poss", "case:dec", "root"], ["case:*"]) == \
        ([2, 3, 0], ["case:dec", "nmod:poss", "root"])
    unchanged = ([3, 1, 0], ["nmod:poss", "case:dec", "root"])
    assert function_heads(*unchanged) == unchanged


def test_a_function_word_with_function_words_of_its_own():
    # x(0) <- f(case) ; f <- g(mark): g heads f's phrase and takes f's place above x
    heads, rels = function_heads([0, 1, 2], ["root", "case", "mark"])
    assert heads == [2, 3, 0] and rels == ["case", "mark", "root"]
    # c <- mark (next to c) and aux (farther: outer), aux <- cop: cop tops the whole phrase
    heads, rels = function_heads([0, 1, 1, 3], ["root", "mark", "aux", "cop"])
    assert heads == [2, 3, 4, 0] and _is_tree(heads)
    assert rels == ["mark", "aux", "cop", "root"]


def _is_tree(heads):
    n = len(heads)
    if sum(h == 0 for h in heads) != 1:
        return False
    for i in range(1, n + 1):
        h, steps = heads[i - 1], 0
        while h:
            h, steps = heads[h - 1], steps + 1
            if steps > n:
                return False
    return True


def test_random_trees_stay_trees_and_only_function_phrases_move():
    rng = random.Random(5)
    labels = ["case", "mark", "aux", "cop", "nsubj", "obj", "case:dec"]
    star = ["case:*", "mark", "aux", "cop"]
    for _ in range(3000):
        n = rng.randint(1, 9)
        order = list(range(1, n + 1))
        rng.shuffle(order)
        heads = [0] * n
        for k, w in enumerate(order[1:], 1):
            heads[w - 1] = order[rng.randrange(k)]
        rels = ["root" if h == 0 else rng.choice(labels) for h in heads]
        new_heads, new_rels = function_heads(heads, rels, star)
        assert _is_tree(new_heads), (heads, rels, new_heads)
        assert sorted(new_rels) == sorted(rels)                      # labels move, none is made up
        fun = [h != 0 and is_function_relation(r, star) for h, r in zip(heads, rels)]
        if not any(fun):
            assert (new_heads, new_rels) == (heads, rels)
        for i in range(n):        # a word that is no function word and has none stays where it was,
            h = heads[i]          # unless one of its head's function words lies between them
            cut = h and any(f and heads[j] == h and min(i + 1, h) < j + 1 < max(i + 1, h) for j, f in enumerate(fun))
            if not fun[i] and not cut and not any(f and heads[j] == i + 1 for j, f in enumerate(fun)):
                assert new_heads[i] == heads[i]


def _projective_tree(rng, lo, hi, heads, parent):
    if lo <= hi:
        r = rng.randint(lo, hi)
        heads[r - 1] = parent
        _projective_tree(rng, lo, r - 1, heads, r)
        _projective_tree(rng, r + 1, hi, heads, r)


def _is_projective(heads):
    arcs = [(min(i, h), max(i, h)) for i, h in enumerate(heads, 1) if h]
    return not any(a < c < b < d for a, b in arcs for c, d in arcs)


def test_projective_trees_stay_projective_without_nested_function_words():
    rng = random.Random(3)
    labels = ["case", "mark", "aux", "cop", "nsubj", "obj", "advmod"]
    checked = 0
    for _ in range(8000):
        n = rng.randint(1, 12)
        heads = [0] * n
        _projective_tree(rng, 1, n, heads, 0)
        rels = ["root" if h == 0 else rng.choice(labels) for h in heads]
        fun = [h != 0 and r in ("case", "mark", "aux", "cop") for h, r in zip(heads, rels)]
        if any(fun[i] and heads[i] and fun[heads[i] - 1] for i in range(n)):
            continue                                   # a function word with function words of its own
        checked += 1
        new_heads, _ = function_heads(heads, rels)
        assert _is_projective(new_heads), (heads, rels, new_heads)
    assert checked > 2000


CONLLU = """# sent_id = s1
1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_
1\tde\tde\tADP\t_\t_\t3\tcase\t3:case\t_
2\tle\tle\tDET\t_\t_\t3\tdet\t_\t_
3\tchat\tchat\tNOUN\t_\t_\t0\troot\t_\t_
3.1\tx\tx\tNOUN\t_\t_\t_\t_\t3:dep\t_

# sent_id = s2
1\tno\t_\tX\t_\t_\t_\t_\t_\t_
2\ttree\t_\tX\t_\t_\t_\t_\t_\t_

"""


def test_cli_rewrites_head_and_deprel_only_and_counts_sentences_without_heads(tmp_path):
    src = tmp_path / "in.conllu"
    src.write_text(CONLLU)
    r = grind("function-heads", src)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("# grind ") and any(ln.startswith("# command: grind function-heads") for ln in lines)
    assert "# without_heads: 1 (written unchanged)" in lines
    assert "# function_words: case 1" in lines and "# words_reattached: 2" in lines
    assert "# several_roots: 0 (sentences with more than one HEAD 0)" in lines
    body = r.stdout[r.stdout.index("# sent_id = s1"):]        # the header: the first sentence's comments (issue 38)
    assert body.splitlines() == [
        "# sent_id = s1",
        "1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_",
        "1\tde\tde\tADP\t_\t_\t0\troot\t3:case\t_",
        "2\tle\tle\tDET\t_\t_\t3\tdet\t_\t_",
        "3\tchat\tchat\tNOUN\t_\t_\t1\tcase\t_\t_",
        "3.1\tx\tx\tNOUN\t_\t_\t_\t_\t3:dep\t_",
        "",
        "# sent_id = s2",
        "1\tno\t_\tX\t_\t_\t_\t_\t_\t_",
        "2\ttree\t_\tX\t_\t_\t_\t_\t_\t_",
        "",
    ]
    assert "1 of 2 sentences have no heads" in r.stderr
    # the output reads back as a treebank: scored against the content heads, only 'le' keeps its head
    one = tmp_path / "one.conllu"
    one.write_text(CONLLU.split("\n\n")[0] + "\n\n")
    out = tmp_path / "out.conllu"
    grind("function-heads", "-o", out, one)
    r2 = grind("eval", "--column", "UPOS", "--no-baselines", one, out)
    assert "\nall\t1\t3\t0.3333\t" in r2.stdout
    assert "; gold heads as annotated in GOLD" in r2.stdout          # the gold's convention is named
    r3 = grind("eval", "--column", "UPOS", "--no-baselines", out, one)
    assert "; gold heads: function heads (adapted from Kohita" in r3.stdout


def test_cli_refuses_what_is_not_a_conll_treebank(tmp_path):
    txt = tmp_path / "plain.txt"
    txt.write_text("a b c\n")
    r = grind("function-heads", txt, check=False)
    assert r.returncode != 0 and "not CoNLL-U or CoNLL-X" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\ta\t_\tX\t_\t_\t2\tcase\t_\t_\n2\tb\t_\tX\t_\t_\t1\troot\t_\t_\n\n")
    r = grind("function-heads", bad, check=False)
    assert r.returncode != 0 and "cycle" in r.stderr and f"{bad}:" in r.stderr
    r = grind("function-heads", "--relations", " , ", bad, check=False)
    assert r.returncode == 2 and "at least one relation" in r.stderr


def test_cli_refuses_to_convert_twice_and_warns_when_nothing_matches(tmp_path):
    src = tmp_path / "in.conllu"
    src.write_text(CONLLU.split("\n\n")[0] + "\n\n")
    once = tmp_path / "once.conllu"
    grind("function-heads", "-o", once, src)
    r = grind("function-heads", once, check=False)
    assert r.returncode == 1 and "already re-headed by grind function-heads" in r.stderr and not r.stdout
    r = grind("function-heads", "--relations", "nsubj", src)
    assert "warning" in r.stderr and "no word has a relation in --relations (nsubj)" in r.stderr


def test_chinese_gsd_converts_and_attach_right_changes():
    test = shared_path("UD_Chinese-GSD", "r1.4", "zh-ud-test.conllu")
    r = grind("function-heads", test)
    assert "# sentences: 500" in r.stdout and "# without_heads: 0 (written unchanged)" in r.stdout
    moved = int(next(ln for ln in r.stdout.splitlines() if ln.startswith("# words_reattached:")).split()[-1])
    assert moved > 1000


def test_a_real_treebank_stays_projective_where_it_was():
    test = shared_path("UD_English-EWT", "en_ewt-ud-test.conllu")
    before = after = 0
    rows: list = []
    for line in open(test, encoding="utf-8").read().split("\n") + [""]:
        if line and not line.startswith("#"):
            c = line.split("\t")
            if c[0].isdigit():
                rows.append((int(c[6]), c[7]))
        elif not line and rows:
            heads, rels = [h for h, _ in rows], [r for _, r in rows]
            before += not _is_projective(heads)
            after += not _is_projective(function_heads(heads, rels)[0])
            rows = []
    assert after == before
@pytest.mark.parametrize("rels", [["case"], ["aux", "cop"]])
def test_no_function_relation_present_is_the_identity(rels):
    heads, labels = [2, 0, 2], ["nsubj", "root", "obj"]
    assert function_heads(heads, labels, rels) == (heads, labels)
