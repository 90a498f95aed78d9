"""Morfessor Baseline 2.0 with its defaults on TRAIN's word types (count 1 each), WORDS segmented by viterbi_segment:
morfessor.py TRAIN.tsv WORDS.tsv > segmented.tsv (data-recipes/morph; needs pip install 'grind[morfessor]')."""
import random
import sys

import morfessor


def words(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[0] for line in f if line.strip()]


random.seed(1)
model = morfessor.BaselineModel()
model.load_data([(1, w) for w in dict.fromkeys(words(sys.argv[1])) if not any(c.isspace() for c in w)])
model.train_batch()
for w in words(sys.argv[2]):
    sys.stdout.write(w + "\t" + " @@".join(model.viterbi_segment(w)[0]) + "\n")
