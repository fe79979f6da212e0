# The published scorers' suite (config `published:`, target `published`; papers in ../shared/seeds/):
# its encoders, scorers and NMT systems go through the experiment's own rules (train_encoder,
# eval_encoder, embed_shard, score_shard into work/<exp>/score/published/<encoder>/, select_top,
# train_nmt, evaluate_nmt); the rules below are the experiment's table rules with the suite's
# inputs (params not named here are the original rule's), writing results/<exp>/published/ - never a
# file of the experiment's, so after `published` the experiment's target has nothing to do. Input
# functions live in marginmine.workflow (PLAN.suites["published"]).

PUBLISHED_DIR = f"{RESULTS}/published"


use rule eval_encoder as published_eval_encoder with:
    output:
        f"{PUBLISHED_DIR}/eval/{{name}}.json",
    log:
        f"{LOGS}/published/eval_encoder/{{name}}.log",
    benchmark:
        f"{BENCH}/published/eval_encoder/{{name}}.tsv"
    params:
        margins=PLAN.published_margin_args(),


rule published_eval_similarity:
    """Intrinsic retrieval with a learned similarity (a suite method whose kind scores every pair,
    e.g. the MLP) over all n x n pairs of the language pair's intrinsic sets, beside the margins."""
    input:
        encoder=lambda w: PLAN.encoder_json(PLAN.paper_scorers[w.name]["encoder"]),
        heads=lambda w: PLAN.head_inputs([w.name]),
        sets=lambda w: PLAN.intrinsic_files(),
    output:
        f"{PUBLISHED_DIR}/eval-similarity/{{name}}.json",
    log:
        f"{LOGS}/published/eval_similarity/{{name}}.log",
    benchmark:
        f"{BENCH}/published/eval_similarity/{{name}}.tsv"
    params:
        scorers=lambda w: PLAN.scorers_json([w.name]),
        encoders=lambda w: PLAN.encoder_args([PLAN.paper_scorers[w.name]["encoder"]]),
        plugins=PLAN.plugin_args(),
        sets=lambda w: PLAN.intrinsic_set_args(pair_only=True),
        src=SRC,
        seed=config["seed"],
        device=ENC["device"],
    wildcard_constraints:
        name=one_of(PLAN.similarity_scorers(), empty="(?!)"),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine eval-similarity --encoder {params.encoders:q} --scorers {params.scorers:q} {params.plugins} "
        "--name {wildcards.name:q} {params.sets} --src-lang {params.src:q} --label similarity --seed {params.seed:q} "
        "--device {params.device:q} --threads {threads} --output {output:q} > {log:q} 2>&1"


use rule encoder_report as published_encoder_report with:
    input:
        evals=[*expand(rules.published_eval_encoder.output, name=PLAN.suites["published"]["encoders"]),
               *expand(rules.published_eval_similarity.output, name=PLAN.similarity_scorers())],
        votes=lambda w: ([rules.published_vote_report.output.tsv]
                         if PLAN.suite_votes("published") and PLAN.vote_intrinsic_sets() else []),
    output:
        tsv=f"{PUBLISHED_DIR}/intrinsic.tsv",
        md=f"{PUBLISHED_DIR}/intrinsic.md",
        per_item=f"{PUBLISHED_DIR}/intrinsic.items.tsv.gz",
    log:
        f"{LOGS}/published/intrinsic.log",
    benchmark:
        f"{BENCH}/published/intrinsic.tsv"


use rule eval_mining as published_eval_mining with:
    input:
        encoders=PLAN.encoder_jsons(PLAN.suite_encoders("published")),
        data=rules.mining_benchmark_data.output.summary,
        heads=PLAN.head_inputs(PLAN.suites["published"]["scorers"]),
        translated=lambda w: PLAN.pool_translations("published"),
    output:
        tsv=f"{PUBLISHED_DIR}/bucc.tsv",
        md=f"{PUBLISHED_DIR}/bucc.md",
        per_item=f"{PUBLISHED_DIR}/bucc.items.tsv.gz",
    log:
        f"{LOGS}/published/bucc.log",
    benchmark:
        f"{BENCH}/published/bucc.tsv"
    params:
        encoders=PLAN.scored_encoder_args("published"),
        scorers=PLAN.suite_scorers_json("published"),


use rule eval_filter as published_eval_filter with:
    input:
        unpack(lambda w: PLAN.filter_eval_inputs("published")),
    output:
        tsv=f"{PUBLISHED_DIR}/quality.tsv",
        md=f"{PUBLISHED_DIR}/quality.md",
        per_item=f"{PUBLISHED_DIR}/quality.items.tsv.gz",
        check_tsv=f"{PUBLISHED_DIR}/clean_share_check.tsv",
        check_md=f"{PUBLISHED_DIR}/clean_share_check.md",
        groups_tsv=f"{PUBLISHED_DIR}/baseline_groups.tsv",
        groups_md=f"{PUBLISHED_DIR}/baseline_groups.md",
    log:
        f"{LOGS}/published/quality.log",
    benchmark:
        f"{BENCH}/published/quality.tsv"
    params:
        args=lambda w, input: PLAN.filter_eval_args("published", input),
        encoders=PLAN.scored_encoder_args("published"),
        scorers=PLAN.suite_scorers_json("published"),


rule published_claims:
    """Each seed paper's headline claim beside the same comparison in the suite's tables
    (marginmine.report.claim_list): the paper's numbers and setting, ours read from the tables, the
    verdict; a table this config does not build makes its claims "not measured"."""
    input:
        tables=lambda w: [  # the tables this config builds (marginmine.report.claim_list reads them), with
            # the items sidecars their significance tests read (marginmine.evaluate.paired)
            rules.published_encoder_report.output.tsv, rules.published_encoder_report.output.per_item,
            rules.published_compare.output.tsv,
            *([rules.published_eval_mining.output.tsv, rules.published_eval_mining.output.per_item]
              if PLAN.mining_eval else []),
            *([rules.published_eval_filter.output.tsv, rules.published_eval_filter.output.per_item]
              if PLAN.filter_table else []),
            *([rules.published_shortcut.output.tsv, rules.published_shortcut.output.per_item]
              if PLAN.shortcut_scorers() else []),
            *([rules.published_composition.output.tsv, rules.published_composition.output.per_item]
              if PLAN.labelled_corpus else []),
            *expand(rules.published_compare_versus.output.tsv, ref=PLAN.paper_references),
        ],
    output:
        tsv=f"{PUBLISHED_DIR}/claims.tsv",
        md=f"{PUBLISHED_DIR}/claims.md",
    log:
        f"{LOGS}/published/claims.log",
    benchmark:
        f"{BENCH}/published/claims.tsv"
    params:
        results=lambda wildcards, output: os.path.dirname(output.tsv),
        size=PLAN.sizes[0],
        small=PLAN.paper_small[0] if PLAN.paper_small else "",
        title=f"{EXP}: the papers' claims beside ours",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine claims --results {params.results:q} --size {params.size:q} --small-size={params.small:q} --title {params.title:q} "
        "--tables {input.tables:q} --tsv {output.tsv:q} --md {output.md:q} > {log:q} 2>&1"


use rule shortcut_check as published_shortcut with:
    input:
        heads=lambda w: PLAN.head_inputs(PLAN.shortcut_scorers()),
        encoders=lambda w: PLAN.encoder_jsons(PLAN.shortcut_encoders()),
        test=lambda w: PLAN.shortcut_test_files(),
    output:
        tsv=f"{PUBLISHED_DIR}/shortcut.tsv",
        md=f"{PUBLISHED_DIR}/shortcut.md",
        per_item=f"{PUBLISHED_DIR}/shortcut.items.tsv.gz",
    log:
        f"{LOGS}/published/shortcut.log",
    benchmark:
        f"{BENCH}/published/shortcut.tsv"
    params:
        scorers=lambda w: PLAN.scorers_json(PLAN.shortcut_scorers()),
        encoders=lambda w: PLAN.encoder_args(PLAN.shortcut_encoders()),
        plugins=PLAN.plugin_args(),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        seed=config["seed"],
        device=ENC["device"],
        title=f"{EXP}: shortcut check of the suite's fitted scorers",


use rule selection_composition as published_composition with:
    input:
        unpack(lambda w: PLAN.composition_inputs("published")),
    output:
        tsv=f"{PUBLISHED_DIR}/composition.tsv",
        md=f"{PUBLISHED_DIR}/composition.md",
        density=f"{PUBLISHED_DIR}/density.tsv",
        per_item=f"{PUBLISHED_DIR}/composition.items.tsv.gz",
    log:
        f"{LOGS}/published/composition.log",
    benchmark:
        f"{BENCH}/published/composition.tsv"
    params:
        title=f"{EXP}: published scorers",


use rule compare_methods as published_compare with:
    input:
        runs=PLAN.suite_runs(rules.evaluate_nmt.output.json),
        labels=list(PLAN.subset_labels().values()),
    output:
        tsv=f"{PUBLISHED_DIR}/comparison.tsv",
        md=f"{PUBLISHED_DIR}/comparison.md",
        runs=f"{PUBLISHED_DIR}/comparison_runs.tsv",
        png=f"{PUBLISHED_DIR}/comparison.png",
    log:
        f"{LOGS}/published/comparison.log",
    benchmark:
        f"{BENCH}/published/comparison.tsv"
    params:
        title=f"{EXP}: published scorers, {SRC}-{TGT}",
        headline=(PLAN.paper_baselines or [PLAN.default_method])[0],


use rule compare_methods as published_compare_versus with:
    input:
        runs=PLAN.suite_runs(rules.evaluate_nmt.output.json),
        labels=list(PLAN.subset_labels().values()),
    output:
        tsv=f"{PUBLISHED_DIR}/versus/{{ref}}/comparison.tsv",
        md=f"{PUBLISHED_DIR}/versus/{{ref}}/comparison.md",
        runs=f"{PUBLISHED_DIR}/versus/{{ref}}/comparison_runs.tsv",
        png=f"{PUBLISHED_DIR}/versus/{{ref}}/comparison.png",
    log:
        f"{LOGS}/published/comparison_versus_{{ref}}.log",
    benchmark:
        f"{BENCH}/published/comparison_versus_{{ref}}.tsv"
    params:
        title=lambda w: f"{EXP}: published scorers against {w.ref}, {SRC}-{TGT}",
        headline=lambda w: w.ref,
    wildcard_constraints:
        ref=one_of(PLAN.paper_references, empty="(?!)"),


rule published_summary:
    """One row per system of the suite (its scorers and the experiment's baselines): ParaCrawl and
    demo-corpus AUC, BUCC F1, its encoder's intrinsic errors, pairs selected, test BLEU with sd and
    p-value, joined from the suite's tables (no number computed here)."""
    input:
        intrinsic=rules.published_encoder_report.output.tsv,
        bucc=rules.published_eval_mining.output.tsv if PLAN.mining_eval else [],
        quality=rules.published_eval_filter.output.tsv if PLAN.filter_table else [],
        comparison=rules.published_compare.output.tsv,
        runs=rules.published_compare.output.runs,
        select=expand(rules.select_top.output.report, method=PLAN.suites["published"]["selected"], N=PLAN.sizes),
    output:
        tsv=f"{PUBLISHED_DIR}/summary.tsv",
        md=f"{PUBLISHED_DIR}/summary.md",
    log:
        f"{LOGS}/published/summary.log",
    benchmark:
        f"{BENCH}/published/summary.tsv"
    params:
        scorers=PLAN.suite_scorers_json("published"),
        methods=PLAN.suites["published"]["methods"],
        sizes=PLAN.sizes,
        tables=lambda w, input: named_options(input, ("bucc", "quality")),
        title=f"{EXP}: published scorers, one row per system",
        caps=lambda w: PLAN.caps_from,
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine summary --scorers {params.scorers:q} --methods {params.methods:q} --sizes {params.sizes:q} "
        "--intrinsic {input.intrinsic:q} {params.tables} --comparison {input.comparison:q} --runs {input.runs:q} "
        "--select {input.select:q} "
        "--title {params.title:q} --tsv {output.tsv:q} --md {output.md:q} --caps-from {params.caps} > {log:q} 2>&1"


rule published_vote_report:
    """Translate-then-vote: the translators' BLEU and decoding speed, the five candidate sets' P/R/F1
    on the intrinsic sets of the language pair, the natural voted-set sizes on the corpus."""
    input:
        unpack(lambda w: PLAN.vote_report_inputs()),
    output:
        tsv=f"{PUBLISHED_DIR}/votes.tsv",
        md=f"{PUBLISHED_DIR}/votes.md",
    log:
        f"{LOGS}/published/votes.log",
    benchmark:
        f"{BENCH}/published/votes.tsv"
    params:
        args=lambda w, input: PLAN.vote_report_args(input),
        encdir=lambda w, input: os.path.dirname(input.encoder),
        k=SCORING["k"],
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        title=f"{EXP}: translate-then-vote, {SRC}-{TGT}",
        device=ENC["device"],
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine vote-report --encoder {params.encdir:q} {params.args} -k {params.k:q} {params.langs} "
        "--title {params.title:q} --device {params.device:q} --threads {threads} --tsv {output.tsv:q} "
        "--md {output.md:q} > {log:q} 2>&1"
