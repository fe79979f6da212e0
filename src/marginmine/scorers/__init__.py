"""Score kinds (the plug-in registry) and the built-in kinds. See :mod:`.base` for the interface.

The built-in kinds are listed here, one import per module that registers kinds."""

from .base import BUILTIN_METHODS, KINDS, NAME, Batch, ScoreKind, describe, kind_params, load_plugins, make_kind, \
    parse_scorers, register
from . import margins  # noqa: F401  (ratio, distance, cosine, absolute)

__all__ = ["BUILTIN_METHODS", "KINDS", "NAME", "Batch", "ScoreKind", "describe", "kind_params", "load_plugins",
           "make_kind", "parse_scorers", "register"]
