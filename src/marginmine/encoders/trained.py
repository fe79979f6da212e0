"""The encoder kind ``trained``: an encoder another experiment already trained, used as it is.

``params.path`` names a finished marginmine encoder directory (its ``encoder.json`` manifest and
the files it lists, e.g. ``results/demo/encoder`` after ``make demo``); ``train`` verifies every
file against the manifest's SHA-256, optionally checks the encoder's identity against
``params.identity`` (:func:`marginmine.encoders.base.encoder_identity`: pin it to be sure which
training you get), and places a copy (hard links where possible) in the encoder directory. The
copy's manifest is the original's, so it loads with the original's kind and embeds exactly as the
original does (same identity: embeddings and fitted heads record it).

Nothing is trained, so there is no random-init twin (``encoder.eval_random_init: false``). Whether
the encoder saw the sentences to be filtered is the experiment that trained it to answer: its
training data report (``encoder/data/report.json``) lists what was removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, encoder_identity, export_encoder, read_manifest
from marginmine.encoders.pretrained import check_keys

KIND = "trained"
KNOWN = ("path", "identity")


def train(data: Sequence[Any], out_dir: Path, params: dict, *, seed: int = SEED,
          max_minutes: float | None = None, untrained: bool = False) -> Path:
    """Place the finished encoder ``params.path`` in ``out_dir`` (``data`` unused)."""
    p = dict(params or {})
    check_keys(KIND, p, KNOWN)
    if untrained:
        raise EncoderError(f"{KIND}: nothing is trained, so there is no random-init twin; set "
                           "encoder.eval_random_init: false")
    if not p.get("path"):
        raise EncoderError(f"{KIND} params.path: give a finished encoder directory (e.g. results/demo/encoder)")
    src = Path(str(p["path"])).expanduser()
    read_manifest(src)  # every file against its SHA-256; a missing or foreign directory is refused here
    want = p.get("identity")
    if want is not None and encoder_identity(src) != want:
        raise EncoderError(f"{src}: identity {encoder_identity(src)} differs from params.identity {want} (another "
                           "training or setting); refusing to use it")
    out = Path(out_dir)
    export_encoder(src, out)
    return out


def load(directory: Path, manifest: dict[str, Any], device: str = "cpu") -> Any:
    """Never called: the placed copy's manifest names the original kind, which loads it."""
    raise EncoderError(f"{directory}: a `{KIND}` copy loads with its original kind ({manifest.get('kind')})")
