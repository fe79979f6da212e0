# Sentence encoder training and embedding (issue #3). PLACEHOLDERS: planned in the DAG so that
# `snakemake -n` shows the whole experiment; running them fails with "not implemented yet".
rule train_encoder:
    """[placeholder, issue #3] Learn joint subwords and train the configured encoder."""
    input:
        encoder_train_files,
    output:
        directory(f"{RESULTS}/encoder"),
    log:
        f"{LOGS}/train_encoder.log",
    benchmark:
        f"{BENCH}/train_encoder.tsv"
    message:
        "PLACEHOLDER (not implemented yet, issue #3): train the {ENC[kind]} encoder"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=24 * 60,
    conda:
        "../envs/encoder.yaml"
    shell:
        "marginmine train-encoder > {log} 2>&1"


rule embed_shard:
    """[placeholder, issue #3] Embed both sides of one preprocessed shard (float16 .npy)."""
    input:
        encoder=rules.train_encoder.output,
        shard=rules.preprocess_shard.output.kept,
    output:
        src=f"{WORK}/embed/shard{{shard}}.{SRC}.npy",
        tgt=f"{WORK}/embed/shard{{shard}}.{TGT}.npy",
    log:
        f"{LOGS}/embed/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/embed/shard{{shard}}.tsv"
    message:
        "PLACEHOLDER (not implemented yet, issue #3): embed shard {wildcards.shard}"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=6 * 60,
    conda:
        "../envs/encoder.yaml"
    shell:
        "marginmine embed > {log} 2>&1"
