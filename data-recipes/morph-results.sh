#!/usr/bin/env bash
# Issue 13: Johnson, Griffiths & Goldwater (2007)'s morphological segmentation experiment on Czech
# (README "Morphology: ..."; needs $SHARED/sigmorphon2022_segmentation).
# Protocol:
#   data   SIGMORPHON 2022 Czech word-level segmentation: ces.word.train.tsv (30,694 types; the 2 multi-word
#          entries 'poroučeti (se)', 'státi (se)' are skipped by grind's reader, 30,692 left) and
#          ces.word.dev.tsv (4,000 types).  The test gold is not used.
#   grammar grind make-grammar morph --chars (templates --template-set TEMPLATE_SET, default czech: Word --> [Pre]
#          Stem Suf{0..3}; czech-long: Pre{0..2} Stem Suf{0..5}; shared substrings of any length) over the words
#          of train AND dev (first column only: unsupervised, the gold column is never read), so that every dev
#          word has a derivation.
#   train  on the train words only (one type each, first column; unsupervised).
#          EM (maximum likelihood, alpha = 1), collapsed Hastings annealed (--temp-start TEMP, linearly
#          to 1 over the first ANNEAL sweeps) at alpha = ALPHAS (Johnson et al.'s 1 .. 1e-5, continued down to
#          1e-50: on Czech the best alpha of their grid was its smallest, so the grid goes on until dev boundary F
#          turns down), and VB / collapsed VB / the Gibbs sampler
#          (annealed as Hastings) at the best alpha, MAP-EM at MAP_ALPHAS (default 1e-1 and the best alpha);
#          all run PASSES passes (EM / VB iterations, CVB / Hastings sweeps; --tolerance 0: EM and VB stop
#          earlier only at an exact fixed point, where further iterations change nothing).  Hastings uses
#          --proposal-batch PB when this grind has the option.  Seeds: SEEDS at every alpha, BEST_SEEDS
#          at the best alpha (Hastings and CVB; EM and VB are deterministic: one run).
#          Best alpha = the Hastings alpha with the highest dev boundary F (Viterbi, seed 1), unless
#          BEST_ALPHA is given: this is model selection on dev, there is no other held-out split here.
#          The BEST_SEEDS runs of Hastings, of CVB, and of both together are also decoded as committees: MBR over
#          their boundary posteriors averaged (grind parse --segment --mbr --average), cut at 0.5 (.mbr) and at the
#          threshold of maximum expected boundary F (--expected-f, .mbrf); files {algos}-a{alpha}-committee_{seeds}.*.
#   decode dev with Viterbi and with --mbr (maximum expected boundary accuracy) under the posterior mean
#          (EM: its probabilities); score with grind eval --digits 6 --segmentation (morph P/R/F over spans, exact,
#          internal-boundary P/R/F, overlap with the one-morph / every-character baselines), and the
#          held-out per-character perplexity of dev with grind loglik --summary (EM: its unparsed dev
#          words -- substrings unseen in train have probability 0 -- are counted and left out of it).
#   Morfessor Baseline 2.0 (optional: only when morfessor is installed; the recipe installs nothing):
#          trained with its defaults on the train word types (count 1 each), dev segmented with
#          viterbi_segment, scored by the same grind eval.
# A finished step (its trained grammar, .eval or .ppl exists) is not run again: rerunning resumes.  Prints a TSV summary to stdout.
# Usage: data-recipes/morph-results.sh [OUTDIR]; env PASSES ALPHAS SEEDS BEST_SEEDS BEST_ALPHA TEMP ANNEAL PB
#   CVB_PASSES (CVB sweeps instead of PASSES; default PASSES, the equal budget); the summary's passes column is
#   the steps each run's trace records (EM and VB stop early only at an exact fixed point: objective gain 0).
#   TRAIN_ON=train (default: the issue's protocol, dev words held out) or TRAIN_ON=train+dev (Johnson et al.'s
#   protocol: their sampler segmented the very word types it was trained on; here every model -- EM, Hastings,
#   CVB, Morfessor -- trains on the unsegmented train + dev words and dev is scored; the "dev perplexity" column
#   is then a training-word perplexity, not a held-out one; use a separate OUTDIR).  GIBBS=0 skips the Gibbs runs.
#   PARTS="base alphas best" (add "long": the extra long Hastings run; "threshold": the MBR boundary threshold
#   chosen on training-word gold, a semi-supervised diagnostic, see below; a subset runs only those parts,
#   then the summary, e.g. two processes splitting ALPHAS or BEST_SEEDS; VB=0 skips the VB run in one).
#   STEM_ALPHA=S: the best-alpha runs (part best, and part validation's second setting) get a per-LHS --alpha
#   (--alpha ALPHA,Stem=S: S on the Stem rules, the best alpha on every other rule; files named
#   {algo}-a{alpha}+stem{S}-s{seed}.*; runs made before grind had per-LHS values read the same prior from a per-rule
#   --alpha FILE, alpha-{alpha}+stem{S}.txt, with bit-identical results); part best
#   then runs Hastings and CVB at both priors (the best alpha alone, and +stem) and also decodes the runs of both
#   priors as one committee ({algos}-a{alpha},{alpha}+stem{S}-committee_{seeds}.*), as part validation does.
#   PARTS=validation: model selection without dev (see the part below); STEM_GRID="S1 S2 ..." adds one Hastings run per
#   Stem alpha there (and one at the best alpha alone), each scored on the validation words.
#   TEMPLATE_SET=czech-long (or sesotho): the grammar's built-in template set; OUTDIR keeps the grammar it was made
#   with (its g0.txt), so use a separate OUTDIR per template set (an OUTDIR made with other templates is refused).
# The README table was made with the defaults and PARTS="base alphas best long" LONG_PASSES=200 LONG_SEEDS="1 2",
#   split over parallel processes as above (the CVB rows later, with PARTS=best VB=0 BEST_ALPHA=1e-5, after
#   CVB's per-word kernel made its sweep ~4 s on this grammar: it had been run with CVB_PASSES=2 before).
#   Its rows below alpha 1e-5 and at alpha 1e-20 (2026-11-25): the extended default ALPHAS with PARTS="base alphas best"
#   (best alpha chosen: 1e-20), and PARTS=long LONG_PASSES=1000 LONG_SEEDS="1 2" BEST_ALPHA=1e-20; rows at 1e-5 are from
#   the first round, when the grid stopped at 1e-5.
#   The czech-long table (2026-11-27): TEMPLATE_SET=czech-long PARTS="base alphas best" ALPHAS=1e-20 BEST_ALPHA=1e-20
#   SEEDS=1 BEST_SEEDS="1 2 3" VB=0 GIBBS=0 MAP_ALPHAS=1, once with the default TRAIN_ON and once with train+dev.
#   The stem-prior rows (2026-11-27): TEMPLATE_SET=czech-long PARTS=best BEST_ALPHA=1e-20 STEM_ALPHA=1e-15
#   BEST_SEEDS="1 2 3" VB=0 GIBBS=0 MAP_ALPHAS=1, then PARTS=validation with the same BEST_ALPHA, STEM_ALPHA, BEST_SEEDS;
#   the both-priors committees and the validation grid: PARTS="best validation" with those settings and
#   STEM_GRID="1e-5 1e-10 1e-12 1e-15 1e-17", in the same OUTDIR (finished runs are reused).
set -eEuo pipefail
# a failed step's error is in its .log (its stderr): say which, and show the end of the newest log
exec 3>&2                     # the script's own stderr: a step's may be its .log when the trap runs
trap 'rc=$?; echo "$(basename "$0"): a step failed (exit $rc); the newest log:" >&3
      l=$(ls -t "${out:-.}"/*.log "${out:-.}"/*/*.log 2>/dev/null | head -1) || true
      [[ -n $l ]] && { echo "== $l" >&3; tail -5 "$l" >&3; }; trap - ERR' ERR
shared=${SHARED:-../shared/data}
out=${1:-results/morph}
mkdir -p "$out"
sig=$shared/sigmorphon2022_segmentation
train=$sig/ces.word.train.tsv
dev=$sig/ces.word.dev.tsv
PASSES=${PASSES:-50}
ALPHAS=${ALPHAS:-"1 1e-1 1e-2 1e-3 1e-4 1e-5 1e-7 1e-10 1e-15 1e-20 1e-30 1e-50"}
SEEDS=${SEEDS:-"1"}
BEST_SEEDS=${BEST_SEEDS:-"1 2 3"}
TEMP=${TEMP:-5}
ANNEAL=${ANNEAL:-$(( PASSES * 4 / 5 ))}
PB=${PB:-1024}
LONG_PASSES=${LONG_PASSES:-200}
C="--chars"
PARTS=${PARTS:-"base alphas best"}
has() { [[ " $PARTS " == *" $1 "* ]]; }
run() { echo "+ $*" >&2; "$@"; }
pbopt=""
if grind train --help | grep -q -- --proposal-batch; then pbopt="--proposal-batch $PB"
else echo "# this grind has no --proposal-batch: Hastings runs one kernel call a word" >&2; fi

# Grammar over train + dev words (first column only; multi-word entries skipped as grind's reader does).
if [[ ! -s $out/g0.txt ]]; then
  cut -f1 "$train" "$dev" | grep -v '[[:space:]]' | awk '!seen[$0]++' > "$out/words-train-dev.txt"
  run grind make-grammar morph $C --template-set "${TEMPLATE_SET:-czech}" -o "$out/g0.txt" "$out/words-train-dev.txt" \
    2>"$out/g0.log"
elif ! grep -q -- "--template-set ${TEMPLATE_SET:-czech}[: ]" "$out/g0.txt"; then
  echo "morph-results.sh: $out/g0.txt was made with other templates than TEMPLATE_SET=${TEMPLATE_SET:-czech} (see its header):" \
       "use another OUTDIR" >&2; exit 2
fi
case ${TRAIN_ON:-train} in
  train) ;;
  train+dev) train=$out/words-train-dev.txt
             echo "# TRAIN_ON=train+dev: every model trains on the train + dev words (no gold); dev is not held out" >&2 ;;
  *) echo "morph-results.sh: TRAIN_ON must be train or train+dev, not '$TRAIN_ON'" >&2; exit 2 ;;
esac

alpha_arg() {  # alpha name -> grind's --alpha: a number, or BASE+stemS -> BASE,Stem=S (Stem rules S, every other BASE)
  local a=$1
  if [[ $a == *+stem* ]]; then echo "${a%%+stem*},Stem=${a##*+stem}"; else echo "$a"; fi
}
score() {  # name grammar: decode dev (Viterbi, MBR), score, perplexity
  local o=$out/$1 g=$2
  for d in viterbi mbr; do
    [[ -s $o.$d.eval ]] && continue
    run grind parse $C --segment --seg-format sigmorphon --$d -o "$o.$d.tsv" "$g" "$dev" 2>>"$o.log"
    run grind eval --digits 6 --segmentation -o "$o.$d.eval" "$dev" "$o.$d.tsv"
  done
  [[ -s $o.ppl ]] || run grind loglik $C --summary -o "$o.ppl" "$g" "$dev"
}
committee() {  # name grammars...: decoded together, MBR over their averaged boundary posteriors, at 0.5 and
  # at the threshold of maximum expected boundary F (--expected-f)
  local n=$1 first=$2 av=() g d ef; shift 2
  for g in "$@"; do av+=(--average "$g"); done
  for d in mbr mbrf; do
    [[ -s $out/$n.$d.eval ]] && continue
    ef=""; [[ $d == mbrf ]] && ef=--expected-f
    run grind parse $C --segment --seg-format sigmorphon --mbr $ef "${av[@]}" -o "$out/$n.$d.tsv" "$first" "$dev" \
      2>>"$out/$n.log"
    run grind eval --digits 6 --segmentation -o "$out/$n.$d.eval" "$dev" "$out/$n.$d.tsv"
  done
}
committees() {  # alpha...: the BEST_SEEDS runs of Hastings, of CVB, and of both, each decoded as one committee; with
  # two alphas (the best alpha and its +stem prior) the runs of both priors together, named {algos}-a{a1},{a2}-committee_*
  local hs=() cs=() s alpha tag="" name
  name=$(IFS=,; echo "$*")
  for s in $BEST_SEEDS; do tag=${tag}_$s; done
  for alpha in "$@"; do
    for s in $BEST_SEEDS; do hs+=("$out/hastings-a$alpha-s$s.txt"); cs+=("$out/cvb-a$alpha-s$s.txt"); done
  done
  (( ${#hs[@]} > 1 )) || return 0
  committee "hastings-a$name-committee$tag" "${hs[@]}"
  committee "cvb-a$name-committee$tag" "${cs[@]}"
  committee "hastings+cvb-a$name-committee$tag" "${hs[@]}" "${cs[@]}"
  # paired approximate randomization tests of every committee output against Morfessor and the baselines
  local sig=$out/committees-a$name$tag.significance.eval files=() n d
  [[ -s $out/morfessor.viterbi.tsv && ! -s $sig ]] || return 0
  for n in hastings cvb hastings+cvb; do for d in mbr mbrf; do files+=("$out/$n-a$name-committee$tag.$d.tsv"); done; done
  run grind eval --digits 6 --segmentation --significance --seed 1 -o "$sig" "$dev" "$out/morfessor.viterbi.tsv" "${files[@]}"
}
one() {  # algo alpha seed extra-options...
  local a=$1 alpha=$2 seed=$3; shift 3
  local n=$a-a$alpha-s$seed
  if [[ ! -s $out/$n.txt ]]; then
    run grind train $C --algo $a --alpha "$(alpha_arg "$alpha")" --iterations $PASSES --seed $seed "$@" \
      --trace "$out/$n.trace.tsv" -o "$out/$n.txt" "$out/g0.txt" "$train" 2>"$out/$n.log"
  fi
  score "$n" "$out/$n.txt"
}

# Morfessor Baseline (optional extra): morfessor_segment TRAIN_TSV WORDS_TSV OUT_TSV.
have_morfessor() {  # installs nothing: the recipe must not change the environment it runs in
  python3 -c 'import morfessor' 2>/dev/null && return 0
  echo "# morfessor is not installed (pip install 'grind[morfessor]'): no Morfessor row" >&2
  return 1
}
morfessor_segment() {
  python3 - "$1" "$2" "$3" <<'PY'
import random, sys, morfessor
random.seed(1)
words = lambda f: [l.rstrip('\n').split('\t')[0] for l in open(f, encoding='utf-8') if l.strip()]
m = morfessor.BaselineModel()
m.load_data([(1, w) for w in dict.fromkeys(words(sys.argv[1])) if not any(c.isspace() for c in w)])
m.train_batch()
with open(sys.argv[3], 'w', encoding='utf-8') as f:
    for w in words(sys.argv[2]):
        f.write(w + '\t' + ' @@'.join(m.viterbi_segment(w)[0]) + '\n')
PY
}
if has base && [[ ! -s $out/morfessor.viterbi.eval ]]; then
  if have_morfessor; then
    morfessor_segment "$train" "$dev" "$out/morfessor.viterbi.tsv"
    run grind eval --digits 6 --segmentation -o "$out/morfessor.viterbi.eval" "$dev" "$out/morfessor.viterbi.tsv"
  fi
fi

has base && one em 1 1 --tolerance 0
if has alphas; then
  for alpha in $ALPHAS; do
    for s in $SEEDS; do one hastings $alpha $s --temp-start $TEMP --anneal-sweeps $ANNEAL $pbopt; done
  done
fi
if has best; then
  best=${BEST_ALPHA:-$(for alpha in $ALPHAS; do
    awk -F'\t' -v a=$alpha '$1 == "predicted" {print $10 == "nan" ? -1 : $10, a}' "$out/hastings-a$alpha-s1.viterbi.eval"
  done | sort -g -k1,1 | tail -1 | cut -d' ' -f2)}
  echo "# best alpha (Hastings, dev boundary F, Viterbi, seed 1): $best" >&2
  priors=$best
  [[ -n ${STEM_ALPHA:-} ]] && priors="$best $best+stem$STEM_ALPHA" best=$best+stem$STEM_ALPHA
  for p in $priors; do
    for s in $BEST_SEEDS; do one hastings $p $s --temp-start $TEMP --anneal-sweeps $ANNEAL $pbopt; done
    for s in $BEST_SEEDS; do one cvb $p $s --tolerance 0 ${CVB_PASSES:+--iterations $CVB_PASSES}; done
    committees $p
  done
  [[ -n ${STEM_ALPHA:-} ]] && committees $priors
  [[ ${VB:-1} == 1 ]] && one vb $best 1 --tolerance 0
  # MAP-EM with alpha < 1 (Johnson et al. 2007 sec. 7: theta_r = 0 once E[f_r] < 1 - alpha, words stop
  # parsing: counted by train and parse) and the uncollapsed Gibbs sampler, annealed like Hastings.
  for a in ${MAP_ALPHAS:-1e-1 $best}; do [[ $a == 1 ]] || one em $a 1 --tolerance 0; done
  if [[ ${GIBBS:-1} == 1 ]]; then
    for s in $BEST_SEEDS; do one gibbs $best $s --temp-start $TEMP --anneal-sweeps $ANNEAL; done
  fi
fi
# Part "threshold" (a diagnostic, semi-supervised: one scalar chosen with gold segmentations): the --mbr boundary
# threshold T chosen on every 7th TRAINING word's gold segmentation (words the model was trained on without their
# gold; dev untouched by the choice) from THRESHOLDS, for CVB and Hastings at the best alpha, then dev decoded at T.
if has threshold && [[ ${TRAIN_ON:-train} == train+dev ]]; then
  echo "# part threshold needs the training TSV's gold column: not run with TRAIN_ON=train+dev" >&2
elif has threshold; then
  ta=${BEST_ALPHA:-${best:-1e-5}}
  awk -F'\t' 'NR % 7 == 1 && $1 !~ /[[:space:]]/' "$train" > "$out/train-every7.tsv"
  for a in cvb hastings; do
    g=$out/$a-a$ta-s1.txt
    [[ -s $g ]] || continue
    for T in ${THRESHOLDS:-0.5 1e-1 1e-2 1e-3 1e-4 1e-5 1e-6 1e-8 1e-10 1e-15}; do
      o=$out/thr-$a-T$T.train
      [[ -s $o.eval ]] && continue
      run grind parse $C --segment --seg-format sigmorphon --mbr --boundary-threshold $T -o "$o.tsv" "$g" \
        "$out/train-every7.tsv" 2>>"$out/thr.log"
      run grind eval --digits 6 --segmentation -o "$o.eval" "$out/train-every7.tsv" "$o.tsv"
    done
    T=$(for f in "$out"/thr-$a-T*.train.eval; do
          awk -F'\t' -v f="$f" '$1 == "predicted" {t = f; sub(/.*-T/, "", t); sub(/\.train\.eval$/, "", t); print $10, t}' "$f"
        done | sort -g -k1,1 | tail -1 | cut -d' ' -f2)
    echo "# $a: boundary threshold chosen on training-word gold: $T" >&2
    for s in $BEST_SEEDS; do
      o=$out/thr-$a-a$ta-s$s-T$T.dev
      [[ -s $o.eval ]] && continue
      run grind parse $C --segment --seg-format sigmorphon --mbr --boundary-threshold $T -o "$o.tsv" \
        "$out/$a-a$ta-s$s.txt" "$dev" 2>>"$out/thr.log"
      run grind eval --digits 6 --segmentation -o "$o.eval" "$dev" "$o.tsv"
    done
  done
fi
# Part "validation" (model selection without dev): every 8th TRAINING word held out with its gold (val.tsv), the
# models trained on the other 7/8 (val-train.tsv; unsupervised, as ever); the Hastings + CVB committee of BEST_SEEDS
# runs (and the Hastings runs alone) each at the best alpha and, with STEM_ALPHA, at that alpha with STEM_ALPHA on the
# Stem rules, and the runs of both priors in one committee; decoded at the threshold of maximum expected boundary F;
# Morfessor trained on the same 7/8; all scored on val, with the paired significance test.  Dev is not read.
if has validation && [[ ${TRAIN_ON:-train} != train ]]; then
  echo "# part validation needs the training TSV's gold column: not run with TRAIN_ON=train+dev" >&2
elif has validation; then
  va=${BEST_ALPHA:-1e-20}
  awk -F'\t' 'NR % 8 != 0' "$train" > "$out/val-train.tsv"
  awk -F'\t' 'NR % 8 == 0' "$train" > "$out/val.tsv"
  vfiles=() vh=() vc=()
  for a in $va ${STEM_ALPHA:+$va+stem$STEM_ALPHA}; do
    for algo in hastings cvb; do
      for s in $BEST_SEEDS; do
        n=val-$algo-a$a-s$s
        if [[ $algo == hastings ]]; then x=(--temp-start $TEMP --anneal-sweeps $ANNEAL $pbopt); else x=(--tolerance 0); fi
        [[ -s $out/$n.txt ]] || run grind train $C --algo $algo --alpha "$(alpha_arg "$a")" --iterations $PASSES \
          --seed $s "${x[@]}" -o "$out/$n.txt" "$out/g0.txt" "$out/val-train.tsv" 2>"$out/$n.log"
        if [[ $algo == hastings ]]; then vh+=("$out/$n.txt"); else vc+=("$out/$n.txt"); fi
      done
    done
  done
  # committees: each prior's runs, and with STEM_ALPHA both priors' runs together (name a{alpha},{alpha}+stem{S})
  nh=$(wc -w <<< "$BEST_SEEDS")
  names=("$va") starts=(0) counts=("$nh")     # vh / vc hold each prior's runs in turn: a slice per committee
  if [[ -n ${STEM_ALPHA:-} ]]; then
    names+=("$va+stem$STEM_ALPHA" "$va,$va+stem$STEM_ALPHA") starts+=("$nh" 0) counts+=("$nh" $(( 2 * nh )))
  fi
  for i in "${!names[@]}"; do
    a=${names[$i]} hs=("${vh[@]:${starts[$i]}:${counts[$i]}}") cs=("${vc[@]:${starts[$i]}:${counts[$i]}}")
    for members in hastings hastings+cvb; do      # the Hastings runs alone, and with the CVB runs
      n=val-$members-a$a-committee av=() ms=("${hs[@]}")
      [[ $members == hastings+cvb ]] && ms+=("${cs[@]}")
      for g in "${ms[@]:1}"; do av+=(--average "$g"); done
      [[ -s $out/$n.mbrf.tsv ]] || run grind parse $C --segment --seg-format sigmorphon --mbr --expected-f "${av[@]}" \
        -o "$out/$n.mbrf.tsv" "${ms[0]}" "$out/val.tsv" 2>>"$out/$n.log"
      vfiles+=("$out/$n.mbrf.tsv")
    done
  done
  # the Stem-alpha grid on validation (STEM_GRID="S1 S2 ..."): one Hastings run (the first of BEST_SEEDS) at the best
  # alpha and at each S on the Stem rules, decoded by MBR (cut at 0.5) and scored on val
  s1=${BEST_SEEDS%% *}
  for a in ${STEM_GRID:+$va} $(for S in ${STEM_GRID:-}; do echo "$va+stem$S"; done); do
    n=val-hastings-a$a-s$s1
    [[ -s $out/$n.txt ]] || run grind train $C --algo hastings --alpha "$(alpha_arg "$a")" --iterations $PASSES \
      --seed $s1 --temp-start $TEMP --anneal-sweeps $ANNEAL $pbopt -o "$out/$n.txt" "$out/g0.txt" "$out/val-train.tsv" \
      2>"$out/$n.log"
    [[ -s $out/$n.mbr.eval ]] && continue
    run grind parse $C --segment --seg-format sigmorphon --mbr -o "$out/$n.mbr.tsv" "$out/$n.txt" "$out/val.tsv" 2>>"$out/$n.log"
    run grind eval --digits 6 --segmentation -o "$out/$n.mbr.eval" "$out/val.tsv" "$out/$n.mbr.tsv"
  done
  if [[ ! -s $out/val-morfessor.tsv ]] && have_morfessor; then
    morfessor_segment "$out/val-train.tsv" "$out/val.tsv" "$out/val-morfessor.tsv"
  fi
  [[ -s $out/val-morfessor.tsv ]] && vfiles=("$out/val-morfessor.tsv" "${vfiles[@]}")
  run grind eval --digits 6 --segmentation --significance --seed 1 -o "$out/validation.significance.eval" "$out/val.tsv" "${vfiles[@]}"
fi
# Part "long" (extra, not an equal budget): Hastings at the best alpha (BEST_ALPHA, else the one chosen
# above, else 1e-5) for LONG_PASSES sweeps, annealed over the first 4/5, seeds LONG_SEEDS (default 1).
if has long; then
  la=${BEST_ALPHA:-${best:-1e-5}}
  for s in ${LONG_SEEDS:-1}; do
    n=hastingslong-a$la-s$s
    [[ -s $out/$n.txt ]] || run grind train $C --algo hastings --alpha $la --iterations $LONG_PASSES --seed $s \
      --temp-start $TEMP --anneal-sweeps $(( LONG_PASSES * 4 / 5 )) $pbopt --trace "$out/$n.trace.tsv" -o "$out/$n.txt" \
      "$out/g0.txt" "$train" 2>"$out/$n.log"
    score "$n" "$out/$n.txt"
  done
fi

python3 - "$out" "$PASSES" <<'PY'
import glob, os, re, sys, statistics as st
out, passes = sys.argv[1], sys.argv[2]
def rows(path):
    r = {}
    for line in open(path):
        f = line.rstrip('\n').split('\t')
        if len(f) == 12 and f[0] != 'system':
            r[f[0]] = f
    return r
def ppl(path):
    if not os.path.exists(path): return None
    kv = dict(l[2:].split(': ', 1) for l in open(path) if l.startswith('# ') and ': ' in l)
    return float(kv['perplexity']), '%s/%s' % (kv['parsed'].strip(), kv['sentences'].strip())
def ppls(ps):
    if None in ps: return '-'
    v = [p[0] for p in ps]
    m = '%.2f' % v[0] if len(v) == 1 else '%.2f±%.2f' % (st.mean(v), st.stdev(v))
    return '%s (%s words parsed)' % (m, '/'.join(sorted(set(p[1] for p in ps))))
cols = ['morph_P', 'morph_R', 'morph_F', 'exact', 'boundary_P', 'boundary_R', 'boundary_F', 'overlap_one', 'overlap_chars']
print('\t'.join(['method', 'alpha', 'passes', 'seeds', 'decoder', 'unparsed'] + cols + ['dev perplexity (per char)']))
fmt = lambda v: '—' if v != v else '%.1f' % (100 * v)   # — : undefined (no boundary predicted, no word parsed)
def agg(vals):
    if len(vals) == 1 or any(v != v for v in vals): return fmt(vals[0]) if len(vals) == 1 else '—'
    return '%s±%s' % (fmt(st.mean(vals)), fmt(st.stdev(vals)))
evals = sorted(glob.glob(f'{out}/*.viterbi.eval'))
if not evals:
    print(f'# no scored run in {out} yet: nothing to summarise', file=sys.stderr)
    sys.exit(0)
first = evals[0]
for b, name in (('baseline-one-morph', 'one morph per word'), ('baseline-chars', 'every character a morph')):
    r = rows(first)[b]
    print('\t'.join([name, '-', '-', '-', '-', r[2]] + [fmt(float(r[i])) for i in range(3, 12)] + ['-']))
if os.path.exists(f'{out}/morfessor.viterbi.eval'):
    r = rows(f'{out}/morfessor.viterbi.eval')['predicted']
    print('\t'.join(['Morfessor Baseline', '-', '-', '1', 'viterbi', r[2]] + [fmt(float(r[i])) for i in range(3, 12)] + ['-']))
groups = {}
for f in glob.glob(f'{out}/*-a*-s*.viterbi.eval') + glob.glob(f'{out}/*-a*-s*.mbr.eval'):
    if os.path.basename(f).startswith('val-'):      # the validation grid's runs: their own table below
        continue
    m = re.match(r'(\w+)-a(.+?)-s(\d+)\.(viterbi|mbr)\.eval', os.path.basename(f))
    groups.setdefault((m[1], m[2], m[4]), []).append((m[3], f))
order = {'em': 0, 'hastings': 1, 'vb': 2, 'cvb': 3, 'gibbs': 4, 'hastingslong': 5}
for (a, alpha, d), runs in sorted(groups.items(), key=lambda k: (order[k[0][0]], -float(k[0][1].split('+')[0]), k[0][1], k[0][2])):
    rs = [rows(f)['predicted'] for _, f in runs]
    ps = [ppl(f'{out}/{a}-a{alpha}-s{s}.ppl') for s, _ in runs]
    steps = sorted(set(max(int(l.split('\t')[0]) for l in open(f'{out}/{a}-a{alpha}-s{s}.trace.tsv') if l[:1].isdigit()) for s, _ in runs))
    print('\t'.join([a, alpha, '/'.join(map(str, steps)), ','.join(sorted(s for s, _ in runs)), d, '/'.join(sorted(set(r[2] for r in rs)))]
                    + [agg([float(r[i]) for r in rs]) for i in range(3, 12)] + [ppls(ps)]))
for f in sorted(glob.glob(f'{out}/*-a*-committee_*.mbr*.eval')):
    a, alpha, seeds, d = re.match(r'([\w+]+)-a(.+?)-committee_([\d_]+)\.(mbrf?)\.eval', os.path.basename(f)).groups()
    seeds = seeds.replace('_', ',')
    r = rows(f)['predicted']
    dec = 'mbr, max expected F' if d == 'mbrf' else 'mbr'
    print('\t'.join([f'{a} committee (boundary posteriors averaged)', alpha, '-', seeds, dec, r[2]]
                    + [fmt(float(r[i])) for i in range(3, 12)] + ['-']))
for f in sorted(glob.glob(f'{out}/committees-a*.significance.eval')):
    print(f'# {os.path.basename(f)}: paired approximate randomization test (10,000 samples, seed 1): each committee against Morfessor, and against every-character on boundary F')
    print('system\tagainst\tmeasure\tscore\tagainst score\tdifference\tp')
    table = open(f, encoding='utf-8').read().split('# significance:')[1].splitlines()[2:]
    for ln in table:
        x, y, m, a, b, d, pv = ln.split('\t')
        if x.endswith('morfessor.viterbi.tsv') and not y.startswith('baseline-'):   # committee - Morfessor
            x, y, a, b, d = y, x, b, a, str(-float(d))
        if y.endswith('morfessor.viterbi.tsv') or (y == 'baseline-chars' and m == 'boundary_F'):
            print('\t'.join([os.path.basename(x), os.path.basename(y), m, fmt(float(a)), fmt(float(b)), fmt(float(d)), pv]))
grid = sorted(glob.glob(f'{out}/val-hastings-a*-s*.mbr.eval'), key=lambda f: -float(m[1]) if (m := re.search(r'\+stem(.+?)-s\d+\.mbr\.eval$', os.path.basename(f))) else 1)
if grid:
    print('# validation stem-alpha grid (part validation, STEM_GRID): one Hastings run each, MBR cut at 0.5, scored on the held-out 1/8 of train')
    print('system\t' + '\t'.join(cols))
    for f in grid:
        r = rows(f)['predicted']
        print('\t'.join([os.path.basename(f)[:-len('.mbr.eval')]] + [fmt(float(r[i])) for i in range(3, 12)]))
v = f'{out}/validation.significance.eval'
if os.path.exists(v):
    text = open(v, encoding='utf-8').read()
    print('# validation (part validation): trained on 7/8 of the training words, scored on the other 1/8 with their gold; dev not read')
    print('system\t' + '\t'.join(cols))
    names = re.findall(r'^# predicted: (.*)$', text, re.M)
    preds = [ln.split('\t') for ln in text.splitlines() if ln.startswith('predicted\t')]
    base = [ln.split('\t') for ln in text.splitlines() if ln.startswith('baseline-')]
    for name, r in list(zip(map(os.path.basename, names), preds)) + [(b[0], b) for b in base]:
        print('\t'.join([name] + [fmt(float(r[i])) for i in range(3, 12)]))
    print('system\tagainst\tmeasure\tscore\tagainst score\tdifference\tp')
    for ln in text.split('# significance:')[1].splitlines()[2:]:
        x, y, m, a, b, d, pv = ln.split('\t')
        if 'one-morph' not in y:
            print('\t'.join([os.path.basename(x), os.path.basename(y), m, fmt(float(a)), fmt(float(b)), fmt(float(d)), pv]))
PY
