"""Make the planted data in this directory again: ``python data/planted/make.py [DIR]`` (default: here).

Trees: drawn from pp-attachment.txt (grind.grammars.planted.planted_treebank), labels cut at '@'.
Words: drawn from a random inventory of prefixes, stems and suffixes (grind.grammars.planted), each word
type once, with its segmentation, in the SIGMORPHON format (word<TAB>morph @@morph ...).
Everything is seeded: the files come out the same byte for byte (tests/test_readme.py checks it)."""
import os
import sys

import numpy as np

from grind.grammars.grammar import read_grammar
from grind.grammars.planted import planted_inventory, planted_treebank, planted_words

HERE = os.path.dirname(os.path.abspath(__file__))
TREES = {"train": 1000, "dev": 200, "test": 200}
WORDS = 3000               # word tokens drawn; each type is kept once, the first 4/5 for train


def main(out: str) -> None:
    grammar = read_grammar(os.path.join(HERE, "pp-attachment.txt"))
    rng = np.random.default_rng(1)
    for part, n in TREES.items():
        with open(os.path.join(out, f"pp-{part}.mrg"), "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in planted_treebank(grammar, n, rng))
    rng = np.random.default_rng(1)
    types = dict(planted_words(WORDS, rng, *planted_inventory(rng)))
    words = list(types.items())
    cut = len(words) * 4 // 5
    for part, rows in (("train", words[:cut]), ("dev", words[cut:])):
        with open(os.path.join(out, f"morph-{part}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{w}\t{' @@'.join(m)}\n" for w, m in rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else HERE)
