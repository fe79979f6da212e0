# marginmine: mine and filter parallel corpora with margin-based scoring of multilingual sentence
# embeddings, then prove the filter downstream with NMT + BLEU (Artetxe & Schwenk 2019).
#
#   snakemake -n results/bleu_10M.txt                          # plan the paper's experiment
#   snakemake demo --configfile config/demo.yaml --cores 2     # the one-machine demo
#
# The paper config (config.yaml) is loaded only when no --configfile is given, so an experiment
# config is complete on its own and never inherits keys from another.

from snakemake.utils import min_version, validate

min_version("9.0")


if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


validate(config, "config/schema.yaml")


# rules call the `marginmine` CLI found on PATH (make puts .venv/bin first)
envvars:
    "PATH",



include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/preprocess.smk"
include: "rules/encoder.smk"
include: "rules/score.smk"
include: "rules/evaluate.smk"
include: "rules/nmt.smk"
include: "rules/translate.smk"
include: "rules/report.smk"
include: "rules/published.smk"


rule all:
    default_target: True
    input:
        PLAN.bleu_targets(),


rule preprocess:
    """The preprocessed, sharded corpus, its ledger and the leakage check."""
    input:
        rules.preprocess_ledger.output.json,
        rules.check_overlap.output,


rule encoders:
    """Every configured encoder trained and evaluated (results/<exp>/encoders/intrinsic.md)."""
    input:
        rules.encoder_report.output.tsv,
        rules.encoder_report.output.md,


rule embeddings:
    """Both sides of every preprocessed shard embedded with every encoder a scorer uses."""
    input:
        expand(rules.embed_shard.output, encoder=PLAN.scored_encoders, shard=PLAN.shards),


rule scoring:
    """Every selection (scorer or method x N) and the scorers' evaluations (mining benchmark, filter AUC)."""
    input:
        expand(rules.select_top.output.report, method=PLAN.selected, N=PLAN.sizes),
        PLAN.threshold_selections(rules.select_top.output.report),
        rules.clean_share.output.md,
        rules.clean_share.output.tsv,
        rules.eval_mining.output if PLAN.mining_eval else [],
        rules.eval_filter.output if PLAN.filter_table else [],
        rules.selection_composition.output if PLAN.labelled_corpus else [],
        rules.shortcut_check.output if PLAN.shortcut_scorers("main") else [],
        rules.audit_sample.output if PLAN.audit_scorer is not None else [],  # the labelled audit's sample and page
        rules.audit_estimate.output if PLAN.audit_estimated() else [],  # ... its estimate, where there are labels


rule filtered:
    """Every selection (scorer or method x N, and by threshold) as a filtered corpus: results/<exp>/filtered/."""
    input:
        expand(rules.export_filtered.output, method=PLAN.selected, N=PLAN.sizes),
        PLAN.threshold_selections(rules.export_filtered.output),


rule nmt:
    """The headline BLEU files and the comparison of selection methods (TSV, Markdown, plot)."""
    input:
        PLAN.bleu_targets(),
        rules.compare_methods.output.tsv,


rule demo:
    """What `make demo` builds: the whole experiment on the demo config, from the raw noisy corpus
    to the comparison table, with every evaluation."""
    input:
        rules.preprocess.input,
        rules.encoders.input,
        rules.scoring.input,
        rules.nmt.input,
        rules.report_samples.output,


rule published:
    """What `make published` builds: the published scorers of the config's `published:` section (their
    encoders, scores, selections and NMT systems) and their tables in results/<exp>/published/, with
    the experiment's baselines beside; reuses the experiment's outputs and writes none of them."""
    input:
        (
            [
                rules.published_encoder_report.output.md,
                rules.published_compare.output.md,
                rules.published_summary.output.md,
                rules.published_eval_mining.output.md if PLAN.mining_eval else [],
                rules.published_eval_filter.output.md if PLAN.filter_table else [],
                rules.published_composition.output.md if PLAN.labelled_corpus else [],
                rules.published_vote_report.output.md if PLAN.suite_votes("published") else [],
                rules.published_shortcut.output.md if PLAN.shortcut_scorers() else [],
                rules.published_claims.output.md,
                expand(rules.published_compare_versus.output.md, ref=PLAN.paper_references),
            ]
            if PLAN.papers
            else []
        ),
