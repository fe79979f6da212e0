# kNN + margin scoring per shard (= one or more kNN batches), top-N selection per method, and the
# scorer's evaluations: the BUCC-style mining benchmark and filtering quality on labelled pairs.
# Settings and input functions live in common.smk.


rule score_shard:
    """kNN within batches of the shard (both directions, distinct sentences), margin score and
    cosine for every pair; resumes from the last finished batch."""
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
    params:
        margin=MARGIN,
        k=SCORING.get("k", 4),
        batch_size=SCORING.get("batch_size", 5_000_000),
        index=SCORING.get("index", "flat"),
        nprobe=SCORING.get("nprobe", 16),
        device=SCORING.get("device", "cpu"),
    priority: 10  # the critical path (encoder -> scores -> selections -> NMT) goes first
    threads: job_threads(2)
    resources:
        mem_mb=SCORING.get("mem_mb", 16000),
        runtime=SCORING.get("runtime_min", 240),
        gpus=int(SCORING.get("device", "cpu").startswith("cuda")),
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine score --input {input.shard:q} --src-embeddings {input.src:q} --tgt-embeddings "
        "{input.tgt:q} --margin {params.margin:q} -k {params.k:q} --batch-size {params.batch_size:q} "
        "--index {params.index:q} --nprobe {params.nprobe:q} --device {params.device:q} --threads "
        "{threads} --allow-empty --output {output:q} > {log:q} 2>&1"


rule select_top:
    """The N best pairs over all shards for one selection method (two streaming passes)."""
    input:
        pairs=expand(rules.preprocess_shard.output.kept, shard=SHARDS),
        scores=select_scores,
    output:
        pairs=f"{WORK}/select/{{method}}.{{N}}.tsv.gz",
        report=f"{RESULTS}/select/{{method}}.{{N}}.json",
    log:
        f"{LOGS}/select/{{method}}.{{N}}.log",
    benchmark:
        f"{BENCH}/select/{{method}}.{{N}}.tsv"
    params:
        args=select_args,
        seed=config.get("seed", 1234),
    wildcard_constraints:
        method="|".join(METHODS),
    priority: 10  # the critical path: a selection waits for no NMT training
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine select --pairs {input.pairs:q} --scores {input.scores:q} {params.args} --seed "
        "{params.seed:q} --output {output.pairs:q} --report {output.report:q} > {log:q} 2>&1"


rule selection_composition:
    """What each selection is made of, by the labelled corpus' origins and noise kinds (the demo's
    sidecar): how much noise a method let through and which clean domain it preferred; and why, per
    group: its mean cosine and mean kNN similarity over the scored corpus (density.tsv)."""
    input:
        labels=f"{WORK}/corpus/demo.labels.tsv",
        selections=expand(rules.select_top.output.pairs, method=METHODS, N=SIZES),
        pairs=expand(rules.preprocess_shard.output.kept, shard=SHARDS),
        scores=expand(rules.score_shard.output, shard=SHARDS),
    output:
        tsv=report(f"{RESULTS}/select/composition.tsv", category="Selection"),
        md=f"{RESULTS}/select/composition.md",
        density=report(f"{RESULTS}/select/density.tsv", category="Selection"),
    log:
        f"{LOGS}/select/composition.log",
    benchmark:
        f"{BENCH}/select/composition.tsv"
    params:
        title=EXP,
        margin=MARGIN,
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine composition --labels {input.labels:q} --selections {input.selections:q} "
        "--pairs {input.pairs:q} --scores {input.scores:q} --margin {params.margin:q} --density-tsv "
        "{output.density:q} --tsv {output.tsv:q} --md {output.md:q} --title {params.title:q} > {log:q} 2>&1"


rule mining_benchmark_data:
    """BUCC-style benchmark: gold pairs hidden in monolingual pools (train split for thresholds)."""
    input:
        mining_eval_files,
    output:
        expand(f"{WORK}/mining_eval/{{split}}.{{part}}", split=["train", "test"], part=["src", "tgt", "gold"]),
        summary=f"{WORK}/mining_eval/summary.json",
    log:
        f"{LOGS}/mining_eval/data.log",
    benchmark:
        f"{BENCH}/mining_eval/data.tsv"
    params:
        gold_train=lambda w: _pair_arg(MINING_EVAL["gold_train"]),
        gold_test=lambda w: _pair_arg(MINING_EVAL["gold_test"]),
        mono_src=lambda w: [data_path(p) for p in MINING_EVAL["mono_src"]],
        mono_tgt=lambda w: [data_path(p) for p in MINING_EVAL["mono_tgt"]],
        share=(MINING_EVAL or {}).get("share", 0.025),
        distractors=(MINING_EVAL or {}).get("distractors", 2000),
        seed=config.get("seed", 1234),
        outdir=lambda w, output: os.path.dirname(output.summary),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine bucc-data --gold-train {params.gold_train:q} --gold-test {params.gold_test:q} "
        "--mono-src {params.mono_src:q} --mono-tgt {params.mono_tgt:q} --share {params.share:q} "
        "--distractors {params.distractors:q} --seed {params.seed:q} --output-dir {params.outdir:q} > "
        "{log:q} 2>&1"


rule eval_mining:
    """P/R/F1 of every margin x retrieval combination (the paper's Table 2), default encoder."""
    input:
        encoder=f"{DEFAULT_ENCODER_DIR}/encoder.json",
        data=rules.mining_benchmark_data.output.summary,
    output:
        tsv=report(f"{RESULTS}/mining/bucc.tsv", category="Mining"),
        md=f"{RESULTS}/mining/bucc.md",
    log:
        f"{LOGS}/mining_eval/eval.log",
    benchmark:
        f"{BENCH}/mining_eval/eval.tsv"
    params:
        encdir=lambda w, input: os.path.dirname(input.encoder),
        data=lambda w, input: os.path.dirname(input.data),
        name=DEFAULT_ENCODER,
        k=SCORING.get("k", 4),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
    threads: job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine eval-mining --encoder {params.encdir:q} --name {params.name:q} --data {params.data:q} "
        "{params.langs} -k {params.k:q} --threads {threads} --tsv {output.tsv:q} --md {output.md:q} > "
        "{log:q} 2>&1"


rule eval_filter:
    """ROC-AUC and precision at top-N of the margin scores beside BiCleaner/Zipporah (ParaCrawl
    human labels) and on the demo corpus' own labels."""
    input:
        unpack(filter_eval_inputs),
    output:
        tsv=report(f"{RESULTS}/filtering/quality.tsv", category="Filtering"),
        md=f"{RESULTS}/filtering/quality.md",
    log:
        f"{LOGS}/filter_eval.log",
    benchmark:
        f"{BENCH}/filter_eval.tsv"
    params:
        encdir=lambda w, input: os.path.dirname(input.encoder),
        args=filter_eval_args,
        name=DEFAULT_ENCODER,
        k=SCORING.get("k", 4),
        top_n=(FILTER_EVAL or {}).get("top_n", [500, 1000]),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
    threads: job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine eval-filter --encoder {params.encdir:q} --name {params.name:q} {params.args} "
        "{params.langs} -k {params.k:q} --top-n {params.top_n:q} --threads {threads} --tsv {output.tsv:q} "
        "--md {output.md:q} > {log:q} 2>&1"
