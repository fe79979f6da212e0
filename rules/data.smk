# Ingestion: downloads (retries, resume, sha256), archive members, sacreBLEU sets, the demo corpus.


rule download:
    """Fetch a url source of the config (HTTP with retries and resume; sha256 when known)."""
    output:
        "data/downloads/{source}/{filename}",
    log:
        "data/downloads/logs/{source}.{filename}.log",
    benchmark:
        "data/downloads/benchmarks/{source}.{filename}.tsv"
    params:
        url=lambda wc: PLAN.url_sources[wc.source]["url"],
        sha256=lambda wc: PLAN.download_sha256_arg(wc.source),
    wildcard_constraints:
        source=one_of(PLAN.url_sources, empty="NO_URL_SOURCES"),
    threads: 1
    resources:
        mem_mb=500,
        runtime=24 * 60,
    retries: 2
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine download --url {params.url:q} --output {output:q} {params.sha256} > {log:q} 2>&1"


rule extract_member:
    """One side of a parallel corpus shipped inside a .tgz (e.g. Europarl v7)."""
    input:
        lambda w: PLAN.download_path(w.source),
    output:
        "data/sources/{source}/{member}",
    log:
        "data/sources/logs/{source}.{member}.log",
    benchmark:
        "data/sources/benchmarks/{source}.{member}.tsv"
    wildcard_constraints:
        source=one_of(PLAN.url_sources, empty="NO_URL_SOURCES"),
    threads: 1
    resources:
        mem_mb=500,
        runtime=120,
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine extract --archive {input:q} --member {wildcards.member:q} --output {output:q} > "
        "{log:q} 2>&1"


rule fetch_sacrebleu:
    """A sacreBLEU test set (source and reference); needs internet once, then sacreBLEU's cache."""
    output:
        src="data/sacrebleu/{sbid}.src",
        ref="data/sacrebleu/{sbid}.ref",
    log:
        "data/sacrebleu/logs/{sbid}.log",
    benchmark:
        "data/sacrebleu/benchmarks/{sbid}.tsv"
    params:
        test_set=lambda wc: PLAN.sacrebleu_sets[wc.sbid]["test_set"],
        langpair=lambda wc: PLAN.sacrebleu_sets[wc.sbid]["langpair"],
    wildcard_constraints:
        sbid=one_of(PLAN.sacrebleu_sets, empty="NO_SACREBLEU_SETS"),
    threads: 1
    resources:
        mem_mb=500,
        runtime=30,
    conda:
        PLAN.conda_env("nmt")
    shell:
        "marginmine fetch-testset --test-set {params.test_set:q} --langpair {params.langpair:q} "
        "--src {output.src:q} --ref {output.ref:q} > {log:q} 2>&1"


rule heldout_set:
    """A dev/test set as a seeded slice of a larger parallel test set (eval.<name>.sample); slices
    of one seed never share a pair or a sentence."""
    input:
        unpack(lambda w: PLAN.heldout_inputs(w.name)),
    output:
        src=f"{WORK}/eval/{{name}}.{SRC}",
        tgt=f"{WORK}/eval/{{name}}.{TGT}",
    log:
        f"{LOGS}/eval/{{name}}.log",
    benchmark:
        f"{BENCH}/eval/{{name}}.tsv"
    params:
        slice=lambda w: PLAN.heldout_args(w.name),
    wildcard_constraints:
        name=one_of(PLAN.heldout, empty="NO_HELDOUT_SETS"),
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine heldout --src {input.src:q} --tgt {input.tgt:q} {params.slice} "
        "--out-src {output.src:q} --out-tgt {output.tgt:q} > {log:q} 2>&1"


rule demo_corpus:
    """The demo noisy corpus: real clean pairs + real ParaCrawl/MT pairs + documented noise,
    built deterministically from data_dir; the sidecar names every pair's origin."""
    output:
        corpus=f"{WORK}/corpus/demo.tsv.gz",
        labels=f"{WORK}/corpus/demo.labels.tsv",
        heldout=PLAN.clean_mix_files("demo"),
    log:
        f"{LOGS}/demo_corpus.log",
    benchmark:
        f"{BENCH}/demo_corpus.tsv"
    params:
        data_dir=str(PLAN.data_dir),
        seed=config["corpus"]["source"].get("seed", config["seed"]),
        scale=config["corpus"]["source"]["scale"],
        heldout=PLAN.clean_mix_arg("demo"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine demo-corpus --data-dir {params.data_dir:q} --output {output.corpus:q} "
        "--labels {output.labels:q} --seed {params.seed:q} --scale {params.scale:q} {params.heldout} > {log:q} "
        "2>&1"


rule scale_corpus:
    """The scale corpus: millions of pairs from the demo's real sources (real pairs, sentences joined
    and cut as crawls do, misaligned recombinations, the demo's noise kinds), built deterministically
    from data_dir; the sidecar marks the planted true translations (docs/scale.md)."""
    output:
        corpus=f"{WORK}/corpus/scale.tsv.gz",
        labels=f"{WORK}/corpus/scale.labels.tsv",
        heldout=PLAN.clean_mix_files("scale"),
    log:
        f"{LOGS}/scale_corpus.log",
    benchmark:
        f"{BENCH}/scale_corpus.tsv"
    params:
        data_dir=str(PLAN.data_dir),
        seed=config["corpus"]["source"].get("seed", config["seed"]),
        pairs=config["corpus"]["source"]["pairs"],
        heldout=PLAN.clean_mix_arg("scale"),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/preprocess.yaml"
    shell:
        "marginmine scale-corpus --data-dir {params.data_dir:q} --output {output.corpus:q} "
        "--labels {output.labels:q} --seed {params.seed:q} --pairs {params.pairs:q} {params.heldout} > {log:q} 2>&1"

