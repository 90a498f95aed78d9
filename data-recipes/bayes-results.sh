#!/usr/bin/env bash
# Every Dirichlet-prior algorithm on the same data at the same budget (README "Every algorithm at an
# equal budget"; needs ../shared/data):
#   the DMV on UD English-EWT train <= 10 (UPOS, punctuation removed: 5,386 sentences), harmonic
#   initialiser; EM, VB, collapsed VB, Gibbs and collapsed Hastings each run PASSES passes over the
#   corpus (iterations of EM / VB, sweeps of CVB and of the samplers; --tolerance 0, so that no run stops
#   at its convergence test before the budget), at alpha = ALPHAS (a sparse value
#   and 1); the algorithms that draw random numbers (CVB's sentence order, the samplers) run with
#   SEEDS and are reported as mean +- sample sd; EM and VB are deterministic (one run).
#   Decoder: Viterbi under the posterior mean; directed accuracy on EWT test <= 10 / <= 20 / all
#   (punctuation removed before scoring, heads re-attached), the attach-right / attach-left
#   baselines on the same test sentences, and the share of each run's arcs that equal attach-right's.
#   Part "single" adds the single-pass algorithms (streaming VB: one pass; stochastic VB: 5 epochs) at
#   their own budgets, labelled as such.
#   HEADS=function: train and test re-headed first by `grind function-heads` (function words head their phrases, as
#   in the papers' Penn-style treebanks; written into OUTDIR/converted/), every run trained and scored on them
#   (training reads only the tags: the grammars and parses are those of HEADS=content, the gold trees differ).
# Usage: data-recipes/bayes-results.sh [OUTDIR]; env PASSES ALPHAS SEEDS INITS (harmonic and/or uniform) ALGOS PARTS
# HEADS (content, the default, or function).
# Finished runs (their .eval exists) are not run again. Prints a TSV summary to stdout.
set -eEuo pipefail
# a failed step's error is in its .log (its stderr): say which, and show the end of the newest log
exec 3>&2                     # the script's own stderr: a step's may be its .log when the trap runs
trap 'rc=$?; echo "$(basename "$0"): a step failed (exit $rc); the newest log:" >&3
      l=$(ls -t "${out:-.}"/*.log "${out:-.}"/*/*.log 2>/dev/null | head -1) || true
      [[ -n $l ]] && { echo "== $l" >&3; tail -5 "$l" >&3; }; trap - ERR' ERR
shared=${SHARED:-../shared/data}
HEADS=${HEADS:-content}
[[ $HEADS == content || $HEADS == function ]] ||
  { echo "bayes-results.sh: HEADS is content or function, not '$HEADS'" >&2; exit 2; }
if [[ $HEADS == function ]]; then out=${1:-results/bayes-fh}; else out=${1:-results/bayes}; fi
mkdir -p "$out"
# an OUTDIR holds the runs of one gold convention (OUTDIR/heads; results without it are content-head ones):
# its finished runs are not run again, so another convention's would be reported as this one's
was=content
[[ -s $out/heads ]] && was=$(cat "$out/heads")
if [[ $was != "$HEADS" ]] && compgen -G "$out/*.eval" >/dev/null; then
  echo "bayes-results.sh: $out holds HEADS=$was results, not HEADS=$HEADS: give another OUTDIR" >&2; exit 2
fi
echo "$HEADS" > "$out/heads"
ewt=$shared/UD_English-EWT
train=$ewt/en_ewt-ud-train.conllu.xz
test=$ewt/en_ewt-ud-test.conllu
C="--column UPOS --punct ud"
T10="$C --max-length 10"
case $HEADS in
  content) ;;
  function)   # made once; the results in OUTDIR were scored on these files (OUTDIR/heads)
    mkdir -p "$out/converted"
    rule=$(printf '1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n' | grind function-heads - 2>/dev/null | grep '^# conversion:')
    for f in train test; do
      if [[ -s $out/converted/$f.conllu ]]; then    # made by this grind's rule, or OUTDIR's results are another gold's
        grep -qxF -- "$rule" <(head -20 "$out/converted/$f.conllu") && continue
        echo "bayes-results.sh: $out/converted/$f.conllu was converted by another rule than this grind's: give" \
             "another OUTDIR" >&2; exit 2
      fi
      [[ $f == train ]] && src=$train || src=$test
      grind function-heads -o "$out/converted/$f.conllu" "$src"
    done
    train=$out/converted/train.conllu; test=$out/converted/test.conllu ;;
esac
PASSES=${PASSES:-100}
ALPHAS=${ALPHAS:-"0.1 1"}
SEEDS=${SEEDS:-"1 2 3"}
INITS=${INITS:-"harmonic"}
ALGOS=${ALGOS:-"em vb cvb gibbs hastings"}
PARTS=${PARTS:-"equal single"}
RANDOM_ALGOS=" cvb gibbs hastings stochastic "     # streaming VB reads the stream in order: deterministic
declare -A EXTRA=(
  [em]="" [vb]="" [cvb]="" [gibbs]="" [hastings]="--temp-start 5"
  [streaming]="--batch 500 --batch-iterations 5"
  [stochastic]="--batch 500 --epochs 5 --batch-iterations 3 --tau 1 --kappa 0.7"
)
run() { echo "+ $*" >&2; "$@"; }
source "$(dirname "$0")/settings.sh"
settings_stamp "$out" "PASSES=$PASSES"
for init in $INITS; do
  [[ $init == harmonic || $init == uniform ]] || { echo "bayes-results.sh: INITS takes harmonic and uniform, not '$init'" >&2; exit 2; }
done
for a in $ALGOS; do
  [[ -n ${EXTRA[$a]+x} ]] || { echo "bayes-results.sh: unknown algorithm '$a' in ALGOS (one of: ${!EXTRA[*]})" >&2; exit 2; }
done

one() {  # init algo alpha seed budget-options -> trains, parses, evaluates (skipped when done)
  local init=$1 a=$2 alpha=$3 seed=$4; shift 4
  local o=$out/dmv-$init-$a-a$alpha-s$seed
  [[ -s $o.eval ]] && return 0
  run grind train --algo $a "$@" --alpha $alpha ${EXTRA[$a]} --seed $seed $T10 --trace "$o.tsv" \
    -o "$o.txt" "$out/dmv-$init.txt" "$train" 2>"$o.log"
  run grind parse $C -o "$o.conllu" "$o.txt" "$test" 2>>"$o.log"
  run grind eval --digits 6 $C -o "$o.eval" "$test" "$o.conllu"
}

run grind make-grammar dmv $T10 -o "$out/dmv0.txt" "$train"
for init in $INITS; do
  [[ $init == harmonic ]] && run grind init --harmonic --corpus "$train" $T10 -o "$out/dmv-harmonic.txt" "$out/dmv0.txt"
  [[ $init == uniform ]] && run grind init --uniform -o "$out/dmv-uniform.txt" "$out/dmv0.txt"
done
run grind baseline --attach right $C -o "$out/right.conllu" "$test"
run grind baseline --attach left $C -o "$out/left.conllu" "$test"
[[ -s $out/right.eval ]] || run grind eval --digits 6 $C -o "$out/right.eval" "$test" "$out/right.conllu"
[[ -s $out/left.eval ]] || run grind eval --digits 6 $C -o "$out/left.eval" "$test" "$out/left.conllu"

for init in $INITS; do
  for alpha in $ALPHAS; do
    if [[ " $PARTS " == *" equal "* ]]; then
      for a in $ALGOS; do
        [[ $a == em && $alpha != 1 ]] && continue     # EM is maximum likelihood: alpha = 1 only
        seeds=1; [[ $RANDOM_ALGOS == *" $a "* ]] && seeds=$SEEDS
        # --tolerance 0: em, vb and cvb run every pass too (their default tolerance stopped cvb after 46-61 sweeps)
        budget=(--iterations "$PASSES"); [[ " em vb cvb " == *" $a "* ]] && budget+=(--tolerance 0)
        for s in $seeds; do one $init $a $alpha $s "${budget[@]}"; done
      done
    fi
    if [[ " $PARTS " == *" single "* ]]; then
      for a in streaming stochastic; do
        seeds=1; [[ $RANDOM_ALGOS == *" $a "* ]] && seeds=$SEEDS
        for s in $seeds; do one $init $a $alpha $s; done
      done
    fi
  done
done

python3 - "$out" "$PASSES" <<'PY'
import glob, os, re, sys, statistics as st
out, passes = sys.argv[1], sys.argv[2]

def table(path):
    """The main TSV block of a grind eval report: {subset: row dict}."""
    rows, head = {}, None
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        if head is None:
            head = f
            continue
        if len(f) == len(head) and f[0] in ("<=10", "<=20", "all"):
            rows.setdefault(f[0], dict(zip(head, f)))
    return rows

def trace_last(path):
    rows = [l.rstrip("\n").split("\t") for l in open(path) if not l.startswith("#")]
    return dict(zip(rows[0], rows[-1]))

def fmt(xs):
    if len(xs) == 1:
        return f"{xs[0]:.1f}"
    return f"{st.mean(xs):.1f}±{st.stdev(xs):.1f}"

subsets = ("<=10", "<=20", "all")
base = {b: table(os.path.join(out, f"{b}.eval")) for b in ("right", "left")}
print("init\talgo\talpha\tbudget\truns\tdirected <=10 / <=20 / all\toverlap with attach-right <=10 / all\t"
      "seconds\tnote")
for b in ("right", "left"):
    print(f"-\tattach-{b}\t-\t-\t1\t" + " / ".join(f"{100 * float(base[b][s]['directed']):.1f}" for s in subsets)
          + "\t-\t-\tbaseline")
groups = {}
for ev in sorted(glob.glob(os.path.join(out, "dmv-*-s*.eval"))):
    m = re.match(r"dmv-(\w+)-(\w+)-a([\d.e-]+)-s(\d+)\.eval", os.path.basename(ev))
    groups.setdefault(m.groups()[:3], []).append(ev)
order = ["em", "vb", "cvb", "gibbs", "hastings", "streaming", "stochastic"]
for (init, algo, alpha), evs in sorted(groups.items(), key=lambda kv: (kv[0][0], float(kv[0][2]), order.index(kv[0][1]))):
    tabs = [table(e) for e in evs]
    acc = {s: [100 * float(t[s]["directed"]) for t in tabs] for s in subsets}
    ov = {s: [100 * float(t[s]["overlap_right"]) for t in tabs if "overlap_right" in t[s]] for s in ("<=10", "all")}
    secs = [float(trace_last(e[:-5] + ".tsv")["seconds"]) for e in evs]
    budget = {"streaming": "1 pass", "stochastic": "5 epochs"}.get(algo, f"{passes} passes")
    ran = sorted({int(trace_last(e[:-5] + ".tsv")["step"]) for e in evs})
    if algo not in ("streaming", "stochastic") and ran != [int(passes)]:     # the trace says what ran
        budget = f"{'-'.join(map(str, (ran[0], ran[-1]) if len(ran) > 1 else ran))} passes (of {passes})"
    notes = []
    for b in ("right", "left"):
        for s in subsets:
            if abs(st.mean(acc[s]) - 100 * float(base[b][s]["directed"])) < 1.0:
                notes.append(f"within 1 point of attach-{b} ({s})")
    print(f"{init}\t{algo}\t{alpha}\t{budget}\t{len(evs)}\t" + " / ".join(fmt(acc[s]) for s in subsets)
          + "\t" + (" / ".join(fmt(ov[s]) for s in ("<=10", "all")) if ov["all"] else "-")
          + f"\t{st.mean(secs):.1f}\t{'; '.join(notes)}")
PY
