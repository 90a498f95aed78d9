"""The second bad-input suite (issue 38): the mistakes users make and the files other tools write.

The first suite (tests/test_bad_input.py) feeds malformed files; this one feeds well-formed files used
wrongly, as a new user or a pipeline does, where the old code exited 0 with a wrong or empty result.
Every case runs one grind command in-process and checks the contract: a mistake exits non-zero with
one error line that names what was wrong and the fix (nothing on stdout, no output file), or, where
grind adopts what the user means, exits 0 and says so; a hint is followed in the test and must work.

Classes (``CASES`` per class, counted by :func:`test_case_count`):

* ``options``  every option a file's header records, cross-checked by every command that reads that file
  (a grammar's ``# corpus:`` line by parse, loglik, estep, train, init --harmonic; a prediction's by eval;
  a shard's by estep; a treebank grammar's ``# model:`` by train; counts' ``# estep-start:`` by mstep);
* ``swapped``  a prediction grind wrote given to eval as GOLD;
* ``unparsed`` more than --max-unparsed of the sentences without a parse, on every command;
* ``hints``    every message that names a command or option as the fix: the fix is run and works;
* ``foreign``  grammar files other tools write (6 significant digits, %g, with and without a header) and
  the files grind writes for them (make-grammar from-file, convert --to johnson, read by a reader as
  strict as Johnson's io), round-tripped;
* ``conll``    every CoNLL-U file grind writes, under the CoNLL 2018 evaluator's file rules;
* ``defaults``, ``averages``, ``wording``, ``forms``: the other classes of the issue.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from test_bad_input import run

# ----------------------------------------------------------------------------- data


def block(sid, rows, mwt=None):
    """A CoNLL-U sentence: rows (FORM, UPOS, XPOS, HEAD); ``mwt`` (first, last, surface) a multiword token."""
    text = " ".join(r[0] for r in rows)
    out = [f"# sent_id = {sid}", f"# text = {text}"]
    for i, (form, upos, xpos, head) in enumerate(rows, 1):
        if mwt and i == mwt[0]:
            out.append(f"{mwt[0]}-{mwt[1]}\t{mwt[2]}\t_\t_\t_\t_\t_\t_\t_\t_")
        rel = "root" if head == 0 else "dep"
        out.append(f"{i}\t{form}\t{form.lower()}\t{upos}\t{xpos}\t_\t{head}\t{rel}\t_\t_")
    return "\n".join(out) + "\n\n"


P = ("PUNCT", ".")
SENTENCES = [
    block("s1", [("The", "DET", "DT", 2), ("dog", "NOUN", "NN", 3), ("barks", "VERB", "VBZ", 0), (".", *P, 3)]),
    block("s2", [("A", "DET", "DT", 2), ("cat", "NOUN", "NN", 3), ("saw", "VERB", "VBD", 0),
                 ("dogs", "NOUN", "NNS", 3), (".", *P, 3)]),
    block("s3", [("!", *P, 0), ("?", *P, 1)]),                                          # punctuation only
    block("s4", [("The", "DET", "DT", 3), ("big", "ADJ", "JJ", 3), ("dog", "NOUN", "NN", 4),
                 ("saw", "VERB", "VBD", 0), ("a", "DET", "DT", 7), ("small", "ADJ", "JJ", 7),
                 ("cat", "NOUN", "NN", 4), ("near", "ADP", "IN", 11), ("the", "DET", "DT", 11),
                 ("old", "ADJ", "JJ", 11), ("house", "NOUN", "NN", 4), ("today", "NOUN", "NN", 4),
                 (".", *P, 4)]),                                                           # 12 words
    block("s5", [("I", "PRON", "PRP", 4), ("do", "AUX", "VBP", 4), ("n't", "PART", "RB", 4),
                 ("know", "VERB", "VB", 0), (".", *P, 4)], mwt=(2, 3, "don't")),
    block("s6", [("Dogs", "NOUN", "NNS", 2), ("bark", "VERB", "VBP", 0)]),
    block("s7", [("Hello", "INTJ", "UH", 0), ("!", *P, 1)]),                              # one word
    block("s8", [("Cats", "NOUN", "NNS", 2), ("sleep", "VERB", "VBP", 0), (".", *P, 2)]),
]
CONLLU = "".join(SENTENCES)
#: Sentences of tags no grammar here has: most of a corpus without a parse.
ODD = "".join(block(f"o{k}", [("x", "ZZ", "ZZ", 0), ("y", "NOUN", "NN", 1)]) for k in range(3)) + SENTENCES[0]
UD = ["--column", "UPOS", "--punct", "ud"]
WORDS = "dogs\ncats\nwalked\nwalking\ndog\ncat\n"
TREES = ("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))\n(S (NP (DT a) (NN cat)) (VP (VBD saw) (NP (NNS dogs))))\n"
         "(S (NP (NNS dogs)) (VP (VBP bark)))\n")


def grind_ok(*args, stdin=None):
    """Run grind in-process; it must exit 0; (stdout, stderr)."""
    code, out, err = run([str(a) for a in args], stdin)
    assert code == 0 and "Traceback" not in err, f"grind {' '.join(map(str, args))}: exit {code}\n{err}"
    return out, err


@pytest.fixture(scope="module")
def D(tmp_path_factory):
    """Inputs every case may read (never written by a case)."""
    d = tmp_path_factory.mktemp("mistakes")
    (d / "t.conllu").write_text(CONLLU)
    (d / "odd.conllu").write_text(ODD)
    (d / "words.txt").write_text(WORDS)
    (d / "tr.mrg").write_text(TREES)
    (d / "tags.txt").write_text("DET NOUN VERB\nNOUN VERB\nDET ADJ NOUN VERB\n")
    t = d / "t.conllu"
    steps = [
        ["make-grammar", "dmv", *UD, "-o", d / "dmv0.txt", t],
        ["init", "--harmonic", "--corpus", t, *UD, "-o", d / "dmv1.txt", d / "dmv0.txt"],
        ["train", "--algo", "em", "--iterations", "2", *UD, "-o", d / "dmv.txt", d / "dmv1.txt", t],
        ["train", "--algo", "vb", "--iterations", "2", *UD, "-o", d / "dmv-vb.txt", d / "dmv1.txt", t],
        ["make-grammar", "cnf", "-n", "2", "-p", "2", *UD, "--min-length", "2", "-o", d / "cnf0.txt", t],
        ["init", "--random", "--seed", "1", "-o", d / "cnf.txt", d / "cnf0.txt"],
        ["make-grammar", "dmv", "--column", "XPOS", "--punct", "ptb", "-o", d / "dmvx.txt", t],
        ["make-grammar", "morph", "--chars", "--max-morph-length", "3", "-o", d / "morph.txt", d / "words.txt"],
        ["make-grammar", "treebank", "--subtypes", "2", "--seed", "1", "-o", d / "tb.txt", d / "tr.mrg"],
        ["parse", *UD, "-o", d / "p.conllu", d / "dmv.txt", t],
        ["parse", "--seed", "3", *UD, "-o", d / "p3.conllu", d / "dmv.txt", t],
        ["parse", *UD, "-o", d / "pvb.conllu", d / "dmv-vb.txt", t],
        ["parse", *UD, "--min-length", "2", "-o", d / "p.trees", d / "cnf.txt", t],
        ["baseline", "--attach", "right", *UD, "-o", d / "right.conllu", t],
        ["estep", *UD, "-o", d / "counts.txt", d / "dmv.txt", t],
        ["split", *UD, "-n", "2", "-o", d / "shard", t],
        ["parse", "--chars", "--segment", "-o", d / "seg.txt", d / "morph.txt", d / "words.txt"],
    ]
    for a in steps:
        grind_ok("-q", *a)
    return d


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    id: str
    cls: str
    args: list                       # "{D}" the data directory, "{T}" the case's
    codes: tuple = (1,)              # (0,): the command succeeds (what the user meant)
    must: tuple = ()                 # in the error line (or, on success, in stderr + stdout)
    output: bool = True              # add -o {T}/out.txt; a failure must not create it
    stdin: str | None = None
    files: dict = field(default_factory=dict)
    check: object = None             # success: callable(T, out, err)


CASES: list[Case] = []


def case(*a, **kw):
    CASES.append(Case(*a, **kw))


def fill(s, D, T):
    return str(s).replace("{D}", str(D)).replace("{T}", str(T))


# --- options: what a grammar's '# corpus:' line records, against every command that reads it with a corpus

#: Commands reading GRAMMAR and CORPUS, as (name, args before the options, args after).
GRAMMAR_CORPUS = {
    "parse": (["parse"], []),
    "loglik": (["loglik"], []),
    "estep": (["estep"], []),
    "train": (["train", "--iterations", "1"], []),
}
GRAMMARS = {"dmv": "{D}/dmv.txt", "cnf": "{D}/cnf.txt"}
for cmd, (head, _) in GRAMMAR_CORPUS.items():
    for gname, g in GRAMMARS.items():
        extra = ["--min-length", "2"] if gname == "cnf" else []
        # another column: refused, naming both and the fix
        case(f"options-{cmd}-{gname}-column-contradicts", "options",
             [*head, "--column", "XPOS", "--punct", "ud", *extra, g, "{D}/t.conllu"],
             must=("--column UPOS", "--column XPOS", "give --column UPOS"))
        # no column on a treebank: refused with the grammar's column
        case(f"options-{cmd}-{gname}-column-missing", "options", [*head, "--punct", "ud", *extra, g, "{D}/t.conllu"],
             must=("explicit --column", "give --column UPOS"))
        # another punctuation rule, given: refused
        for punct in ("none", "ptb"):
            case(f"options-{cmd}-{gname}-punct-{punct}-contradicts", "options",
                 [*head, "--column", "UPOS", "--punct", punct, *extra, g, "{D}/t.conllu"],
                 must=("--punct ud", f"--punct {punct}", "give --punct ud"))
        # not given: the grammar's, said on stderr, in the output header
        case(f"options-{cmd}-{gname}-punct-adopted", "options", [*head, "--column", "UPOS", *extra, g, "{D}/t.conllu"],
             codes=(0,), must=("note:", "which is not given here"),
             check=lambda T, out, err: "punct-removed=ud" in (T / "out.txt").read_text())
        # from standard input the header comes too late to adopt: refused
        case(f"options-{cmd}-{gname}-punct-stdin-grammar", "options",
             [*head, "--column", "UPOS", *extra, "-", "{D}/t.conllu"], stdin=f"@{g}",
             must=("<stdin> was made with --punct ud", "give --punct ud"))
        # what is not compared: a grammar of <= N words reads longer sentences; the format is the file's
        case(f"options-{cmd}-{gname}-length-not-compared", "options",
             [*head, *UD, "--max-length", "40", *extra, "--max-unparsed", "1", g, "{D}/t.conllu"], codes=(0,))
case("options-init-harmonic-column-contradicts", "options",
     ["init", "--harmonic", "--corpus", "{D}/t.conllu", "--column", "XPOS", "--punct", "ud", "{D}/dmv0.txt"],
     must=("--column UPOS", "--column XPOS"))
case("options-init-harmonic-punct-contradicts", "options",
     ["init", "--harmonic", "--corpus", "{D}/t.conllu", "--column", "UPOS", "--punct", "none", "{D}/dmv0.txt"],
     must=("--punct ud", "--punct none"))
case("options-init-harmonic-punct-adopted", "options",
     ["init", "--harmonic", "--corpus", "{D}/t.conllu", "--column", "UPOS", "{D}/dmv0.txt"], codes=(0,),
     must=("note:",), check=lambda T, out, err: "punct-removed=ud" in (T / "out.txt").read_text())
case("options-init-carries-the-corpus-line", "options", ["init", "--random", "--seed", "2", "{D}/cnf0.txt"], codes=(0,),
     check=lambda T, out, err: "# corpus: format=conllu" in (T / "out.txt").read_text())
# --chars of a morphology grammar: adopted when not given
case("options-parse-chars-adopted", "options", ["parse", "--segment", "{D}/morph.txt", "{D}/words.txt"], codes=(0,),
     must=("note:", "--chars"))
case("options-loglik-chars-adopted", "options", ["loglik", "{D}/morph.txt", "{D}/words.txt"], codes=(0,),
     must=("note:",))
# plain text of tags: no punctuation rule to compare (the file has none to remove by)
case("options-parse-text-corpus-not-compared", "options", ["parse", "{D}/dmv.txt", "{D}/tags.txt"], codes=(0,))
# a treebank grammar trains on trees only
case("options-train-treebank-grammar-without-trees", "options", ["train", "{D}/tb.txt", "{D}/tr.mrg"], codes=(2,),
     must=("--trees",))
# eval against what the prediction's header records
case("options-eval-punct-of-the-prediction", "options",
     ["eval", "--column", "UPOS", "{D}/t.conllu", "{D}/p.conllu"], must=("punct-removed=ud", "--punct ud"))
case("options-eval-length-limits-of-the-prediction", "options",
     ["eval", *UD, "{T}/g.conllu", "{T}/lim.conllu"], files={"g.conllu": CONLLU, "lim.conllu": "PARSE10"},
     must=("grind_left_out", "corpus options the prediction was made with"))
case("options-eval-column-not-compared", "options",     # heads are heads, whichever column aligns the tokens
     ["eval", "--column", "XPOS", "--punct", "ud", "{D}/t.conllu", "{D}/p.conllu"], codes=(0,))
# a shard read with other options than it was cut with; counts of another start symbol
case("options-estep-shard-options", "options", ["estep", "--column", "UPOS", "--punct", "ud", "--max-length", "40",
                                                "{D}/dmv.txt", "{D}/shard.1.conllu"], must=("grind split cut",))
case("options-mstep-start-of-the-counts", "options", ["mstep", "--start", "Y_NOUN", "{D}/counts.txt"],
     must=("start symbol 'S'",))


# --- swapped: a prediction given as GOLD

for name, files, args in [
    ("parse", {}, ["eval", *UD, "{D}/p.conllu", "{D}/t.conllu"]),
    ("baseline", {}, ["eval", *UD, "{D}/right.conllu", "{D}/t.conllu"]),
    ("trees", {"g.mrg": TREES}, ["eval", "--column", "UPOS", "{D}/p.trees", "{T}/g.mrg"]),
    ("labeled", {"g.mrg": TREES}, ["eval", "--labeled", "{D}/p.trees", "{T}/g.mrg"]),
    ("segmentation", {}, ["eval", "--segmentation", "{D}/seg.txt", "{D}/seg.txt"]),
    ("header-lost", {"bare.conllu": "BARE"}, ["eval", *UD, "{T}/bare.conllu", "{D}/t.conllu"]),
    ("stdin", {}, ["eval", *UD, "--format", "conllu", "-", "{D}/t.conllu"]),
]:
    case(f"swapped-{name}", "swapped", args, files=files, stdin="@{D}/p.conllu" if name == "stdin" else None,
         must=("did you swap GOLD and PREDICTED?",))
case("swapped-not-when-in-order", "swapped", ["eval", *UD, "{D}/t.conllu", "{D}/p.conllu"], codes=(0,))


# --- unparsed: more than --max-unparsed of the sentences without a parse, on every command

ODD_CMDS = {
    "parse-dmv": ["parse", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "parse-mbr": ["parse", "--mbr", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "parse-cnf": ["parse", *UD, "--min-length", "2", "{D}/cnf.txt", "{D}/odd.conllu"],
    "loglik": ["loglik", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "estep": ["estep", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "train-em": ["train", "--iterations", "1", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "train-vb": ["train", "--algo", "vb", "--iterations", "1", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "train-stochastic": ["train", "--algo", "stochastic", "--batch", "2", *UD, "{D}/dmv.txt", "{D}/odd.conllu"],
    "train-gibbs": ["train", "--algo", "gibbs", "--iterations", "1", "--seed", "1", *UD, "{D}/dmv.txt",
                    "{D}/odd.conllu"],
    "parse-segment": ["parse", "--chars", "--segment", "{D}/morph.txt", "{T}/w.txt"],
    "parse-treebank": ["parse", "{D}/tb.txt", "{T}/odd.mrg"],
    "train-trees": ["train", "--trees", "--iterations", "1", "{D}/tb.txt", "{T}/odd.mrg"],
    "eval-dependencies": ["eval", *UD, "{D}/odd.conllu", "{T}/pred.conllu"],
    "eval-brackets": ["eval", "--column", "FORM", "{T}/g.mrg", "{T}/np.mrg"],
    "eval-labeled": ["eval", "--labeled", "{T}/g.mrg", "{T}/np.mrg"],
    "eval-segmentation": ["eval", "--segmentation", "{T}/gs.txt", "{T}/ps.txt"],
}
ODD_FILES = {"w.txt": "zzz\nqqq\ndogs\n", "odd.mrg": "(S (XX qq))\n(S (YY zz))\n"
                                                    "(S (NP (DT the) (NN dog)) (VP (VBZ barks)))\n",
             "pred.conllu": "ODDPRED", "g.mrg": TREES,
             "np.mrg": "(NOPARSE the dog barks)\n(NOPARSE a cat saw dogs)\n(S (NP (NNS dogs)) (VP (VBP bark)))\n",
             "gs.txt": "dog s\ncat s\nwalk ed\n", "ps.txt": "dogs\t_\ncats\t_\nwalk ed\n"}
for name, args in ODD_CMDS.items():
    case(f"unparsed-{name}", "unparsed", args, files=ODD_FILES, must=("have no parse", "--max-unparsed 1"))
    case(f"unparsed-{name}-allowed", "unparsed", [*args[:1], "--max-unparsed", "1", *args[1:]], files=ODD_FILES,
         codes=(0,))


# --- foreign: other tools' grammar files, and the files grind writes for them

SIX = "".join(f"{w:.6g} S --> {a}\n" for w, a in zip([1 / 6] * 6, "abcdef"))          # 0.166667 x 6 = 1.000002
THIRDS = "".join(f"{1 / 3:.5g} X --> {a}\n" for a in "abc") + "1 S --> X X\n"        # 0.33333 x 3 = 0.99999
FOREIGN_CORPUS = "a b\nc\nd e f\n"
for name, text in [("six-digits", SIX), ("six-digits-header", "# weights: probabilities\n" + SIX),
                   ("five-digits-thirds", "1 S --> X X\n" + THIRDS.replace("1 S --> X X\n", ""))]:
    for cmd in ("loglik", "parse", "estep"):
        case(f"foreign-{name}-{cmd}", "foreign", [cmd, "--max-unparsed", "1", "{T}/g.txt", "{T}/c.txt"],
             files={"g.txt": text, "c.txt": FOREIGN_CORPUS}, codes=(0,), must=("renormalised",))
for name, text in [("sum-1.05", SIX.replace("0.166667 S --> a", "0.216667 S --> a")),
                   ("three-tenths", "0.3 S --> a\n0.3 S --> b\n0.3 S --> c\n"),
                   ("six-digits-short", SIX.replace("0.166667 S --> a", "0.166 S --> a"))]:
    case(f"foreign-refused-{name}", "foreign", ["loglik", "{T}/g.txt", "{T}/c.txt"],
         files={"g.txt": text, "c.txt": FOREIGN_CORPUS}, must=("not 1, so they are not probabilities",))
case("foreign-from-file-as-read", "foreign", ["loglik", "--max-unparsed", "1", "{T}/g.txt", "{T}/c.txt"],
     files={"g.txt": "# weights: as read\n" + SIX, "c.txt": FOREIGN_CORPUS}, codes=(0,))
case("foreign-train-six-digits-no-warning", "foreign",
     ["train", "--iterations", "1", "--max-unparsed", "1", "{T}/g.txt", "{T}/c.txt"],
     files={"g.txt": SIX, "c.txt": FOREIGN_CORPUS}, codes=(0,),
     check=lambda T, out, err: "not probabilities" not in err and "# renormalised:" in (T / "out.txt").read_text())


# --- the cases' runner


def materialise(c: Case, D: Path, T: Path):
    for name, content in c.files.items():
        if content == "PARSE10":           # a parse with length limits: the longer sentences marked left out
            out, _ = grind_ok("parse", *UD, "--max-length", "10", D / "dmv.txt", D / "t.conllu")
            content = out
        elif content == "BARE":            # a prediction without its header (grep -v '^#' keeps no marks either)
            content = "".join(ln for ln in (D / "p.conllu").read_text().splitlines(True)
                              if not ln.startswith("# grind ") and not re.match(r"# [a-z_]+: ", ln))
            content = content.replace("# sent_id = s1", "# grind_unparsed = made up\n# sent_id = s1", 1)
        elif content == "ODDPRED":
            out, _ = grind_ok("parse", "--max-unparsed", "1", *UD, D / "dmv.txt", D / "odd.conllu")
            content = out
        (T / name).write_text(content)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_mistake(c: Case, D, tmp_path):
    T = tmp_path
    materialise(c, D, T)
    args = [fill(a, D, T) for a in c.args]
    out_path = T / "out.txt"
    if c.output:
        args += ["-o", str(out_path)]
    stdin = None
    if c.stdin is not None:
        stdin = Path(fill(c.stdin[1:], D, T)).read_bytes() if c.stdin.startswith("@") else c.stdin.encode()
    code, out, err = run(args, stdin)
    assert "Traceback" not in err, err
    assert code in c.codes, f"exit {code}, expected {c.codes}:\n{err}"
    if code == 0:
        for m in c.must:
            assert m in err + out + (out_path.read_text() if out_path.exists() else ""), (m, err)
        if c.check is not None:
            assert c.check(T, out, err), err
        return
    last = err.strip().splitlines()[-1]
    assert last.startswith(("grind: error:", "Error:")), err
    for m in c.must:
        assert fill(m, D, T) in last, f"the error should name {m!r}: {last}"
    assert not out, out[:300]
    assert not out_path.exists(), "a failed run wrote its output"


# ----------------------------------------------------------------------------- hints: follow each one


def hint_command(message: str) -> list[str]:
    """The command a message quotes as its fix: the text between quotes that starts with 'grind '."""
    m = re.search(r"'(grind [^']+)'", message)
    assert m, f"no quoted grind command in: {message}"
    return shlex.split(m.group(1))[1:]


def error_of(args, stdin=None, codes=(1,)):
    code, out, err = run([str(a) for a in args], stdin)
    assert code in codes and "Traceback" not in err, f"exit {code}:\n{err}"
    return err.strip().splitlines()[-1]


HINTS: dict = {}


def hint(f):
    HINTS[f.__name__] = f
    return f


@hint
def unnormalised_weights_init_normalise(D, T):
    (T / "g.txt").write_text("2 S --> a\n1 S --> b\n")
    (T / "c.txt").write_text("a\nb\n")
    msg = error_of(["loglik", T / "g.txt", T / "c.txt"])
    grind_ok(*hint_command(msg), "-o", T / "n.txt")
    out, _ = grind_ok("loglik", "--summary", T / "n.txt", T / "c.txt")
    assert "# logprob: " + repr(float(np.log(2 / 3) + np.log(1 / 3))) in out          # the ratios were kept


@hint
def equal_weights_init_random(D, T):
    msg = error_of(["parse", *UD, "--min-length", "2", D / "cnf0.txt", D / "t.conllu"])
    assert "grind init --random" in msg
    grind_ok(*hint_command(msg), "-o", T / "g1.txt")
    grind_ok("parse", *UD, "--min-length", "2", T / "g1.txt", D / "t.conllu")
    grind_ok("train", "--iterations", "1", *UD, "--min-length", "2", T / "g1.txt", D / "t.conllu")


@hint
def pseudo_counts_header(D, T):
    text = "3 S --> a\n1 S --> b\n"
    (T / "g.txt").write_text(text)
    (T / "c.txt").write_text("a\nb\n")
    msg = error_of(["loglik", T / "g.txt", T / "c.txt"])
    line = re.search(r"the line '(# weights: [^']+)'", msg).group(1)
    (T / "g.txt").write_text(line + "\n" + text)
    out, _ = grind_ok("loglik", "--summary", T / "g.txt", T / "c.txt")
    assert "# parsed: 2" in out


@hint
def counts_given_as_grammar_mstep(D, T):
    msg = error_of(["parse", *UD, D / "counts.txt", D / "t.conllu"])
    grind_ok(*[str(D / "dmv.txt") if a == "GRAMMAR" else a for a in hint_command(msg)], "-o", T / "g.txt")
    grind_ok("parse", *UD, T / "g.txt", D / "t.conllu")


@hint
def one_word_sentences_min_length(D, T):
    (T / "c.txt").write_text("DET NOUN VERB\nNOUN\nVERB\nNOUN VERB\nINTJ\n")
    msg = error_of(["loglik", D / "cnf.txt", T / "c.txt"])
    assert "--min-length 2" in msg
    out, _ = grind_ok("loglik", "--summary", "--min-length", "2", D / "cnf.txt", T / "c.txt")
    assert "# parsed: 2" in out


@hint
def treebank_grammar_needs_trees(D, T):
    msg = error_of(["train", D / "tb.txt", D / "tr.mrg"], codes=(2,))
    assert "give --trees" in msg
    grind_ok("train", "--trees", "--iterations", "1", "-o", T / "g.txt", D / "tb.txt", D / "tr.mrg")


@hint
def symmetric_start_init_random(D, T):
    grind_ok("init", "-o", T / "u.txt", D / "cnf0.txt")                       # uniform: every X alike
    msg = error_of(["train", *UD, "--min-length", "2", T / "u.txt", D / "t.conllu"])
    assert "symmetric start" in msg
    grind_ok(*hint_command(msg), "-o", T / "r.txt")
    grind_ok("train", "--iterations", "2", *UD, "--min-length", "2", "-o", T / "g.txt", T / "r.txt", D / "t.conllu")


@hint
def symmetric_split_grammar_noise(D, T):
    grind_ok("make-grammar", "treebank", "--subtypes", "2", "--noise", "0", "-o", T / "s0.txt", D / "tr.mrg")
    msg = error_of(["train", "--trees", "--iterations", "1", T / "s0.txt", D / "tr.mrg"])
    cmd = [a.replace("H", "2").replace("TREES", str(D / "tr.mrg")) for a in hint_command(msg)]
    grind_ok(*cmd, "-o", T / "s1.txt")
    grind_ok("train", "--trees", "--iterations", "1", "-o", T / "g.txt", T / "s1.txt", D / "tr.mrg")


@hint
def column_and_punct_of_the_grammar(D, T):
    for given, fix in ((["--column", "XPOS", "--punct", "ud"], ["--column", "UPOS", "--punct", "ud"]),
                       (["--column", "UPOS", "--punct", "none"], ["--column", "UPOS", "--punct", "ud"]),
                       (["--punct", "ud"], ["--column", "UPOS", "--punct", "ud"])):
        msg = error_of(["parse", *given, D / "dmv.txt", D / "t.conllu"])
        told = re.search(r"give (--\S+ \S+)", msg).group(1).split()
        assert told in ([fix[0], fix[1]], [fix[2], fix[3]]), msg
        grind_ok("parse", *fix, D / "dmv.txt", D / "t.conllu")


@hint
def swapped_gold_and_predicted(D, T):
    msg = error_of(["eval", *UD, D / "p.conllu", D / "t.conllu"])
    assert "did you swap" in msg
    grind_ok("eval", *UD, D / "t.conllu", D / "p.conllu")


@hint
def max_unparsed_writes_it_anyway(D, T):
    msg = error_of(["parse", *UD, D / "dmv.txt", D / "odd.conllu"])
    assert "give --max-unparsed 1" in msg
    out, _ = grind_ok("parse", "--max-unparsed", "1", *UD, D / "dmv.txt", D / "odd.conllu")
    assert "# unparsed: 3" in out


@hint
def unknown_tag_tags_from(D, T):
    grind_ok("make-grammar", "dmv", "-o", T / "g.txt", D / "tags.txt")
    (T / "c.txt").write_text("DET NOUN ZZ\nNOUN VERB\nZZ\n")
    _, err = grind_ok("parse", "--max-unparsed", "1", T / "g.txt", T / "c.txt")
    assert "make the grammar with make-grammar dmv --tags-from CORPUS" in err
    grind_ok("make-grammar", "dmv", "--tags-from", T / "c.txt", "-o", T / "g2.txt", D / "tags.txt")
    out, _ = grind_ok("parse", T / "g2.txt", T / "c.txt")
    assert "# unparsed: 0" in out


@hint
def numerical_failure_kernel_cky(D, T):
    from grind.kernels.dmv import DMVParser
    real = DMVParser.inside_outside

    def broken(self, weights, idx=None):
        counts, logz = real(self, weights, idx)
        return counts, np.full(len(logz), np.nan)
    DMVParser.inside_outside = broken
    try:
        msg = error_of(["loglik", *UD, D / "dmv.txt", D / "t.conllu"])
    finally:
        DMVParser.inside_outside = real
    assert "try --kernel cky" in msg
    DMVParser.inside_outside = broken
    try:
        out, _ = grind_ok("loglik", "--summary", "--kernel", "cky", *UD, D / "dmv.txt", D / "t.conllu")
    finally:
        DMVParser.inside_outside = real
    assert "# parsed: 7" in out


@hint
def punct_rule_the_file_cannot_match(D, T):
    (T / "t.dp").write_text("the\tDT\t2\ndog\tNN\t0\n.\t.\t2\n\n")
    msg = error_of(["eval", "--column", "XPOS", "--punct", "ud", T / "t.dp", T / "t.dp"])
    assert "use --punct ptb" in msg
    grind_ok("eval", "--column", "XPOS", "--punct", "ptb", T / "t.dp", T / "t.dp")
    (T / "x.conllu").write_text("1\tw\tw\tNOUN\t_\t_\t0\t_\t_\t_\n2\t.\t.\tPUNCT\t_\t_\t1\t_\t_\t_\n\n")
    msg = error_of(["eval", "--column", "UPOS", "--punct", "ptb", T / "x.conllu", T / "x.conllu"])
    assert "use --punct ud" in msg
    grind_ok("eval", "--column", "UPOS", "--punct", "ud", T / "x.conllu", T / "x.conllu")


@hint
def format_hints(D, T):
    msg = error_of(["parse", *UD, D / "t.conllu", D / "dmv.txt"])                      # a grammar as corpus
    assert "GRAMMAR and CORPUS swapped?" in msg
    grind_ok("parse", *UD, D / "dmv.txt", D / "t.conllu")
    (T / "tabs.txt").write_text("a b\tc\n")
    msg = error_of(["make-grammar", "cnf", "-n", "1", T / "tabs.txt"])
    assert "pass --format" in msg
    grind_ok("make-grammar", "cnf", "-n", "1", "--format", "text", T / "tabs.txt")
    (T / "late.txt").write_text("a b\nc\td\n")
    msg = error_of(["make-grammar", "cnf", "-n", "1", T / "late.txt"])
    assert "pass --format text to read TABs as spaces" in msg
    grind_ok("make-grammar", "cnf", "-n", "1", "--format", "text", T / "late.txt")
    (T / "s.tsv").write_text("dogs\tdog @@s\n")
    msg = error_of(["make-grammar", "cnf", "-n", "1", "--format", "sigmorphon", T / "s.tsv"])
    assert "pass --chars" in msg
    grind_ok("make-grammar", "morph", "--chars", T / "s.tsv")
    msg = error_of(["make-grammar", "morph", D / "words.txt"], codes=(2,))
    assert "pass --chars" in msg
    grind_ok("make-grammar", "morph", "--chars", D / "words.txt")


@hint
def compressed_stdin(D, T):
    import gzip
    data = gzip.compress(b"a b\n")
    msg = error_of(["make-grammar", "cnf", "-n", "1", "-"], stdin=data)
    assert "give the file by a name ending in its suffix" in msg
    (T / "c.txt.gz").write_bytes(data)
    grind_ok("make-grammar", "cnf", "-n", "1", T / "c.txt.gz")


@hint
def eval_punct_of_the_prediction(D, T):
    msg = error_of(["eval", "--column", "UPOS", D / "t.conllu", D / "p.conllu"])
    fix = re.search(r"score it with (--punct \S+)", msg).group(1).split()
    grind_ok("eval", "--column", "UPOS", *fix, D / "t.conllu", D / "p.conllu")


@hint
def eval_length_limits_of_the_prediction(D, T):
    out, _ = grind_ok("parse", *UD, "--max-length", "10", D / "dmv.txt", D / "t.conllu")
    (T / "lim.conllu").write_text(out)
    msg = error_of(["eval", *UD, D / "t.conllu", T / "lim.conllu"])
    assert "corpus options the prediction was made with (its '# corpus:' header)" in msg
    grind_ok("eval", *UD, "--max-length", "10", D / "t.conllu", T / "lim.conllu")


@hint
def checkpoint_exists_resume(D, T):
    a = ["train", "--iterations", "1", *UD, "--checkpoint", T / "ck.npz", "-o", T / "g.txt", D / "dmv1.txt",
         D / "t.conllu"]
    grind_ok(*a)
    msg = error_of(a, codes=(2,))
    assert "give --resume to continue it" in msg
    grind_ok(*[x if x != "1" else "2" for x in a], "--resume")
    msg = error_of(["train", "--checkpoint", T / "ck.npz.gz", D / "dmv1.txt", D / "t.conllu"], codes=(2,))
    assert "give a name without that suffix" in msg


@hint
def mstep_start_and_algo(D, T):
    cnf = [*UD, "--min-length", "2"]
    grind_ok("estep", *cnf, "--start", "X0", "-o", T / "c.txt", D / "cnf.txt", D / "t.conllu")
    msg = error_of(["mstep", "--grammar", D / "cnf.txt", T / "c.txt"])
    assert "give grind estep's --start to grind mstep too" in msg
    grind_ok("mstep", "--grammar", D / "cnf.txt", "--start", "X0", T / "c.txt")
    grind_ok("estep", "--algo", "vb", *UD, "-o", T / "v.txt", D / "dmv-vb.txt", D / "t.conllu")
    msg = error_of(["mstep", "--grammar", D / "dmv-vb.txt", T / "v.txt"])
    assert "use --algo vb" in msg
    grind_ok("mstep", "--algo", "vb", "--grammar", D / "dmv-vb.txt", T / "v.txt")
    msg = error_of(["mstep", "--algo", "vb", "--grammar", D / "dmv-vb.txt", D / "counts.txt"])
    assert "run grind estep --algo vb" in msg or "make them with grind estep --algo vb" in msg


@hint
def max_rules_lift(D, T):
    for args in (["make-grammar", "cnf", "-n", "3", "-p", "3", *UD],
                 ["make-grammar", "dmv", "--column", "FORM"]):
        msg = error_of([*args, "--max-rules", "10", D / "t.conllu"])
        n = re.search(r"--max-rules ([0-9]+)", msg).group(1)
        grind_ok(*args, "--max-rules", n, D / "t.conllu")
    msg = error_of(["make-grammar", "morph", "--chars", "--max-rules", "10", D / "words.txt"])
    n = re.search(r"lift the limit with --max-rules ([0-9]+)", msg).group(1)
    grind_ok("make-grammar", "morph", "--chars", "--max-rules", n, D / "words.txt")


@hint
def split_shard_options(D, T):
    msg = error_of(["estep", "--column", "UPOS", "--punct", "ud", "--max-length", "40", D / "dmv.txt",
                    D / "shard.1.conllu"])
    assert "give the split's options" in msg
    grind_ok("estep", *UD, D / "dmv.txt", D / "shard.1.conllu")


@hint
def unary_cycle(D, T):
    (T / "g.txt").write_text("1 S --> A\n0.5 A --> S\n0.5 A --> a\n")
    msg = error_of(["make-grammar", "from-file", T / "g.txt"])
    assert "remove a rule of it or give it weight 0" in msg
    (T / "g.txt").write_text("1 S --> A\n0 A --> S\n1 A --> a\n")
    grind_ok("make-grammar", "from-file", T / "g.txt")


@hint
def stdin_twice(D, T):
    msg = error_of(["eval", *UD, "--format", "conllu", "-", "-"], stdin=CONLLU.encode(), codes=(2,))
    assert "give all but one of them as files" in msg
    grind_ok("eval", *UD, "--format", "conllu", "-", D / "t.conllu", stdin=CONLLU.encode())


@hint
def tempered_state_resume(D, T):
    a = ["train", "--algo", "gibbs", "--seed", "1", "--temp-start", "3", "--anneal-sweeps", "4", *UD,
         "--checkpoint", T / "ck.npz"]
    _, err = grind_ok(*a, "--iterations", "2", "-o", T / "g.txt", D / "dmv1.txt", D / "t.conllu")
    assert "continue with --checkpoint FILE --resume and more --iterations" in err
    _, err = grind_ok(*a, "--iterations", "4", "--resume", "-o", T / "g.txt", D / "dmv1.txt", D / "t.conllu")
    assert "temperature" not in (T / "g.txt").read_text()


@hint
def vb_underflow_larger_alpha(D, T):
    grind_ok("estep", "--algo", "vb", *UD, "-o", T / "c0.txt", D / "dmv1.txt", D / "t.conllu")   # VB's first counts
    grind_ok("mstep", "--algo", "vb", "--alpha", "1e-9", "--grammar", D / "dmv1.txt", "-o", T / "v.txt", T / "c0.txt")
    (T / "rare.conllu").write_text(block("r", [("1", "NUM", "CD", 2), ("%", "SYM", "SYM", 0)]))   # unseen pairs
    code, _, err = run(["estep", "--algo", "vb", "--max-unparsed", "1", *UD, str(T / "v.txt"), str(T / "rare.conllu")])
    assert "use a larger --alpha" in err, err
    grind_ok("mstep", "--algo", "vb", "--alpha", "1", "--grammar", D / "dmv1.txt", "-o", T / "v1.txt", T / "c0.txt")
    _, err = grind_ok("estep", "--algo", "vb", *UD, T / "v1.txt", T / "rare.conllu")
    assert "underflow" not in err


@hint
def usage_hints(D, T):
    msg = error_of(["parse", "--mbr", *UD, "--min-length", "2", D / "cnf.txt", D / "t.conllu"], codes=(2,))
    assert "use --viterbi for a PCFG" in msg
    grind_ok("parse", "--viterbi", *UD, "--min-length", "2", D / "cnf.txt", D / "t.conllu")
    (T / "sp.conllu").write_text(block("a", [("New York", "PROPN", "NNP", 0)]) + SENTENCES[0])
    msg = error_of(["make-grammar", "cnf", "-n", "1", "--column", "FORM", T / "sp.conllu"])
    assert "use another --column" in msg
    grind_ok("make-grammar", "cnf", "-n", "1", "--column", "UPOS", T / "sp.conllu")
    (T / "nox.conllu").write_text(CONLLU.replace("\tDT\t", "\t_\t"))
    msg = error_of(["make-grammar", "cnf", "-n", "1", "--column", "XPOS", T / "nox.conllu"])
    assert "choose another --column" in msg
    grind_ok("make-grammar", "cnf", "-n", "1", "--column", "UPOS", T / "nox.conllu")
    msg = error_of(["split", *UD, "-n", "9", "-o", T / "s", D / "t.conllu"])
    n = re.search(r"at most ([0-9]+) shards", msg).group(1)
    grind_ok("split", *UD, "-n", n, "-o", T / "s", D / "t.conllu")
    msg = error_of(["split", *UD, "-n", "2", "-o", "-", D / "t.conllu"], codes=(2,))
    assert "give a PREFIX in a directory (e.g. shards/train)" in msg
    grind_ok("split", *UD, "-n", "2", "-o", T / "train", D / "t.conllu")


@hint
def resume_with_the_checkpoints_value(D, T):
    a = ["train", *UD, "--checkpoint", T / "ck.npz", "-o", T / "g.txt", D / "dmv1.txt", D / "t.conllu"]
    grind_ok(*a, "--iterations", "1", "--alpha", "2")
    msg = error_of([*a, "--iterations", "2", "--alpha", "3", "--resume"])
    assert "resume with the checkpoint's value" in msg
    grind_ok(*a, "--iterations", "2", "--alpha", "2", "--resume")


@pytest.mark.parametrize("name", list(HINTS))
def test_hint_followed_works(name, D, tmp_path):
    HINTS[name](D, tmp_path)


# ----------------------------------------------------------------------------- foreign: Johnson's format, strict


def johnson_io_read(text: str) -> tuple[str, list]:
    """A reader as strict as Mark Johnson's io: no comment or blank line; every line 'weight LHS --> RHS...'
    with a number first; a symbol that is never a left-hand side is a terminal, and terminals appear only in
    unary rules; the first rule's LHS is the start symbol.  Returns (start, rules)."""
    rules = []
    for k, line in enumerate(text.split("\n")[:-1], 1):
        toks = line.split(" ")
        assert line and not line.startswith("#") and "\t" not in line, f"line {k}: {line!r}"
        assert len(toks) >= 4 and toks[2] == "-->" and "-->" not in toks[3:] and all(toks), f"line {k}: {line!r}"
        w = float(toks[0])
        assert np.isfinite(w) and w >= 0
        rules.append((w, toks[1], tuple(toks[3:])))
    assert text.endswith("\n") and rules
    lhs = {r[1] for r in rules}
    for _, a, rhs in rules:
        assert len(rhs) == 1 or all(x in lhs for x in rhs), f"a terminal in a rule of several symbols: {a} --> {rhs}"
    return rules[0][1], rules


@pytest.mark.parametrize("g, corpus, opts", [
    ("dmv.txt", "t.conllu", UD), ("cnf.txt", "t.conllu", [*UD, "--min-length", "2"]),
    ("morph.txt", "words.txt", ["--chars"]), ("dmv-vb.txt", "t.conllu", UD)])
def test_johnson_format_is_read_by_a_strict_reader_and_by_grind(D, tmp_path, g, corpus, opts):
    out, _ = grind_ok("convert", "--to", "johnson", D / g)
    start, rules = johnson_io_read(out)
    assert start == read_start(D / g)
    (tmp_path / "j.txt").write_text(out)
    a, _ = grind_ok("loglik", "--summary", "--max-unparsed", "1", *opts, D / g, D / corpus)
    b, _ = grind_ok("loglik", "--summary", "--max-unparsed", "1", *opts, tmp_path / "j.txt", D / corpus)
    la, lb = (float(re.search(r"# logprob: (\S+)", x).group(1)) for x in (a, b))
    assert la == pytest.approx(lb, rel=1e-12)


def read_start(path):
    from grind.grammars.grammar import read_grammar
    return read_grammar(str(path)).start


def test_six_digit_grammar_round_trips_through_percent_g(D, tmp_path):
    """A grind grammar printed as other tools print it (%g) reads back, renormalised, with nearly its scores."""
    from grind.grammars.grammar import read_grammar
    g = read_grammar(str(D / "dmv.txt"))
    text = "".join(f"{w:g} {a} --> {' '.join(r)}\n" for w, (a, r) in zip(g.weights, g.rules))
    (tmp_path / "g6.txt").write_text(text)
    a, _ = grind_ok("loglik", "--summary", *UD, D / "dmv.txt", D / "t.conllu")
    b, err = grind_ok("loglik", "--summary", *UD, tmp_path / "g6.txt", D / "t.conllu")
    la, lb = (float(re.search(r"# logprob: (\S+)", x).group(1)) for x in (a, b))
    assert la == pytest.approx(lb, rel=1e-4)
    grind_ok("make-grammar", "from-file", "-o", tmp_path / "ff.txt", tmp_path / "g6.txt")
    assert "# weights: probabilities (as read)" in (tmp_path / "ff.txt").read_text()
    grind_ok("parse", *UD, tmp_path / "ff.txt", D / "t.conllu")


# ----------------------------------------------------------------------------- conll: the evaluator's file rules


def conll18_problems(text: str, gold: str) -> list[str]:
    """What the CoNLL 2018 evaluator's reader would stop on in ``text`` as a system file for ``gold``:
    a block without a word line (a comment-only block and a blank line), a comment after a word line, a line
    without 10 columns, word IDs not 1..n, a HEAD that is not an integer in 0..n, not exactly one root, a
    cycle, an empty FORM, a file not ending with a blank line, and token streams (FORMs of the tokens,
    multiword tokens by their surface form, spaces removed) that differ from the gold's."""
    problems = []

    def sentences(t):
        if t and not t.endswith("\n\n"):
            problems.append("the file does not end with an empty line")
        for k, chunk in enumerate(t.split("\n\n")):
            lines = [ln for ln in chunk.split("\n") if ln]
            if lines:
                yield k, lines

    def tokens(t):
        out = []
        for _, lines in sentences(t):
            skip = 0
            for ln in lines:
                if ln.startswith("#"):
                    continue
                cols = ln.split("\t")
                if "." in cols[0]:
                    continue
                if "-" in cols[0]:
                    a, b = map(int, cols[0].split("-"))
                    skip = b
                    out.append(cols[1])
                    continue
                if int(cols[0]) > skip:
                    out.append(cols[1])
        return "".join(out).replace(" ", "")

    for k, lines in sentences(text):
        words, seen_word = [], False
        for ln in lines:
            if ln.startswith("#"):
                if seen_word:
                    problems.append(f"block {k}: a comment after the words: {ln!r}")
                continue
            seen_word = True
            cols = ln.split("\t")
            if len(cols) != 10:
                problems.append(f"block {k}: {len(cols)} columns: {ln!r}")
                continue
            if cols[0].isdigit():
                words.append(cols)
        if not words:
            problems.append(f"block {k}: no word line (a sentence with no words: 'multiple roots')")
            continue
        n = len(words)
        if [int(w[0]) for w in words] != list(range(1, n + 1)):
            problems.append(f"block {k}: word IDs are not 1..{n}")
        heads = []
        for w in words:
            if not re.fullmatch(r"[0-9]+", w[6]) or int(w[6]) > n:
                problems.append(f"block {k}: HEAD {w[6]!r} is not an integer in 0..{n}")
                break
            heads.append(int(w[6]))
            if not w[1].replace(" ", ""):
                problems.append(f"block {k}: an empty FORM")
        else:
            if heads.count(0) != 1:
                problems.append(f"block {k}: {heads.count(0)} roots")
            for i in range(1, n + 1):
                h, steps = heads[i - 1], 0
                while h and steps <= n:
                    h, steps = heads[h - 1], steps + 1
                if steps > n:
                    problems.append(f"block {k}: a cycle")
                    break
    if tokens(text) != tokens(gold):
        problems.append("the token stream differs from the gold's")
    return problems


L5 = ["--max-length", "5", "--min-length", "2"]
#: name: (the command, the corpus options to score its output with; None: not a prediction)
CONLL_OUTPUTS = {
    "parse-viterbi": (["parse", *UD, "{D}/dmv.txt", "{D}/t.conllu"], UD),
    "parse-mbr": (["parse", "--mbr", *UD, "{D}/dmv.txt", "{D}/t.conllu"], UD),
    "parse-length-limits": (["parse", *UD, *L5, "{D}/dmv.txt", "{D}/t.conllu"], [*UD, *L5]),
    "parse-types": (["parse", *UD, "--types", "{D}/dmv.txt", "{T}/twice.conllu"], [*UD, "--types"]),
    "parse-ptb-punct": (["parse", "--column", "XPOS", "--punct", "ptb", "{D}/dmvx.txt", "{D}/t.conllu"],
                        ["--column", "XPOS", "--punct", "ptb"]),
    "parse-unparsed": (["parse", *UD, "--max-unparsed", "1", "{D}/dmv.txt", "{D}/odd.conllu"], UD),
    "parse-average": (["parse", "--mbr", "--average", "{D}/dmv-vb.txt", *UD, "{D}/dmv.txt", "{D}/t.conllu"], UD),
    "parse-committee": (["parse", "--committee", "{T}/ln.params", "--seed", "1", *UD, "{T}/ln.txt",
                         "{D}/t.conllu"], UD),
    "parse-its-own-output": (["parse", *UD, "{D}/dmv.txt", "{D}/p.conllu"], UD),
    "baseline-right": (["baseline", "--attach", "right", *UD, *L5, "{D}/t.conllu"], [*UD, *L5]),
    "baseline-left": (["baseline", "--attach", "left", *UD, "{D}/t.conllu"], UD),
    "function-heads": (["function-heads", "{D}/t.conllu"], None),
    "function-heads-of-a-parse": (["function-heads", "{D}/p.conllu"], None),
}


@pytest.mark.parametrize("name", list(CONLL_OUTPUTS))
def test_conll_output_passes_the_evaluator_file_rules(name, D, tmp_path):
    T = tmp_path
    gold = (D / ("odd.conllu" if "unparsed" in name else "t.conllu")).read_text()
    if "types" in name:
        gold = CONLLU + SENTENCES[0]
        (T / "twice.conllu").write_text(gold)
    if "committee" in name:
        grind_ok("train", "--algo", "ln", "--iterations", "1", *UD, "--ln-params", T / "ln.params", "-o", T / "ln.txt",
                 D / "dmv1.txt", D / "t.conllu")
    args, opts = CONLL_OUTPUTS[name]
    out, _ = grind_ok(*[fill(a, D, T) for a in args])
    assert conll18_problems(out, gold) == []
    assert out.startswith("# grind ") and "\n\n" not in out.split("# sent_id = ")[0]      # the header: comments
    if opts is not None:                     # and grind eval reads it as before
        (T / "p.conllu").write_text(out)
        (T / "g.conllu").write_text(gold)
        report, _ = grind_ok("eval", "--max-unparsed", "1", *opts, T / "g.conllu", T / "p.conllu")
        rows = {r.split("\t")[0]: r.split("\t") for r in report.splitlines() if "\t" in r}
        assert rows["all"][5] == ("3" if "unparsed" in name else "0")        # unparsed: their words count 0


def test_eval_scores_marked_sentences_as_before(D, tmp_path):
    """A sentence written with filler heads after '# grind_unparsed' scores as the HEAD '_' of old files did."""
    new, _ = grind_ok("parse", "--max-unparsed", "1", *UD, D / "dmv.txt", D / "odd.conllu")
    old = []
    unparsed = False
    for ln in new.splitlines():
        if ln.startswith("# grind_unparsed = "):
            unparsed = True
            continue
        if not ln:
            unparsed = False
        elif unparsed and not ln.startswith("#"):
            c = ln.split("\t")
            c[6] = c[7] = "_"
            ln = "\t".join(c)
        old.append(ln)
    (tmp_path / "new.conllu").write_text(new)
    (tmp_path / "old.conllu").write_text("\n".join(old) + "\n")
    a, _ = grind_ok("eval", "--max-unparsed", "1", *UD, D / "odd.conllu", tmp_path / "new.conllu")
    b, _ = grind_ok("eval", "--max-unparsed", "1", *UD, D / "odd.conllu", tmp_path / "old.conllu")
    body = [ln for ln in a.splitlines() if "\t" in ln]
    assert body == [ln for ln in b.splitlines() if "\t" in ln] and body[3].split("\t")[5] == "3"


# ----------------------------------------------------------------------------- defaults, averages, wording, forms


def test_trees_runs_its_iterations_from_the_split_start(D, tmp_path):
    """With 1% noise the objective of a split grammar barely moves for the first steps: the tolerance stopped
    EM at step 3, at the unsplit PCFG's F1; --trees now runs its --iterations unless --tolerance is given."""
    _, err = grind_ok("train", "--trees", "--iterations", "6", "-o", tmp_path / "g.txt", D / "tb.txt", D / "tr.mrg")
    assert "# steps: 6" in (tmp_path / "g.txt").read_text() and "stopped reached the cap of 6" in err
    grind_ok("train", "--trees", "--iterations", "6", "--tolerance", "0.5", "-o", tmp_path / "h.txt", D / "tb.txt",
             D / "tr.mrg")                                          # a --tolerance given is the user's: it stops
    assert "# steps: 2" in (tmp_path / "h.txt").read_text()


@pytest.mark.parametrize("algo, extra, refused", [
    ("em", [], True), ("vb", [], True), ("cvb", [], True), ("cvb", ["--cvb-init", "random", "--seed", "1"], False),
    ("ln", [], True), ("streaming", ["--batch", "3"], True), ("stochastic", ["--batch", "3", "--seed", "1"], True),
    ("gibbs", ["--seed", "1"], False), ("hastings", ["--seed", "1"], False)])
def test_a_symmetric_start_is_refused_by_every_deterministic_algorithm(D, tmp_path, algo, extra, refused):
    grind_ok("init", "-o", tmp_path / "u.txt", D / "cnf0.txt")
    args = ["train", "--algo", algo, "--iterations", "1", *extra, *UD, "--min-length", "2", "-o", tmp_path / "g.txt",
            tmp_path / "u.txt", D / "t.conllu"]
    if algo in ("streaming", "stochastic"):
        args.remove("--iterations"), args.remove("1")
    code, _, err = run([str(a) for a in args])
    assert (code == 1 and "a symmetric start" in err) if refused else code == 0, err


def test_eval_averages_only_runs_of_one_configuration(D, tmp_path):
    out, _ = grind_ok("eval", *UD, D / "t.conllu", D / "p.conllu", D / "p3.conllu", D / "pvb.conllu")
    assert "# configurations: 2 among the 3 PREDICTED files" in out
    first = out.split("# configuration 1: ")[1]
    assert first.startswith(f"{D / 'p.conllu'}, {D / 'p3.conllu'}\n# 2 runs: mean")       # the seeds averaged
    assert out.split("# configuration 2: ")[1].strip() == str(D / "pvb.conllu")          # em and vb not together
    out, _ = grind_ok("eval", "--aggregate", *UD, D / "t.conllu", D / "p.conllu", D / "pvb.conllu")
    assert "# 2 runs: mean" in out and "# configurations" not in out
    out, _ = grind_ok("eval", *UD, D / "t.conllu", D / "p.conllu", D / "right.conllu")
    assert "# configurations: 2" in out and "mean" not in out.split("# configurations")[1]


def test_v1_conj_is_named_a_v1_tag(tmp_path):
    (tmp_path / "v1.conllu").write_text(block("a", [("and", "CONJ", "CC", 2), ("go", "VERB", "VB", 0)]))
    _, err = grind_ok("make-grammar", "dmv", "--column", "UPOS", "-o", tmp_path / "g.txt", tmp_path / "v1.conllu")
    assert "not UPOS tags" not in err and "UD v1 tags" in err and "CONJ (v2 calls it CCONJ)" in err


def test_length_messages_state_the_limits_given_and_punctuation_only(D, tmp_path):
    _, err = grind_ok("parse", *UD, "--max-length", "5", D / "dmv.txt", D / "t.conllu")
    assert "left out: 1 outside the length limits 1..5" in err and "1 of punctuation only" in err
    _, err = grind_ok("make-grammar", "dmv", *UD, "--max-length", "5", D / "t.conllu")
    assert "1..inf" not in err and "1 of punctuation only (no token left after --punct ud)" in err


def test_eval_refuses_predictions_of_other_sentences_with_the_same_tags(D, tmp_path):
    other = CONLLU.replace("\tdog\tdog\t", "\tcow\tcow\t").replace("\tDogs\tdogs\t", "\tCows\tcows\t")
    (tmp_path / "o.conllu").write_text(other)
    out, _ = grind_ok("parse", *UD, D / "dmv.txt", tmp_path / "o.conllu")
    (tmp_path / "p.conllu").write_text(out)
    msg = error_of(["eval", *UD, D / "t.conllu", tmp_path / "p.conllu"])
    assert "other words (FORM)" in msg and "'The dog barks'" in msg


def test_a_byte_order_mark_inside_a_corpus_is_no_part_of_a_word(tmp_path):
    (tmp_path / "c.txt").write_bytes("\ufeffthe dog\n".encode() + "\ufeffthe cat\n".encode())
    out, err = grind_ok("make-grammar", "cnf", "-n", "1", tmp_path / "c.txt")
    assert "\ufeff" not in out and "X0 --> the" in out and "byte-order mark" in err


@pytest.mark.parametrize("key, value", [("loglik", "3.5"), ("sentences", "2.5"), ("parsed", "1.5"),
                                        ("words", "7.25")])
def test_implausible_count_headers_are_refused(D, tmp_path, key, value):
    text = re.sub(rf"^# {key}: .*$", f"# {key}: {value}", (D / "counts.txt").read_text(), flags=re.M)
    (tmp_path / "c.txt").write_text(text)
    msg = error_of(["mstep", tmp_path / "c.txt"])
    assert f"'# {key}: {value}'" in msg


# ----------------------------------------------------------------------------- the count


def test_case_count():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    per = {}
    for c in CASES:
        per[c.cls] = per.get(c.cls, 0) + 1
    assert per["options"] >= 40 and per["unparsed"] >= 30 and per["swapped"] >= 7 and per["foreign"] >= 12
    assert len(HINTS) >= 25


def test_a_bracketed_parse_has_a_line_for_every_input_sentence(tmp_path):
    """A sentence the length limits leave out is written (LEFTOUT w1 ... wn) in its place, so that line k of
    the parse is sentence k of the corpus; grind eval with the parse's corpus options sets those lines aside,
    and without them says which options to give."""
    (tmp_path / "g.txt").write_text("1 S --> NP VP\n1 NP --> a\n0.5 VP --> b\n0.5 VP --> VP NP\n")
    (tmp_path / "s.txt").write_text("a b\na\nb b\na b a\n")
    (tmp_path / "gold.txt").write_text("(S (NP a) (VP b))\n(S (NP a))\n(S (VP b) (VP b))\n"
                                       "(S (NP a) (VP (VP b) (NP a)))\n")
    out, _ = grind_ok("parse", "--min-length", "2", "--max-unparsed", "1", tmp_path / "g.txt", tmp_path / "s.txt")
    trees = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert trees == ["(S (NP a) (VP b))", "(LEFTOUT a)", "(NOPARSE b b)", "(S (NP a) (VP (VP b) (NP a)))"]
    assert "# left_out: 1 sentences outside the length limits 2..inf (written as (LEFTOUT w1 ... wn))" in out
    (tmp_path / "p.txt").write_text(out)
    scored, _ = grind_ok("eval", "--min-length", "2", tmp_path / "gold.txt", tmp_path / "p.txt")
    assert "sentences\t3" in scored and "noparse\t1" in scored
    code, _, err = run(["eval", str(tmp_path / "gold.txt"), str(tmp_path / "p.txt")])
    assert code == 1 and "marked LEFTOUT" in err and "'# corpus:' header" in err
