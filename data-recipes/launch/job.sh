# job.sh: what slurm.sh, sge.sh and pbs.sh share (sourced, not run): the arguments LOG COMMAND..., and the job
# that runs local.sh LOG COMMAND... on a node. Sets: here (this directory), log, name (a job name from LOG's file
# name, characters a scheduler accepts), extra (JOB_OPTIONS split at spaces), script (an sh script that starts in
# this directory and runs the job), and sq (one word for sh).
launcher=$(basename -- "$0")
if (($# < 2)); then
    echo "usage: $launcher LOG COMMAND [ARG...]" >&2
    exit 2
fi
here=$(cd "$(dirname -- "$0")" && pwd)
log=$1
sq() { local s=$1; printf "'%s'" "${s//\'/\'\\\'\'}"; }
name=grind-$(basename -- "$log" .log | tr -c 'A-Za-z0-9_.\n-' _)
read -r -a extra <<< "${JOB_OPTIONS:-}"
mkdir -p -- "$(dirname -- "$log")" || exit
script="#!/bin/sh
cd $(sq "$PWD") || exit 1
exec"
for a in "$here/local.sh" "$@"; do script+=" $(sq "$a")"; done
# finished RC: say where the scheduler's messages are when the job did not succeed, and exit with RC
finished() {
    if (($1 != 0)); then
        echo "$launcher: the job of $log ended with exit $1 (the scheduler's messages: $log.$2)" >&2
        [[ -s $log ]] && tail -n 6 -- "$log" | sed 's/^/  /' >&2
    fi
    exit "$1"
}
