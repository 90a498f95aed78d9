"""Training sets of data-recipes/ln's parts wsjsize and wsjplus, chosen with grind's own corpus reader (run with a
Python that imports grind: GRIND_PYTHON). Writes Malt-TAB on stdout.

  subsets.py every K SAMPLE.dp   every K-th sentence grind keeps under WSJ10's options (nested sets), blocks whole
  subsets.py ptb-tags EWT.conllu  EWT's sentences of <= 10 words (PTB punctuation removed) whose XPOS tags are all
                                  PTB tags: FORM, XPOS, HEAD 0 (nothing scores them; training reads only the tags)
"""
import sys

from grind.formats.corpus import CorpusSpec, read_corpus
from grind.grammars.families import read_families

WSJ10 = CorpusSpec(column="XPOS", punct="ptb", max_length=10)


def every(k: int, path: str) -> None:
    keep = {s.number for i, s in enumerate(read_corpus(path, WSJ10)) if i % k == 0}
    with open(path, encoding="utf-8") as f:
        blocks = [b.strip("\n") for b in f.read().split("\n\n") if b.strip()]
    sys.stdout.write("".join(b + "\n\n" for n, b in enumerate(blocks, 1) if n in keep))


def ptb_tags(path: str) -> None:
    ptb = {t for t, fam in read_families("ptb").items() if fam != "punctuation"}
    kept = read_corpus(path, WSJ10)
    n = 0
    for s in kept:
        if s.tokens and all(t in ptb for t in s.tokens):
            sys.stdout.write("".join(f"{r[1]}\t{r[4]}\t0\n" for r in s.rows) + "\n")
            n += 1
    print(f"subsets.py: {n} of {len(kept)} EWT training sentences <= 10 kept (every XPOS a PTB tag)", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["every"] and len(sys.argv) == 4:
        every(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["ptb-tags"] and len(sys.argv) == 3:
        ptb_tags(sys.argv[2])
    else:
        sys.exit(__doc__)
