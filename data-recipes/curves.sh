#!/usr/bin/env bash
# Learning curves for the README (docs/curves.png): the DMV on the shipped EWT sample (UPOS,
# punctuation removed, <= 10 words), harmonic initialisation, EM and VB (alpha 0.1) for 40
# iterations each, with held-out directed accuracy (Viterbi) on the dev sample every iteration, beside
# the attach-right baseline's accuracy on the same sentences (the test sample is not looked at).
# Needs matplotlib (pip install 'grind[plot]').  Writes the README's figure, PNG (default docs/curves.png in the
# repository), and its work files in OUT (default curves-out).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'import matplotlib' 2>/dev/null || { echo "curves.sh: needs matplotlib: pip install 'grind[plot]'" >&2; exit 1; }
out=${OUT:-curves-out}
png=${PNG:-docs/curves.png}
mkdir -p "$out" "$(dirname "$png")"
train=data/ewt/en_ewt-ud-train-sample.conllu.gz
dev=data/ewt/en_ewt-ud-dev-sample.conllu.gz
D="--column UPOS --punct ud --max-length 10"
run() { echo "+ $*" >&2; "$@"; }
run grind make-grammar dmv $D -o "$out/dmv0.txt" $train
run grind init --harmonic --corpus $train $D -o "$out/dmv1.txt" "$out/dmv0.txt"
run grind train --algo em --iterations 40 --dev $dev --eval-every 1 $D --trace "$out/em.tsv" -o "$out/em.txt" "$out/dmv1.txt" $train
run grind train --algo vb --alpha 0.1 --iterations 40 --dev $dev --eval-every 1 $D --trace "$out/vb.tsv" -o "$out/vb.txt" "$out/dmv1.txt" $train
# the attach-right baseline's directed accuracy on the same dev sentences, drawn beside the curves
run grind baseline --attach right $D -o "$out/right.conllu" $dev
right=$(grind eval --digits 6 --no-baselines $D $dev "$out/right.conllu" | awk -F'\t' '$1 == "all" {print $4}')
run grind plot --label "EM" --label "VB alpha=0.1" --reference "dev_directed=$right:attach-right" \
    -o "$png" "$out/em.tsv" "$out/vb.tsv"
