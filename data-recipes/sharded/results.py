"""RESULTS.md of data-recipes/sharded from its cells (make results): each sharded run beside grind train's."""
import os
import sys

import tables as t


def weights(path):
    """{rule: weight} of a grammar file (the first number of each rule line)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            first, rest = line.split(None, 1)
            out[rest.strip()] = float(first)
    return out


def main(argv):
    s = t.Settings(argv)
    n, k = s["ITERATIONS"], s["SHARDS"]
    rows, made = [], []
    for r in s.words("RUNS"):
        algo, _, alpha = r.partition(":")
        d = f"{algo}{'-a' + alpha if alpha else ''}-k{k}{'-trees' if s['TREES'] else ''}"
        got, want = weights(s.path(d, "grammar.txt")), weights(s.path(d, f"train-i{n}.txt"))
        if got.keys() != want.keys():
            sys.exit(f"results: {d}: the sharded grammar and grind train's have different rules")
        rel = max(abs(got[x] - want[x]) / max(abs(want[x]), 1e-300) for x in want)
        sharded = float(t.tsv(s.path(d, "trace.tsv"))[-1]["objective"])
        whole = float(t.tsv(s.path(d, f"train-i{n}.tsv"))[-1]["objective"])
        made.append(s.path(d, "grammar.txt"))
        rows.append([{"em": "EM", "map": "MAP-EM", "vb": "VB"}[algo], alpha or "—", k, n, f"{sharded:.6f}",
                     f"{whole:.6f}", "0 (identical)" if rel == 0 else f"{rel:.1e}"])
    body = t.table(["algorithm", "α", "shards", "iterations", "objective, sharded (last step)",
                    "objective, grind train", "largest relative difference of a rule weight"], rows, "llrrrrr") + (
        f"\n\nEach run: `grind split -n {k}` once, then every iteration a `grind estep` per shard (the cells make "
        "runs at once with -j, through the launcher CMD), `grind sum` and `grind mstep`; beside it `grind train` "
        f"with the same algorithm, α and {n} iterations (`--tolerance 0`) on the whole corpus "
        f"(`{os.path.basename(s['CORPUS'])}`, `{s['CORPUS_OPTIONS']}`). With one shard the grammars are identical "
        "bit for bit; with more they agree to about 1e-15 relative a step, because the shards' sentences are "
        "added in another order and floating-point addition is not associative (tests/test_sharded.py checks "
        "this).")
    return t.document(s, [t.section("Sharded training against grind train", s.command(), body)], made)
