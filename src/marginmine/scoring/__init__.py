"""The scoring stage (rules/score.smk): score kinds and their registry (:mod:`.kinds`, the built-in
ones in :mod:`.builtin`), self-describing score files in batches (:mod:`.files`), fitted heads
(:mod:`.heads`), top-N selection (:mod:`.selection`), mining (:mod:`.mining`) and rank metrics
(:mod:`.metrics`); kNN and margins come from :mod:`marginmine.search`. What the scores are worth is
the next stage, :mod:`marginmine.evaluate`.

The registry API is re-exported here (``from marginmine.scoring import register, Batch``). The
built-in kinds are listed explicitly: one import per module that registers kinds."""

from marginmine.scoring import builtin, calibrated, mlp, votes  # noqa: F401  (ratio, distance, cosine, absolute, eq9, eq10; calibrated; mlp; vote)
from marginmine.scoring.kinds import (
    BUILTIN_METHODS,
    KINDS,
    NAME,
    Batch,
    ScoreKind,
    describe,
    kind_params,
    load_plugins,
    make_kind,
    parse_scorers,
    register,
)

__all__ = ["BUILTIN_METHODS", "KINDS", "NAME", "Batch", "ScoreKind", "describe", "kind_params", "load_plugins",
           "make_kind", "parse_scorers", "register"]
