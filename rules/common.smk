# The plan every rule reads: the config, validated (the schema fills every default), read once into
# marginmine.workflow.Plan (derived values, the sources, the plan-time checks that fail `snakemake -n`
# with the config key named, and every stage's input functions and param builders, tested without
# Snakemake). Rules only wire files to the `marginmine` CLI; the NMT helpers not yet moved follow in
# nmt_common.smk.

import json
import math
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from marginmine.io.sizes import SIZE_PATTERN
from marginmine.workflow import Plan
from marginmine.workflow.config import quoted

# `marginmine` comes from the environment snakemake runs in (make puts .venv/bin on PATH).
if shutil.which("marginmine") is None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

PLAN = Plan.from_config(config, note=lambda line: print(line, file=sys.stderr))

# the names every rule's paths start from
EXP, RESULTS, WORK, LOGS, BENCH = PLAN.exp, PLAN.results, PLAN.work, PLAN.logs, PLAN.bench
SRC, TGT = PLAN.src, PLAN.tgt
# the config's sections the rules read
PRE, ENC, SCORING, AUDIT, TRANSLATORS = PLAN.pre, PLAN.enc, PLAN.scoring, PLAN.audit, PLAN.translators

# nmt_common.smk, not yet moved into the plan, reads these
SIZES, METHODS, EVAL_SETS, CLEAN_MIX_PREFIX = PLAN.sizes, PLAN.methods, PLAN.eval_sets, PLAN.clean_mix_prefix
ALL_SCORERS, PAPER_BASELINES, PAPER_METHODS = PLAN.all_scorers, PLAN.paper_baselines, PLAN.paper_methods
eval_files, _quoted = PLAN.eval_files, quoted

wildcard_constraints:
    shard=r"\d\d\d\d+",
    N=SIZE_PATTERN,
