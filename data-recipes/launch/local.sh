#!/usr/bin/env bash
# local.sh LOG COMMAND [ARG...]: run COMMAND on this machine, its stdout and stderr into LOG, and exit with its
# status. LOG starts with the command line, the working directory, the host and the start time, and ends with
# the end time, the seconds taken and the exit status; a failure also prints LOG's last lines to stderr.
# Every recipe's default launcher (CMD=../launch/local.sh); slurm.sh, sge.sh and pbs.sh run it on a node.
# SIGTERM, SIGINT and SIGHUP are passed on to COMMAND as SIGTERM, and its status is still written.
set -u
if (($# < 2)); then
    echo "usage: local.sh LOG COMMAND [ARG...]" >&2
    exit 2
fi
log=$1
shift
mkdir -p -- "$(dirname -- "$log")" || exit
now() { date '+%Y-%m-%d %H:%M:%S %z'; }
{
    printf '# command:'
    printf ' %q' "$@"
    printf '\n# cwd: %s\n# host: %s\n# start: %s\n' "$PWD" "$(hostname)" "$(now)"
} > "$log" || exit
t0=$(date +%s.%N)
"$@" >> "$log" 2>&1 &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
wait "$child"
rc=$?
while kill -0 "$child" 2>/dev/null; do   # wait was cut short by a signal: the command's own status follows
    wait "$child"
    rc=$?
done
t1=$(date +%s.%N)
printf '# end: %s\n# seconds: %s\n# exit: %d\n' "$(now)" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
    "$rc" >> "$log"
if ((rc != 0)); then
    {
        printf 'local.sh: exit %d:' "$rc"
        printf ' %q' "$@"
        printf '\nlocal.sh: the end of %s:\n' "$log"
        tail -n 6 -- "$log" | sed 's/^/  /'
    } >&2
fi
exit "$rc"
