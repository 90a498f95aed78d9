#!/usr/bin/env bash
# Does the gold's head convention decide which side of the baselines the DMV lands on? (README "Function
# heads"; needs ../shared/data.)  One protocol for every treebank file we have, Klein & Manning's transductive
# one: the DMV (UPOS, punctuation removed, km-global harmonic initialiser) trained by EM (EM_ITER iterations,
# default 100) on a file's sentences of <= 10 words and scored by MBR on the same sentences, against the file's
# UD heads (content heads) and against the file re-headed by `grind function-heads` (function heads), each
# beside its own attach-right / attach-left baselines.  Training reads only the tags, so one grammar and one
# set of parses per file; only the gold differs.  Files: every UD test set here, and the dev set where the
# test set is held out (Czech, Japanese) or where there is no other.
# Usage: data-recipes/heads-results.sh [OUTDIR]; env FILES (names below), EM_ITER.  Prints a TSV to stdout.
set -eEuo pipefail
exec 3>&2
trap 'rc=$?; echo "$(basename "$0"): a step failed (exit $rc); see the .log files in ${out:-.}" >&3; trap - ERR' ERR
shared=${SHARED:-../shared/data}
out=${1:-results/heads}
mkdir -p "$out"
declare -A FILE=(
  [en-ewt-test]=$shared/UD_English-EWT/en_ewt-ud-test.conllu
  [en-childes-dev]=$shared/UD_English-CHILDES/en_childes-ud-dev.conllu
  [de-gsd-test]=$shared/UD_German-GSD/de_gsd-ud-test.conllu
  [pt-bosque-test]=$shared/UD_Portuguese-Bosque/pt_bosque-ud-test.conllu
  [cs-cac-dev]=$shared/UD_Czech-CAC/cs_cac-ud-dev.conllu
  [cs-fictree-dev]=$shared/UD_Czech-FicTree/cs_fictree-ud-dev.conllu
  [cs-cltt-dev]=$shared/UD_Czech-CLTT/cs_cltt-ud-dev.conllu
  [he-htb-test]=$shared/UD_Hebrew-HTB/he_htb-ud-test.conllu
  [tr-imst-test]=$shared/UD_Turkish-IMST/tr_imst-ud-test.conllu
  [ja-gsd-dev]=$shared/UD_Japanese-GSD/ja_gsd-ud-dev.conllu
  [zh-gsd-test]=$shared/UD_Chinese-GSD/zh_gsd-ud-test.conllu
)
FILES=${FILES:-"en-ewt-test en-childes-dev de-gsd-test pt-bosque-test cs-cac-dev cs-fictree-dev cs-cltt-dev he-htb-test tr-imst-test ja-gsd-dev zh-gsd-test"}
EM_ITER=${EM_ITER:-100}
source "$(dirname "$0")/settings.sh"
settings_stamp "$out" "EM_ITER=$EM_ITER"
for f in $FILES; do
  [[ -n ${FILE[$f]+x} ]] || { echo "heads-results.sh: unknown file '$f' in FILES (one of: ${!FILE[*]})" >&2; exit 2; }
done
C="--column UPOS --punct ud --max-length 10"
run() { echo "+ $*" >&2; "$@"; }
acc() { awk -F'\t' '$1 == "<=10" {printf "%.1f", 100*$4; exit}' "$1"; }
base() { awk -F'\t' -v b="attach-$2:<=10" '$1 == b {printf "%.1f", 100*$4; exit}' "$1"; }
overlap() { awk -F'\t' '$1 == "<=10" {printf "%.0f%%", 100*$7; exit}' "$1"; }
unparsed() { awk -F'\t' '$1 == "<=10" {print $6; exit}' "$1"; }
near() {  # eval-file label: grind eval's notes of a <= 10 score within 1 point of a baseline, one a line
  { grep '^# note: <=10 ' "$1" || true; } | sed "s/^# note: <=10 directed [0-9.]* is /$2 /; s/ attach-\([a-z]*\) [0-9.]*$/ attach-\1/"
}
echo -e "file\tsentences <= 10\tEM MBR (content heads)\tattach-right\tattach-left\tEM MBR (function heads)\tattach-right\tattach-left\toverlap with attach-right\tunparsed\tnote"
for f in $FILES; do
  d=$out/$f; mkdir -p "$d"; src=${FILE[$f]}
  [[ -s $d/fh.conllu ]] || run grind function-heads -o "$d/fh.conllu" "$src" 2>"$d/fh.log"
  if [[ ! -s $d/em.conllu ]]; then
    run grind make-grammar dmv $C -o "$d/dmv0.txt" "$src" 2>"$d/make.log"
    run grind init --harmonic --corpus "$src" $C -o "$d/dmv1.txt" "$d/dmv0.txt" 2>"$d/init.log"
    run grind train --algo em --iterations "$EM_ITER" --tolerance 0 $C -o "$d/em.txt" "$d/dmv1.txt" "$src" 2>"$d/train.log"
    run grind parse --mbr $C -o "$d/em.conllu" "$d/em.txt" "$src" 2>"$d/parse.log"
  fi
  run grind eval --digits 6 $C -o "$d/content.eval" "$src" "$d/em.conllu" 2>"$d/eval.log"
  run grind eval --digits 6 $C -o "$d/function.eval" "$d/fh.conllu" "$d/em.conllu" 2>>"$d/eval.log"
  n=$(awk -F'\t' '$1 == "<=10" {print $2; exit}' "$d/content.eval")
  echo -e "$f\t$n\t$(acc "$d/content.eval")\t$(base "$d/content.eval" right)\t$(base "$d/content.eval" left)\t$(acc "$d/function.eval")\t$(base "$d/function.eval" right)\t$(base "$d/function.eval" left)\t$(overlap "$d/content.eval")\t$(unparsed "$d/content.eval")\t$( (near "$d/content.eval" content; near "$d/function.eval" function) | paste -sd ';' -)"
done
