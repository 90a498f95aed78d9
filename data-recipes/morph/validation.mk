# data-recipes/morph, part validation (model selection without dev): every 8th TRAINING word held out with its gold
# (val.tsv), the models trained on the other 7/8 (val-train.tsv; unsupervised, as ever): Hastings and CVB at each prior
# (BEST_ALPHA, and with STEM_ALPHA that alpha with STEM_ALPHA on the Stem rules), their committees (Hastings alone and
# Hastings + CVB; with STEM_ALPHA both priors together) decoded at the threshold of maximum expected boundary F,
# Morfessor on the same 7/8, all scored on val.tsv with the paired significance test; STEM_GRID adds one Hastings run
# per Stem alpha (and one at BEST_ALPHA alone), decoded by MBR at 0.5. Dev is not read. Included by the Makefile.
VPRIORS := $(PRIORS) $(if $(STEM_ALPHA),$(subst $(space),$(comma),$(strip $(PRIORS))))
VCOMMITTEES := $(foreach p,$(VPRIORS),val-hastings-a$p-committee val-hastings+cvb-a$p-committee)
VRUNS := $(foreach p,$(PRIORS),$(foreach g,hastings cvb,$(foreach s,$(BEST_SEEDS),$(call run,$g,$p,$s))))
S1 := $(firstword $(BEST_SEEDS))
VGRID := $(if $(STEM_GRID),$(foreach p,$(BEST_ALPHA) $(addprefix $(BEST_ALPHA)+stem,$(STEM_GRID)),$(call \
  run,hastings,$p,$(S1))))
VSIG := $(DO)/validation-a$(subst $(space),$(comma),$(strip $(PRIORS)))_$(SEEDTAG).significance.eval
VALIDATION_CELLS := $(if $(call has,validation),$(VSIG) $(foreach r,$(VGRID),$(DO)/val-$r.mbr.tsv $(DO)/val-$r.mbr.eval))

$(DO)/val-train.tsv: $(call esc,$(TRAIN))
	awk -F'\t' 'NR % 8 != 0' $(call q,$(TRAIN)) > $(call q,$@.tmp) && mv -- $(call q,$@.tmp) $(call q,$@)
$(DO)/val.tsv: $(call esc,$(TRAIN))
	awk -F'\t' 'NR % 8 == 0' $(call q,$(TRAIN)) > $(call q,$@.tmp) && mv -- $(call q,$@.tmp) $(call q,$@)
$(if $(call has,validation),$(foreach r,$(sort $(VRUNS) $(VGRID)),$(eval $(call train,$(word 1,$(subst -, \
  ,$r)),$(patsubst a%,%,$(word 2,$(subst -a, ,$(subst -p, ,$r)))),$(lastword $(subst -s, ,$r)),$(DQ)/val-train.tsv,val-))))
vmembers = $(foreach p,$(subst $(comma), ,$2),$(foreach g,$(subst +, ,$1),$(foreach s,$(BEST_SEEDS),$(DO)/val-$(call \
  run,$g,$p,$s).txt)))
define vcommittee  # NAME ALGOS PRIORS
$(DO)/$1.mbrf.tsv: $(call vmembers,$2,$3) $(DO)/val.tsv
	$$(segment) --mbr --expected-f $(foreach g,$(wordlist 2,999,$(call vmembers,$2,$3)),--average $(call q,$(subst \
	  \,,$g))) -o $$(call q,$$@) $(call q,$(subst \,,$(firstword $(call vmembers,$2,$3)))) $(call q,$(DQ)/val.tsv)
endef
$(if $(call has,validation),$(foreach c,$(VCOMMITTEES),$(eval $(call vcommittee,$c,$(patsubst \
  val-%,%,$(firstword $(subst -a, ,$c))),$(patsubst %-committee,%,$(word 2,$(subst -a, ,$c)))))))
$(DO)/val-%.mbr.tsv: $(DO)/val-%.txt $(DO)/val.tsv
	$(segment) --mbr -o $(call q,$@) $(call q,$<) $(call q,$(DQ)/val.tsv)
$(DO)/val-%.mbr.eval: $(DO)/val-%.mbr.tsv $(DO)/val.tsv
	$(RUN) eval --digits 6 --segmentation -o $(call q,$@) $(call q,$(DQ)/val.tsv) $(call q,$<)
$(DO)/val-morfessor.tsv: $(DO)/val-train.tsv $(DO)/val.tsv morfessor.py
	$(MORFESSOR_PYTHON) morfessor.py $(call q,$<) $(call q,$(DQ)/val.tsv) > $(call q,$@.tmp) && \
	  mv -- $(call q,$@.tmp) $(call q,$@)
$(VSIG): $(if $(HAVE_MORFESSOR),$(DO)/val-morfessor.tsv) $(foreach c,$(VCOMMITTEES),$(DO)/$c.mbrf.tsv) $(DO)/val.tsv
	$(RUN) eval --digits 6 --segmentation --significance --seed 1 -o $(call q,$@) $(call q,$(DQ)/val.tsv) \
	  $(foreach f,$(filter-out %/val.tsv,$(subst \,,$^)),$(call q,$f))
