"""RESULTS.md of data-recipes/ewt-sample: the files made, beside the shipped ones (make results)."""
import gzip
import hashlib
import os

import tables as t

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "ewt")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def sentences(path):
    if not path.endswith(".gz"):
        return "—"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f"{sum(1 for line in f if line.startswith('1' + chr(9))):,}"


def main(argv):
    s = t.Settings(argv)
    rows = []
    for name in ("en_ewt-ud-train-sample.conllu.gz", "en_ewt-ud-dev-sample.conllu.gz",
                 "en_ewt-ud-test-sample.conllu.gz", "LICENSE.txt"):
        made, shipped = s.path(name), os.path.join(SHIPPED, name)
        same = os.path.exists(shipped) and sha(made) == sha(shipped)
        rows.append([f"`{name}`", sentences(made), f"`{sha(made)[:16]}`", "yes" if same else "**no**"])
    body = t.table(["file", "sentences", "sha256 (first 16 digits)", "byte-identical to data/ewt/"], rows, "lrll") + (
        "\n\nThe first 2,000 sentences of UD English-EWT v2.16's train file and the first 500 of dev and of test, "
        "unmodified, gzipped without a time stamp (`gzip -n -9`), and the treebank's licence. Copy them into "
        "`data/ewt/` to replace the shipped sample.")
    return t.document(s, [t.section("The shipped EWT sample, made again", s.command(), body)], [])
