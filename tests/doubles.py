"""Test doubles with real behaviour, shared by several test modules."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from marginmine.encoders.base import l2_normalize


class TrigramEncoder:
    """A deterministic bag of hashed character trigrams (test double with real behaviour)."""

    kind, dim = "trigram", 64

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls, self.fail_after = 0, fail_after

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        out = np.zeros((len(sentences), self.dim), np.float32)
        for i, s in enumerate(sentences):
            t = f"  {s.lower()}  "
            for j in range(len(t) - 2):
                h = int.from_bytes(hashlib.blake2b(t[j:j + 3].encode(), digest_size=4).digest(), "big")
                out[i, h % self.dim] += 1
        return l2_normalize(out)


def trigram_encoder_dir(base: Path, weights: str = "trigrams") -> Path:
    """An encoder directory for :class:`TrigramEncoder` (tests patch ``load_encoder``) with a real
    manifest over one file, so it has an identity; ``weights`` tells two encoders apart."""
    from marginmine.encoders.base import write_manifest

    d = base / f"enc-{weights}"
    d.mkdir(exist_ok=True)
    (d / "weights.bin").write_text(weights)
    write_manifest(d, "trigram", 64, ["de", "en"], {"weights": "weights.bin"})
    return d
