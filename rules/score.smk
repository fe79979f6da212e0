# Scoring per shard and encoder (every scorer over that encoder: kNN within batches, one named
# column each), top-N selection per scorer or method, and the scorers' evaluations: the BUCC-style
# mining benchmark and filtering quality on labelled pairs. Input functions live in score_common.smk.


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
    threads: job_threads(2)
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
        encoder=lambda wc: encoder_json(ALL_SCORERS[wc.name]["encoder"]),
        held_out=held_out_files,
        positives=positives_files,
        protect=lambda wc: sorted(set(encoder_protect_files() + (mining_eval_files() if MINING_EVAL else []))),
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
    threads: job_threads(2)
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


rule shortcut_check:
    """The shortcut check of the experiment's fitted scorers (marginmine.scoring.shortcut): each on the
    clean-mix test pairs of each origin and on its kept-out positives, against the same pairs
    re-paired within the group, beside cosine: a scorer that tells domains apart instead of
    translations shows AUCs near or under 0.5."""
    input:
        heads=lambda w: head_inputs(shortcut_scorers("main")),
        encoders=lambda w: [encoder_json(e) for e in shortcut_encoders("main")],
        test=lambda w: shortcut_test_files(),
    output:
        tsv=f"{RESULTS}/filtering/shortcut.tsv",
        md=f"{RESULTS}/filtering/shortcut.md",
    log:
        f"{LOGS}/filtering/shortcut.log",
    benchmark:
        f"{BENCH}/filtering/shortcut.tsv"
    params:
        scorers=lambda w: scorers_json(shortcut_scorers("main")),
        encoders=lambda w: encoder_args(shortcut_encoders("main")),
        plugins=plugin_args,
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        seed=config["seed"],
        device=ENC["device"],
        title=f"{EXP}: shortcut check of the fitted scorers",
    threads: job_threads(2)
    resources:
        mem_mb=3000,
        runtime=20,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine shortcut-check --scorers {params.scorers:q} {params.plugins} --encoder {params.encoders:q} "
        "--test {input.test:q} {params.langs} --seed {params.seed:q} --device {params.device:q} --threads {threads} "
        "--title {params.title:q} --tsv {output.tsv:q} --md {output.md:q} > {log:q} 2>&1"


rule select_top:
    """The N best pairs over all shards by one scorer's column (or random, unfiltered), in two
    streaming passes."""
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
        columns=source_columns(config["corpus"]["source"]),
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


rule selection_composition:
    """What each selection is made of, by the labelled corpus' origins and noise kinds (the demo's
    sidecar): how much noise a method let through and which clean domain it preferred; and why, per
    group: its mean cosine and mean kNN similarity over the scored corpus (density.tsv, from a margin
    scorer and a cosine scorer over one encoder)."""
    input:
        unpack(composition_inputs("main")),
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
        density=composition_density_args,
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine composition --labels {input.labels:q} --selections {input.selections:q} {params.density} "
        "--tsv {output.tsv:q} --md {output.md:q} --title {params.title:q} > {log:q} 2>&1"


rule clean_share:
    """How many pairs to keep: each scorer's estimated noise share, the estimated clean share of its
    top N (selection.sizes) and above its thresholds (selection.thresholds), the largest N at 90% and
    50%, and the retained-count curve, from the score files and their noise baselines."""
    input:
        unpack(clean_share_inputs),
    output:
        tsv=report(f"{RESULTS}/select/clean_share.tsv", category="Selection"),
        md=f"{RESULTS}/select/clean_share.md",
        curve=f"{RESULTS}/select/clean_share_curve.tsv",
        png=report(f"{RESULTS}/select/clean_share.png", category="Selection",
                   caption="../docs/report/clean_share.rst"),
    log:
        f"{LOGS}/select/clean_share.log",
    benchmark:
        f"{BENCH}/select/clean_share.tsv"
    params:
        args=clean_share_args,
        title=f"{EXP}: estimated clean share (noise baseline)",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine clean-share {params.args} --title {params.title:q} --tsv {output.tsv:q} --md {output.md:q} "
        "--curve {output.curve:q} --png {output.png:q} > {log:q} 2>&1"


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
        share=lambda w: MINING_EVAL["share"],
        distractors=lambda w: MINING_EVAL["distractors"],
        mono_max=lambda w: MINING_EVAL["mono_max"],
        seed=config["seed"],
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
        "--distractors {params.distractors:q} --mono-max {params.mono_max:q} --seed {params.seed:q} --output-dir {params.outdir:q} > "
        "{log:q} 2>&1"


rule eval_mining:
    """P/R/F1 of every scorer x retrieval (the paper's Table 2, one row group per scorer that can mine)."""
    input:
        encoders=[encoder_json(e) for e in suite_encoders("main")],
        data=rules.mining_benchmark_data.output.summary,
        heads=head_inputs(SUITES["main"]["scorers"]),
        translated=lambda w: pool_translations("main"),
    output:
        tsv=report(f"{RESULTS}/mining/bucc.tsv", category="Mining"),
        md=f"{RESULTS}/mining/bucc.md",
    log:
        f"{LOGS}/mining_eval/eval.log",
    benchmark:
        f"{BENCH}/mining_eval/eval.tsv"
    params:
        encoders=scored_encoder_args("main"),
        scorers=scorers_json(SUITES["main"]["scorers"]),
        plugins=plugin_args,
        data=lambda w, input: os.path.dirname(input.data),
        k=SCORING["k"],
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        translated=lambda w, input: pool_translation_args(w, input),
    threads: job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine eval-mining --encoder {params.encoders:q} --scorers {params.scorers:q} {params.plugins} "
        "-k {params.k:q} --data {params.data:q} {params.translated} {params.langs} --threads {threads} "
        "--tsv {output.tsv:q} --md {output.md:q} > {log:q} 2>&1"


rule eval_filter:
    """ROC-AUC and precision at top-N of every scorer beside BiCleaner/Zipporah (ParaCrawl human
    labels) and on the demo corpus' own labels; the clean share estimated from the noise baseline
    beside the labelled one (clean_share_check)."""
    input:
        unpack(filter_eval_inputs("main")),
    output:
        tsv=report(f"{RESULTS}/filtering/quality.tsv", category="Filtering"),
        md=f"{RESULTS}/filtering/quality.md",
        check_tsv=report(f"{RESULTS}/filtering/clean_share_check.tsv", category="Filtering"),
        check_md=f"{RESULTS}/filtering/clean_share_check.md",
        groups_tsv=f"{RESULTS}/filtering/baseline_groups.tsv",
        groups_md=f"{RESULTS}/filtering/baseline_groups.md",
    log:
        f"{LOGS}/filter_eval.log",
    benchmark:
        f"{BENCH}/filter_eval.tsv"
    params:
        args=filter_eval_args("main"),
        encoders=scored_encoder_args("main"),
        scorers=scorers_json(SUITES["main"]["scorers"]),
        plugins=plugin_args,
        k=SCORING["k"],
        top_n=lambda w: f"--top-n {' '.join(map(str, FILTER_EVAL['top_n']))}" if FILTER_EVAL else "",
        langs=f"--src-lang {SRC} --tgt-lang {TGT}",
        seed=config["seed"],
    threads: job_threads(2)
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/score.yaml"
    shell:
        "marginmine eval-filter --encoder {params.encoders:q} --scorers {params.scorers:q} {params.plugins} "
        "-k {params.k:q} {params.args} {params.langs} {params.top_n} --threads {threads} --seed {params.seed:q} "
        "--tsv {output.tsv:q} --md {output.md:q} --check-tsv {output.check_tsv:q} --check-md {output.check_md:q} "
        "--groups-tsv {output.groups_tsv:q} --groups-md {output.groups_md:q} > {log:q} 2>&1"
