#!/usr/bin/env python3
"""TUNING.md: the dev-only comparisons data-recipes/ud/induce's setting was chosen from (standard library only).

Each configuration is a set of the Makefile's variables; for each, make trains and scores its cells on the
dev split of every language that has one (content-head gold), and this script reads the scores back through
``make list``.  Test splits are never made here.  The recommended setting (``induce``) is the configuration
marked ``*``: the best mean margin over the better baseline among those at least 3 points above it on every
dev language.  Usage (from the Makefile's ``tune`` target): tune.py --make MAKE -j N [VAR=value ...].
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

DEV_LANGS = "en zh pt tr cs el fr qpm yi mr te vi childes"
# (label, variables): the comparisons, in the order they were made
CONFIGS = [
    ("em plain", dict(ALGOS="em", VARIANTS="plain")),
    ("vb plain", dict(ALGOS="vb", VARIANTS="plain")),
    ("vb leaves", dict(ALGOS="vb", VARIANTS="leaves")),
    ("vb rules 0.85 (no leaves), MBR", dict(ALGOS="vb", VARIANTS="rules", FRAC="0.85", DECODER="mbr")),
    ("vb leaves + rules 0.8", dict(ALGOS="vb", VARIANTS="both", FRAC="0.8")),
    ("vb leaves + rules 0.85", dict(ALGOS="vb", VARIANTS="both", FRAC="0.85")),
    ("vb leaves + rules 0.9", dict(ALGOS="vb", VARIANTS="both", FRAC="0.9")),
    ("vb leaves + rules 0.85, MBR", dict(ALGOS="vb", VARIANTS="both", FRAC="0.85", DECODER="mbr")),
    ("vb leaves + rules 0.9, MBR", dict(ALGOS="vb", VARIANTS="both", FRAC="0.9", DECODER="mbr")),
    ("vb leaves + naseem rules 0.85, MBR", dict(ALGOS="vb", VARIANTS="both", FRAC="0.85", RULES="naseem",
                                                DECODER="mbr")),
    ("vb alpha 1, leaves + rules 0.85, MBR", dict(ALGOS="vb", VARIANTS="both", FRAC="0.85", ALPHA="1",
                                                  DECODER="mbr")),
    ("em leaves + rules 0.85, MBR", dict(ALGOS="em", VARIANTS="both", FRAC="0.85", DECODER="mbr")),
    ("cvb leaves + rules 0.85, MBR (seed 1)", dict(ALGOS="cvb", VARIANTS="both", FRAC="0.85", SEEDS="1",
                                                   DECODER="mbr")),
    ("vb leaves + rules 0.85, MBR, train <= 10 (not eligible: the protocol trains on <= 15)",
     dict(ALGOS="vb", VARIANTS="both", FRAC="0.85", DECODER="mbr", TRAIN_MAX="10")),
]
#: The configuration data-recipes/ud/induce runs.
RECOMMENDED = "vb leaves + rules 0.85, MBR"
EACH = 3.0


def scores(make, common, extra):
    """{lang: (name, directed, left, right)} of the configuration's dev cells (made first)."""
    args = [*make, *common, f"LANGS={DEV_LANGS}", "SPLITS=dev", "GOLDS=content",
            *(f"{k}={v}" for k, v in extra.items())]
    subprocess.run([*args, "all"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        listed = os.path.join(tmp, "cells.tsv")
        subprocess.run([*args, "-s", "list", f"LIST={listed}"], check=True)
        lines = [ln.split("\t") for ln in open(listed, encoding="utf-8").read().splitlines() if ln.strip()]
    from results import read_eval
    out = {}
    for f in lines:
        lang, name, path, parse = f[0].strip(), f[1], f[7], f[8].strip()
        e = read_eval(path, parse)
        if e is None:
            raise SystemExit(f"tune.py: no score of {parse} in {path}")
        out.setdefault(lang, (name, [], e["left"], e["right"]))[1].append(e["model"][0])
    return {k: (n, statistics.mean(v), left, right) for k, (n, v, left, right) in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make", default="make")
    ap.add_argument("-j", default="1")
    ap.add_argument("-o", "--output", default="TUNING.md")
    ap.add_argument("vars", nargs="*", help="VAR=value passed to every make call (SHARED, OUT, CMD, GRIND)")
    a = ap.parse_args()
    make = [*a.make.split(), f"-j{a.j}"]
    results = [(label, scores(make, a.vars, extra)) for label, extra in CONFIGS]
    langs = list(results[0][1])
    out = ["# How the recommended setting was chosen (dev splits only)", "",
           "Made by `make -C data-recipes/ud -j2 tune` (tune.py). Directed accuracy (%) on the dev sentences of "
           "<= 40 words of every language with a dev split, content-head gold; margin = accuracy - the better of "
           "attach-left and attach-right. No test split is read. Settings not named: the Makefile's defaults "
           "(vb alpha 0.1, leaves udfunc, rules ud, train <= 15 words, 100 iterations, Viterbi). `*`: the "
           f"setting `induce` runs, the best mean margin among those at least {EACH:g} points above the better "
           "baseline on every dev language (training on <= 15 words, as the protocol and induce fix).", "",
           "| setting | " + " | ".join(results[0][1][lg][0] for lg in langs) + " | mean margin | worst margin |",
           "|---|" + "---|" * (len(langs) + 2),
           "| better baseline | " + " | ".join(f"{max(results[0][1][lg][2:]):.1f}" for lg in langs) + " | | |"]
    eligible = []
    for label, sc in results:
        margins = [sc[lg][1] - max(sc[lg][2:]) for lg in langs]
        if min(margins) >= EACH and "not eligible" not in label:
            eligible.append((statistics.mean(margins), label))
        mark = " *" if label == RECOMMENDED else ""
        out.append(f"| {label}{mark} | " + " | ".join(f"{sc[lg][1]:.1f}" for lg in langs)
                   + f" | {statistics.mean(margins):+.1f} | {min(margins):+.1f} |")
    best = max(eligible)[1] if eligible else None
    out += ["", f"Best by the rule: {best or 'none meets it'}; induce runs: {RECOMMENDED}."]
    with open(a.output + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    os.replace(a.output + ".tmp", a.output)
    if best != RECOMMENDED:
        print(f"tune.py: the rule picks {best!r}, not induce's {RECOMMENDED!r}: update induce and RECOMMENDED",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
