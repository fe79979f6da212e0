# The plan every rule reads: the config, validated (the schema fills every default), read once into
# marginmine.workflow.Plan (derived values, the sources, the plan-time checks that fail `snakemake -n`
# with the config key named, and every stage's input functions and param builders, tested without
# Snakemake). Rules only wire files to the `marginmine` CLI; the stages' remaining helpers follow in
# score_common.smk, nmt_common.smk and translate_common.smk.

import json
import math
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from marginmine.io.sizes import SIZE_PATTERN, resolve_sizes, threshold_label
from marginmine.scoring.plan import check_scorer_config
from marginmine.workflow import Plan

# `marginmine` comes from the environment snakemake runs in (make puts .venv/bin on PATH).
if shutil.which("marginmine") is None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

PLAN = Plan.from_config(config)

# the names every rule's paths start from
EXP, RESULTS, WORK, LOGS, BENCH = PLAN.exp, PLAN.results, PLAN.work, PLAN.logs, PLAN.bench
SRC, TGT = PLAN.src, PLAN.tgt
PRE, ENC = PLAN.pre, PLAN.enc

# the stages' helper files not yet moved into the plan read these
SHARD_SIZE, SHARDS, EVAL_SETS, EXPECTED_KEPT = PLAN.shard_size, PLAN.shards, PLAN.eval_sets, PLAN.expected_kept
SIZES, METHODS, THRESHOLDS, URL_SOURCES = PLAN.sizes, PLAN.methods, PLAN.thresholds, PLAN.url_sources
CLEAN_MIX, CLEAN_MIX_PREFIX = PLAN.clean_mix, PLAN.clean_mix_prefix
BUILT_CORPORA = ("demo", "scale")
data_path, download_path, source_files = PLAN.data_path, PLAN.download_path, PLAN.source_files
eval_files, protect_files, corpus_files = PLAN.eval_files, PLAN.protect_files, PLAN.corpus_files
DEFAULT_ENCODER, ENCODER_DIRS, EVALUATED_ENCODERS = PLAN.default_encoder, PLAN.encoder_dirs, PLAN.evaluated_encoders
PAPERS, PAPER_ENCODERS, encoder_json, encoder_args = PLAN.papers, PLAN.paper_encoders, PLAN.encoder_json, PLAN.encoder_args

wildcard_constraints:
    shard=r"\d\d\d\d+",
    N=SIZE_PATTERN,
