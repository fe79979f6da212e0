"""The package's defaults that the workflow's schema (config/schema.yaml) also states: the CLI and
the settings dataclasses take them from here, the rules from the schema, and
tests/test_scorers.py checks that the two agree. Nothing else writes these numbers."""

#: seed of every seeded step without a seed of its own (schema: seed)
SEED = 1234
#: neighbours per sentence of the margin scores (schema: scoring.k)
K = 4
#: pairs per kNN batch in filtering mode, the paper's 5M (schema: scoring.batch_size)
BATCH_SIZE = 5_000_000
#: the kNN index of a scoring batch: exact up to 200k distinct sentences, approximate beyond
#: (schema: scoring.index; marginmine.search.knn.choose_index)
INDEX = "auto"
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
#: what a wall-clock cap (max_minutes) that ends training before its steps does: error or warn
#: (schema: encoder.models.<name>.on_time_cap, nmt.on_time_cap; marginmine.timecap)
ON_TIME_CAP = "error"
#: the labelled audit (schema: audit.labels, audit.strata, audit.target; marginmine audit-sample / audit-estimate)
AUDIT_LABELS = 300
AUDIT_STRATA = 8
AUDIT_TARGET = 0.9
#: posterior draws of the audit's intervals (marginmine audit-estimate --draws)
AUDIT_DRAWS = 4000
