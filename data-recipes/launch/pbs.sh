#!/usr/bin/env bash
# pbs.sh LOG COMMAND [ARG...]: run COMMAND as a PBS Pro job (qsub -W block=true) and wait for it; exit with its
# status. The job runs local.sh LOG COMMAND... on its node (LOG as for a local run). An example to adapt (Torque's
# qsub cannot block; resource names differ between sites). For a recipe: make -j 16 CMD=../launch/pbs.sh
# Resources (variables of the environment or of make's command line, each optional):
#   JOB_QUEUE  queue (-q)      JOB_TIME  -l walltime=      JOB_MEM, JOB_CPUS  -l select=1:ncpus=N:mem=M
#   JOB_OPTIONS  more qsub options, split at spaces (e.g. "-A project")
# The job starts in this directory with this environment (-V); the job's own output goes to LOG.pbs.
set -u
source "$(dirname -- "$0")/job.sh"
opts=(-W block=true -V -N "${name:0:15}" -j oe -o "$log.pbs")
[[ -n ${JOB_QUEUE:-} ]] && opts+=(-q "$JOB_QUEUE")
[[ -n ${JOB_TIME:-} ]] && opts+=(-l "walltime=$JOB_TIME")
select=select=1${JOB_CPUS:+:ncpus=$JOB_CPUS}${JOB_MEM:+:mem=$JOB_MEM}
[[ $select != select=1 ]] && opts+=(-l "$select")
qsub "${opts[@]}" "${extra[@]}" <<< "$script" > /dev/null
finished $? pbs
