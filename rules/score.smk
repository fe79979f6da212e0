# kNN + margin scoring per batch (= shard) and top-N selection (issue #4). PLACEHOLDERS.
SCORING = config.get("scoring", {})


rule score_shard:
    """[placeholder, issue #4] kNN within the batch, margin score for every pair."""
    input:
        src=rules.embed_shard.output.src,
        tgt=rules.embed_shard.output.tgt,
        shard=rules.preprocess_shard.output.kept,
    output:
        f"{WORK}/score/shard{{shard}}.scores.tsv.gz",
    log:
        f"{LOGS}/score/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/score/shard{{shard}}.tsv"
    message:
        "PLACEHOLDER (not implemented yet, issue #4): {SCORING[margin]} margin, k={SCORING[k]}, shard {wildcards.shard}"
    threads: 2
    resources:
        mem_mb=16000,
        runtime=4 * 60,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine score > {log} 2>&1"


rule select_top:
    """[placeholder, issue #4] The N best pairs over all shards for one selection method."""
    input:
        expand(rules.score_shard.output, shard=SHARDS),
    output:
        f"{WORK}/select/{{method}}.{{N}}.tsv.gz",
    log:
        f"{LOGS}/select/{{method}}.{{N}}.log",
    benchmark:
        f"{BENCH}/select/{{method}}.{{N}}.tsv"
    message:
        "PLACEHOLDER (not implemented yet, issue #4): select top {wildcards.N} by {wildcards.method}"
    wildcard_constraints:
        method="|".join(METHODS),
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine select > {log} 2>&1"
