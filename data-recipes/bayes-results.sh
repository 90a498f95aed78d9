#!/usr/bin/env bash
# The issue-4 comparison recorded in README.md (needs ../shared/data):
#  (a) the DMV on UD English-EWT train <= 10 (UPOS, punctuation removed), harmonic and uniform init,
#      every algorithm; directed accuracy (Viterbi, posterior mean) on test <= 10 / <= 20 / all,
#      held-out log probability of test <= 10, wall time, sentences parsed;
#  (b) a fully connected CNF grammar (10 nonterminals, 10 preterminals) over the same UPOS strings
#      (2-10 words), every algorithm: held-out log probability and wall time, Hastings acceptance.
# Usage: data-recipes/bayes-results.sh [OUTDIR]; prints a TSV summary to stdout.
set -euo pipefail
shared=${SHARED:-../shared/data}
out=${1:-results/bayes}
mkdir -p "$out"
ewt=$shared/UD_English-EWT
train=$ewt/en_ewt-ud-train.conllu.xz
test=$ewt/en_ewt-ud-test.conllu
C="--column UPOS --punct ud"
T10="$C --max-length 10"
ALPHA=${ALPHA:-0.1}
ITER=${ITER:-40}
declare -A OPTS=(
  [em]="--iterations $ITER"
  [vb]="--iterations $ITER --alpha $ALPHA"
  [cvb]="--iterations 10 --alpha $ALPHA"
  [streaming]="--batch 500 --batch-iterations 5 --alpha $ALPHA"
  [stochastic]="--batch 500 --epochs 5 --batch-iterations 3 --tau 1 --kappa 0.7 --alpha $ALPHA"
  [gibbs]="--iterations 200 --alpha $ALPHA"
  [hastings]="--iterations 200 --temp-start 5 --alpha $ALPHA"
)
ALGOS=${ALGOS:-"em vb cvb streaming stochastic gibbs hastings"}
MODELS=${MODELS:-"dmv cnf"}
run() { echo "+ $*" >&2; "$@"; }
summ() {  # name trace-file: last step's sentences and seconds, acceptance if any
  python3 - "$@" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2]) if not l.startswith("#")]
h, last = rows[0], rows[-1]
acc = last[h.index("acceptance")] if "acceptance" in h else ""
print(f"{last[h.index('sentences')]}\t{float(last[h.index('seconds')]):.1f}\t{acc}", end="")
PY
}
acc() { grep -v '^#' "$1" | awk -F'\t' 'NR>1{printf "%s%.1f", (NR>2?"/":""), 100*$4}'; }
lp() { grind loglik --summary $2 "$1" "$test" 2>/dev/null | awk -F': ' '/^# parsed/{p=$2} /^# logprob/{l=$2} END{printf "%.1f (%s parsed)", l, p}'; }

echo -e "model\tinit\talgo\tdirected<=10/<=20/all\ttest<=10 logprob\tsentences parsed\tseconds\tacceptance"
if [[ " $MODELS " == *" dmv "* ]]; then
run grind make-grammar dmv $T10 -o "$out/dmv0.txt" "$train"
run grind init --harmonic --corpus "$train" $T10 -o "$out/dmv-harmonic.txt" "$out/dmv0.txt"
run grind init --uniform -o "$out/dmv-uniform.txt" "$out/dmv0.txt"
for init in harmonic uniform; do
  for a in $ALGOS; do
    o=$out/dmv-$init-$a
    run grind train --algo $a ${OPTS[$a]} --seed 1 $T10 --trace "$o.tsv" -o "$o.txt" "$out/dmv-$init.txt" "$train" 2>"$o.log"
    run grind parse $C -o "$o.conllu" "$o.txt" "$test" 2>/dev/null
    run grind eval $C -o "$o.eval" "$test" "$o.conllu"
    echo -e "dmv\t$init\t$a\t$(acc "$o.eval")\t$(lp "$o.txt" "$T10")\t$(summ x "$o.tsv")"
  done
done
fi
[[ " $MODELS " == *" cnf "* ]] || exit 0
P="$C --min-length 2 --max-length 10"
run grind make-grammar cnf $P -n 10 -p 10 -o "$out/cnf0.txt" "$train"
run grind init --random --seed 1 -o "$out/cnf-init.txt" "$out/cnf0.txt"
for a in $ALGOS; do
  o=$out/cnf-$a
  run grind train --algo $a ${OPTS[$a]} --seed 1 $P --jobs 2 --trace "$o.tsv" -o "$o.txt" "$out/cnf-init.txt" "$train" 2>"$o.log"
  echo -e "cnf10\trandom\t$a\t-\t$(lp "$o.txt" "$P")\t$(summ x "$o.tsv")"
done
