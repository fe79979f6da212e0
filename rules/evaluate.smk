# The evaluations of a run's scores (package marginmine.evaluate): the shortcut check of fitted
# scorers, a selection's composition and the noise baseline's clean share, the BUCC-style mining
# benchmark and filtering quality on labelled pairs; and the labelled audit of how many pairs to
# keep (docs/choosing-n.md): a stratified sample of one scorer's ranking and its labelling page, the
# estimate from a person's exported labels (audit.labels_file) or, for a corpus the workflow builds,
# from its own label sidecar standing in. Input functions live in marginmine.workflow (evaluations.py).


rule shortcut_check:
    """The shortcut check of the experiment's fitted scorers (marginmine.evaluate.shortcut): each on the
    clean-mix test pairs of each origin and on its kept-out positives, against the same pairs
    re-paired within the group, beside cosine: a scorer that tells domains apart instead of
    translations shows AUCs near or under 0.5."""
    input:
        heads=lambda w: PLAN.head_inputs(PLAN.shortcut_scorers("main")),
        encoders=lambda w: PLAN.encoder_jsons(PLAN.shortcut_encoders("main")),
        test=lambda w: PLAN.shortcut_test_files(),
    output:
        tsv=f"{RESULTS}/filtering/shortcut.tsv",
        md=f"{RESULTS}/filtering/shortcut.md",
        per_item=f"{RESULTS}/filtering/shortcut.items.tsv.gz",
    log:
        f"{LOGS}/filtering/shortcut.log",
    benchmark:
        f"{BENCH}/filtering/shortcut.tsv"
    params:
        scorers=lambda w: PLAN.scorers_json(PLAN.shortcut_scorers("main")),
        encoders=lambda w: PLAN.encoder_args(PLAN.shortcut_encoders("main")),
        plugins=PLAN.plugin_args(),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        seed=config["seed"],
        device=ENC["device"],
        title=f"{EXP}: shortcut check of the fitted scorers",
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=3000,
        runtime=20,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine shortcut-check --scorers {params.scorers:q} {params.plugins} --encoder {params.encoders:q} "
        "--test {input.test:q} {params.langs} --seed {params.seed:q} --device {params.device:q} --threads {threads} "
        "--title {params.title:q} --tsv {output.tsv:q} --md {output.md:q} > {log:q} 2>&1"


rule selection_composition:
    """What each selection is made of, by the labelled corpus' origins and noise kinds (the demo's
    sidecar): how much noise a method let through and which clean domain it preferred; and why, per
    group: its mean cosine and mean kNN similarity over the scored corpus (density.tsv, from a margin
    scorer and a cosine scorer over one encoder)."""
    input:
        unpack(lambda w: PLAN.composition_inputs("main")),
    output:
        tsv=report(f"{RESULTS}/select/composition.tsv", category="Selection"),
        md=f"{RESULTS}/select/composition.md",
        density=report(f"{RESULTS}/select/density.tsv", category="Selection"),
        per_item=f"{RESULTS}/select/composition.items.tsv.gz",
    log:
        f"{LOGS}/select/composition.log",
    benchmark:
        f"{BENCH}/select/composition.tsv"
    params:
        title=EXP,
        density=lambda w, input, output: PLAN.composition_density_args(input, output),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine composition --labels {input.labels:q} --selections {input.selections:q} {params.density} "
        "--tsv {output.tsv:q} --md {output.md:q} --title {params.title:q} > {log:q} 2>&1"


rule clean_share:
    """How many pairs to keep: each scorer's estimated noise share, the estimated clean share of its
    top N (selection.sizes) and above its thresholds (selection.thresholds), the largest N at 90% and
    50%, and the retained-count curve, from the score files and their noise baselines."""
    input:
        unpack(lambda w: PLAN.clean_share_inputs()),
    output:
        tsv=report(f"{RESULTS}/select/clean_share.tsv", category="Selection"),
        md=f"{RESULTS}/select/clean_share.md",
        curve=f"{RESULTS}/select/clean_share_curve.tsv",
        png=report(f"{RESULTS}/select/clean_share.png", category="Selection",
                   caption="../docs/report/clean_share.rst"),
    log:
        f"{LOGS}/select/clean_share.log",
    benchmark:
        f"{BENCH}/select/clean_share.tsv"
    params:
        args=lambda w: PLAN.clean_share_args(),
        title=f"{EXP}: estimated clean share (noise baseline)",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine clean-share {params.args} --title {params.title:q} --tsv {output.tsv:q} --md {output.md:q} "
        "--curve {output.curve:q} --png {output.png:q} > {log:q} 2>&1"


rule mining_benchmark_data:
    """BUCC-style benchmark: gold pairs hidden in monolingual pools (train split for thresholds)."""
    input:
        lambda w: PLAN.mining_eval_files(),
    output:
        expand(f"{WORK}/mining_eval/{{split}}.{{part}}", split=["train", "test"], part=["src", "tgt", "gold"]),
        summary=f"{WORK}/mining_eval/summary.json",
    log:
        f"{LOGS}/mining_eval/data.log",
    benchmark:
        f"{BENCH}/mining_eval/data.tsv"
    params:
        gold_train=lambda w: PLAN.pair_args(PLAN.mining_eval["gold_train"]),
        gold_test=lambda w: PLAN.pair_args(PLAN.mining_eval["gold_test"]),
        mono_src=lambda w: PLAN.mining_mono("src"),
        mono_tgt=lambda w: PLAN.mining_mono("tgt"),
        share=lambda w: PLAN.mining_eval["share"],
        distractors=lambda w: PLAN.mining_eval["distractors"],
        mono_max=lambda w: PLAN.mining_eval["mono_max"],
        seed=config["seed"],
        outdir=lambda w, output: os.path.dirname(output.summary),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine bucc-data --gold-train {params.gold_train:q} --gold-test {params.gold_test:q} "
        "--mono-src {params.mono_src:q} --mono-tgt {params.mono_tgt:q} --share {params.share:q} "
        "--distractors {params.distractors:q} --mono-max {params.mono_max:q} --seed {params.seed:q} --output-dir {params.outdir:q} > "
        "{log:q} 2>&1"


rule eval_mining:
    """P/R/F1 of every scorer x retrieval (the paper's Table 2, one row group per scorer that can mine)."""
    input:
        encoders=PLAN.encoder_jsons(PLAN.suite_encoders("main")),
        data=rules.mining_benchmark_data.output.summary,
        heads=PLAN.head_inputs(PLAN.suites["main"]["scorers"]),
        translated=lambda w: PLAN.pool_translations("main"),
    output:
        tsv=report(f"{RESULTS}/mining/bucc.tsv", category="Mining"),
        md=f"{RESULTS}/mining/bucc.md",
        per_item=f"{RESULTS}/mining/bucc.items.tsv.gz",
    log:
        f"{LOGS}/mining_eval/eval.log",
    benchmark:
        f"{BENCH}/mining_eval/eval.tsv"
    params:
        encoders=PLAN.scored_encoder_args("main"),
        scorers=PLAN.suite_scorers_json("main"),
        plugins=PLAN.plugin_args(),
        data=lambda w, input: os.path.dirname(input.data),
        k=SCORING["k"],
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        translated=lambda w, input: PLAN.pool_translation_args(input),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine eval-mining --encoder {params.encoders:q} --scorers {params.scorers:q} {params.plugins} "
        "-k {params.k:q} --data {params.data:q} {params.translated} {params.langs} --threads {threads} "
        "--tsv {output.tsv:q} --md {output.md:q} > {log:q} 2>&1"


rule eval_filter:
    """ROC-AUC and precision at top-N of every scorer beside BiCleaner/Zipporah (ParaCrawl human
    labels) and on the demo corpus' own labels; the clean share estimated from the noise baseline
    beside the labelled one (clean_share_check)."""
    input:
        unpack(lambda w: PLAN.filter_eval_inputs("main")),
    output:
        tsv=report(f"{RESULTS}/filtering/quality.tsv", category="Filtering"),
        md=f"{RESULTS}/filtering/quality.md",
        per_item=f"{RESULTS}/filtering/quality.items.tsv.gz",
        check_tsv=report(f"{RESULTS}/filtering/clean_share_check.tsv", category="Filtering"),
        check_md=f"{RESULTS}/filtering/clean_share_check.md",
        groups_tsv=f"{RESULTS}/filtering/baseline_groups.tsv",
        groups_md=f"{RESULTS}/filtering/baseline_groups.md",
    log:
        f"{LOGS}/filter_eval.log",
    benchmark:
        f"{BENCH}/filter_eval.tsv"
    params:
        args=lambda w, input: PLAN.filter_eval_args("main", input),
        encoders=PLAN.scored_encoder_args("main"),
        scorers=PLAN.suite_scorers_json("main"),
        plugins=PLAN.plugin_args(),
        k=SCORING["k"],
        top_n=lambda w: PLAN.filter_top_n_arg(),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        seed=config["seed"],
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine eval-filter --encoder {params.encoders:q} --scorers {params.scorers:q} {params.plugins} "
        "-k {params.k:q} {params.args} {params.langs} {params.top_n} --threads {threads} --seed {params.seed:q} "
        "--tsv {output.tsv:q} --md {output.md:q} --check-tsv {output.check_tsv:q} --check-md {output.check_md:q} "
        "--groups-tsv {output.groups_tsv:q} --groups-md {output.groups_md:q} > {log:q} 2>&1"


rule audit_sample:
    """A seeded sample of the audited scorer's ranking, stratified so every N is measured as
    closely, as a TSV with an empty label column and a self-contained labelling page."""
    input:
        pairs=expand(rules.preprocess_shard.output.kept, shard=PLAN.shards),
        scores=lambda w: PLAN.scorer_score_files(PLAN.audit_scorer),
    output:
        tsv=f"{RESULTS}/audit/sample.tsv",
        plan=f"{RESULTS}/audit/sample.plan.json",
        html=report(f"{RESULTS}/audit/sample.html", category="Audit"),
    log:
        f"{LOGS}/audit/sample.log",
    benchmark:
        f"{BENCH}/audit/sample.tsv"
    params:
        scorer=PLAN.audit_scorer,
        labels=AUDIT["labels"],
        strata=AUDIT["strata"],
        sizes=PLAN.audit_sizes,
        thresholds=PLAN.audit_thresholds(),
        seed=config["seed"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine audit-sample --pairs {input.pairs:q} --scores {input.scores:q} --scorer {params.scorer:q} "
        "--labels {params.labels:q} --strata {params.strata:q} --sizes {params.sizes:q} --thresholds {params.thresholds:q} "
        "--seed {params.seed:q} --tsv {output.tsv:q} --plan {output.plan:q} --html {output.html:q} > {log:q} 2>&1"


rule audit_fill:
    """The sample labelled from the corpus' own label sidecar (clean = good), standing in for a
    person: only for the corpora the workflow builds."""
    input:
        sample=rules.audit_sample.output.tsv,
        labels=PLAN.corpus_labels,
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
        PLAN.conda_env("score")
    shell:
        "marginmine audit-fill --sample {input.sample:q} --labels {input.labels:q} --output {output:q} > {log:q} 2>&1"


rule audit_estimate:
    """The precision of every N and threshold with 95% intervals, the largest N at audit.target,
    the label counts and a plot, from the labelled sample. A person's labels file is an audit on its
    own: drawn again for new sizes, the sample's plan no longer matches it, and the estimate is made at
    audit.sizes without the thresholds (the log says so)."""
    input:
        plan=rules.audit_sample.output.plan,
        labels=PLAN.audit_labels or rules.audit_fill.output[0],
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
        scorer=PLAN.audit_scorer,
        sizes=PLAN.audit_sizes,
        target=AUDIT["target"],
        monotone=["--monotone"] if AUDIT["monotone"] else [],
        note=PLAN.audit_note(),
        seed=config["seed"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine audit-estimate --plan {input.plan:q} --labels {input.labels:q} --scorer {params.scorer:q} "
        "--sizes {params.sizes:q} --target {params.target:q} {params.monotone:q} --note {params.note:q} "
        "--seed {params.seed:q} --tsv {output.tsv:q} --md {output.md:q} --json {output.json:q} --png {output.png:q} "
        "> {log:q} 2>&1"
