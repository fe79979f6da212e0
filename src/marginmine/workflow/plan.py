"""The workflow's plan: one object built from the config dict, once, while Snakemake parses the
Snakefile (``PLAN = Plan.from_config(config)`` in rules/common.smk). Its attributes are the config's
derived values, its methods the rules' input functions and param builders; it never imports
Snakemake and is tested without it (tests/test_workflow_plan.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from marginmine.workflow.checks import check_devices, gpu_visible
from marginmine.workflow.config import Config
from marginmine.workflow.encoders import Encoders
from marginmine.workflow.estimate import Costs
from marginmine.workflow.evaluations import Evaluations
from marginmine.workflow.nmt import Nmt
from marginmine.workflow.scoring import Scoring
from marginmine.workflow.translate import Translate


class Plan(Costs, Translate, Nmt, Evaluations, Scoring, Encoders, Config):
    """What the rules ask while the workflow is planned. Read-only once built: a rule that set an
    attribute would change what other rules see."""

    _frozen = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                    note: Callable[[str], None] | None = None, gpu_rules: set[str] | None = None,
                    executing: bool = False) -> "Plan":
        """The plan of a validated config (schema defaults filled in); ``environ`` supplies
        MARGINMINE_DATA_DIR when the config has no data_dir (default: the process's environment).
        Raises ValueError (or MarginmineError) naming the config key of the first setting that cannot
        be planned. ``note`` gets the lines a plan prints (each scored encoder's scoring estimate, a
        note on small batches, the run's cost estimate); without it they are kept in ``notes``.
        ``gpu_rules``: the rules the run's profile gives a GPU; ``executing``: not a dry run (a GPU
        device that nothing provides is then an error, else a note)."""
        plan = cls.__new__(cls)
        plan._init_config(config, os.environ if environ is None else environ)
        notes: list[str] = []
        plan._init_encoders()
        plan._init_scoring(note or notes.append)
        plan._init_evaluations()
        plan._init_nmt()
        plan._init_translate()
        plan._init_costs(note or notes.append)
        for line in check_devices({"encoder.device": plan.enc["device"], "scoring.device": plan.scoring["device"],
                                   "nmt.device": plan.nmt["device"]}, gpu_rules or set(), gpu_visible(), executing):
            (note or notes.append)(line)
        plan.notes = notes
        plan._frozen = True
        return plan

    def conda_env(self, stage: str) -> str:
        """The conda environment of a stage's rules (``encoder``, ``score``, ``nmt``; relative to rules/):
        its GPU twin (envs/<stage>-gpu.yaml) when the stage's device key asks for cuda."""
        device = {"encoder": self.enc["device"], "score": self.scoring["device"], "nmt": self.nmt["device"]}[stage]
        return f"../envs/{stage}{'-gpu' if device.startswith('cuda') else ''}.yaml"

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(f"the plan is read-only (tried to set {name!r})")
        super().__setattr__(name, value)
