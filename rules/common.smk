# The plan every rule reads: the config, validated (the schema fills every default), read once into
# marginmine.workflow.Plan (derived values, the sources, the plan-time checks that fail `snakemake -n`
# with the config key named, and every stage's input functions and param builders, tested without
# Snakemake). Rules only wire files to the `marginmine` CLI: each gets its input, output, params,
# resources and shell from PLAN's attributes, path templates and methods.

import os
import shutil
import sys
from pathlib import Path

from marginmine.io.sizes import SIZE_PATTERN
from marginmine.workflow import Plan
from marginmine.workflow.checks import executing_from_argv, profile_gpu_rules
from marginmine.workflow.paths import named_options, one_of, repeated, tables

# `marginmine` comes from the environment snakemake runs in (make puts .venv/bin on PATH).
if shutil.which("marginmine") is None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

# the rules the profile gives a GPU (set-resources), and whether jobs will run: a device the run
# cannot provide fails here when executing, and is a note in a dry run
PLAN = Plan.from_config(config, note=lambda line: print(line, file=sys.stderr),
                        gpu_rules=profile_gpu_rules(workflow.resource_settings.overwrite_resources),
                        executing=executing_from_argv(sys.argv))

# the names every rule's paths start from
EXP, RESULTS, WORK, LOGS, BENCH = PLAN.exp, PLAN.results, PLAN.work, PLAN.logs, PLAN.bench
SRC, TGT = PLAN.src, PLAN.tgt
# the config's sections the rules read
PRE, ENC, SCORING, NMT = PLAN.pre, PLAN.enc, PLAN.scoring, PLAN.nmt
AUDIT, TRANSLATORS = PLAN.audit, PLAN.translators

wildcard_constraints:
    shard=r"\d\d\d\d+",
    N=SIZE_PATTERN,
