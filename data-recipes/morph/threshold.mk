# data-recipes/morph, part threshold (a diagnostic, semi-supervised: one scalar chosen with gold): the --mbr boundary
# threshold T chosen from THRESHOLDS by boundary F on every 7th TRAINING word's gold segmentation (words the models
# were trained on without their gold; dev untouched by the choice), for CVB and Hastings at BEST_ALPHA (seed 1), then
# dev decoded at T for each of BEST_SEEDS. Included by the Makefile.
THR = thr-$1-a$(BEST_ALPHA)
THRESHOLD_CELLS := $(if $(call has,threshold),$(foreach g,cvb hastings,$(foreach s,$(BEST_SEEDS),$(DO)/$(call \
  THR,$g)-s$s.dev.tsv $(DO)/$(call THR,$g)-s$s.dev.eval) $(foreach T,$(THRESHOLDS),$(DO)/$(call \
  THR,$g)-T$T.train.tsv)))

$(DO)/train-every7.tsv: $(call esc,$(TRAIN))
	awk -F'\t' 'NR % 7 == 1 && $$1 !~ /[[:space:]]/' $(call q,$(TRAIN)) > $(call q,$@.tmp) && mv -- $(call q,$@.tmp) \
	  $(call q,$@)
define threshold  # ALGO
$(DO)/$(call THR,$1)-T%.train.tsv: $(DO)/$(call run,$1,$(BEST_ALPHA),1).txt $(DO)/train-every7.tsv
	$$(segment) --mbr --boundary-threshold $$* -o $$(call q,$$@) $$(call q,$$<) $(call q,$(DQ)/train-every7.tsv)
$(DO)/$(call THR,$1)-T%.train.eval: $(DO)/$(call THR,$1)-T%.train.tsv
	$$(RUN) eval --digits 6 --segmentation -o $$(call q,$$@) $(call q,$(DQ)/train-every7.tsv) $$(call q,$$<)
# the threshold of the best boundary F on the training words' gold
$(DO)/$(call THR,$1).T: $(foreach T,$(THRESHOLDS),$(DO)/$(call THR,$1)-T$T.train.eval)
	for T in $(THRESHOLDS); do awk -F'\t' -v T=$$$$T '$$$$1 == "predicted" {print $$$$10, T}' \
	  $(call q,$(DQ))/$(call THR,$1)-T$$$$T.train.eval; done | sort -g -k1,1 | tail -1 | cut -d' ' -f2 \
	  > $$(call q,$$@.tmp) && mv -- $$(call q,$$@.tmp) $$(call q,$$@)
$(DO)/$(call THR,$1)-s%.dev.tsv: $(DO)/$(call THR,$1).T $(DO)/$(call run,$1,$(BEST_ALPHA),%).txt
	$$(segment) --mbr --boundary-threshold "$$$$(cat $$(call q,$$<))" -o $$(call q,$$@) \
	  $(call q,$(DQ))/$(call run,$1,$(BEST_ALPHA),$$*).txt $(call q,$(DEV))
endef
$(if $(call has,threshold),$(foreach g,cvb hastings,$(eval $(call threshold,$g))))
