#!/usr/bin/env bash
# slurm.sh LOG COMMAND [ARG...]: run COMMAND as a SLURM job and wait for it; exit with its status. The job runs
# local.sh LOG COMMAND... on its node, so LOG has the command line, the node, the start and end time and the exit
# status as for a local run. For a recipe: make -j 16 CMD=../launch/slurm.sh JOB_TIME=1:00:00 JOB_MEM=4G
# Resources (variables of the environment or of make's command line, each optional):
#   JOB_QUEUE    partition (--partition)              JOB_TIME  time limit (--time, e.g. 1:00:00)
#   JOB_MEM      memory (--mem, e.g. 4G)              JOB_CPUS  CPUs of the task (--cpus-per-task)
#   JOB_OPTIONS  more sbatch / srun options, split at spaces (e.g. "--account=a --qos=q")
#   JOB_SUBMIT   sbatch (default: sbatch --wait, the job's own output in LOG.slurm) or srun
# The job starts in this directory with this environment; OUT must be on a file system the nodes share. An
# interrupted slurm.sh cancels its job (scancel).
set -u
source "$(dirname -- "$0")/job.sh"
opts=("--job-name=$name")
[[ -n ${JOB_QUEUE:-} ]] && opts+=("--partition=$JOB_QUEUE")
[[ -n ${JOB_TIME:-} ]] && opts+=("--time=$JOB_TIME")
[[ -n ${JOB_MEM:-} ]] && opts+=("--mem=$JOB_MEM")
[[ -n ${JOB_CPUS:-} ]] && opts+=("--cpus-per-task=$JOB_CPUS")
case ${JOB_SUBMIT:-sbatch} in
    sbatch)
        ids=$(mktemp) || exit
        sbatch --wait --parsable "--output=$log.slurm" "${opts[@]}" "${extra[@]}" <<< "$script" > "$ids" &
        pid=$!
        trap 'id=$(cut -d";" -f1 "$ids"); [[ -n $id ]] && scancel "$id"; kill -TERM "$pid" 2>/dev/null' TERM INT HUP
        wait "$pid"
        rc=$?
        while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
        rm -f -- "$ids"
        finished "$rc" slurm ;;
    srun)
        exec srun "${opts[@]}" "${extra[@]}" "$here/local.sh" "$@" ;;
    *)
        echo "slurm.sh: JOB_SUBMIT is sbatch or srun, not '$JOB_SUBMIT'" >&2
        exit 2 ;;
esac
