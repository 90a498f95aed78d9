#!/usr/bin/env bash
# sge.sh LOG COMMAND [ARG...]: run COMMAND as a Grid Engine job (qsub -sync y) and wait for it; exit with its
# status. The job runs local.sh LOG COMMAND... on its node (LOG as for a local run). An example to adapt: queue
# and resource names differ between sites. For a recipe: make -j 16 CMD=../launch/sge.sh JOB_TIME=1:00:00
# Resources (variables of the environment or of make's command line, each optional):
#   JOB_QUEUE  queue (-q)      JOB_TIME  -l h_rt=      JOB_MEM  -l h_vmem=      JOB_CPUS  -pe smp N
#   JOB_OPTIONS  more qsub options, split at spaces (e.g. "-P project")
# The job starts in this directory with this environment (-V); the job's own output goes to LOG.sge.
set -u
source "$(dirname -- "$0")/job.sh"
opts=(-sync y -V -S /bin/sh -N "$name" -j y -o "$log.sge")
[[ -n ${JOB_QUEUE:-} ]] && opts+=(-q "$JOB_QUEUE")
[[ -n ${JOB_TIME:-} ]] && opts+=(-l "h_rt=$JOB_TIME")
[[ -n ${JOB_MEM:-} ]] && opts+=(-l "h_vmem=$JOB_MEM")
[[ -n ${JOB_CPUS:-} ]] && opts+=(-pe smp "$JOB_CPUS")
qsub "${opts[@]}" "${extra[@]}" <<< "$script" > /dev/null
finished $? sge
