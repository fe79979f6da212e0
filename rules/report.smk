# The HTML report (`snakemake --report results/<exp>/report.html report_figures`, or `make report`):
# figures and tables of the preprocessing ledger, the selections' score histograms, the result
# tables, and wall time / throughput per rule from the benchmark files. Logic: marginmine.report.figures.

report: "../docs/report/workflow.rst"


rule report_figures:
    """Ledger figure + table, score histograms per selection method, result tables and the per-rule
    wall time / throughput table (benchmark files are globbed, so run it last: `make report`)."""
    input:
        ledger=rules.preprocess_ledger.output.json,
        select=expand(rules.select_top.output.report, method=SELECTED, N=SIZES),
        encoders=rules.encoder_report.output.tsv,
        evals=lambda w: [f for f in scoring_targets() if f.endswith(".tsv")],
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
        benchmarks=BENCH,
        methods=SELECTED,
        title=EXP,
        outdir=lambda w, output: os.path.dirname(output.ledger_png),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/nmt.yaml"
    shell:
        "marginmine report-figures --ledger {input.ledger:q} --select {input.select:q} --tables "
        "{input.encoders:q} {input.evals:q} --work {params.work:q} --benchmarks {params.benchmarks:q} "
        "--methods {params.methods:q} --title {params.title:q} --outdir {params.outdir:q} > {log:q} 2>&1"
