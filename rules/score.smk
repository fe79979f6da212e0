# Scoring per shard and encoder (every scorer over that encoder: kNN within batches, one named
# column each), fitted scorers' heads, top-N selection per scorer or method and the filtered
# corpora. The evaluations of the scores are rules/evaluate.smk. Input functions live in
# marginmine.workflow (scoring.py).


#: score_shard's command; score_translated (translate.smk, derived from score_shard) fills params.translated
SCORE_SHELL = (
    "marginmine score --input {input.shard:q} --src-embeddings {input.src:q} --tgt-embeddings "
    "{input.tgt:q} --scorers {params.scorers:q} {params.plugins} -k {params.k:q} --batch-size "
    "{params.batch_size:q} --index {params.index:q} --nlist {params.nlist:q} --nprobe {params.nprobe:q} --refine {params.refine:q} --device {params.device:q} "
    "--threads {threads} --allow-empty {params.translated}--output {output.scores:q} --baseline {output.baseline:q} --seed "
    "{params.seed:q} > {log:q} 2>&1"
)


rule score_shard:
    """kNN within batches of the shard (both directions, distinct sentences) and every scorer over
    this encoder, one column each under a header naming them; beside it the noise baseline (each
    batch re-paired at random, seeded, scored against the same neighbourhoods); resumes from the last
    finished batch."""
    input:
        src=lambda wc: rules.embed_shard.output.src.format(encoder=PLAN.group_encoder(wc.group), shard=wc.shard),
        tgt=lambda wc: rules.embed_shard.output.tgt.format(encoder=PLAN.group_encoder(wc.group), shard=wc.shard),
        shard=rules.preprocess_shard.output.kept,
        heads=lambda wc: PLAN.head_inputs(PLAN.group_scorers(wc.group)),
    output:
        scores=PLAN.paths.scores,
        baseline=PLAN.paths.baseline,
    log:
        f"{LOGS}/score/{{group}}/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/score/{{group}}/shard{{shard}}.tsv"
    params:
        seed=config["seed"],
        scorers=lambda wc: PLAN.scorers_json(PLAN.group_scorers(wc.group)),
        plugins=PLAN.plugin_args(),
        k=SCORING["k"],
        batch_size=SCORING["batch_size"],
        index=SCORING["index"],
        nprobe=SCORING["nprobe"],
        nlist=SCORING["nlist"],
        refine=SCORING["refine"],
        device=SCORING["device"],
        translated="",  # score_translated: the translations' embeddings (--src-translated ... with a trailing space)
    wildcard_constraints:
        group=one_of(PLAN.untranslated_groups, empty="(?!)"),
    priority: 10  # the critical path (encoder -> scores -> selections -> NMT) goes first
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=SCORING["mem_mb"],
        runtime=SCORING["runtime_min"],
        gpus=int(SCORING["device"].startswith("cuda")),
    conda:
        PLAN.conda_env("score")
    shell:
        SCORE_SHELL


rule fit_scorer:
    """The head of a fitted scorer (its kind says `fitted`, e.g. calibrated, mlp), fitted on its
    encoder's embeddings of its positives (heads.positives, or the scorer's own: by default a sample
    of the encoder data) and checked on the held-out pairs (heads.held_out): a pair in a protected
    set or the mining benchmark is an error, held-out pairs in the encoder's training data are
    removed and counted (data/report.json); an mlp's negatives come from the corpus' embeddings."""
    input:
        encoder=lambda wc: PLAN.encoder_json(PLAN.all_scorers[wc.name]["encoder"]),
        held_out=lambda w: PLAN.held_out_files(),
        positives=lambda w: PLAN.positives_files(w.name),
        protect=lambda wc: PLAN.fit_protect_files(),
        data=rules.encoder_data.output.manifest,
        corpus=lambda w: PLAN.fit_corpus_files(w.name),  # kinds whose negatives come from the corpus (mlp)
    output:
        PLAN.paths.head,
    log:
        f"{LOGS}/heads/{{name}}.log",
    benchmark:
        f"{BENCH}/heads/{{name}}.tsv"
    params:
        scorers=lambda wc: PLAN.scorers_json([wc.name]),
        plugins=PLAN.plugin_args(),
        held_out=lambda w: PLAN.held_out_args(),
        positives=lambda w: PLAN.positives_args(w.name),
        pretrained=lambda w: PLAN.fit_pretrained_arg(w.name),
        corpus=lambda w: PLAN.fit_corpus_args(w.name),
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        encdir=lambda wildcards, input: os.path.dirname(input.encoder),
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
        seed=config["seed"],
        device=ENC["device"],
    wildcard_constraints:
        name=one_of(PLAN.fitted, empty="(?!)"),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine fit-scorer --scorers {params.scorers:q} --name {wildcards.name:q} {params.plugins} "
        "--encoder {params.encdir:q} --held-out {params.held_out} {params.positives} {params.pretrained}"
        "{params.corpus} {params.langs} "
        "--protect {input.protect:q} --encoder-data {input.data:q} --seed {params.seed:q} --device "
        "{params.device:q} --threads {threads} --output {params.outdir:q} > {log:q} 2>&1"


rule select_top:
    """The N best pairs over all shards by one scorer's column (or random, unfiltered), in two
    streaming passes."""
    input:
        pairs=expand(rules.preprocess_shard.output.kept, shard=PLAN.shards),
        scores=lambda w: PLAN.select_scores(w.method),
    output:
        pairs=PLAN.paths.select_pairs,
        report=PLAN.paths.select_report,
    log:
        f"{LOGS}/select/{{method}}.{{N}}.log",
    benchmark:
        f"{BENCH}/select/{{method}}.{{N}}.tsv"
    params:
        args=lambda w: PLAN.select_args(w.method, w.N),
        seed=config["seed"],
    wildcard_constraints:
        method=one_of(PLAN.selectable),
    priority: 10  # the critical path: a selection waits for no NMT training
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        PLAN.conda_env("score")
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
        method=one_of(PLAN.selectable),
    threads: 1
    resources:
        mem_mb=500,
        runtime=120,
    conda:
        PLAN.conda_env("score")
    shell:
        "marginmine export-filtered --selection {input:q} --columns {params.columns:q} --tsv {output.tsv:q} "
        "--src {output.src:q} --tgt {output.tgt:q} > {log:q} 2>&1"
