#!/usr/bin/env bash
# trace.sh OUT N: the objective of each step of a sharded run (the '# objective:' header grind mstep
# writes into OUT/g1.txt .. OUT/gN.txt) as TSV on stdout, the columns of grind train --trace's first two.
set -euo pipefail
out=$1
n=$2
head -1 "$out/g1.txt"                                   # '# grind VERSION' of the run's grammars
printf '# command: %s %s %s\n' "$0" "$out" "$n"
printf "# objective: each step's grammar's '# objective:' header line (grind mstep)\n"
printf 'step\tobjective\n'
for ((i = 1; i <= n; i++)); do
    printf '%s\t%s\n' "$i" "$(sed -n '/^[^#]/q; s/^# objective: //p' "$out/g$i.txt")"
done
