# NMT on the selected pairs, once per training seed; BLEU; the comparison of selection methods
# (mean and sd over seeds, a seed-and-sentence bootstrap against the headline method).
# Settings and input functions live in marginmine.workflow (nmt.py).


rule train_nmt:
    """Subword model on the selection, fairseq-preprocess, fairseq-train (early stopping on dev),
    average of the last checkpoints; resumable."""
    input:
        data=rules.select_top.output.pairs,
        dev=PLAN.eval_files("dev"),
    output:
        f"{WORK}/nmt/{{method}}.{{N}}/seed{{seed}}/checkpoint_avg.pt",
    log:
        f"{LOGS}/nmt/{{method}}.{{N}}.seed{{seed}}.train.log",
    benchmark:
        f"{BENCH}/nmt/{{method}}.{{N}}.seed{{seed}}.train.tsv"
    params:
        workdir=lambda w, output: os.path.dirname(output[0]),
        nmt_params=PLAN.nmt_params_json(),
        budget=PLAN.nmt_budget_arg(),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
    wildcard_constraints:
        seed=r"\d+",
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=NMT["mem_mb"],
        runtime=PLAN.nmt_runtime(),
        gpus=NMT["gpus"],
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine train-nmt --train {input.data:q} --dev-src {input.dev[0]:q} --dev-ref {input.dev[1]:q} "
        "--workdir {params.workdir:q} {params.langs} --params {params.nmt_params:q} {params.budget} "
        "--seed {wildcards.seed} --threads {threads} > {log:q} 2>&1"


rule evaluate_nmt:
    """Beam decoding of every line of the test, dev and extra sets (one fairseq start-up for all);
    detokenised sacreBLEU with its signature and tokenised BLEU (multi-bleu.perl)."""
    input:
        model=rules.train_nmt.output,
        test=PLAN.eval_files("test"),
        dev=PLAN.eval_files("dev"),
        extra=lambda w: PLAN.extra_eval_files(w.method),
    output:
        report=f"{RESULTS}/nmt/{{method}}.{{N}}/seed{{seed}}/bleu.txt",
        json=f"{RESULTS}/nmt/{{method}}.{{N}}/seed{{seed}}/bleu.json",
    log:
        f"{LOGS}/nmt/{{method}}.{{N}}.seed{{seed}}.evaluate.log",
    benchmark:
        f"{BENCH}/nmt/{{method}}.{{N}}.seed{{seed}}.evaluate.tsv"
    params:
        workdir=lambda w, input: os.path.dirname(input.model[0]),
        extra=lambda w: PLAN.extra_eval_args(w.method),
        beam=NMT["beam"],
        device=NMT["device"],
        decoder=NMT["decoder"],
    wildcard_constraints:
        seed=r"\d+",
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=8000,
        runtime=NMT["eval_runtime_min"],
        gpus=NMT["gpus"],
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine evaluate --workdir {params.workdir:q} --test-src {input.test[0]:q} --test-ref "
        "{input.test[1]:q} --dev-src {input.dev[0]:q} --dev-ref {input.dev[1]:q} {params.extra} --beam "
        "{params.beam:q} --device {params.device:q} --decoder {params.decoder:q} --threads {threads} --output "
        "{output.report:q} > "
        "{log:q} 2>&1"


rule headline_bleu:
    """results/.../bleu_{N}.txt: the headline method's test BLEU, mean over its training seeds (the
    number first, then each seed's)."""
    input:
        lambda w: PLAN.headline_runs(rules.evaluate_nmt.output.json, w.N),
    output:
        PLAN.paths.bleu,
    log:
        f"{LOGS}/nmt/bleu_{{N}}.log",
    benchmark:
        f"{BENCH}/nmt/bleu_{{N}}.tsv"
    params:
        caps=lambda w: PLAN.caps_from,
    threads: 1
    resources:
        mem_mb=100,
        runtime=5,
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine headline --inputs {input:q} --output {output:q} --caps-from {params.caps} > {log:q} 2>&1"


rule compare_methods:
    """Every method's BLEU on every test set: mean and sd over training seeds, a two-level
    bootstrap (seeds and sentences) against the headline method, BLEU per clean origin of the
    clean-mix test; TSV, Markdown, per-run TSV and the BLEU-vs-N plot."""
    input:
        runs=PLAN.nmt_runs(rules.evaluate_nmt.output.json),
        labels=list(PLAN.subset_labels().values()),
    output:
        tsv=report(f"{RESULTS}/comparison.tsv", category="BLEU"),
        md=f"{RESULTS}/comparison.md",
        runs=f"{RESULTS}/comparison_runs.tsv",
        png=report(f"{RESULTS}/comparison.png", category="BLEU"),
    log:
        f"{LOGS}/nmt/comparison.log",
    benchmark:
        f"{BENCH}/nmt/comparison.tsv"
    params:
        title=f"{EXP}: {SRC}-{TGT}",
        headline=PLAN.default_method,
        subsets=PLAN.subset_args(),
        caps=lambda w: PLAN.caps_from,
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine compare --inputs {input.runs:q} --headline {params.headline:q} {params.subsets} "
        "--title {params.title:q} --tsv {output.tsv:q} --md {output.md:q} --runs {output.runs:q} "
        "--png {output.png:q} --caps-from {params.caps} > {log:q} 2>&1"
