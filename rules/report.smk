# The HTML report (`snakemake --report results/<exp>/report.html report_figures`, or `make report`):
# figures and tables of the preprocessing ledger, the selections' score histograms, the result
# tables, and wall time / throughput per rule from the benchmark files. Logic: marginmine.report.figures.

report: "../docs/report/workflow.rst"


rule report_figures:
    """Ledger figure + table, score histograms per selection method, result tables and the per-rule
    wall time / throughput table (benchmark files are globbed, so run it last: `make report`)."""
    input:
        ledger=rules.preprocess_ledger.output.json,
        select=expand(rules.select_top.output.report, method=PLAN.selected, N=PLAN.sizes),
        encoders=rules.encoder_report.output.tsv,
        evals=lambda w: tables(rules.scoring.input, but=rules.audit_sample.output.tsv),
    output:
        ledger_png=report(
            f"{RESULTS}/report/ledger.png",
            category="Preprocessing",
            caption="../docs/report/ledger_figure.rst",
        ),
        ledger_html=report(
            f"{RESULTS}/report/ledger.html",
            category="Preprocessing",
            caption="../docs/report/ledger_table.rst",
        ),
        histograms=report(
            f"{RESULTS}/report/score_histograms.png",
            category="Selection",
            caption="../docs/report/score_histograms.rst",
        ),
        tables=report(
            f"{RESULTS}/report/tables.html",
            category="Result tables",
            caption="../docs/report/tables.rst",
        ),
        benchmarks_html=report(
            f"{RESULTS}/report/benchmarks.html",
            category="Benchmarks",
            caption="../docs/report/benchmarks.rst",
        ),
        benchmarks_tsv=report(
            f"{RESULTS}/report/benchmarks.tsv",
            category="Benchmarks",
            caption="../docs/report/benchmarks.rst",
        ),
    log:
        f"{LOGS}/report_figures.log",
    benchmark:
        f"{BENCH}/report_figures.tsv"
    params:
        work=WORK,
        caps=lambda w: PLAN.caps_from,
        benchmarks=BENCH,
        methods=PLAN.selected,
        title=EXP,
        outdir=lambda w, output: os.path.dirname(output.ledger_png),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine report-figures --ledger {input.ledger:q} --select {input.select:q} --tables "
        "{input.encoders:q} {input.evals:q} --work {params.work:q} --benchmarks {params.benchmarks:q} "
        "--methods {params.methods:q} --title {params.title:q} --outdir {params.outdir:q} "
        "--caps-from {params.caps} > {log:q} 2>&1"


rule report_samples:
    """Pairs to read (marginmine.report.samples): a seeded sample of the pairs each preprocessing step
    removed, pairs at score quantiles and at each N's boundary per scorer, pairs the config's first
    two scorers disagree on; one report page and its TSVs."""
    input:
        pairs=expand(rules.preprocess_shard.output.kept, shard=PLAN.shards),
        scores=lambda w: PLAN.scorers_score_files(PLAN.scorers),
        removed=expand(rules.removed_sample.output, shard=PLAN.shards),
        split_rejects=rules.split_corpus.output.rejects,
    output:
        html=report(
            f"{RESULTS}/report/samples.html",
            category="Samples",
            caption="../docs/report/samples.rst",
        ),
        scores=report(
            f"{RESULTS}/samples/scores.tsv",
            category="Samples",
            caption="../docs/report/samples.rst",
        ),
        disagree=report(
            f"{RESULTS}/samples/disagree.tsv",
            category="Samples",
            caption="../docs/report/samples.rst",
        ),
        removed=report(
            f"{RESULTS}/samples/removed.tsv",
            category="Samples",
            caption="../docs/report/samples.rst",
        ),
    log:
        f"{LOGS}/report_samples.log",
    benchmark:
        f"{BENCH}/report_samples.tsv"
    params:
        # SCORER=FILE,... of every scorer of the config (its score group's shard files)
        scores=lambda w: PLAN.scorer_files_args(list(PLAN.scorers)),
        sizes=PLAN.sizes,
        seed=config["seed"],
        block=PRE["block"],
        title=f"Samples: {EXP}",
    threads: 1
    resources:
        # one scorer's scores and ranking, and the two compared scorers' (~80 bytes a pair at most)
        mem_mb=max(2000, 1000 + PLAN.expected_kept * 80 // 2**20),
        runtime=PRE["runtime_min"],
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine report-samples --pairs {input.pairs:q} --scores {params.scores} --sizes {params.sizes:q} "
        "--removed {input.removed:q} --split-rejects {input.split_rejects:q} --block {params.block:q} "
        "--seed {params.seed:q} --title {params.title:q} --html {output.html:q} --scores-tsv {output.scores:q} "
        "--disagree-tsv {output.disagree:q} --removed-tsv {output.removed:q} > {log:q} 2>&1"
