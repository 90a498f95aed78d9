#!/usr/bin/env bash
# trace.sh OUT N: the objective of each step of a sharded run (the '# objective:' header grind mstep
# writes into OUT/g1.txt .. OUT/gN.txt) as TSV on stdout, the columns of grind train --trace's first two.
set -euo pipefail
out=$1
n=$2
printf 'step\tobjective\n'
for ((i = 1; i <= n; i++)); do
    printf '%s\t%s\n' "$i" "$(sed -n '/^[^#]/q; s/^# objective: //p' "$out/g$i.txt")"
done
