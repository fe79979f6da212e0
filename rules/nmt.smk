# NMT on the selected pairs and BLEU (issue #5). PLACEHOLDERS.
NMT = config.get("nmt", {"arch": "transformer"})
DEFAULT_METHOD = METHODS[0]


rule train_nmt:
    """[placeholder, issue #5] BPE on the selection, fairseq-preprocess, fairseq-train, averaging."""
    input:
        data=rules.select_top.output,
        dev=eval_files("dev"),
    output:
        f"{WORK}/nmt/{{method}}.{{N}}/checkpoint_avg.pt",
    log:
        f"{LOGS}/nmt/{{method}}.{{N}}.train.log",
    benchmark:
        f"{BENCH}/nmt/{{method}}.{{N}}.train.tsv"
    message:
        "PLACEHOLDER (not implemented yet, issue #5): train {NMT[arch]} on top {wildcards.N} ({wildcards.method})"
    threads: 2
    resources:
        mem_mb=16000,
        runtime=3 * 24 * 60,
    conda:
        "../envs/nmt.yaml"
    shell:
        "marginmine train-nmt > {log} 2>&1"


rule evaluate:
    """[placeholder, issue #5] Beam-5 decoding of the test set; sacreBLEU + tokenised BLEU."""
    input:
        model=expand(rules.train_nmt.output, method=DEFAULT_METHOD, allow_missing=True),
        test=eval_files("test"),
        dev=eval_files("dev"),
    output:
        f"{RESULTS}/bleu_{{N}}.txt",
    log:
        f"{LOGS}/nmt/bleu_{{N}}.log",
    benchmark:
        f"{BENCH}/nmt/bleu_{{N}}.tsv"
    message:
        "PLACEHOLDER (not implemented yet, issue #5): BLEU of the top-{wildcards.N} system"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        "../envs/nmt.yaml"
    shell:
        "marginmine evaluate > {log} 2>&1"
