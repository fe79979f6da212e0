"""Built-in encoder kinds; importing this package registers their loaders and trainers.

* ``dual``  - dual encoder (DAN / transformer) trained with in-batch negatives and an additive
  margin (Guo et al. 2018; Yang et al. 2019): :mod:`marginmine.encoders.dual`
* ``laser`` - the paper's LASER-style BiLSTM encoder-decoder via fairseq's LASER task:
  :mod:`marginmine.encoders.laser`

A trainer is ``train(data, out_dir, params, *, seed, max_minutes) -> Path`` and leaves a
directory that :func:`marginmine.encoder.load_encoder` loads.
"""

from __future__ import annotations

from ..encoder import Trainer
from . import dual, laser

TRAINERS: dict[str, Trainer] = {"dual": dual.train, "laser": laser.train}
