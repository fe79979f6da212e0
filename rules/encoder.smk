# Sentence encoders (issue #3): training data with leakage removed, training (resumable; the
# default encoder in results/<exp>/encoder/, others in results/<exp>/encoders/<name>/),
# intrinsic evaluation, and embedding of every preprocessed shard.


rule tatoeba_share:
    """The Tatoeba de-en pairs the demo corpus leaves for encoder training (disjoint by design)."""
    output:
        en=f"{WORK}/encoder/sources/tatoeba-share.en",
        de=f"{WORK}/encoder/sources/tatoeba-share.de",
    log:
        f"{LOGS}/tatoeba_share.log",
    benchmark:
        f"{BENCH}/tatoeba_share.tsv"
    params:
        data_dir=str(PLAN.data_dir),
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine tatoeba-share --data-dir {params.data_dir:q} --en {output.en:q} --de {output.de:q} > "
        "{log:q} 2>&1"


rule encoder_data:
    """Clean the encoder training data; pairs with a dev/test (or scored-corpus) sentence are removed."""
    input:
        train=lambda w: PLAN.encoder_train_files(),
        protect=lambda w: PLAN.encoder_protect_files(),
        corpus=lambda w: PLAN.encoder_excluded_corpus(),
    output:
        manifest=f"{WORK}/encoder/data/manifest.json",
        report=report(
            f"{WORK}/encoder/data/report.json",
            category="Encoders",
            caption="../docs/report/encoder_data.rst",
        ),
    log:
        f"{LOGS}/encoder_data.log",
    benchmark:
        f"{BENCH}/encoder_data.tsv"
    params:
        sources=PLAN.encoder_sources_json(),
        outdir=lambda wildcards, output: os.path.dirname(output.manifest),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine encoder-data --sources {params.sources:q} --outdir {params.outdir:q} "
        "--protect {input.protect:q} --exclude-corpus {input.corpus:q} > {log:q} 2>&1"


rule train_encoder:
    """Train one configured encoder (a pre-trained kind is imported: pins checked, files linked);
    checkpoints in work/ make an interrupted run resume."""
    input:
        data=rules.encoder_data.output.manifest,
        downloads=lambda wc: PLAN.encoder_downloads(wc.encdir),  # files given by url, encoders named in params
    output:
        f"{{encdir}}/encoder.json",
    log:
        f"{LOGS}/train_encoder/{{encdir}}.log",
    benchmark:
        f"{BENCH}/train_encoder/{{encdir}}.tsv"
    params:
        kind=lambda wc: PLAN.encoder_model(wc.encdir)["kind"],
        json=lambda wc: PLAN.encoder_params_json(wc.encdir),
        seed=lambda wc: PLAN.encoder_seed(wc.encdir),
        budget=lambda wc: PLAN.encoder_budget_arg(wc.encdir),  # a twin: --untrained (no budget)
        workdir=lambda wc: PLAN.encoder_workdir(wc.encdir),
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
    wildcard_constraints:
        encdir=one_of(PLAN.encoder_dirs.values()),
    priority: 10  # the critical path (encoder -> scores -> selections -> NMT) goes first
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=lambda wc: PLAN.encoder_model(wc.encdir)["mem_mb"],
        runtime=lambda wc: PLAN.encoder_runtime(wc.encdir),
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine train-encoder --kind {params.kind:q} --data {input.data:q} --output {params.outdir:q} "
        "--workdir {params.workdir:q} --params {params.json:q} --seed {params.seed:q} {params.budget} "
        "--threads {threads} "
        "> {log:q} 2>&1"


rule eval_encoder:
    """Tatoeba retrieval and newstest alignment error rates, cosine and ratio margin (and, for the
    published scorers' suite, its scorers' margin functions)."""
    input:
        encoder=lambda wc: PLAN.encoder_json(wc.name),
        gold=lambda w: PLAN.intrinsic_files(),
    output:
        f"{RESULTS}/encoders/eval/{{name}}.json",
    log:
        f"{LOGS}/eval_encoder/{{name}}.log",
    benchmark:
        f"{BENCH}/eval_encoder/{{name}}.tsv"
    params:
        sets=lambda w: PLAN.intrinsic_set_args(),
        margins="",  # the CLI's default: cosine and ratio (the published scorers' suite adds its kinds' margins)
        encdir=lambda wildcards, input: os.path.dirname(input.encoder),
        device=ENC["device"],
    wildcard_constraints:
        name=one_of(PLAN.encoder_dirs),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine eval-encoder --encoder {params.encdir:q} --name {wildcards.name:q} {params.sets} "
        "{params.margins} --device {params.device:q} --threads {threads} --output {output:q} > {log:q} 2>&1"


rule encoder_report:
    """One table, one row per encoder (random-init baselines included)."""
    input:
        evals=expand(rules.eval_encoder.output[0], name=PLAN.evaluated_encoders),
        votes=[],  # the suite's vote report (published_encoder_report)
    output:
        tsv=report(f"{RESULTS}/encoders/intrinsic.tsv", category="Encoders"),
        md=report(f"{RESULTS}/encoders/intrinsic.md", category="Encoders"),
        per_item=f"{RESULTS}/encoders/intrinsic.items.tsv.gz",
    log:
        f"{LOGS}/encoder_report.log",
    benchmark:
        f"{BENCH}/encoder_report.tsv"
    params:
        votes=lambda w, input: repeated("--votes", input.votes),
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine encoder-report --inputs {input.evals:q} {params.votes} --tsv {output.tsv:q} --md {output.md:q} "
        "> {log:q} 2>&1"


rule embed_shard:
    """Embed both sides of one preprocessed shard with one encoder a scorer uses, in one process (the
    encoder loaded once; float16, memory-mapped, resumable in chunks)."""
    input:
        encoder=lambda wc: PLAN.encoder_json(wc.encoder),
        shard=rules.preprocess_shard.output.kept,
    output:
        src=PLAN.paths.embed_src,
        tgt=PLAN.paths.embed_tgt,
    log:
        f"{LOGS}/embed/{{encoder}}/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/embed/{{encoder}}/shard{{shard}}.tsv"
    wildcard_constraints:
        encoder=one_of(PLAN.all_scored_encoders),
    params:
        encdir=lambda wildcards, input: os.path.dirname(input.encoder),
        device=ENC["device"],
        dtype=ENC["embed_dtype"],
        src=SRC,
        tgt=TGT,
    priority: 10  # the critical path (encoder -> scores -> selections -> NMT) goes first
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=ENC["embed_runtime_min"],
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine embed --encoder {params.encdir:q} --input {input.shard:q} "
        "--lang {params.src:q} --column 0 --output {output.src:q} "
        "--lang {params.tgt:q} --column 1 --output {output.tgt:q} "
        "--dtype {params.dtype:q} --device {params.device:q} --threads {threads} --allow-empty > {log:q} 2>&1"
