"""RESULTS.md of data-recipes/curves from its cells (make results)."""
import os

import tables as t


def spans(steps):
    """[1, 2, 3, 7] -> '1–3, 7'."""
    out, run = [], []
    for x in steps:
        if run and x != run[-1] + 1:
            out.append(run)
            run = []
        run.append(x)
    if run:
        out.append(run)
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in out) or "none"


def main(argv):
    s = t.Settings(argv)
    n = s["ITERATIONS"]
    right = float(t.tsv(s.path("right.eval"))[-1]["directed"])
    rows, traces = [], []
    for name, cell in (("EM", f"em-i{n}"), (f"VB, α = {s['ALPHA']}", f"vb-a{s['ALPHA']}-i{n}")):
        tr = t.tsv(s.path(cell + ".tsv"))
        traces.append(s.path(cell + ".tsv"))
        acc = [float(r["dev_directed"]) for r in tr]
        lp = [float(r["dev_logprob"]) for r in tr]
        best = max(range(len(acc)), key=acc.__getitem__)
        top = max(range(len(lp)), key=lp.__getitem__)
        above = [i + 1 for i, a in enumerate(acc) if a > right]
        rows.append([name, f"{t.pct(acc[best])} (iteration {best + 1})", spans(above), t.pct(acc[-1]),
                     f"{top + 1} ({t.pct(acc[top])})"])
    rows.append(["attach-right (baseline)", t.pct(right), "—", t.pct(right), "—"])
    png = os.path.relpath(s["PNG"], os.path.dirname(os.path.abspath(s["RESULTS"])))
    body = t.table(["", "best dev directed accuracy", "iterations above attach-right", f"at iteration {n}",
                    "dev log probability peaks at iteration (directed there)"], rows, "lrlrl") + (
        f"\n\n![Learning curves: EM and VB on the EWT sample]({png})\n\n"
        "The DMV on the shipped EWT sample (UPOS, punctuation removed, ≤ 10 words), harmonic initialiser, EM and VB "
        f"for {n} iterations each, held-out directed accuracy (Viterbi) and log probability on the dev sample's "
        f"{tr[0]['dev_parsed']} sentences of ≤ 10 words after every iteration (`grind train --dev --eval-every 1`), "
        "beside the attach-right baseline on the same sentences (the dashed line; the test sample is not read). "
        "The dev log probability's peak is where `--early-stop` would stop.")
    return t.document(s, [t.section("Learning curves on the EWT sample", s.command(), body)], traces)
