# data-recipes/common.mk: what every recipe's Makefile needs (data-recipes/README.md, "Writing a recipe").
#
# A recipe's Makefile declares its variables and their checks, includes this file, then states its cells:
#
#   RECIPE := quick
#   ABOUT := one line: what the recipe reproduces
#   VARS := ALGOS SEEDS                       # its own variables (OUT CMD GRIND PYTHON RESULTS are added here)
#   ALGOS.default := em vb
#   ALGOS.help := the algorithms (em, vb)
#   define CHECKS                             # run here before anything is written (not for make help)
#   $(call check_words,ALGOS,em vb)
#   endef
#   include ../common.mk
#   all: $(O)/em-s1.eval ...                   # O: OUT escaped for make (spaces)
#   $(O)/%.txt: ...
#   	$(RUN) train ... -o $(call q,$@) ...     # RUN: $(CMD) LOG $(GRIND), the launcher prefix
#
# Paths: make sees OUT-based paths through $(call esc,...) (a space escaped), the shell through $(call q,...)
# (single-quoted). A path may hold spaces but none of the characters in BAD_PATH_CHARS below.

ifneq ($(filter 3.% 4.0% 4.1%,$(MAKE_VERSION)),)
$(error the recipes need GNU make 4.2 or later (this is $(MAKE_VERSION)))
endif

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:
# A file made through a chain of pattern rules and named nowhere else is an intermediate one, which make deletes
# when it is done: a recipe names every cell it keeps (in all's prerequisites, say).
.SUFFIXES:
MAKEFLAGS += --no-builtin-rules
.DEFAULT_GOAL := all

empty :=
space := $(empty) $(empty)
comma := ,
hash := \#
tab := $(empty)	$(empty)
define newline


endef

# $(call q,TEXT): TEXT as one shell word (single-quoted)
q = '$(subst ','\'',$1)'
# $(call esc,PATH): PATH as one make target or prerequisite (its spaces escaped)
esc = $(subst $(space),\$(space),$1)
# $(call same,A,B): non-empty when the two texts are equal
same = $(and $(findstring x$1,x$2),$(findstring x$2,x$1))

# The variables every recipe has; a recipe may set NAME.default before the include to change a default.
COMMON_VARS := OUT CMD GRIND PYTHON RESULTS
OUT.default ?= out
OUT.help ?= the output directory (relative to this recipe's directory); every cell is a file in it
CMD.default ?= ../launch/local.sh
CMD.help ?= the launcher prefix of every grind call: CMD LOG COMMAND... (../launch/: local.sh slurm.sh sge.sh pbs.sh; empty: run grind directly, no log)
GRIND.default ?= grind
GRIND.help ?= the grind command (e.g. /path/to/grind/.venv/bin/grind)
PYTHON.default ?= python3
PYTHON.help ?= the Python that writes RESULTS (standard library only)
RESULTS.default ?= RESULTS.md
RESULTS.help ?= the file `make results` writes (relative to this recipe's directory)
SHARED.default ?= ../../../shared/data
SHARED.help ?= the shared data directory (../shared/data beside the repository)
VARS := $(COMMON_VARS) $(filter-out $(COMMON_VARS),$(VARS))
$(foreach v,$(VARS),$(eval $v ?= $(value $v.default)))
# The variables that do not change a result (left out of the command RESULTS gives for a table)
MACHINE_VARS := OUT CMD GRIND PYTHON RESULTS SHARED $(MACHINE_VARS)

# What this call does: help and clean do no work; -n, -q and -t (DRY) write nothing.
NOWORK_GOALS := help clean
WORK := $(if $(MAKECMDGOALS),$(filter-out $(NOWORK_GOALS),$(MAKECMDGOALS)),all)
DRY := $(strip $(foreach f,n q t,$(findstring $f,$(filter-out --%,$(firstword -$(MAKEFLAGS))))))

# ------------------------------------------------------------------------------------------ value checks
# Each check expands to nothing or stops make with a message, before any cell runs (not for `make help`).
fail = $(if $(WORK),$(error $1))
# The value as given: a command-line or environment value unexpanded (its '$' is seen, not expanded)
given = $(if $(filter command% environment%,$(origin $1)),$(value $1),$($1))

BAD_PATH_CHARS := ' " ` \ $$ % : ; $(hash) * ? [ ] ( ) | & < > =
# $(call check_path,NAME): a path make and the shell can carry (spaces are fine), normalised: relative when it is
# under the recipe's directory, absolute otherwise
check_path = $(if $(strip $(call given,$1)),,$(call fail,$1 is empty: give a path))$(foreach c,$(BAD_PATH_CHARS),$(if \
$(findstring $c,$(call given,$1)),$(call fail,$1='$(call given,$1)' has the character $c in it: make or the shell \
cannot carry it in a path; give a path without any of $(BAD_PATH_CHARS))))$(if $(findstring $(tab),$(call \
given,$1))$(findstring $(newline),$(call given,$1)),$(call fail,$1 has a tab or a newline in it: give a path \
without))$(eval override $1 := $(shell realpath -m -s --relative-base=. -- $(call q,$($1))))

# $(call check_words,NAME,ALLOWED): every word of NAME is one of ALLOWED, and there is at least one
check_words = $(if $(strip $($1)),,$(call fail,$1 is empty: give one or more of: $2))$(foreach w,$($1),$(if \
$(filter $w,$2),,$(call fail,$1: '$w' is not one of: $2)))
# $(call check_one,NAME,ALLOWED): NAME is one word of ALLOWED
check_one = $(if $(filter 1,$(words $($1))),,$(call fail,$1='$($1)': give one of: $2))$(call check_words,$1,$2)

# the characters of a number: a value with any other is refused before it reaches a shell
numchars = $(strip $(subst 0,,$(subst 1,,$(subst 2,,$(subst 3,,$(subst 4,,$(subst 5,,$(subst 6,,$(subst 7,,$(subst \
8,,$(subst 9,,$(subst .,,$(subst e,,$(subst E,,$(subst +,,$(subst -,,$1))))))))))))))))
is_numchars = $(if $(call numchars,$1),,ok)
# $(call bad_number,WORD): non-empty unless WORD is a number > 0 (1, 0.1, 1e-5)
bad_number = $(if $(call is_numchars,$1),$(if $(shell awk 'BEGIN { v = ARGV[1]; ARGV[1] = ""; exit !(v ~ \
/^([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$$/ && v + 0 > 0) }' $1 && echo ok),,bad),bad)
# $(call check_numbers,NAME): every word of NAME a number > 0, at least one
check_numbers = $(if $(strip $(call given,$1)),,$(call fail,$1 is empty: give one or more numbers > 0))$(foreach \
w,$(call given,$1),$(if $(call bad_number,$w),$(call fail,$1: '$w' is not a number > 0)))
# $(call check_counts,NAME,MIN): every word of NAME a whole number >= MIN (0 or 1), at least one
check_counts = $(if $(strip $(call given,$1)),,$(call fail,$1 is empty: give one or more whole numbers >= \
$2))$(foreach w,$(call given,$1),$(if $(call is_numchars,$w),$(if $(shell awk 'BEGIN { v = ARGV[1]; ARGV[1] = \
""; exit !(v ~ /^[0-9]+$$/ && v + 0 >= $2) }' $w && echo ok),,$(call fail,$1: '$w' is not a whole number >= \
$2)),$(call fail,$1: '$w' is not a whole number >= $2)))
# $(call check_count,NAME,MIN): NAME is one whole number >= MIN
check_count = $(if $(filter 1,$(words $(call given,$1))),,$(call fail,$1='$(call given,$1)': give one whole \
number >= $2))$(call check_counts,$1,$2)
# $(call check_number,NAME): NAME is one number > 0
check_number = $(if $(filter 1,$(words $(call given,$1))),,$(call fail,$1='$(call given,$1)': give one number \
> 0))$(call check_numbers,$1)
# $(call check_file,NAME,WHAT): the file $(NAME) exists (after check_path)
check_file = $(if $(shell test -e $(call q,$($1)) && echo ok),,$(call fail,$1: $($1) not found$(if $2, ($2))))
# $(call check_shared,FILE...): files under SHARED exist (say where the data comes from when they do not)
check_shared = $(foreach f,$1,$(if $(shell test -e $(call q,$(SHARED)/$f) && echo ok),,$(call fail,$(SHARED)/$f \
not found: this recipe needs ../shared/data beside the repository (or SHARED=DIR), see its README.md)))

$(call check_path,OUT)
$(if $(filter .,$(OUT)),$(call fail,OUT is this recipe's directory: give a directory for the cells (default: out)))
$(call check_path,RESULTS)
$(if $(filter SHARED,$(VARS)),$(call check_path,SHARED))
# the recipe's own checks (define CHECKS ... endef before the include), before anything is written
$(eval $(CHECKS))
ifeq ($(DRY),)
$(if $(shell command -v $(firstword $(GRIND)) >/dev/null && echo y),,$(call fail,GRIND=$(GRIND): \
$(firstword $(GRIND)) not found: activate grind's environment (source .venv/bin/activate) or give GRIND=/path/to/grind))
endif

# ---------------------------------------------------------------------------------- cells, logs, settings
# O: OUT as make writes it in a rule (spaces escaped; relative to the recipe's directory when under it)
O := $(call esc,$(OUT))
# The log of the cell being made: OUT/log/<the target's path under OUT>.log, OUT/log/<its name>.log for a target
# elsewhere (the launcher writes it)
LOG = $(OUT)/log/$(if $(call same,$(OUT)/$(subst $(OUT)/,,$@),$@),$(subst $(OUT)/,,$@),$(lastword $(subst /, ,$@))).log
# RUN: a grind call of a cell through the launcher, e.g. $(RUN) train ... -o $(call q,$@) ...
RUN = $(if $(strip $(CMD)),$(CMD) $(call q,$(LOG)) )$(GRIND)

# OUT/.recipe names the recipe whose cells OUT holds; OUT/.settings/NAME holds a setting that is not in the
# cells' file names. Written when the goal does work and this is no dry run (-n, -q, -t).
ifneq ($(WORK),)
ifneq ($(shell test -e $(call q,$(OUT)/.recipe) && echo y),)
ifeq ($(call same,$(file <$(OUT)/.recipe),$(RECIPE)),)
$(error OUT=$(OUT) holds the cells of the recipe '$(file <$(OUT)/.recipe)', not $(RECIPE)'s: give another OUT)
endif
else ifeq ($(DRY),)
$(shell mkdir -p $(call q,$(OUT)/.settings))
$(file >$(OUT)/.recipe,$(RECIPE))
endif
endif

# $(call dirs,DIR...): make the directories under OUT the cells are written in (grind writes into an existing one)
dirs = $(if $(and $(WORK),$(if $(DRY),,y)),$(shell mkdir -p $(foreach d,$1,$(call q,$(OUT)/$d))))

# $(call setting,NAME,VALUE): a prerequisite (OUT/.settings/NAME) for every cell VALUE goes into. The file holds
# VALUE and is rewritten, so newer than the cells made before, only when VALUE changes: those cells are made
# again, never reused. In a dry run a changed value is the phony prerequisite setting-changed instead.
setting_kept = $(and $(shell test -e $(call q,$(OUT)/.settings/$1) && echo y),$(call same,$(file \
<$(OUT)/.settings/$1),$2))
setting = $(if $(call setting_kept,$1,$2),$(call esc,$(OUT)/.settings/$1),$(if $(or $(DRY),$(if \
$(WORK),,no)),setting-changed,$(shell mkdir -p $(call q,$(OUT)/.settings))$(file >$(OUT)/.settings/$1,$2)$(call \
esc,$(OUT)/.settings/$1)))
.PHONY: setting-changed
setting-changed: ;

# --------------------------------------------------------------------------------------- results, help, clean
# $(call results_args): every variable as NAME=VALUE and NAME.default=VALUE, shell-quoted, for a results script
results_args = $(foreach v,$(VARS),$(call q,$v=$($v)) $(call q,$v.default=$($v.default))) $(call \
q,MACHINE_VARS=$(MACHINE_VARS)) $(call q,RECIPE=$(RECIPE))
# $(call write_results,SCRIPT): the recipe lines that write RESULTS from SCRIPT's stdout (atomically)
write_results = @echo $(call q,$(PYTHON) ../tables.py $1 ... > $(RESULTS))$(newline)$(tab)@$(PYTHON) ../tables.py $1 \
  $(results_args) > $(call q,$(RESULTS).tmp) && mv -- $(call q,$(RESULTS).tmp) $(call \
q,$(RESULTS))

.PHONY: help clean
help:
	@printf '%s\n' $(call q,data-recipes/$(RECIPE): $(ABOUT)) '' \
	  $(call q,make -C data-recipes/$(RECIPE) [-j N] [NAME=VALUE ...] [all | results | clean | help]) '' \
	  '  all (default)  every cell (a file in OUT); -j N runs N at once, an interrupted run goes on where it stopped' \
	  '  results        $(RESULTS.default) (RESULTS): the tables, written from the cells (made first where missing)' \
	  $(TARGETS.help) \
	  '  clean          remove OUT (only if it holds this recipe'"'"'s cells)' \
	  '  help           this' '' 'Variables (default; now, if given otherwise):'
	@$(foreach v,$(VARS),printf '  %-14s %s\n  %-14s default: %s%s\n' $(call q,$v) $(call q,$($v.help)) '' \
	  $(call q,$(if $(strip $($v.default)),$($v.default),(empty))) $(call q,$(if $(call \
	  same,$(strip $(call given,$v)),$(strip $($v.default))),,; now: $(call given,$v)));)

clean:
	@if [[ ! -e $(call q,$(OUT)) ]]; then exit 0; fi; \
	if [[ $$(cat $(call q,$(OUT)/.recipe) 2>/dev/null) != $(call q,$(RECIPE)) ]]; then \
	  echo $(call q,make clean: $(OUT) does not hold this recipe's cells (no $(OUT)/.recipe naming $(RECIPE)): \
	  not removed) >&2; exit 2; fi; \
	rm -rf -- $(call q,$(OUT))
