# Scoring per shard and encoder (every scorer over that encoder: kNN within batches, one named
# column each), fitted scorers' heads, top-N selection per scorer or method and the filtered
# corpora. The evaluations of the scores are rules/evaluate.smk. Input functions live in
# score_common.smk.


#: score_shard's command; score_translated (translate.smk) adds the translations' embeddings to it
SCORE_SHELL = (
    "marginmine score --input {input.shard:q} --src-embeddings {input.src:q} --tgt-embeddings "
    "{input.tgt:q} --scorers {params.scorers:q} {params.plugins} -k {params.k:q} --batch-size "
    "{params.batch_size:q} --index {params.index:q} --nlist {params.nlist:q} --nprobe {params.nprobe:q} --refine {params.refine:q} --device {params.device:q} "
    "--threads {threads} --allow-empty --output {output.scores:q} --baseline {output.baseline:q} --seed "
    "{params.seed:q} > {log:q} 2>&1"
)


rule score_shard:
    """kNN within batches of the shard (both directions, distinct sentences) and every scorer over
    this encoder, one column each under a header naming them; beside it the noise baseline (each
    batch re-paired at random, seeded, scored against the same neighbourhoods); resumes from the last
    finished batch."""
    input:
        src=lambda wc: rules.embed_shard.output.src.format(encoder=group_encoder(wc.group), shard=wc.shard),
        tgt=lambda wc: rules.embed_shard.output.tgt.format(encoder=group_encoder(wc.group), shard=wc.shard),
        shard=rules.preprocess_shard.output.kept,
        heads=lambda wc: head_inputs([n for n in ALL_SCORERS if score_group(n) == wc.group]),
    output:
        scores=f"{WORK}/score/{{group}}/shard{{shard}}.scores.tsv.gz",
        baseline=f"{WORK}/score/{{group}}/shard{{shard}}.baseline.tsv.gz",
    log:
        f"{LOGS}/score/{{group}}/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/score/{{group}}/shard{{shard}}.tsv"
    params:
        seed=config["seed"],
        scorers=lambda wc: group_scorers_json(wc.group),
        plugins=plugin_args,
        k=SCORING["k"],
        batch_size=SCORING["batch_size"],
        index=SCORING["index"],
        nprobe=SCORING["nprobe"],
        nlist=SCORING["nlist"],
        refine=SCORING["refine"],
        device=SCORING["device"],
    wildcard_constraints:
        group="|".join(map(re.escape, [g for g in ALL_GROUPS if g not in TRANSLATED_GROUPS])) or "(?!)",
    priority: 10  # the critical path (encoder -> scores -> selections -> NMT) goes first
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=SCORING["mem_mb"],
        runtime=SCORING["runtime_min"],
        gpus=int(SCORING["device"].startswith("cuda")),
    conda:
        "../envs/score.yaml"
    shell:
        SCORE_SHELL


rule fit_scorer:
    """The head of a fitted scorer (its kind says `fitted`, e.g. calibrated, mlp), fitted on its
    encoder's embeddings of its positives (heads.positives, or the scorer's own: by default a sample
    of the encoder data) and checked on the held-out pairs (heads.held_out): a pair in a protected
    set or the mining benchmark is an error, held-out pairs in the encoder's training data are
    removed and counted (data/report.json); an mlp's negatives come from the corpus' embeddings."""
    input:
        encoder=lambda wc: PLAN.encoder_json(ALL_SCORERS[wc.name]["encoder"]),
        held_out=held_out_files,
        positives=positives_files,
        protect=lambda wc: sorted(set(PLAN.encoder_protect_files() + (mining_eval_files() if MINING_EVAL else []))),
        data=rules.encoder_data.output.manifest,
        corpus=fit_corpus_files,  # kinds whose negatives come from the corpus (mlp)
    output:
        f"{WORK}/heads/{{name}}/head.json",
    log:
        f"{LOGS}/heads/{{name}}.log",
    benchmark:
        f"{BENCH}/heads/{{name}}.tsv"
    params:
        scorers=lambda wc: scorers_json([wc.name]),
        plugins=plugin_args,
        held_out=held_out_args,
        positives=positives_args,
        corpus=fit_corpus_args,
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        encdir=lambda wildcards, input: os.path.dirname(input.encoder),
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
        seed=config["seed"],
        device=ENC["device"],
    wildcard_constraints:
        name="|".join(map(re.escape, FITTED)) or "(?!)",
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine fit-scorer --scorers {params.scorers:q} --name {wildcards.name:q} {params.plugins} "
        "--encoder {params.encdir:q} --held-out {params.held_out} {params.positives} {params.corpus} {params.langs} "
        "--protect {input.protect:q} --encoder-data {input.data:q} --seed {params.seed:q} --device "
        "{params.device:q} --threads {threads} --output {params.outdir:q} > {log:q} 2>&1"


rule select_top:
    """The N best pairs over all shards by one scorer's column (or random, unfiltered), in two
    streaming passes."""
    input:
        pairs=expand(rules.preprocess_shard.output.kept, shard=PLAN.shards),
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
        seed=config["seed"],
    wildcard_constraints:
        method="|".join(map(re.escape, dict.fromkeys(SELECTED + PAPER_BASELINES + PAPER_SELECTED))),
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


rule export_filtered:
    """A selection in the formats filtered corpora travel in: the corpus TSV's own columns with the
    score appended (as bicleaner-ai writes), and two line-aligned text files."""
    input:
        rules.select_top.output.pairs,
    output:
        tsv=f"{RESULTS}/filtered/{{method}}.{{N}}.tsv.gz",
        src=f"{RESULTS}/filtered/{{method}}.{{N}}.{SRC}.gz",
        tgt=f"{RESULTS}/filtered/{{method}}.{{N}}.{TGT}.gz",
    log:
        f"{LOGS}/filtered/{{method}}.{{N}}.log",
    benchmark:
        f"{BENCH}/filtered/{{method}}.{{N}}.tsv"
    params:
        columns=PLAN.corpus_columns(),
    wildcard_constraints:
        method="|".join(map(re.escape, dict.fromkeys(SELECTED + PAPER_BASELINES + PAPER_SELECTED))),
    threads: 1
    resources:
        mem_mb=500,
        runtime=120,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine export-filtered --selection {input:q} --columns {params.columns:q} --tsv {output.tsv:q} "
        "--src {output.src:q} --tgt {output.tgt:q} > {log:q} 2>&1"
