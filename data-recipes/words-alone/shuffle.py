"""Write CoNLL-U (or CoNLL-X) sentence blocks of some files, in a seeded random order.

usage: python3 shuffle.py [--seed S] [--genres G1,G2] [--first FILE] -o OUT IN [IN ...]

A block is a sentence with its comment lines.  --genres keeps the blocks whose
'# sent_id = GENRE-...' starts with a listed genre (UD English-EWT: answers, email,
newsgroup, reviews, weblog).  --seed permutes the blocks of the INs with Python's
random.Random(S).shuffle (the same order on any machine); without it they keep their
order.  --first FILE: its blocks come first, in its order.  IN may be .xz / .gz;
OUT is written plain, atomically.
"""
import argparse
import gzip
import lzma
import os
import random


def blocks(path):
    opener = lzma.open if path.endswith(".xz") else gzip.open if path.endswith(".gz") else open
    block = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                block.append(line if line.endswith("\n") else line + "\n")
            elif block:
                yield block
                block = []
    if block:
        yield block


def genre(block):
    for line in block:
        if line.startswith("# sent_id"):
            return line.split("=", 1)[1].strip().split("-", 1)[0]
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="shuffle.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--genres", default=None)
    ap.add_argument("--first", default=None)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args(argv)
    keep = set(a.genres.split(",")) if a.genres else None
    bs = [b for p in a.inputs for b in blocks(p) if keep is None or genre(b) in keep]
    if a.seed is not None:
        random.Random(a.seed).shuffle(bs)
    head = list(blocks(a.first)) if a.first else []
    tmp = f"{a.output}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as out:
        what = f"{len(bs)} sentences" + (f" in a random order (seed {a.seed})" if a.seed is not None else "")
        out.write(f"# shuffle.py: {len(head)} sentences of {a.first}, then {what} of "
                  f"{' '.join(map(os.path.basename, a.inputs))}{' (genres ' + a.genres + ')' if keep else ''}\n"
                  if head else f"# shuffle.py: {what} of {' '.join(map(os.path.basename, a.inputs))}"
                  f"{' (genres ' + a.genres + ')' if keep else ''}\n")
        for b in head + bs:
            out.writelines(b)
            out.write("\n")
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()
