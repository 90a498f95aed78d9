#!/usr/bin/env bash
# Rebuild the UD English-EWT sample shipped in data/ewt/ from ../shared/data (UD v2.16).
# The first 2,000 sentences of train and the first 500 of dev and of test, CoNLL-U, gzipped.
set -euo pipefail
src=${1:-../shared/data/UD_English-EWT}
out=${2:-data/ewt}
mkdir -p "$out"
first() { awk -v n="$1" 'BEGIN{RS=""; ORS="\n\n"} NR<=n'; }
xz -dc "$src/en_ewt-ud-train.conllu.xz" | first 2000 | gzip -n -9 > "$out/en_ewt-ud-train-sample.conllu.gz"
first 500 < "$src/en_ewt-ud-dev.conllu" | gzip -n -9 > "$out/en_ewt-ud-dev-sample.conllu.gz"
first 500 < "$src/en_ewt-ud-test.conllu" | gzip -n -9 > "$out/en_ewt-ud-test-sample.conllu.gz"
cp "$src/LICENSE.txt" "$out/LICENSE.txt"
