# The labelled audit of how many pairs to keep (docs/choosing-n.md): a stratified sample of one
# scorer's ranking and its labelling page; the estimate from a person's exported labels
# (audit.labels_file) or, for a corpus the workflow builds, from its own label sidecar standing in.


rule audit_sample:
    """A seeded sample of the audited scorer's ranking, stratified so every N is measured as
    closely, as a TSV with an empty label column and a self-contained labelling page."""
    input:
        pairs=expand(rules.preprocess_shard.output.kept, shard=SHARDS),
        scores=lambda w: score_files(score_group(AUDIT_SCORER)),
    output:
        tsv=f"{RESULTS}/audit/sample.tsv",
        plan=f"{RESULTS}/audit/sample.plan.json",
        html=report(f"{RESULTS}/audit/sample.html", category="Audit"),
    log:
        f"{LOGS}/audit/sample.log",
    benchmark:
        f"{BENCH}/audit/sample.tsv"
    params:
        scorer=AUDIT_SCORER,
        labels=AUDIT["labels"],
        strata=AUDIT["strata"],
        sizes=AUDIT_SIZES,
        thresholds=[f"{t:g}" for t in THRESHOLDS.get(AUDIT_SCORER, [])],
        seed=config["seed"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine audit-sample --pairs {input.pairs:q} --scores {input.scores:q} --scorer {params.scorer:q} "
        "--labels {params.labels:q} --strata {params.strata:q} --sizes {params.sizes:q} --thresholds {params.thresholds:q} "
        "--seed {params.seed:q} --tsv {output.tsv:q} --plan {output.plan:q} --html {output.html:q} > {log:q} 2>&1"


rule audit_fill:
    """The sample labelled from the corpus' own label sidecar (clean = good), standing in for a
    person: only for the corpora the workflow builds."""
    input:
        sample=rules.audit_sample.output.tsv,
        labels=CORPUS_LABELS,
    output:
        f"{WORK}/audit/labels.sidecar.tsv",
    log:
        f"{LOGS}/audit/fill.log",
    benchmark:
        f"{BENCH}/audit/fill.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine audit-fill --sample {input.sample:q} --labels {input.labels:q} --output {output:q} > {log:q} 2>&1"


rule audit_estimate:
    """The precision of every N and threshold with 95% intervals, the largest N at audit.target,
    the label counts and a plot, from the labelled sample. A person's labels file is an audit on its
    own: drawn again for new sizes, the sample's plan no longer matches it, and the estimate is made at
    audit.sizes without the thresholds (the log says so)."""
    input:
        plan=rules.audit_sample.output.plan,
        labels=AUDIT["labels_file"] or rules.audit_fill.output[0],
    output:
        tsv=f"{RESULTS}/audit/estimate.tsv",
        md=f"{RESULTS}/audit/estimate.md",
        json=f"{RESULTS}/audit/estimate.json",
        png=report(f"{RESULTS}/audit/estimate.png", category="Audit"),
    log:
        f"{LOGS}/audit/estimate.log",
    benchmark:
        f"{BENCH}/audit/estimate.tsv"
    params:
        scorer=AUDIT_SCORER,
        sizes=AUDIT_SIZES,
        target=AUDIT["target"],
        monotone=["--monotone"] if AUDIT["monotone"] else [],
        note="Labels: " + (f"{AUDIT['labels_file']} (a person's)." if AUDIT["labels_file"] else
                           "the corpus' own label sidecar (clean = good) stands in for a person."),
        seed=config["seed"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine audit-estimate --plan {input.plan:q} --labels {input.labels:q} --scorer {params.scorer:q} "
        "--sizes {params.sizes:q} --target {params.target:q} {params.monotone:q} --note {params.note:q} "
        "--seed {params.seed:q} --tsv {output.tsv:q} --md {output.md:q} --json {output.json:q} --png {output.png:q} "
        "> {log:q} 2>&1"
