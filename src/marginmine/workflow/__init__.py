"""The workflow's plan (the Snakefile and rules/*.smk call it): the config read once, its derived
values and plan-time checks (:mod:`.config`), the path templates a rule and its readers share
(:mod:`.paths`), and per stage the rules' input functions and param builders (:mod:`.encoders`,
:mod:`.scoring`, :mod:`.evaluations`, :mod:`.nmt`, :mod:`.translate`), joined in :class:`Plan`.
May import any stage package; no stage imports it, and it never imports Snakemake."""

from marginmine.workflow.plan import Plan

__all__ = ["Plan"]
