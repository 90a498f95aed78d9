#!/usr/bin/env bash
# The issue-5 comparison recorded in README.md (needs ../shared/data): Cohen & Smith (2010, Table 1)'s
# protocol on four UD treebanks -- train the DMV on train <= 10 (UPOS, punctuation removed, harmonic
# initialiser), decode test with MBR, directed attachment accuracy on test <= 10 / <= 20 / all:
#   MLE (EM), Dirichlet VB, LN-I (identity, families), SLN (TieV, TieN, TieV&N, TieA; families
#   covariance), one bilingual pair (English + Chinese, TieA), and on Chinese the posterior-mixture
#   components of Cohen & Smith (2009).
# Logistic-normal runs go to convergence (grind's ln default: relative change of the bound <= 1e-5, at
# most 1000 iterations; LN_ITER=N caps them at N instead) with Algorithm 1's early stop on dev <= 10
# (PATIENCE=K: stop after K evaluations in a row below the best instead, keeping the best; default 1).
# Method ln-families-newton-nostop (not in the default ORDER): the Newton M-step without the early stop, dev
# scored every 5 iterations into the trace (README's IMST paragraph: TREEBANKS=tr PARTS=main LN_ITER=100
# ORDER=ln-families-newton-nostop).
# Methods ln2-families and ln2-families-1cycle (not in the default ORDER): LN model II (theta drawn once for the
# corpus), with the paper's 5 E-step cycles, and with 1 cycle and warm starts (one parse an iteration);
# ln-families-1cycle and ln-families-newton-1cycle: model I with 1 cycle an iteration and warm starts.
# SLN runs tie choose and stop multinomials after 5 untied iterations (grind's defaults). Mixtures run over
# the logistic-normal mean-field base (families covariance), schedule I, 20 iterations (the paper's).
# MIX_VB=1 adds every mixture component over the Dirichlet VB base (alpha ALPHA) and that base at the same 20 iterations.
# Every treebank also gets its attach-right / attach-left rows, and every row its overlap with attach-right.
#   Part "extra" (Chinese): LN model II, and committee decoding (10 grammars drawn from the learned
#   LN-I families prior, mean and spread of the members).
#   Part "wsj": the same methods on the NLTK Penn Treebank sample's WSJ10 sentences with PTB tags and
#   the PTB families (the paper's tag set; trained and scored on the same sentences, Klein & Manning's
#   WSJ10 protocol; no dev set, so no early stop).
#   Part "wsjsize" (a diagnostic for the README's open question whether the logistic normal gains from more
#   training sentences where EM does not): EM and LN-I families with the Newton M-step (the closest LN-families
#   row) trained on every 4th, every 2nd and every one of the sample's WSJ10 sentences (WSJSIZE_STEPS, default
#   "4 2 1": nested sets), all scored on the smallest set, which every model was trained on (train = test as in
#   part wsj, and no grammar meets a sentence it never saw: EM gives unseen configurations probability 0); the
#   grammar and harmonic initialiser of each size are made from its own sentences (the subsets are chosen with grind's
#   own reader: run with grind's environment active, e.g. `source .venv/bin/activate`, so python3 imports grind).
#   Part "wsjplus" (the next doubling of that diagnostic, with the data we have): the sample's WSJ10 sentences
#   plus every English-EWT training sentence of <= 10 words after PTB punctuation removal whose XPOS tags are
#   all PTB tags (EWT's web-text extras HYPH, NFP, ADD, GW, AFX, XX drop a sentence) -- about WSJ10's size --
#   trained with their own grammar and km-global initialiser, scored on the WSJ10 sample as in part wsj
#   (WSJPLUS_METHODS, default "mle ln-families-newton"; python3 must import grind, as for wsjsize).
# A finished run (its .eval file exists) is not run again: rerunning the recipe resumes it.
# Function heads: treebank TB-fh (ewt-fh pt-fh tr-fh zh-fh) is TB's train / dev / test re-headed by
# `grind function-heads` (words whose relation is case, mark, aux, auxpass, aux:pass or cop head their phrases, as in
# the papers' Penn2Malt-style treebanks), converted once into OUTDIR/converted/; every model and baseline of TB-fh is
# trained and scored on the converted files.  (Training reads only the tags, so TB-fh's grammars and parses are
# TB's: only the gold trees and the baselines' scores differ; a TB-fh run repeats TB's training.)  zh-ctb: Chinese
# re-headed with the relations that name the Chinese Treebank's Penn2Malt heads in UD Chinese r1.4 (case, case:dec
# = DEC/DEG, cop = VC, aux = modal VV, auxpass and aux:caus = LB/BA), leaving out r1.4's mark, which is mostly
# adverbs and verbs there (AD and VV are dependents in CTB).  MIXTB=zh-fh or zh-ctb runs part mixture on them
# (default zh).  Converted files made by another rule (an older grind) are refused: remove them and their results.
# Usage: data-recipes/ln-results.sh [OUTDIR]; env TREEBANKS="ewt pt tr zh" PARTS="main joint mixture extra wsj"
# (also wsjsize, wsjplus), ORDER (methods, below), LN_ITER, EM_ITER (EM / VB iterations, default 100), JOINT_ITER,
# ALPHA, PATIENCE, MIXTURES, MIXTB; prints a TSV summary to stdout.  Part extra is run again on every call (no resume).
set -eEuo pipefail
# a failed step's error is in its .log (its stderr): say which, and show the end of the newest log
exec 3>&2                     # the script's own stderr: a step's may be its .log when the trap runs
trap 'rc=$?; echo "$(basename "$0"): a step failed (exit $rc); the newest log:" >&3
      l=$(ls -t "${out:-.}"/*.log "${out:-.}"/*/*.log 2>/dev/null | head -1) || true
      [[ -n $l ]] && { echo "== $l" >&3; tail -5 "$l" >&3; }; trap - ERR' ERR
shared=${SHARED:-../shared/data}
out=${1:-results/ln}
mkdir -p "$out"
declare -A TRAIN=(
  [ewt]=$shared/UD_English-EWT/en_ewt-ud-train.conllu.xz
  [pt]=$shared/UD_Portuguese-Bosque/pt_bosque-ud-train.conllu.xz
  [tr]=$shared/UD_Turkish-IMST/tr_imst-ud-train.conllu
  [zh]=$shared/UD_Chinese-GSD/r1.4/zh-ud-train.conllu
)
declare -A DEV=(
  [ewt]=$shared/UD_English-EWT/en_ewt-ud-dev.conllu
  [pt]=$shared/UD_Portuguese-Bosque/pt_bosque-ud-dev.conllu
  [tr]=$shared/UD_Turkish-IMST/tr_imst-ud-dev.conllu
  [zh]=$shared/UD_Chinese-GSD/r1.4/zh-ud-dev.conllu
)
declare -A TEST=(
  [ewt]=$shared/UD_English-EWT/en_ewt-ud-test.conllu
  [pt]=$shared/UD_Portuguese-Bosque/pt_bosque-ud-test.conllu
  [tr]=$shared/UD_Turkish-IMST/tr_imst-ud-test.conllu
  [zh]=$shared/UD_Chinese-GSD/r1.4/zh-ud-test.conllu
)
declare -A RELATIONS=([zh-ctb]=case,case:dec,cop,aux,auxpass,aux:caus)   # grind function-heads --relations
for tb in ewt-fh pt-fh tr-fh zh-fh zh-ctb; do   # re-headed by grind function-heads (made by prepare)
  for part in TRAIN DEV TEST; do
    declare -n arr=$part; arr[$tb]=$out/converted/$tb-${part,,}.conllu
  done
done
unset -n arr
TREEBANKS=${TREEBANKS-"ewt pt tr zh"}   # set and empty: none (e.g. PARTS=wsj alone)
MIXTB=${MIXTB:-zh}                      # the treebank of part mixture (zh, zh-fh or zh-ctb)
PARTS=${PARTS:-"main joint mixture extra wsj"}
ALPHA=${ALPHA:-0.1}
EM_ITER=${EM_ITER:-100}
LN_ITER=${LN_ITER:-}
LNI=${LN_ITER:+--iterations $LN_ITER}
C="--column UPOS --punct ud"
T10="$C --max-length 10"
PATIENCE=${PATIENCE:-1}
STOP="--eval-every 1 --early-stop --patience $PATIENCE"
declare -A METHODS=(
  [mle]="--algo em --iterations $EM_ITER"
  [dirichlet]="--algo vb --alpha $ALPHA --iterations $EM_ITER"
  [ln-identity]="--algo ln $LNI --cov identity"
  [ln-families]="--algo ln $LNI --cov families"
  [ln-families-newton]="--algo ln $LNI --cov families --ln-mstep newton"
  [ln-families-newton-nostop]="--algo ln $LNI --cov families --ln-mstep newton"
  [sln-tiev]="--algo ln $LNI --cov families --tie V"
  [sln-tien]="--algo ln $LNI --cov families --tie N"
  [sln-tievn]="--algo ln $LNI --cov families --tie VN"
  [sln-tiea]="--algo ln $LNI --cov families --tie A"
  [sln-tievn-newton]="--algo ln $LNI --cov families --tie VN --ln-mstep newton"
  [ln-families-1cycle]="--algo ln $LNI --cov families --ln-cycles 1 --ln-warm"
  [ln-families-newton-1cycle]="--algo ln $LNI --cov families --ln-mstep newton --ln-cycles 1 --ln-warm"
  [ln2-families]="--algo ln --model 2 $LNI --cov families"
  [ln-families-warm]="--algo ln $LNI --cov families --ln-warm"
  [ln-families-newton-warm]="--algo ln $LNI --cov families --ln-mstep newton --ln-warm"
  [sln-tievn-newton-warm]="--algo ln $LNI --cov families --tie VN --ln-mstep newton --ln-warm"
  [ln2-families-1cycle]="--algo ln --model 2 $LNI --cov families --ln-cycles 1 --ln-warm"
)
ORDER=${ORDER:-"mle dirichlet ln-identity ln-families sln-tiev sln-tien sln-tievn sln-tiea"}
source "$(dirname "$0")/settings.sh"
settings_stamp "$out" "EM_ITER=$EM_ITER" "LN_ITER=$LN_ITER" "ALPHA=$ALPHA" "PATIENCE=$PATIENCE" \
    "JOINT_ITER=${JOINT_ITER:-}" "WSJSIZE_STEPS=${WSJSIZE_STEPS:-4 2 1}"
MIXTURES=${MIXTURES:-"RA AR LC VAR NS SD RA+VAR+SD"}
run() { echo "+ $*" >&2; "$@"; }
ptb_families() {  # --families ptb for the methods that read a family map (--cov families, --tie, mixtures)
  [[ ${METHODS[$1]} == *"--cov families"* || ${METHODS[$1]} == *"--tie "* || ${METHODS[$1]} == *"--algo mixture"* ]] &&
    echo "--families ptb"; true
}
for m in $ORDER; do
  [[ -n ${METHODS[$m]+x} ]] || { echo "ln-results.sh: unknown method '$m' in ORDER (one of: ${!METHODS[*]})" >&2; exit 2; }
done
for tb in $TREEBANKS; do
  [[ -n ${TRAIN[$tb]+x} ]] || { echo "ln-results.sh: unknown treebank '$tb' in TREEBANKS (one of: ${!TRAIN[*]})" >&2; exit 2; }
done
[[ $MIXTB == zh || $MIXTB == zh-fh || $MIXTB == zh-ctb ]] ||
  { echo "ln-results.sh: MIXTB is zh, zh-fh or zh-ctb, not '$MIXTB'" >&2; exit 2; }
acc() { awk -F'\t' '$1 ~ /^(<=10|<=20|all)$/ && !seen[$1]++ {printf "%s%.1f", (n++?"/":""), 100*$4}' "$1"; }
overlap() { awk -F'\t' '$1 == "all" {printf "%.0f%%", 100*$7; exit}' "$1"; }
pright() {  # the significance test's p of the directed accuracy (all) against attach-right, or - if not run
  awk -F'\t' '$2 == "attach-right" && $3 == "directed:all" {p = $7} END {print (p == "" ? "-" : p)}' "$1"; }
steps() { grep -v '^#' "$1" | tail -1 | awk -F'\t' '{printf "%s\t%.0f", $1, $4}'; }
unparsed() { awk -F'\t' '$1 == "all" {print $6; exit}' "$1"; }   # test sentences without a parse (scored 0)
baselines() {  # tb: the attach-right / attach-left rows of its test set
  for a in right left; do
    grind baseline --attach $a $C -o "$out/$1/$a.conllu" "${TEST[$1]}"
    grind eval --digits 6 $C -o "$out/$1/$a.eval" "${TEST[$1]}" "$out/$1/$a.conllu"
    echo -e "$1\tattach-$a (baseline)\t$(acc "$out/$1/$a.eval")\t-\t-\t-\t-\t-"
  done
}
evaluate() {  # tb grammar name trace
  run grind parse --mbr $C -o "$2.conllu" "$2" "${TEST[$1]}" 2>"${2%.txt}.parse.log"
  run grind eval --digits 6 $C --significance -o "$2.eval" "${TEST[$1]}" "$2.conllu"
  echo -e "$1\t$3\t$(acc "$2.eval")\t$(overlap "$2.eval")\t$(steps "$4")\t$(pright "$2.eval")\t$(unparsed "$2.eval")"
}
done_before() {  # tb grammar name trace: print the row of a finished run
  [[ -s $2.eval && -s $4 ]] || return 1
  echo -e "$1\t$3\t$(acc "$2.eval")\t$(overlap "$2.eval")\t$(steps "$4")\t$(pright "$2.eval")\t$(unparsed "$2.eval")"
}
wsj_sample() {  # file: the NLTK PTB sample's .dp files in one file (blank line between files), made once
  [[ -s $1 ]] || for f in "$shared"/nltk_ptb_sample/dependency_treebank/wsj_*.dp; do cat "$f"; echo; done > "$1"
}
conversion_line() {  # relations: the '# conversion:' header line grind function-heads writes with them
  printf '1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n' | grind function-heads ${1:+--relations $1} - 2>/dev/null |
    grep '^# conversion:'
}
prepare() {  # tb
  local d=$out/$1
  mkdir -p "$d"
  if [[ $1 == *-fh || $1 == zh-ctb ]]; then   # function heads: convert the base treebank's three files once
    mkdir -p "$out/converted"
    local part base=${1%-*} from rule
    rule=$(conversion_line "${RELATIONS[$1]:-}")
    for part in TRAIN DEV TEST; do
      declare -n to=$part
      if [[ -s ${to[$1]} ]]; then   # made before: by this grind's rule, or the results there are another gold's
        grep -qxF -- "$rule" <(head -20 "${to[$1]}") && continue
        echo "ln-results.sh: ${to[$1]} was converted by another rule than this grind's ($rule): remove" \
             "$out/converted and $out/$1 and run again" >&2; exit 2
      fi
      from=$part; declare -n src=$from
      run grind function-heads ${RELATIONS[$1]:+--relations ${RELATIONS[$1]}} -o "${to[$1]}" "${src[$base]}" \
          2>"${to[$1]%.conllu}.log"
    done
  fi
  [[ -s $d/dmv-harmonic.txt ]] && return
  run grind make-grammar dmv $T10 -o "$d/dmv0.txt" "${TRAIN[$1]}"
  run grind init --harmonic --corpus "${TRAIN[$1]}" $T10 -o "$d/dmv-harmonic.txt" "$d/dmv0.txt"
}

echo -e "treebank\tmethod\tdirected MBR <=10/<=20/all\toverlap with attach-right (all)\tsteps\tseconds\tp vs attach-right (all; paired randomization)\tunparsed test sentences"
for tb in $TREEBANKS; do
  prepare "$tb"
  baselines "$tb"
  [[ " $PARTS " == *" main "* ]] || continue
  for m in $ORDER; do
    o=$out/$tb/$m
    stop=""; [[ $m == mle || $m == dirichlet ]] || stop="--dev ${DEV[$tb]} $STOP"
    [[ $m == *-nostop ]] && stop="--dev ${DEV[$tb]} --eval-every 5"   # no early stop; dev figures in the trace
    done_before "$tb" "$o.txt" "$m" "$o.tsv" && continue
    run grind train ${METHODS[$m]} $stop --seed 1 $T10 --trace "$o.tsv" -o "$o.txt" "$out/$tb/dmv-harmonic.txt" "${TRAIN[$tb]}" 2>"$o.log"
    evaluate "$tb" "$o.txt" "$m" "$o.tsv"
  done
done

if [[ " $PARTS " == *" joint "* ]]; then
  prepare ewt; prepare zh
  o=$out/joint-ewt-zh
  if done_before ewt "$o-ewt.txt" "bilingual ewt+zh TieA" "$o.tsv"; then
    done_before zh "$o-zh.txt" "bilingual ewt+zh TieA" "$o.tsv"
  else
  run grind train --algo ln ${JOINT_ITER:+--iterations $JOINT_ITER} $LNI --cov families --tie A --seed 1 $T10 \
      --joint "$out/zh/dmv-harmonic.txt" "${TRAIN[zh]}" --joint-output "$o-zh.txt" \
      --trace "$o.tsv" -o "$o-ewt.txt" "$out/ewt/dmv-harmonic.txt" "${TRAIN[ewt]}" 2>"$o.log"
  evaluate ewt "$o-ewt.txt" "bilingual ewt+zh TieA" "$o.tsv"
  evaluate zh "$o-zh.txt" "bilingual ewt+zh TieA" "$o.tsv"
  fi
fi

if [[ " $PARTS " == *" mixture "* ]]; then
  prepare $MIXTB
  o=$out/$MIXTB/mixture-base-ln20      # the unconstrained base at the mixtures' budget (the paper's "LN, mean-field")
  if ! done_before $MIXTB "$o.txt" "LN-I families, 20 iterations (mixture base)" "$o.tsv"; then
    run grind train --algo ln --iterations 20 --cov families --seed 1 $T10 --trace "$o.tsv" \
        -o "$o.txt" "$out/$MIXTB/dmv-harmonic.txt" "${TRAIN[$MIXTB]}" 2>"$o.log"
    evaluate $MIXTB "$o.txt" "LN-I families, 20 iterations (mixture base)" "$o.tsv"
  fi
  for k in $MIXTURES; do
    o=$out/$MIXTB/mixture-$k
    done_before $MIXTB "$o.txt" "mixture $k" "$o.tsv" && continue
    run grind train --algo mixture --base ln --cov families --constraints "$k" --seed 1 $T10 --trace "$o.tsv" \
        -o "$o.txt" "$out/$MIXTB/dmv-harmonic.txt" "${TRAIN[$MIXTB]}" 2>"$o.log"
    evaluate $MIXTB "$o.txt" "mixture $k" "$o.tsv"
  done
  for v in "schedule II:--mix-schedule II --cov families" "schedule III:--mix-schedule III --cov families" \
           "base vb:--base vb --alpha $ALPHA" "base em:--base em"; do   # RA+VAR+SD under the other schedules and bases
    name=${v%%:*}; o=$out/$MIXTB/mixture-RA+VAR+SD-${name// /-}
    done_before $MIXTB "$o.txt" "mixture RA+VAR+SD, $name" "$o.tsv" && continue
    run grind train --algo mixture --constraints RA+VAR+SD ${v#*:} --seed 1 $T10 --trace "$o.tsv" \
        -o "$o.txt" "$out/$MIXTB/dmv-harmonic.txt" "${TRAIN[$MIXTB]}" 2>"$o.log"
    evaluate $MIXTB "$o.txt" "mixture RA+VAR+SD, $name" "$o.tsv"
  done
  if [[ ${MIX_VB:-0} == 1 ]]; then   # every component over the Dirichlet VB base too, beside VB at the same 20 iterations
    o=$out/$MIXTB/mixture-base-vb20
    if ! done_before $MIXTB "$o.txt" "Dirichlet VB, 20 iterations (mixture base vb)" "$o.tsv"; then
      run grind train --algo vb --alpha $ALPHA --iterations 20 --seed 1 $T10 --trace "$o.tsv" \
          -o "$o.txt" "$out/$MIXTB/dmv-harmonic.txt" "${TRAIN[$MIXTB]}" 2>"$o.log"
      evaluate $MIXTB "$o.txt" "Dirichlet VB, 20 iterations (mixture base vb)" "$o.tsv"
    fi
    for k in $MIXTURES; do
      o=$out/$MIXTB/mixture-$k-base-vb
      done_before $MIXTB "$o.txt" "mixture $k, base vb" "$o.tsv" && continue
      run grind train --algo mixture --base vb --alpha $ALPHA --constraints "$k" --seed 1 $T10 \
          --trace "$o.tsv" -o "$o.txt" "$out/$MIXTB/dmv-harmonic.txt" "${TRAIN[$MIXTB]}" 2>"$o.log"
      evaluate $MIXTB "$o.txt" "mixture $k, base vb" "$o.tsv"
    done
  fi
fi

if [[ " $PARTS " == *" extra "* ]]; then
  prepare zh
  tb=zh; o=$out/zh/ln2-families
  run grind train --algo ln --model 2 $LNI --cov families --dev "${DEV[zh]}" $STOP --seed 1 $T10 \
      --trace "$o.tsv" -o "$o.txt" "$out/zh/dmv-harmonic.txt" "${TRAIN[zh]}" 2>"$o.log"
  evaluate zh "$o.txt" "ln-II families" "$o.tsv"
  o=$out/zh/committee
  run grind train --algo ln $LNI --cov families --dev "${DEV[zh]}" $STOP --seed 1 $T10 \
      --ln-params "$o.params" --trace "$o.tsv" -o "$o.txt" "$out/zh/dmv-harmonic.txt" "${TRAIN[zh]}" 2>"$o.log"
  for s in 1 2 3 4 5 6 7 8 9 10; do
    run grind parse --mbr --committee "$o.params" --seed $s $C -o "$o.m$s.conllu" "$o.txt" "${TEST[zh]}" 2>"$o.m$s.parse.log"
  done
  run grind eval --digits 6 $C -o "$o.eval" "${TEST[zh]}" "$o".m*.conllu
  echo -e "zh\tcommittee of 10 (LN-I families), mean+-sd\t$(awk -F'\t' '/^# [0-9]+ runs/{f=1; next} f && $1 ~ /^(<=|all)/{printf "%s%.1f+-%.1f", (n++?"/":""), 100*$2, 100*$3}' "$o.eval")\t-\t$(steps "$o.tsv")\t-"
fi

if [[ " $PARTS " == *" wsj "* ]]; then
  d=$out/wsj; mkdir -p "$d"
  ptb=$d/wsj-sample.dp
  wsj_sample "$ptb"
  TRAIN[wsj]=$ptb; TEST[wsj]=$ptb
  C="--column XPOS --punct ptb --max-length 10"; T10="$C"     # WSJ10: train and score <= 10
  prepare wsj
  baselines wsj
  for m in $ORDER; do
    o=$d/$m
    done_before wsj "$o.txt" "$m" "$o.tsv" && continue
    run grind train ${METHODS[$m]} $(ptb_families "$m") --seed 1 $T10 --trace "$o.tsv" -o "$o.txt" "$d/dmv-harmonic.txt" "$ptb" 2>"$o.log"
    evaluate wsj "$o.txt" "$m" "$o.tsv"
  done
fi

if [[ " $PARTS " == *" wsjsize "* ]]; then
  d=$out/wsjsize; mkdir -p "$d"
  ptb=$d/wsj-sample.dp
  wsj_sample "$ptb"
  C="--column XPOS --punct ptb --max-length 10"; T10="$C"
  steps_=${WSJSIZE_STEPS:-4 2 1}
  for k in $steps_; do        # every k-th sentence grind's reader keeps under $C (nested sets), blocks copied whole
    python3 - "$ptb" "$k" > "$d/wsj10-every$k.dp" <<'PY'
import sys
from grind.formats.corpus import CorpusSpec, read_corpus
path, k = sys.argv[1], int(sys.argv[2])
kept = read_corpus(path, CorpusSpec(column="XPOS", punct="ptb", max_length=10))
keep = {s.number for i, s in enumerate(kept) if i % k == 0}
blocks = [b.strip("\n") for b in open(path, encoding="utf-8").read().split("\n\n") if b.strip()]
sys.stdout.write("".join(b + "\n\n" for n, b in enumerate(blocks, 1) if n in keep))
PY
  done
  kmax=$(printf '%s\n' $steps_ | sort -n | tail -1)
  for k in $steps_; do      # each size its own grammar and harmonic initialiser; scored on the smallest set
    tb=wsjsize/every$k; TRAIN[$tb]=$d/wsj10-every$k.dp; TEST[$tb]=$d/wsj10-every$kmax.dp
    prepare "$tb"
    [[ $k == "$kmax" ]] && baselines "$tb"
    for m in mle ln-families-newton; do
      o=$out/$tb/$m
      done_before "$tb" "$o.txt" "$m, trained on every ${k}-th sentence" "$o.tsv" && continue
      run grind train ${METHODS[$m]} $(ptb_families "$m") --seed 1 $T10 --trace "$o.tsv" -o "$o.txt" "$out/$tb/dmv-harmonic.txt" \
          "${TRAIN[$tb]}" 2>"$o.log"
      evaluate "$tb" "$o.txt" "$m, trained on every ${k}-th sentence" "$o.tsv"
    done
  done
fi

if [[ " $PARTS " == *" wsjplus "* ]]; then
  d=$out/wsjplus; mkdir -p "$d"
  ptb=$d/wsj-sample.dp
  wsj_sample "$ptb"
  if [[ ! -s $d/wsjplus.dp ]]; then
    python3 - "${TRAIN[ewt]}" > "$d/ewt10-ptbtags.dp" <<'PY'
import sys
from grind.formats.corpus import CorpusSpec, read_corpus
from grind.grammars.families import read_families
ptb = {t for t, fam in read_families("ptb").items() if fam != "punctuation"}
kept = read_corpus(sys.argv[1], CorpusSpec(column="XPOS", punct="ptb", max_length=10))
n = 0
for s in kept:               # FORM, XPOS, HEAD 0 (punctuation removed; training reads no heads, nothing scores EWT)
    if s.tokens and all(t in ptb for t in s.tokens):
        sys.stdout.write("".join(f"{r[1]}\t{r[4]}\t0\n" for r in s.rows) + "\n")
        n += 1
print(f"wsjplus: {n} of {len(kept)} EWT training sentences <= 10 kept (every XPOS a PTB tag)", file=sys.stderr)
PY
    cat "$ptb" "$d/ewt10-ptbtags.dp" > "$d/wsjplus.dp"
  fi
  C="--column XPOS --punct ptb --max-length 10"; T10="$C"
  tb=wsjplus; TRAIN[$tb]=$d/wsjplus.dp; TEST[$tb]=$ptb
  prepare "$tb"
  baselines "$tb"
  for m in ${WSJPLUS_METHODS:-mle ln-families-newton}; do
    o=$d/$m
    done_before "$tb" "$o.txt" "$m, trained on WSJ10 sample + EWT <= 10" "$o.tsv" && continue
    run grind train ${METHODS[$m]} $(ptb_families "$m") --seed 1 $T10 --trace "$o.tsv" -o "$o.txt" "$d/dmv-harmonic.txt" \
        "${TRAIN[$tb]}" 2>"$o.log"
    evaluate "$tb" "$o.txt" "$m, trained on WSJ10 sample + EWT <= 10" "$o.tsv"
  done
fi
