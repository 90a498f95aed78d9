# data-recipes/dmv.mk: the cells a DMV recipe repeats (include after ../common.mk). DIR is a directory under OUT
# as make writes it ($(O)/name); a corpus or gold file is given as it is (the shell and make forms are made here).

# $(call dmv_grammar,DIR,CORPUS,OPTIONS): DIR/dmv0.txt (grind make-grammar dmv OPTIONS CORPUS) and DIR/dmv1.txt,
# its harmonic initialisation (grind init --harmonic, Klein & Manning's km-global) on CORPUS with OPTIONS
define dmv_grammar
$1/dmv0.txt: $(call esc,$2)
	$$(RUN) make-grammar dmv $3 -o $$(call q,$$@) $(call q,$2)
$1/dmv1.txt: $1/dmv0.txt $(call esc,$2)
	$$(RUN) init --harmonic --corpus $(call q,$2) $3 -o $$(call q,$$@) $$(call q,$$<)
endef

# $(call dmv_decode,DIR,CORPUS,OPTIONS): DIR/X.viterbi.conllu and DIR/X.mbr.conllu, the parses of CORPUS by the
# grammar DIR/X.txt (grind parse --viterbi / --mbr OPTIONS)
define dmv_decode
$1/%.viterbi.conllu: $1/%.txt $(call esc,$2)
	$$(RUN) parse --viterbi $3 -o $$(call q,$$@) $$(call q,$$<) $(call q,$2)
$1/%.mbr.conllu: $1/%.txt $(call esc,$2)
	$$(RUN) parse --mbr $3 -o $$(call q,$$@) $$(call q,$$<) $(call q,$2)
endef

# $(call dmv_eval,DIR,SUFFIX,GOLD,OPTIONS): DIR/X.SUFFIX.eval, the parses DIR/X.conllu scored against GOLD (grind
# eval --digits 6 OPTIONS: the baselines' rows and the overlaps with them come with it)
define dmv_eval
$1/%.$2.eval: $1/%.conllu $(call esc,$3)
	$$(RUN) eval --digits 6 $4 -o $$(call q,$$@) $(call q,$3) $$(call q,$$<)
endef

# the relations that name the Chinese Treebank's Penn2Malt heads in UD Chinese r1.4 (README, "Function heads")
RELATIONS.ctb := case,case:dec,cop,aux,auxpass,aux:caus
# $(call function_heads,TARGET,TREEBANK,RELATIONS): TARGET (a path under OUT, as the shell reads it), TREEBANK
# re-headed by grind function-heads (with --relations RELATIONS if given): a function-head gold
define function_heads
$(call esc,$1): $(call esc,$2)
	$$(RUN) function-heads $(if $3,--relations $3) -o $$(call q,$$@) $(call q,$2)
endef
