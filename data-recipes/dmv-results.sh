#!/usr/bin/env bash
# The DMV results recorded in README.md (needs ../shared/data). Usage: data-recipes/dmv-results.sh [OUTDIR];
# env ITERATIONS (default 50; the CHILDES rows run 10).
# 1. UD English-EWT: EM + harmonic init on train <= 10 (UPOS, punctuation removed), evaluated on test
#    <= 10 / <= 20 / all with Viterbi and MBR decoding, beside the attach-left/right baselines.
# 2. Klein & Manning's protocol on the NLTK Penn Treebank sample: train and evaluate on its <= 10 sentences (XPOS).
# 3. Lexicalized DMV from words alone on UD English-CHILDES train (4-15 words): time per EM iteration.
set -euo pipefail
shared=${SHARED:-../shared/data}
out=${1:-results/dmv}
iters=${ITERATIONS:-50}
mkdir -p "$out"
run() { echo "+ $*" >&2; "$@"; }

ewt=$shared/UD_English-EWT
C="--column UPOS --punct ud"
run grind make-grammar dmv $C --max-length 10 -o "$out/ewt-dmv0.txt" "$ewt/en_ewt-ud-train.conllu.xz"
run grind init --harmonic --corpus "$ewt/en_ewt-ud-train.conllu.xz" $C --max-length 10 -o "$out/ewt-dmv1.txt" "$out/ewt-dmv0.txt"
run grind train --algo em --iterations "$iters" --tolerance 0 $C --max-length 10 --trace "$out/ewt-em.tsv" -o "$out/ewt-em.txt" \
    "$out/ewt-dmv1.txt" "$ewt/en_ewt-ud-train.conllu.xz"
for dec in viterbi mbr; do
  run grind parse --$dec $C -o "$out/ewt-test-$dec.conllu" "$out/ewt-em.txt" "$ewt/en_ewt-ud-test.conllu"
  run grind eval --digits 6 $C -o "$out/ewt-test-$dec.eval" "$ewt/en_ewt-ud-test.conllu" "$out/ewt-test-$dec.conllu"
done
for a in left right; do
  run grind baseline --attach $a $C -o "$out/ewt-test-$a.conllu" "$ewt/en_ewt-ud-test.conllu"
  run grind eval --digits 6 $C -o "$out/ewt-test-$a.eval" "$ewt/en_ewt-ud-test.conllu" "$out/ewt-test-$a.conllu"
done

ptb=$out/wsj-sample.dp
for f in "$shared"/nltk_ptb_sample/dependency_treebank/wsj_*.dp; do cat "$f"; echo; done > "$ptb"   # files lack a final blank line
P="--column XPOS --punct ptb --max-length 10"
run grind make-grammar dmv $P -o "$out/wsj10-dmv0.txt" "$ptb"
run grind init --harmonic --corpus "$ptb" $P -o "$out/wsj10-dmv1.txt" "$out/wsj10-dmv0.txt"
run grind train --algo em --iterations "$iters" --tolerance 0 $P --trace "$out/wsj10-em.tsv" -o "$out/wsj10-em.txt" "$out/wsj10-dmv1.txt" "$ptb"
for dec in viterbi mbr; do
  run grind parse --$dec $P -o "$out/wsj10-$dec.conllu" "$out/wsj10-em.txt" "$ptb"
  run grind eval --digits 6 $P -o "$out/wsj10-$dec.eval" "$ptb" "$out/wsj10-$dec.conllu"
done
for a in left right; do
  run grind baseline --attach $a $P -o "$out/wsj10-$a.conllu" "$ptb"
  run grind eval --digits 6 $P -o "$out/wsj10-$a.eval" "$ptb" "$out/wsj10-$a.conllu"
done

ch=$shared/UD_English-CHILDES/en_childes-derived-train.conllu.xz
L="--column LFORM --punct ud --min-length 4 --max-length 15"
run grind make-grammar dmv --lexicalized $L -o "$out/childes-lex0.txt" "$ch"
run grind init --harmonic --corpus "$ch" $L -o "$out/childes-lex1.txt" "$out/childes-lex0.txt"
run grind train --algo em --iterations 10 --tolerance 0 $L --trace "$out/childes-em.tsv" -o "$out/childes-em.txt" "$out/childes-lex1.txt" "$ch"
