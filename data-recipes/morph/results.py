"""RESULTS.md of data-recipes/morph from its cells (make results); see tables.document for the sections it keeps."""
import glob
import os
import re
import statistics

import tables as t

ORDER = {"em": 0, "hastings": 1, "vb": 2, "cvb": 3, "gibbs": 4, "hastingslong": 5}
NAME = {"em": "EM", "hastings": "Hastings", "vb": "VB", "cvb": "CVB", "gibbs": "Gibbs sampler (uncollapsed)",
        "hastingslong": "*extra, not an equal budget:* Hastings, long"}
HEAD = ["morph P / R / F", "exact", "boundary P / R / F", "one / chars"]


def rows(path):
    """{system: row dict} of a grind eval --segmentation report (predicted rows in file order: 'predicted', ...)."""
    out = {}
    for _, head, rs in t.blocks(path):
        if head[:2] == ["system", "words"]:
            for r in rs:
                d = dict(zip(head, r))
                key = d["system"] if d["system"] not in out else f"{d['system']}#{len(out)}"
                out[key] = d
    return out


def cells(ds, p=t.mean_sd):
    """The four score cells of the rows DS (mean ± sd over several)."""
    v = {k: [float(d[k]) for d in ds] for k in ds[0] if k not in ("system", "words", "unparsed")}
    return [" / ".join(p(v[k]) for k in ("morph_P", "morph_R", "morph_F")), p(v["exact"]),
            " / ".join(p(v[k]) for k in ("boundary_P", "boundary_R", "boundary_F")),
            f"{t.pct(statistics.mean(v['overlap_one']))} / {t.pct(statistics.mean(v['overlap_chars']))}"]


def prior(alpha):
    """'1e-20', '1e-20, Stem 1e-15' (a per-LHS prior) or 'both: ...' (a committee of two priors' runs)."""
    text = "; ".join(a.replace("+stem", ", Stem ") for a in alpha.split(","))
    return f"both: {text}" if "," in alpha else text


def perplexity(path):
    if not os.path.exists(path):
        return None
    kv = t.header(path)
    return float(kv["perplexity"]) if kv.get("perplexity") not in (None, "nan", "inf") else None, \
        f"{kv.get('parsed')}/{kv.get('sentences')}"


def main(argv):
    s = t.Settings(argv)
    d = s.path(f"{s['TEMPLATE_SET']}-{s['TRAIN_ON']}")
    made, sections = [], []
    runs = {}
    for f in glob.glob(os.path.join(d, "*-a*-p*-s*.viterbi.eval")):
        m = re.match(r"(\w+)-a(.+?)-p(\d+)-s(\d+)\.viterbi\.eval$", os.path.basename(f))
        if m and not os.path.basename(f).startswith(("val-", "thr-")):
            runs.setdefault((m[1], m[2], m[3]), []).append((m[4], f))
    if runs:
        first = rows(next(iter(runs.values()))[0][1])
        table = [["one morph per word (baseline)", "—", "—", "—", *cells([first["baseline-one-morph"]]), "—"],
                 ["**every character a morph** (baseline)", "—", "—", "—", *cells([first["baseline-chars"]]), "—"]]
        mf = os.path.join(d, "morfessor.viterbi.eval")
        if os.path.exists(mf):
            table.append(["**Morfessor Baseline** (defaults, training types)", "—", "—", "—",
                          *cells([rows(mf)["predicted"]]), "—"])
        else:
            table.append(["Morfessor Baseline: not run (morfessor not installed for MORFESSOR_PYTHON)"] + [""] * 8)
        for (a, alpha, passes), rs in sorted(runs.items(), key=lambda kv: (ORDER[kv[0][0]], -float(
                kv[0][1].split("+")[0]), kv[0][1])):
            rs.sort()
            made += [f for _, f in rs]
            steps = sorted({int(t.tsv(f[:-len(".viterbi.eval")] + ".trace.tsv")[-1]["step"]) for _, f in rs})
            ppl = [perplexity(f[:-len(".viterbi.eval")] + ".ppl") for _, f in rs]
            pp = "—"
            if ppl and not any(p is None or p[0] is None for p in ppl):
                v = [p[0] for p in ppl]
                pp = (t.mean_sd(v, 2, 1) if max(v) < 1e4 else f"{statistics.mean(v):.2g}") + \
                    f" ({'/'.join(sorted({p[1] for p in ppl}))} words parsed)"
            name = "MAP-EM" if a == "em" and alpha != "1" else NAME[a]
            table.append([name, prior(alpha), "/".join(map(str, steps)) +
                          ("" if steps == [int(passes)] else f" (of {passes})"), ",".join(x for x, _ in rs),
                          *cells([rows(f)["predicted"] for _, f in rs]), pp])
        held = "held out (trained on train)" if s["TRAIN_ON"] == "train" else "trained on train + dev (Johnson et al.)"
        body = t.table(["method", "α", "passes", "seeds", *HEAD, "dev perplexity (per char)"], table,
                       "lllr" + "rrrr" + "r") + (
            f"\n\nDev words {held}; `grind make-grammar morph --chars --template-set {s['TEMPLATE_SET']}` over the "
            "train and dev words (first column only); Viterbi decoding under the posterior mean; `grind eval "
            "--segmentation` (types; morph P/R/F over character spans, exact match, internal-boundary P/R/F, %; "
            "\"—\": undefined); \"one / chars\": the share of parsed dev words segmented as the one-morph / "
            "every-character baseline; mean ± sd over seeds. Perplexity: `grind loglik --summary` on dev, per "
            "character.")
        sections.append(t.section(f"Segmentation of Czech dev words ({s['TEMPLATE_SET']} templates, {held})",
                                  s.command(), body))
    comm = sorted(glob.glob(os.path.join(d, "*-committee_*.mbr*.eval")))
    comm = [f for f in comm if not os.path.basename(f).startswith("val-")]
    if comm:
        table = []
        for f in comm:
            m = re.match(r"([\w+]+)-a(.+?)-committee_([\d_]+)\.(mbrf?)\.eval$", os.path.basename(f))
            made.append(f)
            table.append([f"{m[1]}, seeds {m[3].replace('_', ', ')}", prior(m[2]),
                          "max expected F" if m[4] == "mbrf" else "0.5", *cells([rows(f)["predicted"]])])
        body = t.table(["committee", "α", "cut at", *HEAD], table, "lll" + "rrrr") + (
            "\n\nThe runs of a committee decoded together: `grind parse --segment --mbr --average G2 ... G1` averages "
            "their boundary posteriors; cut at 0.5, or with `--expected-f` at the threshold that maximises the "
            "expected boundary F.")
        sig = sorted(glob.glob(os.path.join(d, "committees-a*.significance.eval")))
        for f in sig:
            made.append(f)
            srows = [r for _, head, rs in t.blocks(f) if head[:2] == ["system", "against"] for r in rs]
            keep = [[os.path.basename(x), os.path.basename(y), m, a, b, dd, p] for x, y, m, a, b, dd, p in srows
                    if y.endswith("morfessor.viterbi.tsv") or (y == "baseline-chars" and m == "boundary_F")]
            head = ["system", "against", "measure", "score", "against score", "difference", "p"]
            body += ("\n\nPaired approximate randomization test (10,000 samples, seed 1) of each committee against "
                     "Morfessor and, on boundary F, against every-character:\n\n" + t.table(head, keep, "lllrrrr"))
        sections.append(t.section("Committees of runs", s.command(), body))
    thr = sorted(glob.glob(os.path.join(d, "thr-*-s*.dev.eval")))
    if thr:
        table = []
        for g in ("cvb", "hastings"):
            fs = [f for f in thr if os.path.basename(f).startswith(f"thr-{g}-")]
            if fs:
                made += fs
                tfile = re.sub(r"-s\d+\.dev\.eval$", ".T", fs[0])
                table.append([NAME[g], open(tfile, encoding="utf-8").read().strip(), *cells([rows(f)["predicted"]
                                                                                              for f in fs])])
        body = t.table(["method (seeds of BEST_SEEDS)", "T chosen on training gold", *HEAD], table, "lr" + "rrrr") + (
            "\n\nA semi-supervised diagnostic: the `--mbr` boundary threshold T chosen from THRESHOLDS by boundary F "
            "on every 7th training word's gold segmentation (words the model was trained on without their gold), "
            "then dev decoded at T.")
        sections.append(t.section("The boundary threshold chosen on training gold", s.command(), body))
    val = sorted(glob.glob(os.path.join(d, "validation-a*.significance.eval")))
    for f in val:
        made.append(f)
        rs = rows(f)
        names = [ln.split(":", 1)[1].strip() for ln in open(f, encoding="utf-8") if ln.startswith("# predicted:")]
        preds = [v for k, v in rs.items() if k.startswith("predicted")]
        table = [[os.path.basename(n), *cells([r])] for n, r in zip(names, preds)]
        table += [[k, *cells([v])] for k, v in rs.items() if k.startswith("baseline-")]
        body = t.table(["system", *HEAD], table, "l" + "rrrr") + (
            "\n\nModel selection without dev: trained on 7/8 of the training words, scored on the other 1/8 with "
            "their gold (dev not read).")
        grid = sorted(glob.glob(os.path.join(d, "val-hastings-a*-s*.mbr.eval")))
        if grid:
            made += grid
            body += "\n\nThe Stem-alpha grid (one Hastings run each, MBR cut at 0.5):\n\n" + t.table(
                ["run", *HEAD], [[os.path.basename(g)[:-len(".mbr.eval")], *cells([rows(g)["predicted"]])]
                                 for g in grid], "l" + "rrrr")
        sections.append(t.section("Validation on held-out training words", s.command(), body))
    return t.document(s, sections, made)
