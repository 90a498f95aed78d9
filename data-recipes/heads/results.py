"""RESULTS.md of data-recipes/heads from its cells (make results)."""

import tables as t

LABEL = {"en-ewt-test": "English-EWT test", "en-childes-dev": "English-CHILDES dev", "de-gsd-test": "German-GSD test",
         "pt-bosque-test": "Portuguese-Bosque test", "cs-cac-dev": "Czech-CAC dev",
         "cs-fictree-dev": "Czech-FicTree dev", "cs-cltt-dev": "Czech-CLTT dev", "he-htb-test": "Hebrew-HTB test",
         "tr-imst-test": "Turkish-IMST test", "ja-gsd-dev": "Japanese-GSD dev",
         "zh-gsd-test": "Chinese-GSD test (the current release, not r1.4)"}


def three(ev):
    """EM, attach-right, attach-left at <= 10 (%), the best of the three in bold, and the near-baseline notes."""
    em, right, left = ev.score("<=10"), ev.baseline("right", "<=10"), ev.baseline("left", "<=10")
    best = max(em, right, left)
    cell = [f"**{t.pct(x)}**" if x == best else t.pct(x) for x in (em, right, left)]
    notes = [f"within 1 point of attach-{b}" for b, x in (("right", right), ("left", left)) if t.near(em, x)]
    return cell[0] + (f" ({'; '.join(notes)})" if notes else ""), f"{cell[1]} / {cell[2]}"


def main(argv):
    s = t.Settings(argv)
    em = f"em-i{s['EM_ITER']}"
    rows, evals, unparsed = [], [], []
    for f in s.words("FILES"):
        content = t.DepEval(s.path(f, f"{em}.mbr.content.eval"))
        function = t.DepEval(s.path(f, f"{em}.mbr.function.eval"))
        evals += [content.path, function.path]
        rows.append([LABEL[f], f"{int(content.runs[0][1]['<=10']['sentences']):,}", *three(content),
                     *three(function)])
        if content.unparsed("<=10"):
            unparsed.append(f"{LABEL[f]}: {content.unparsed('<=10')}")
    body = t.table(["file", "sentences", "EM, content heads", "attach-right / -left", "EM, function heads",
                    "attach-right / -left"], rows, "lrrlrl") + (
        "\n\nOne protocol for every treebank file, Klein & Manning's transductive one: the DMV (UPOS, punctuation "
        f"removed, `km-global` harmonic initialiser) trained by EM ({s['EM_ITER']} iterations) on a file's sentences "
        "of ≤ 10 words and scored by MBR on the same sentences; one grammar and one set of parses per file, scored "
        "against its UD heads (content heads) and against the file re-headed by `grind function-heads` (function "
        "heads), each beside that gold's own baselines. Directed accuracy (%), ≤ 10 words; bold: the best of the "
        "three on that gold; one run each (nothing here is random). Test files, and dev files where the test set "
        "is held out (Czech, Japanese) or there is no other. "
        + (f"Sentences without a parse (scored 0): {', '.join(unparsed)}." if unparsed else "No sentence unparsed."))
    return t.document(s, [t.section("The DMV on every treebank file, against content and function heads",
                                    s.command(), body)], evals)
