# NMT on the selected pairs, BLEU, and the comparison of selection methods (issue #5).
# Settings and input functions live in common.smk.


rule train_nmt:
    """Subword model on the selection, fairseq-preprocess, fairseq-train (early stopping on dev),
    average of the last checkpoints; resumable."""
    input:
        data=rules.select_top.output.pairs,
        dev=eval_files("dev"),
    output:
        f"{WORK}/nmt/{{method}}.{{N}}/checkpoint_avg.pt",
    log:
        f"{LOGS}/nmt/{{method}}.{{N}}.train.log",
    benchmark:
        f"{BENCH}/nmt/{{method}}.{{N}}.train.tsv"
    params:
        workdir=lambda w, output: os.path.dirname(output[0]),
        nmt_params=nmt_params_json,
        budget=nmt_budget_arg,
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        seed=NMT.get("seed", 1),
    threads: 2
    resources:
        mem_mb=NMT.get("mem_mb", 16000),
        runtime=nmt_runtime,
        gpus=NMT.get("gpus", 0),
    conda:
        "../envs/nmt.yaml"
    shell:
        "marginmine train-nmt --train {input.data:q} --dev-src {input.dev[0]:q} --dev-ref {input.dev[1]:q} "
        "--workdir {params.workdir:q} {params.langs} --params {params.nmt_params:q} {params.budget} "
        "--seed {params.seed:q} --threads {threads} > {log:q} 2>&1"


rule evaluate_nmt:
    """Beam-5 decoding of every line of the test, dev and extra sets; detokenised sacreBLEU with its
    signature and tokenised BLEU (multi-bleu.perl)."""
    input:
        model=rules.train_nmt.output,
        test=eval_files("test"),
        dev=eval_files("dev"),
        extra=extra_eval_files,
    output:
        report=f"{RESULTS}/nmt/{{method}}.{{N}}/bleu.txt",
        json=f"{RESULTS}/nmt/{{method}}.{{N}}/bleu.json",
    log:
        f"{LOGS}/nmt/{{method}}.{{N}}.evaluate.log",
    benchmark:
        f"{BENCH}/nmt/{{method}}.{{N}}.evaluate.tsv"
    params:
        workdir=lambda w, input: os.path.dirname(input.model[0]),
        extra=extra_eval_args,
        beam=NMT.get("beam", 5),
        device=NMT.get("device", "auto"),
    threads: 2
    resources:
        mem_mb=8000,
        runtime=NMT.get("eval_runtime_min", 120),
        gpus=NMT.get("gpus", 0),
    conda:
        "../envs/nmt.yaml"
    shell:
        "marginmine evaluate --workdir {params.workdir:q} --test-src {input.test[0]:q} --test-ref "
        "{input.test[1]:q} --dev-src {input.dev[0]:q} --dev-ref {input.dev[1]:q} {params.extra} --beam "
        "{params.beam:q} --device {params.device:q} --threads {threads} --output {output.report:q} > "
        "{log:q} 2>&1"


rule headline_bleu:
    """results/.../bleu_{N}.txt: the default method's BLEU (the number first, then the details)."""
    input:
        expand(rules.evaluate_nmt.output.report, method=DEFAULT_METHOD, allow_missing=True),
    output:
        f"{RESULTS}/bleu_{{N}}.txt",
    log:
        f"{LOGS}/nmt/bleu_{{N}}.log",
    benchmark:
        f"{BENCH}/nmt/bleu_{{N}}.tsv"
    threads: 1
    resources:
        mem_mb=100,
        runtime=5,
    conda:
        "../envs/nmt.yaml"
    shell:
        "cp {input:q} {output:q} 2> {log:q}"


rule compare_methods:
    """Dev/test BLEU of every selection method and size: TSV, Markdown and the BLEU-vs-N plot."""
    input:
        expand(rules.evaluate_nmt.output.json, method=METHODS, N=SIZES),
    output:
        tsv=report(f"{RESULTS}/comparison.tsv", category="BLEU"),
        md=f"{RESULTS}/comparison.md",
        png=report(f"{RESULTS}/comparison.png", category="BLEU"),
    log:
        f"{LOGS}/nmt/comparison.log",
    benchmark:
        f"{BENCH}/nmt/comparison.tsv"
    params:
        title=f"{EXP}: {SRC}-{TGT}",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/nmt.yaml"
    shell:
        "marginmine compare --inputs {input:q} --title {params.title:q} --tsv {output.tsv:q} --md "
        "{output.md:q} --png {output.png:q} > {log:q} 2>&1"
