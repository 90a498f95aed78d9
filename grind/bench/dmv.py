"""``python -m grind.bench.dmv``: DMV E-step throughput on one core.

One E-step = ``inside_outside`` over every sentence of a random corpus
(expected counts of all rules + log Z per sentence), timed best-of-k after a
warm-up.  Settings: 35 tags at lengths 2-10 and 2-20, and a lexicalized
grammar (choose rules only for co-occurring word pairs) over a 20,000-word
vocabulary with Zipfian word frequencies.  The general CKY kernel
(``grind.kernels.cky.CKYParser``, on the same grammar with split sentences) is timed
on a subset in the same run, in a forked process stopped when --cky-seconds of
calls are spent (the subset doubles while its calls fit; when not one sentence
finishes, the column gives the bound < 1 / --cky-seconds); the column is skipped
if it cannot be imported or cannot compile the grammar.  Targets: >= 150,000 sentences/s at 2-10 and
>= 50,000 at 2-20 (the fastest existing tools: 10,000-14,500 and 2,000-6,600).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import multiprocessing  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from grind.grammars.dmv import dmv_grammar, split_heads  # noqa: E402
from grind.kernels.dmv import DMVParser  # noqa: E402

TARGETS = {10: 150_000, 20: 50_000}
POOL = 8192        # sentences the CKY column can time
BUILD_S = 120.0     # seconds allowed for building the CKY parser (not in the budget)


def tag_corpus(rng, n_sent, max_len, n_tags=35):
    tags = np.array([f"T{i}" for i in range(n_tags)])
    lens = rng.integers(2, max_len + 1, size=n_sent)
    return _split(tags[rng.integers(0, n_tags, size=lens.sum())], lens), None


def zipf_corpus(rng, n_sent, max_len, vocab=20_000):
    words = np.array([f"w{i}" for i in range(vocab)])
    p = 1.0 / np.arange(1, vocab + 1)
    lens = rng.integers(2, max_len + 1, size=n_sent)
    return _split(words[rng.choice(vocab, size=lens.sum(), p=p / p.sum())], lens), words.tolist()


def _split(tokens, lens):
    return [s.tolist() for s in np.split(tokens, np.cumsum(lens)[:-1])]


def best_rate(parser, weights, n_sent, repeats):
    """Sentences/s of the best of ``repeats`` full E-steps (after one warm-up)."""
    parser.inside_outside(weights)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        parser.inside_outside(weights)
        best = min(best, time.perf_counter() - t)
    return n_sent / best


def _cky_calls(conn, grammar, sents, weights, seconds):
    """(In a child process) build the parser, then time calls on the first 1, 2, 4, ...
    sentences, sending ("built", s) and then ("call", k, s) after each call."""
    from grind.kernels.cky import CKYParser
    t = time.perf_counter()
    parser = CKYParser(grammar, [split_heads(s) for s in sents[:POOL]])
    conn.send(("built", time.perf_counter() - t))
    n, spent, k = min(len(sents), POOL), 0.0, 1
    while True:
        t = time.perf_counter()
        parser.inside_outside(weights, np.arange(k))
        t = time.perf_counter() - t
        conn.send(("call", k, t))
        spent += t
        if k == n or spent + 2 * t > seconds:      # the next size would not fit
            break
        if t >= seconds / 4:                        # a second call at this size, then stop
            if spent + t <= seconds:
                t0 = time.perf_counter()
                parser.inside_outside(weights, np.arange(k))
                conn.send(("call", k, time.perf_counter() - t0))
            break
        k = min(2 * k, n)
    conn.send(("done",))


def cky_rate(grammar, sents, weights, seconds):
    """CKY E-step sentences/s, measured within ``seconds`` of E-step calls.

    A forked process builds one parser over the first sentences (up to POOL; the build
    has its own allowance, BUILD_S) and times calls on the first 1, 2, 4, ... of them,
    each started only when it should fit in the budget (twice the last call's time),
    until a call takes a quarter of it; the process is stopped when the budget is spent.
    The rate is the best call at the largest size finished, and the note says what it
    rests on.  When not even one sentence finishes, the rate is an upper bound
    (1 / ``seconds``): returned as (rate, note, True)."""
    try:
        import grind.kernels.cky  # noqa: F401
    except ImportError as e:
        return None, f"not importable ({e})", False
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:
        return None, "not timed: needs fork() to keep the column within its budget", False
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_cky_calls, args=(send, grammar, sents, weights, seconds), daemon=True)
    child.start()
    send.close()
    deadline, calls, done = time.monotonic() + BUILD_S, [], False
    try:
        while not done and time.monotonic() < deadline:
            if not recv.poll(max(0.0, deadline - time.monotonic())):
                break
            msg = recv.recv()
            if msg[0] == "built":
                deadline = time.monotonic() + seconds
            elif msg[0] == "call":
                calls.append(msg[1:])
            else:
                done = True
    except EOFError:                          # the child failed (e.g. cannot compile the grammar)
        pass
    finally:
        child.kill()
        child.join()
    if not calls:
        if child.exitcode not in (0, -9) and not done:
            return None, "cannot compile the grammar or parse", False
        return 1 / seconds, f"no sentence finished in the {seconds:g} s budget", True
    k = calls[-1][0]
    best = min(t for kk, t in calls if kk == k)
    n_at_k = sum(1 for kk, _ in calls if kk == k)
    cut = "" if done else "; stopped at the budget"
    word = "sentence" if k == 1 else "sentences"
    return k / best, f"{k} {word}, best of {n_at_k} call{'s' if n_at_k > 1 else ''}{cut}", False


def run_setting(label, make, max_len, n_sent, rng, lexicalized, cky_seconds):
    sents, vocab = make(rng, n_sent, max_len)
    t = time.perf_counter()
    g = dmv_grammar(sents, lexicalized=lexicalized, vocabulary=vocab)
    t_grammar = time.perf_counter() - t
    w = g.normalize(rng.gamma(1.0, size=len(g)))
    t = time.perf_counter()
    p = DMVParser(g, sents)
    t_parser = time.perf_counter() - t
    dmv = best_rate(p, w, len(sents), 5)
    cky, note, bound = cky_rate(g, sents, w, cky_seconds)
    return dict(label=label, n=len(sents), rules=len(g), build=t_grammar + t_parser, dmv=dmv,
                target=TARGETS.get(max_len) if not lexicalized else None, cky=cky, note=note, bound=bound)


def table(rows) -> str:
    head = ("| setting | sentences | rules | build s | DMV E-step sent/s | target | "
            "CKY E-step sent/s | DMV / CKY |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for r in rows:
        if r["cky"]:
            le, ge = ("< ", "> ") if r["bound"] else ("", "")
            cky = f"{r['cky']:,.0f}" if r["cky"] >= 100 else f"{le}{r['cky']:.2g} ({r['note']})"
            ratio = f"{ge}{r['dmv'] / r['cky']:,.0f}x"
        else:
            cky, ratio = f"— ({r['note']})", "—"
        target = f">= {r['target']:,}" if r["target"] else "—"
        lines.append(f"| {r['label']} | {r['n']:,} | {r['rules']:,} | {r['build']:.1f} | "
                     f"{r['dmv']:,.0f} | {target} | {cky} | {ratio} |")
    return head + "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.dmv", description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="corpus size factor (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cky-seconds", type=float, default=3.0, help="time budget of each CKY run")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    sc = lambda k: max(100, int(k * args.scale))  # noqa: E731
    settings = [("35 tags, length 2-10", tag_corpus, 10, sc(100_000), False),
                ("35 tags, length 2-20", tag_corpus, 20, sc(50_000), False),
                ("lexicalized, 20k-word Zipf vocab, length 2-10", zipf_corpus, 10, sc(20_000), True),
                ("lexicalized, 20k-word Zipf vocab, length 2-20", zipf_corpus, 20, sc(20_000), True)]
    rows = []
    for label, make, max_len, n, lex in settings:
        print(f"[dmv bench] {label} ...", file=sys.stderr, flush=True)
        rows.append(run_setting(label, make, max_len, n, rng, lex, args.cky_seconds))
    print("### DMV kernel: E-step throughput (one core)\n")
    print(table(rows))
    print("\nE-step = expected counts of every rule + log Z of every sentence (best of 5). "
          "Fastest existing tools: 10,000-14,500 sent/s at 2-10, 2,000-6,600 at 2-20.")
    return rows


if __name__ == "__main__":
    main()
