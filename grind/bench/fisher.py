"""``python -m grind.bench.fisher``: a Fisher-sized words-alone DMV run (issue 15).

Pate & Johnson (2016) trained the lexicalized DMV from words alone on the
Fisher corpus (~664,000 utterances, ~40,000 word types).  This bench makes a
corpus of that shape with a known answer (:class:`grind.grammars.planted.PlantedDMV`:
Zipfian words, conversational utterance lengths, gold trees from a planted
DMV), builds the lexicalized grammar (``grind make-grammar dmv --lexicalized``,
uniform probabilities) and runs one pass over the corpus of each training
path, each in its own process:

* streaming VB (``grind train --algo streaming``; the corpus is read as a stream),
* stochastic VB (``--algo stochastic --epochs 1``),
* collapsed VB (``--algo cvb --iterations 1``: the initial E-step and one sweep),
* the sharded path on 2 workers: ``grind split -n 2``, ``grind estep --algo vb``
  on both shards in 2 parallel processes, ``grind sum``, ``grind mstep --algo vb``.

For each step it reports wall seconds and the peak resident memory of its
process (``os.wait4``'s ``ru_maxrss``; for the parallel E-steps the larger
one and their sum), and for each trained grammar the directed accuracy of
its Viterbi trees against the planted heads on the first ``--eval``
sentences.  The default is the full 664,000 sentences / 40,000 types, which
takes long (see README); ``--sentences 20000`` runs in about a minute.

Everything is written under ``--workdir`` (default: a fresh temporary
directory, deleted afterwards unless ``--keep``); the rule cache goes there
too (``GRIND_CACHE_DIR``), so the user's cache is left alone.  The corpus
alone: ``--corpus-only -o fisher.conllu [--text fisher.txt]``.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core a process (effective when imported first)

import argparse  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

from grind.grammars.planted import write_planted_corpus  # noqa: E402

#: Pate & Johnson's (2016) Fisher corpus: utterances and word types.
FISHER_SENTENCES, FISHER_TYPES = 664_000, 40_000
GOAL_BYTES = 4 << 30


@dataclass
class Run:
    """One measured step: ``seconds`` wall time, ``rss`` peak bytes of its
    process (``rss_sum``: of its parallel processes together)."""

    method: str
    step: str
    seconds: float
    rss: int
    rss_sum: int | None = None
    accuracy: float | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)


def grind_cmd() -> list[str]:
    """The grind command line of this interpreter (works without the venv on PATH)."""
    return [sys.executable, "-m", "grind.cli"]


def run_procs(cmds, env, log_path=None) -> tuple[float, list[int]]:
    """Run ``cmds`` (argument lists) in parallel; ``(wall seconds, peak RSS bytes
    of each)``.  A failing command raises RuntimeError with its stderr's tail."""
    t = time.perf_counter()
    procs = []
    for k, c in enumerate(cmds):
        err = open(f"{log_path}.{k}.err" if log_path else os.devnull, "w")
        procs.append((subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=err), err, c, k))
    rss = [0] * len(cmds)
    failed = []
    for p, err, c, k in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.close()
        rss[k] = usage.ru_maxrss * 1024            # Linux: kilobytes
        if p.returncode:
            failed.append((c, p.returncode, k))
    secs = time.perf_counter() - t
    if failed:
        c, code, k = failed[0]
        tail = ""
        if log_path:
            with open(f"{log_path}.{k}.err") as f:
                tail = "".join(f.readlines()[-5:])
        raise RuntimeError(f"{' '.join(c)} exited with {code}\n{tail}")
    return secs, rss


def first_blocks(src, dst, n) -> int:
    """Copy the header and the first ``n`` CoNLL blocks of ``src`` to ``dst``; returns blocks copied."""
    k = 0
    with open(src) as f, open(dst, "w") as out:
        for line in f:
            out.write(line)
            if not line.strip():
                k += 1
                if k == n:
                    break
    return k


def directed_accuracy(eval_output: str) -> float | None:
    """The 'all' row's directed accuracy of ``grind eval`` output."""
    for line in eval_output.splitlines():
        cols = line.split()
        if cols and cols[0] == "all":
            return float(cols[3])
    return None


class Bench:
    def __init__(self, workdir, sentences, types, seed, batch, eval_n, methods, first_batch=None):
        self.dir, self.n, self.types, self.seed = workdir, sentences, types, seed
        self.batch, self.eval_n, self.methods, self.first_batch = batch, eval_n, methods, first_batch
        self.env = dict(os.environ, GRIND_CACHE_DIR=os.path.join(workdir, "cache"), OMP_NUM_THREADS="1",
                        OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.corpus = self.path("corpus.conllu")
        self.test = self.path("test.conllu")
        self.grammar = self.path("g0.txt")
        self.opts = ["--column", "FORM"]
        self.runs: list[Run] = []

    def path(self, name):
        return os.path.join(self.dir, name)

    def say(self, msg):
        print(f"[fisher bench] {msg}", file=sys.stderr, flush=True)

    def step(self, method, step, cmds, note="", parallel_sum=False) -> Run:
        self.say(f"{method}: {step} ...")
        secs, rss = run_procs(cmds, self.env, self.path(f"log-{method}-{step}".replace(" ", "_")))
        r = Run(method, step, secs, max(rss), sum(rss) if parallel_sum else None, note=note)
        self.runs.append(r)
        self.say(f"{method}: {step}: {secs:.1f} s, peak {max(rss) / 2**20:,.0f} MiB")
        return r

    def make_corpus(self):
        self.say(f"corpus: {self.n:,} sentences, {self.types:,} types, seed {self.seed} ...")
        t = time.perf_counter()
        write_planted_corpus(self.corpus, self.n, self.types, seed=self.seed)
        first_blocks(self.corpus, self.test, self.eval_n)
        self.corpus_seconds = time.perf_counter() - t
        tokens = 0
        with open(self.corpus) as f:
            for line in f:
                tokens += line[:1].isdigit()
        self.tokens = tokens

    def build_grammar(self):
        g = grind_cmd()
        self.step("grammar", "make-grammar dmv --lexicalized",
                  [g + ["make-grammar", "dmv", "--lexicalized", *self.opts, "-o", self.grammar, self.corpus]])
        with open(self.grammar) as f:
            self.rules = sum(1 for line in f if not line.startswith("#"))
        self.step("grammar", "read + parser build (estep on 1 sentence)",
                  [g + ["estep", *self.opts, "-o", self.path("c-probe.txt"), self.grammar, self.test_one()]])

    def test_one(self):
        p = self.path("one.conllu")
        if not os.path.exists(p):
            first_blocks(self.corpus, p, 1)
        return p

    def score(self, run: Run, grammar):
        """Directed accuracy of ``grammar``'s Viterbi trees on the test sentences."""
        g = grind_cmd()
        pred = self.path(f"pred-{run.method}.conllu")
        self.say(f"{run.method}: parsing the first {self.eval_n:,} sentences ...")
        subprocess.run(g + ["parse", *self.opts, "-o", pred, grammar, self.test], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(g + ["eval", *self.opts, "--no-baselines", self.test, pred], env=self.env,
                             check=True, capture_output=True, text=True).stdout
        run.accuracy = directed_accuracy(out)

    def train(self, algo, extra, note):
        out = self.path(f"g-{algo}.txt")
        r = self.step(algo, "one pass", [grind_cmd() + ["train", "--algo", algo, "--alpha", "1", "--seed", "1",
                                                       *extra, *self.opts, "-o", out, self.grammar, self.corpus]],
                      note=note)
        if self.eval_n:
            self.score(r, out)

    def sharded(self):
        g = grind_cmd()
        prefix = self.path("shard")
        self.step("sharded", "split -n 2", [g + ["split", "-n", "2", *self.opts, "-o", prefix, self.corpus]])
        counts = [self.path(f"c{k}.txt") for k in (1, 2)]
        r = self.step("sharded", "estep x2 (parallel)",
                      [g + ["estep", "--algo", "vb", *self.opts, "-o", c, self.grammar, f"{prefix}.{k}.conllu"]
                       for k, c in zip((1, 2), counts)], parallel_sum=True)
        self.step("sharded", "sum", [g + ["sum", "-o", self.path("c.txt"), *counts]])
        out = self.path("g-sharded.txt")
        m = self.step("sharded", "mstep --algo vb",
                      [g + ["mstep", "--algo", "vb", "--alpha", "1", "--grammar", self.grammar, "-o", out,
                            self.path("c.txt")]])
        r.note = "2 processes"
        if self.eval_n:
            self.score(m, out)

    def run(self):
        self.make_corpus()
        self.build_grammar()
        b = str(self.batch)
        if "streaming" in self.methods:
            first = ["--first-batch", str(self.first_batch)] if self.first_batch else []
            self.train("streaming", ["--batch", b, *first, "--batch-iterations", "1"],
                       (f"first minibatch {self.first_batch:,}, then " if first else "")
                       + f"batch {self.batch:,}, 1 VB iteration")
        if "stochastic" in self.methods:
            self.train("stochastic", ["--epochs", "1", "--batch", b, "--batch-iterations", "1"],
                       f"batch {self.batch:,}, 1 local iteration")
        if "cvb" in self.methods:
            self.train("cvb", ["--iterations", "1", "--tolerance", "0"], "initial E-step + 1 sweep")
        if "sharded" in self.methods:
            self.sharded()
        return self.runs


def table(bench: Bench) -> str:
    mib = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    lines = [f"Planted-DMV corpus: {bench.n:,} sentences, {bench.tokens:,} words, {bench.types:,} word types "
             f"(seed {bench.seed}); lexicalized DMV of {bench.rules:,} rules; directed accuracy on the first "
             f"{bench.eval_n:,} sentences (Viterbi).\n",
             "| method | step | wall s | peak RSS MiB | within 4 GB | directed acc. | note |",
             "|---|---|---:|---:|---|---:|---|"]
    for r in bench.runs:
        rss = mib(r.rss) + (f" (sum {mib(r.rss_sum)})" if r.rss_sum else "")
        worst = r.rss_sum or r.rss
        acc = f"{100 * r.accuracy:.1f}" if r.accuracy is not None else ""
        lines.append(f"| {r.method} | {r.step} | {r.seconds:,.1f} | {rss} | "
                     f"{'yes' if worst <= GOAL_BYTES else 'no'} | {acc} | {r.note} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.fisher", description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=FISHER_SENTENCES)
    ap.add_argument("--types", type=int, default=FISHER_TYPES)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=10_000, help="minibatch size (streaming, stochastic)")
    ap.add_argument("--first-batch", type=int, default=None, help="streaming VB's first minibatch (default --batch)")
    ap.add_argument("--eval", type=int, default=2000, dest="eval_n",
                    help="sentences scored for accuracy (0: no scoring)")
    ap.add_argument("--methods", default="streaming,stochastic,cvb,sharded")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--corpus-only", action="store_true", help="only write the corpus (-o, --text)")
    ap.add_argument("-o", "--output", default=None, help="with --corpus-only: the CoNLL-U file")
    ap.add_argument("--text", default=None, help="with --corpus-only: also the words, one sentence a line")
    a = ap.parse_args(argv)
    if a.corpus_only:
        if not a.output:
            ap.error("--corpus-only needs -o FILE")
        write_planted_corpus(a.output, a.sentences, a.types, seed=a.seed, text_path=a.text)
        return None
    made = a.workdir is None
    workdir = a.workdir or tempfile.mkdtemp(prefix="grind-fisher-")
    os.makedirs(workdir, exist_ok=True)
    try:
        bench = Bench(workdir, a.sentences, a.types, a.seed, a.batch, min(a.eval_n, a.sentences),
                      set(a.methods.split(",")), a.first_batch)
        bench.run()
        print("### Fisher-sized words-alone DMV: one pass per method\n")
        print(table(bench))
        return bench
    finally:
        if made and not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
