# Translate-then-vote (a scorer whose kind says `translated`, e.g. vote): two translators trained by
# the NMT stage on the encoder's training pairs of the language pair (one per direction, the
# reverse one on the swapped columns), their BLEU, every corpus shard's side translated into the
# other language (resumable in chunks) and embedded by the scorer's encoder; the evaluation texts
# (ParaCrawl's labelled pairs, the mining benchmark's pools) translated the same way. Nothing here
# runs unless a scorer needs it. Settings: config `translators:` (schema).


rule translator_data:
    """A translator's training pairs: the encoder data's pairs of the language pair, in its
    direction (their leakage checks are the encoder data's), or a seeded sample of them
    (translators.max_pairs, the same rows for both directions)."""
    input:
        rules.encoder_data.output.manifest,
    output:
        tsv=f"{WORK}/translate/{{direction}}/train.tsv.gz",
        report=f"{RESULTS}/translate/{{direction}}/data.json",
    log:
        f"{LOGS}/translate/{{direction}}/data.log",
    benchmark:
        f"{BENCH}/translate/{{direction}}/data.tsv"
    params:
        langs=lambda w: PLAN.direction_langs(w.direction),
        max_pairs=TRANSLATORS["max_pairs"],
        seed=PLAN.translator_seed,
    wildcard_constraints:
        direction=one_of(PLAN.directions),
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine translator-data --encoder-data {input:q} {params.langs} --max-pairs {params.max_pairs:q} "
        "--seed {params.seed:q} --output {output.tsv:q} --report {output.report:q} > {log:q} 2>&1"


use rule train_nmt as train_translator with:
    input:
        data=rules.translator_data.output.tsv,
        dev=lambda w: PLAN.translator_eval(w.direction, "dev"),
    output:
        PLAN.paths.translator,
    log:
        f"{LOGS}/translate/{{direction}}/seed{{seed}}.train.log",
    benchmark:
        f"{BENCH}/translate/{{direction}}/seed{{seed}}.train.tsv"
    params:
        workdir=lambda w, output: os.path.dirname(output[0]),
        nmt_params=PLAN.translator_params_json(),
        budget=PLAN.nmt_budget_arg(),
        langs=lambda w: PLAN.direction_langs(w.direction),
    wildcard_constraints:
        direction=one_of(PLAN.directions),
        seed=r"\d+",


rule evaluate_translator:
    """A translator's BLEU on the experiment's dev and test sets (read in its direction): what
    bounds the votes."""
    input:
        model=lambda w: PLAN.translator_model(w.direction),
        test=lambda w: PLAN.translator_eval(w.direction, "test"),
        dev=lambda w: PLAN.translator_eval(w.direction, "dev"),
    output:
        report=f"{RESULTS}/translate/{{direction}}/bleu.txt",
        json=PLAN.paths.translator_bleu,
    log:
        f"{LOGS}/translate/{{direction}}/evaluate.log",
    benchmark:
        f"{BENCH}/translate/{{direction}}/evaluate.tsv"
    params:
        workdir=lambda w, input: os.path.dirname(input.model),
        beam=TRANSLATORS["beam"],
        decoder=NMT["decoder"],
    wildcard_constraints:
        direction=one_of(PLAN.directions),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=NMT["eval_runtime_min"],
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine evaluate --workdir {params.workdir:q} --test-src {input.test[0]:q} --test-ref {input.test[1]:q} "
        "--dev-src {input.dev[0]:q} --dev-ref {input.dev[1]:q} --beam {params.beam:q} --decoder {params.decoder:q} "
        "--threads {threads} --output {output.report:q} > {log:q} 2>&1"


rule translate_shard:
    """One side of one preprocessed shard translated into the other language (resumable in chunks;
    one line per shard line, empty translations kept and counted)."""
    input:
        model=lambda w: PLAN.translator_model(w.direction),
        shard=rules.preprocess_shard.output.kept,
    output:
        text=f"{WORK}/translate/{{direction}}/shard{{shard}}.txt.gz",
        stats=PLAN.paths.translate_stats,
    log:
        f"{LOGS}/translate/{{direction}}/shard{{shard}}.log",
    benchmark:
        f"{BENCH}/translate/{{direction}}/shard{{shard}}.tsv"
    params:
        workdir=lambda w, input: os.path.dirname(input.model),
        langs=lambda w: PLAN.direction_langs(w.direction),
        column=lambda w: 0 if w.direction == PLAN.directions[0] else 1,
        beam=TRANSLATORS["beam"],
        chunk=TRANSLATORS["chunk_lines"],
        decoder=NMT["decoder"],
    wildcard_constraints:
        direction=one_of(PLAN.directions),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=TRANSLATORS["runtime_min"],
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine translate --workdir {params.workdir:q} {params.langs} --input {input.shard:q} "
        "--column {params.column} --output {output.text:q} --stats {output.stats:q} --chunk-lines {params.chunk:q} "
        "--beam {params.beam:q} --decoder {params.decoder:q} --threads {threads} > {log:q} 2>&1"


rule translate_text:
    """An evaluation text (ParaCrawl's labelled pairs, a mining pool) translated into the other
    language, for the vote scorers' evaluations."""
    input:
        model=lambda w: PLAN.translator_model(PLAN.direction_of(PLAN.translated_texts[w.name][2])),
        text=lambda w: PLAN.translated_texts[w.name][0],
    output:
        text=PLAN.paths.translated_text,
        stats=f"{WORK}/translate/texts/{{name}}.json",
    log:
        f"{LOGS}/translate/texts/{{name}}.log",
    benchmark:
        f"{BENCH}/translate/texts/{{name}}.tsv"
    params:
        workdir=lambda w, input: os.path.dirname(input.model),
        langs=lambda w: PLAN.direction_langs(PLAN.direction_of(PLAN.translated_texts[w.name][2])),
        column=lambda w: PLAN.text_column_arg(w.name),
        beam=TRANSLATORS["beam"],
        chunk=TRANSLATORS["chunk_lines"],
        decoder=NMT["decoder"],
    wildcard_constraints:
        name=one_of(PLAN.translated_texts, empty="(?!)"),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=TRANSLATORS["runtime_min"],
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine translate --workdir {params.workdir:q} {params.langs} --input {input.text:q} {params.column} "
        "--output {output.text:q} --stats {output.stats:q} --chunk-lines {params.chunk:q} --beam {params.beam:q} "
        "--decoder {params.decoder:q} --threads {threads} > {log:q} 2>&1"


rule embed_translation:
    """A shard side's translation embedded by the vote scorer's encoder, in the language it was
    translated into (one row per shard line)."""
    input:
        encoder=lambda wc: PLAN.encoder_json(wc.encoder),
        text=rules.translate_shard.output.text,
    output:
        PLAN.paths.translation_embedding,
    log:
        f"{LOGS}/embed/{{encoder}}/shard{{shard}}.{{direction}}.log",
    benchmark:
        f"{BENCH}/embed/{{encoder}}/shard{{shard}}.{{direction}}.tsv"
    params:
        encdir=lambda wildcards, input: os.path.dirname(input.encoder),
        lang=lambda w: w.direction.split("-")[1],
        device=ENC["device"],
        dtype=ENC["embed_dtype"],
    wildcard_constraints:
        encoder=one_of(PLAN.all_scored_encoders),
        direction=one_of(PLAN.directions),
    threads: PLAN.job_threads(2)
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        PLAN.conda_env("encoder")
    shell:
        "marginmine embed --encoder {params.encdir:q} --lang {params.lang:q} --input {input.text:q} "
        "--output {output:q} --dtype {params.dtype:q} --device {params.device:q} --threads {threads} "
        "--allow-empty > {log:q} 2>&1"


use rule score_shard as score_translated with:
    """score_shard for a scorer that votes over translations (its own score group): the same
    command, priority and resources (a GPU with scoring.device cuda) with the embeddings of both
    sides' translations."""
    input:
        src=lambda wc: rules.embed_shard.output.src.format(encoder=PLAN.group_encoder(wc.group), shard=wc.shard),
        tgt=lambda wc: rules.embed_shard.output.tgt.format(encoder=PLAN.group_encoder(wc.group), shard=wc.shard),
        shard=rules.preprocess_shard.output.kept,
        translated=lambda wc: PLAN.shard_translation_embeddings(wc.group, wc.shard),
    params:
        translated=lambda w, input: PLAN.translation_args(input),
    wildcard_constraints:
        group=one_of(PLAN.translated_groups, empty="(?!)"),
