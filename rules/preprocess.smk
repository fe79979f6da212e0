# The paper's preprocessing: global exact dedup + split into shards, then per shard: test-set
# overlap, fastText language id, 3-80 tokens, token overlap, length ratio. The ledger accounts
# for every input pair (in = kept + removed by step and reason, per source-length bucket).


rule split_corpus:
    """Read the raw corpus once: input defects and exact duplicates (over the whole corpus) go to
    the rejects, the rest is dealt to PLAN.n_shards shards in blocks (PLAN.n_shards fixed at plan time)."""
    input:
        lambda w: PLAN.corpus_files(),
    output:
        shards=expand(PLAN.paths.split_shard, shard=PLAN.shards),
        rejects=f"{WORK}/preprocess/split/rejects.tsv.gz",
        ledger=f"{WORK}/preprocess/split/ledger.json",
        ledger_tsv=f"{WORK}/preprocess/split/ledger.tsv",
    log:
        f"{LOGS}/split_corpus.log",
    benchmark:
        f"{BENCH}/split_corpus.tsv"
    params:
        columns=PLAN.corpus_columns(),
        shards=PLAN.n_shards,
        block=PRE["block"],
        outdir=lambda wildcards, output: os.path.dirname(output.rejects),
        max_chars=PRE["max_chars"],
        dedup_mem_mb=PRE["dedup_mem_mb"],
        tmpdir=f"{WORK}/tmp",
    threads: 1
    resources:
        mem_mb=PRE["dedup_mem_mb"] + 1000,
        runtime=PLAN.split_runtime,  # one process over every raw pair: its own limit, from its estimate
    conda:
        "../envs/preprocess.yaml"
    shell:
        "mkdir -p {params.tmpdir:q} && "
        "marginmine split --input {input:q} --columns {params.columns:q} --shards {params.shards:q} "
        "--block {params.block:q} --outdir {params.outdir:q} --rejects {output.rejects:q} "
        "--ledger {output.ledger:q} --max-chars {params.max_chars:q} "
        "--dedup-mem-mb {params.dedup_mem_mb:q} --tmpdir {params.tmpdir:q} > {log:q} 2>&1"


rule preprocess_shard:
    """Filter one shard; rejects carry their step and reason."""
    input:
        shard=PLAN.paths.split_shard,
        protect=lambda w: PLAN.protect_files(),
    output:
        kept=PLAN.paths.kept,
        rejects=f"{WORK}/preprocess/rejects/shard{{shard}}.tsv.gz",
        ledger=f"{WORK}/preprocess/ledger/shard{{shard}}.json",
        ledger_tsv=f"{WORK}/preprocess/ledger/shard{{shard}}.tsv",
    log:
        f"{LOGS}/preprocess/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/preprocess/shard{{shard}}.tsv"
    params:
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        min_tokens=PRE["min_tokens"],
        max_tokens=PRE["max_tokens"],
        max_overlap=PRE["max_overlap"],
        max_ratio=PRE["max_ratio"],
        langid=PLAN.langid_args,  # --no-langid, or the identifier when not the default
        langid_min_prob=PRE["langid_min_prob"],
        cache_mb=PRE["cache_mb"],
    threads: PLAN.job_threads(PRE["workers"])
    resources:
        mem_mb=PRE["mem_mb"],
        runtime=PRE["runtime_min"],
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine preprocess {params.langs} --input {input.shard:q} --output {output.kept:q} --rejects "
        "{output.rejects:q} --ledger {output.ledger:q} --no-dedup --allow-empty --workers {threads} "
        "--min-tokens {params.min_tokens:q} --max-tokens {params.max_tokens:q} --max-overlap "
        "{params.max_overlap:q} --max-ratio {params.max_ratio:q} {params.langid} --langid-min-prob "
        "{params.langid_min_prob:q} --cache-mb {params.cache_mb:q} --protect {input.protect:q} > {log:q} 2>&1"


rule removed_sample:
    """A seeded sample of one shard's removed pairs, per step (marginmine.preprocess.removed): drawn
    by a priority of the seed, shard and line, so a repeated run or any worker count gives the same
    sample; report_samples merges the shards' into the corpus' sample."""
    input:
        rules.preprocess_shard.output.rejects,
    output:
        f"{WORK}/preprocess/removed_sample/shard{{shard}}.tsv",
    log:
        f"{LOGS}/removed_sample/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/removed_sample/shard{{shard}}.tsv"
    params:
        seed=config["seed"],
        shard=lambda wildcards: int(wildcards.shard),
    threads: 1
    resources:
        mem_mb=500,
        runtime=PRE["runtime_min"],
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine removed-sample --rejects {input:q} --shard {params.shard:q} --seed {params.seed:q} "
        "--output {output:q} > {log:q} 2>&1"


rule preprocess_ledger:
    """One ledger for the whole corpus: the split's read/dedup steps chained with all shards."""
    input:
        first=rules.split_corpus.output.ledger,
        shards=expand(rules.preprocess_shard.output.ledger, shard=PLAN.shards),
    output:
        json=report(
            f"{RESULTS}/preprocess/ledger.json",
            category="Preprocessing",
            caption="../docs/report/ledger.rst",
        ),
        tsv=report(
            f"{RESULTS}/preprocess/ledger.tsv",
            category="Preprocessing",
            caption="../docs/report/ledger.rst",
        ),
    log:
        f"{LOGS}/preprocess_ledger.log",
    benchmark:
        f"{BENCH}/preprocess_ledger.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine ledger --first {input.first:q} --shards {input.shards:q} --output {output.json:q} > "
        "{log:q} 2>&1"


rule check_overlap:
    """Proof that no dev/test sentence survived into the filtered corpus (fails otherwise)."""
    input:
        kept=expand(rules.preprocess_shard.output.kept, shard=PLAN.shards),
        protect=lambda w: PLAN.protect_files(),
    output:
        f"{RESULTS}/preprocess/overlap_check.json",
    log:
        f"{LOGS}/check_overlap.log",
    benchmark:
        f"{BENCH}/check_overlap.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=PRE["runtime_min"],
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine check-overlap --corpus {input.kept:q} --protect {input.protect:q} "
        "--output {output:q} > {log:q} 2>&1"
