#!/usr/bin/env bash
# Issue 14: Wang & Blunsom (2013) §4.3, Table 1 and Figure 7 -- a treebank PCFG with latent subtypes trained
# on gold trees with EM, VB and collapsed VB -- on the NLTK Penn Treebank sample (README "Latent-annotation
# treebank PCFGs"; needs $SHARED/nltk_ptb_sample, non-commercial licence: never shipped).
# Protocol:
#   data    the sample's 199 WSJ files split by file: train wsj_0001-0159 (3,396 trees), dev wsj_0160-0179
#           (273), test wsj_0180-0199 (245); every length (no cut-off), test scores also for <= 40 words.
#   grammar grind make-grammar treebank --subtypes H --seed SEED: function tags and -NONE- removed, X-->X
#           collapsed, ROOT added, right-factored binarisation with horizontal Markovisation 0 (@X), training
#           words seen once -> unknown-word signatures; every symbol but ROOT split into H subtypes, 1% noise.
#           H = 1 is the plain treebank PCFG (relative frequencies; EM on it is a fixed point, not re-run).
#   train   grind train --trees on the train trees, subtypes hidden: EM (maximum likelihood), VB and CVB
#           (Dirichlet alpha = ALPHA on every rule; both start from the expected counts under the split
#           grammar, as Wang & Blunsom initialise), ITER iterations / sweeps each (--tolerance 0: the
#           1% noise leaves the subtypes nearly symmetric, the objective barely moves for the first ~10
#           iterations and a relative-change rule stops EM there), an equal budget for all three; the
#           dev trees' log probability and dev F1 every EVAL iterations in the trace (learning curves;
#           nothing is stopped or selected by them but the seed, below).
#   decode  grind parse (max-rule-sum over the latent grammar, coarse-to-fine pruning at threshold PRUNE)
#           of dev for every run; per (H, algorithm) the seed with the best dev F1 is parsed on test
#           (their protocol: the dev-best run reported on test).
#   score   grind eval --labeled (EVALB COLLINS.prm conventions): labeled P / R / F1 and exact match,
#           corpus level, all sentences and <= 40 words.
# A finished step (its output exists) is not run again: rerunning resumes.  Prints TSV tables to stdout:
#   dev F1 mean +- sd over seeds per (H, algorithm), then test P/R/F1/exact of the dev-best seed with its
#   training and parsing time.
# Usage: data-recipes/latent-results.sh [OUTDIR]; env HS ALGOS SEEDS ITER EVAL ALPHA PRUNE JOBS PARTS
#   PARTS="train test" (a subset: only those parts, then the tables; e.g. two processes splitting HS).
# The README table was made with HS="1 2 4 8" and the defaults, split over parallel processes by H, algorithm
#   and seed (e.g. HS=8 ALGOS=cvb SEEDS="4 5" PARTS=train), then PARTS=test; H = 16 was not run.
set -euo pipefail
shared=${SHARED:-../shared/data}
out=${1:-results/latent}
HS=${HS:-"1 2 4 8 16"}
ALGOS=${ALGOS:-"em vb cvb"}
SEEDS=${SEEDS:-"1 2 3 4 5"}
ITER=${ITER:-50}
EVAL=${EVAL:-10}
ALPHA=${ALPHA:-1}
PRUNE=${PRUNE:-1e-4}
JOBS=${JOBS:-1}
PARTS=${PARTS:-"train test"}
ptb=$shared/nltk_ptb_sample/treebank/combined
if [ ! -d "$ptb" ]; then echo "latent-results.sh: $ptb not found (set SHARED)" >&2; exit 1; fi
mkdir -p "$out"
source "$(dirname "$0")/settings.sh"
settings_stamp "$out" "ITER=$ITER" "EVAL=$EVAL" "ALPHA=$ALPHA" "PRUNE=$PRUNE"
split() {  # split NAME FIRST LAST
  [ -s "$out/$1.mrg" ] && return
  local tmp="$out/$1.mrg.tmp.$$"  # per process: the README's runs start several of these at once
  for i in $(seq -f %04g "$2" "$3"); do cat "$ptb/wsj_$i.mrg"; echo; done > "$tmp"
  mv "$tmp" "$out/$1.mrg"
}
split train 1 159
split dev 160 179
split test 180 199

timed() {  # timed SECONDS_FILE cmd...  (wall seconds of the command into SECONDS_FILE)
  local f=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@"
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.2f\n", a - b}' > "$f"
}

parse_eval() {  # parse_eval GRAMMAR SPLIT PREFIX
  if [ ! -s "$3.$2.eval" ]; then
    timed "$3.$2.parse-seconds" grind parse --prune-threshold "$PRUNE" -o "$3.$2.trees" "$1" "$out/$2.mrg"
    grind eval --labeled -o "$3.$2.eval" "$out/$2.mrg" "$3.$2.trees"
  fi
}

run_one() {  # run_one H ALGO SEED
  local h=$1 algo=$2 seed=$3 d="$out/h$1"
  mkdir -p "$d"
  local g0="$d/g0.s$seed.txt"
  [ "$h" = 1 ] && g0="$d/g0.txt"
  if [ ! -s "$g0" ]; then
    grind make-grammar treebank --subtypes "$h" --seed "$seed" -o "$g0" "$out/train.mrg"
  fi
  if [ "$h" = 1 ]; then
    parse_eval "$g0" dev "$d/pcfg"
    echo 0 > "$d/pcfg.train-seconds"
    return
  fi
  local p="$d/$algo.s$seed"
  if [ ! -s "$p.txt" ]; then
    local tol=(--tolerance 0); [[ $algo == gibbs ]] && tol=()     # a sampler has no convergence test
    timed "$p.train-seconds" grind train --trees --algo "$algo" --alpha "$ALPHA" --iterations "$ITER" "${tol[@]}" \
      --seed "$seed" --dev "$out/dev.mrg" --eval-every "$EVAL" --jobs "$JOBS" \
      --trace "$p.trace.tsv" -o "$p.txt" "$g0" "$out/train.mrg"
  fi
  parse_eval "$p.txt" dev "$p"
}

if [[ " $PARTS " == *" train "* ]]; then
  for h in $HS; do
    if [ "$h" = 1 ]; then run_one 1 pcfg 1; continue; fi
    for algo in $ALGOS; do for seed in $SEEDS; do run_one "$h" "$algo" "$seed"; done; done
  done
fi

best_prefix() {  # best_prefix H ALGO -> the prefix of the seed with the highest dev F1
  local best="" bf=-1
  for seed in $SEEDS; do
    local p="$out/h$1/$2.s$seed"
    [ -s "$p.dev.eval" ] || continue
    local f; f=$(awk -F'\t' '$1=="all_labeled_f1"{print $2}' "$p.dev.eval")
    if awk -v a="$f" -v b="$bf" 'BEGIN{exit !(a > b)}'; then best=$p; bf=$f; fi
  done
  echo "$best"
}

if [[ " $PARTS " == *" test "* ]]; then
  for h in $HS; do
    if [ "$h" = 1 ]; then parse_eval "$out/h1/g0.txt" test "$out/h1/pcfg"; continue; fi
    for algo in $ALGOS; do
      p=$(best_prefix "$h" "$algo")
      [ -n "$p" ] && parse_eval "$p.txt" test "$p"
    done
  done
fi

python3 - "$out" "$HS" "$ALGOS" "$SEEDS" <<'EOF'
import os, statistics, sys
out, hs, algos, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()

def ev(path):
    if not os.path.exists(path):
        return None
    return {k: v for k, v in (ln.rstrip("\n").split("\t") for ln in open(path) if "\t" in ln)}

def num(path):
    return float(open(path).read()) if os.path.exists(path) else float("nan")

print("# dev labeled F1 (EVALB, all lengths), mean +- sd over seeds")
print("H\talgorithm\tseeds\tdev_F1_mean\tdev_F1_sd\tdev_F1_per_seed")
rows = []
for h in hs:
    runs = [("pcfg", [f"{out}/h1/pcfg"])] if h == "1" else [(a, [f"{out}/h{h}/{a}.s{s}" for s in seeds]) for a in algos]
    for algo, prefixes in runs:
        fs = [float(e["all_labeled_f1"]) for e in (ev(p + ".dev.eval") for p in prefixes) if e]
        if not fs:
            continue
        sd = statistics.stdev(fs) if len(fs) > 1 else 0.0
        print(f"{h}\t{algo}\t{len(fs)}\t{statistics.mean(fs):.2f}\t{sd:.2f}\t{','.join(f'{f:.2f}' for f in fs)}")
        best = max((p for p in prefixes if ev(p + ".dev.eval")), key=lambda p: float(ev(p + ".dev.eval")["all_labeled_f1"]))
        rows.append((h, algo, best))
print()
print("# test (dev-best seed): labeled P / R / F1 / exact, all lengths and <= 40 words; seconds")
print("H\talgorithm\trun\tP\tR\tF1\texact\tF1_le40\texact_le40\tnoparse\ttrain_s\ttest_parse_s\tsentences_per_s")
for h, algo, p in rows:
    e = ev(p + ".test.eval")
    if not e:
        continue
    n = float(e["all_sentences"])
    ps = num(p + ".test.parse-seconds")
    print(f"{h}\t{algo}\t{os.path.basename(p)}\t{e['all_labeled_precision']}\t{e['all_labeled_recall']}\t"
          f"{e['all_labeled_f1']}\t{e['all_exact_match']}\t{e['le40_labeled_f1']}\t{e['le40_exact_match']}\t"
          f"{e['all_noparse']}\t{num(p + '.train-seconds'):.0f}\t{ps:.1f}\t{n / ps:.1f}")
EOF
