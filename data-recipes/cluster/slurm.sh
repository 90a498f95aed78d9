#!/usr/bin/env bash
# Sharded grind training on a SLURM cluster: the jobs of the Makefile beside this script, submitted at
# once with dependencies -- one job for grind split, then per iteration a job array of grind estep (one
# task a shard) and a job that runs grind sum (in shard order) and grind mstep once every task of the
# array has succeeded, and a last job that copies the grammar and writes the trace.  See README.md.
#
#   GRAMMAR=g1.txt CORPUS=train.conllu SHARDS=64 ITERATIONS=20 ALGO=vb ALPHA=0.1 \
#   CORPUS_OPTIONS="--column UPOS --punct ud --max-length 10" OUT=run \
#       data-recipes/cluster/slurm.sh --partition=short --time=1:00:00 --mem=4G
#
# Arguments are sbatch options given to every job.  Variables: GRAMMAR, CORPUS (required); ALGO
# (em|map|vb, default em), ALPHA (1), SHARDS (4), ITERATIONS (10), CORPUS_OPTIONS, ESTEP_OPTIONS (e.g.
# "--jobs 8" with --cpus-per-task=8), GRIND (grind: the command every job runs), OUT (run);
# ESTEP_SBATCH / MSTEP_SBATCH: sbatch options for the E-step tasks / the M-step jobs only.
# DRY_RUN=1 prints the sbatch commands (with made-up job ids) instead of submitting them.
# Outputs as the Makefile's (OUT/gI.txt, OUT/grammar.txt, OUT/trace.tsv), logs in OUT/logs/.
# A failed job cancels the jobs that depend on it (--kill-on-invalid-dep=yes).
set -euo pipefail

: "${GRAMMAR:?set GRAMMAR=FILE (the initial grammar, rule probabilities)}"
: "${CORPUS:?set CORPUS=FILE}"
GRIND=${GRIND:-grind}
ALGO=${ALGO:-em}
ALPHA=${ALPHA:-1}
SHARDS=${SHARDS:-4}
ITERATIONS=${ITERATIONS:-10}
CORPUS_OPTIONS=${CORPUS_OPTIONS:-}
ESTEP_OPTIONS=${ESTEP_OPTIONS:-}
ESTEP_SBATCH=${ESTEP_SBATCH:-}
MSTEP_SBATCH=${MSTEP_SBATCH:-}
OUT=${OUT:-run}
DRY_RUN=${DRY_RUN:-}
case $ALGO in em | map | vb) ;; *) echo "slurm.sh: ALGO must be em, map or vb, not '$ALGO'" >&2; exit 2 ;; esac
for n in "$SHARDS" "$ITERATIONS"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "slurm.sh: SHARDS and ITERATIONS must be positive integers" >&2; exit 2; }
done
[[ -r $GRAMMAR && -r $CORPUS ]] || { echo "slurm.sh: cannot read $GRAMMAR or $CORPUS" >&2; exit 1; }
[[ -n $DRY_RUN ]] || command -v sbatch >/dev/null || { echo "slurm.sh: no sbatch here (SLURM); DRY_RUN=1 prints the jobs" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/shards" "$OUT/counts" "$OUT/logs"
out=$(cd "$OUT" && pwd)                       # jobs may start elsewhere: absolute paths
corpus=$(cd "$(dirname "$CORPUS")" && pwd)/$(basename "$CORPUS")
# CORPUS's extension, as grind split keeps it: the last suffix, with the one before when that is .gz/.xz/.bz2
base=$(basename "$CORPUS")
z=
case $base in *.gz | *.xz | *.bz2) z=.${base##*.}; base=${base%.*} ;; esac
ext=$z
stem=${base#.}                                # a leading dot starts no suffix (.train has none)
case $stem in *.*) ext=.${stem##*.}$z ;; esac
cp "$GRAMMAR" "$out/start.txt"
q() { printf '%q' "$1"; }                    # a path quoted for the job's shell

sbatch_args=("$@")                           # given to every job
fake=0
job=
submit() {                                   # submit ARGS...: sbatch ARGS...; the job id in $job
    if [[ -n $DRY_RUN ]]; then
        fake=$((fake + 1))
        job=JOB$fake
        printf 'sbatch' >&2
        printf ' %q' "$@" >&2
        printf '  # %s\n' "$job" >&2
    else
        job=$(sbatch --parsable "$@" | cut -d';' -f1)
        [[ -n $job ]] || { echo "slurm.sh: sbatch printed no job id" >&2; exit 1; }
    fi
}

# $GRIND, $CORPUS_OPTIONS and $ESTEP_OPTIONS are word lists: left unquoted on purpose.
submit "${sbatch_args[@]}" -J grind-split -o "$out/logs/split.log" \
    --wrap "$GRIND split $CORPUS_OPTIONS -n $SHARDS -o $(q "$out/shards/corpus") $(q "$corpus")"
prev=$job
echo "split: job $prev"

round() {                                    # round NAME IN OUT: estep array, then sum + mstep
    local r=$1 in=$2 to=$3 arr sums k
    # shellcheck disable=SC2086
    submit "${sbatch_args[@]}" $ESTEP_SBATCH -J "grind-estep-$r" --array="1-$SHARDS" --dependency="afterok:$prev" \
        --kill-on-invalid-dep=yes -o "$out/logs/estep-$r-%a.log" \
        --wrap "$GRIND estep --algo $ALGO $CORPUS_OPTIONS $ESTEP_OPTIONS -o $(q "$out/counts/c$r.")\${SLURM_ARRAY_TASK_ID}.txt $(q "$in") $(q "$out/shards/corpus.")\${SLURM_ARRAY_TASK_ID}$(q "$ext")"
    arr=$job
    sums=
    for ((k = 1; k <= SHARDS; k++)); do sums+=" $(q "$out/counts/c$r.$k.txt")"; done
    # shellcheck disable=SC2086
    submit "${sbatch_args[@]}" $MSTEP_SBATCH -J "grind-mstep-$r" --dependency="afterok:$arr" --kill-on-invalid-dep=yes \
        -o "$out/logs/mstep-$r.log" \
        --wrap "$GRIND sum -o $(q "$out/counts/c$r.txt")$sums && $GRIND mstep --algo $ALGO --alpha $(q "$ALPHA") --grammar $(q "$in") -o $(q "$to") $(q "$out/counts/c$r.txt")"
    prev=$job
    echo "iteration $r: E-steps job $arr, M-step job $prev"
}

if [[ $ALGO == vb ]]; then                   # VB's initialisation: alpha + counts under GRAMMAR's probabilities
    round 0 "$out/start.txt" "$out/g0.txt"
else
    cp "$out/start.txt" "$out/g0.txt"
fi
for ((i = 1; i <= ITERATIONS; i++)); do
    round "$i" "$out/g$((i - 1)).txt" "$out/g$i.txt"
done
submit "${sbatch_args[@]}" -J grind-trace --dependency="afterok:$prev" --kill-on-invalid-dep=yes \
    -o "$out/logs/trace.log" \
    --wrap "cp $(q "$out/g$ITERATIONS.txt") $(q "$out/grammar.txt") && bash $(q "$here/trace.sh") $(q "$out") $ITERATIONS > $(q "$out/trace.tsv")"
echo "grammar and trace: job $job ($out/grammar.txt, $out/trace.tsv)"
