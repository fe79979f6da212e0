"""The package's defaults that the workflow's schema (config/schema.yaml) also states: the CLI and
the settings dataclasses take them from here, the rules from the schema, and
tests/test_scorers.py checks that the two agree. Nothing else writes these numbers. The command
line's own defaults and choices live here too, so that building its parser (``marginmine --help``)
imports no stage module and none of the heavy libraries they load."""

#: seed of every seeded step without a seed of its own (schema: seed)
SEED = 1234
#: neighbours per sentence of the margin scores (schema: scoring.k)
K = 4
#: pairs per kNN batch in filtering mode, the paper's 5M (schema: scoring.batch_size)
BATCH_SIZE = 5_000_000
#: the kNN index of a scoring batch: exact up to 200k distinct sentences, approximate beyond
#: (schema: scoring.index; marginmine.search.knn.choose_index)
INDEX = "auto"
#: the kNN index kinds (schema: scoring.index's enum; marginmine.search.knn)
INDEX_KINDS: tuple[str, ...] = ("auto", "flat", "ivf-blas", "ivf", "ivf-fp16", "ivf-sq8", "ivfpq")
#: queries per block of a search (scratch memory ``block x database`` floats for exact search) ...
QUERY_BLOCK = 8192
#: ... and of an ``ivf-blas`` search (unless the caller sets one): each cell meets its queries of a block in one
#: product; at 4M vectors (1,953 cells, nprobe 8) a block gives a cell about 1,000 queries, and the scan runs
#: at twice the rate of 65,536-query blocks (docs/scale.md); scratch about 1.2 KB a query at 320 dimensions
#: (a float32 copy of the block's queries, 4 bytes a dimension, plus the candidates)
BLAS_QUERY_BLOCK = 262_144
#: the paper's pair filters (schema: preprocess.min_tokens, max_tokens, max_overlap, max_ratio,
#: langid_min_prob; marginmine.preprocess.pipeline.PreprocessSettings)
MIN_TOKENS = 3
MAX_TOKENS = 80
MAX_OVERLAP = 0.5
MAX_RATIO = 2.0
LANGID_MIN_PROB = 0.1
#: gold share of each pool of the BUCC-style mining benchmark (schema: mining_eval.share)
BUCC_SHARE = 0.025
#: unpaired gold-domain lines per side of each pool (schema: mining_eval.distractors)
BUCC_DISTRACTORS = 2000
#: monolingual lines per side kept for the pools, 0 = all (schema: mining_eval.mono_max)
BUCC_MONO_MAX = 0
#: pairs of the scale corpus (marginmine scale-corpus; a scale source's corpus.source.pairs)
SCALE_PAIRS = 5_000_000
#: RAM (MB) of the preprocessing's cache of sentence facts, both sides (schema: preprocess.cache_mb)
PREPROCESS_CACHE_MB = 256
#: the estimated clean shares whose largest N the clean-share table gives (marginmine clean-share --targets)
CLEAN_TARGETS = (0.9, 0.5)
#: where a fitted scorer's positives come from, and how many (schema: heads.positives.from, .size)
HEAD_POSITIVES = "encoder_data"
HEAD_POSITIVES_SIZE = 4000
#: the sources a fitted scorer's positives may come from (schema: heads.positives.from's enum)
POSITIVE_SOURCES = ("encoder_data", "files", "held_out")
#: beam size of the NMT beam search (schema: nmt.beam, translators.beam; marginmine evaluate/translate --beam)
BEAM = 5
#: lines per saved chunk of a corpus translation (schema: translators.chunk_lines; marginmine translate)
CHUNK_LINES = 5000
#: the seed-and-sentence bootstrap of the BLEU comparison: rounds and seed (marginmine compare-methods)
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 12345
#: the NMT beam search's decoders and the default (schema: nmt.decoder)
DECODERS = ("ctranslate2", "fairseq")
DEFAULT_DECODER = "ctranslate2"
#: removed pairs sampled per preprocessing step and rejects file (marginmine removed-sample --per-step)
PER_STEP = 20
#: pairs of the report's samples at each score quantile, either side of each N's boundary, and each way
#: where two scorers disagree (marginmine report-samples --per-quantile, --per-boundary, --per-disagree)
PER_QUANTILE = 3
PER_BOUNDARY = 5
PER_DISAGREE = 10
#: what a wall-clock cap (max_minutes) that ends training before its steps does: error or warn
#: (schema: encoder.models.<name>.on_time_cap, nmt.on_time_cap; marginmine.timecap)
ON_TIME_CAP = "error"
#: the labelled audit (schema: audit.labels, audit.strata, audit.target; marginmine audit-sample / audit-estimate)
AUDIT_LABELS = 300
AUDIT_STRATA = 8
AUDIT_TARGET = 0.9
#: posterior draws of the audit's intervals (marginmine audit-estimate --draws)
AUDIT_DRAWS = 4000
