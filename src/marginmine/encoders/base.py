"""The sentence-encoder interface every scorer plugs into, and safe loading of encoder directories.

An encoder directory holds ``encoder.json`` (the manifest) beside its files::

    {"format": "marginmine-encoder", "version": 1, "kind": "dual", "dim": 320,
     "langs": ["de", "en", "fr"], "files": {"model": "model.pt", ...},
     "sha256": {"model.pt": "<hex>", ...}, "info": {...training settings and stats...}}

``load_encoder(DIR)`` reads the manifest, checks every listed file against its SHA-256 and only
then hands the directory to the loader registered for ``kind``. Files that need pickle to load
(fairseq checkpoints) are therefore only unpickled when they are byte-identical to what our own
training wrote; anything else - a foreign checkpoint, a directory without a manifest, a modified
file - is refused with a clear message.

A new encoder kind is one module listed in ``KINDS`` (``encoders/__init__.py``, imported only when
used) with its ``train`` and ``load``; nothing downstream changes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from marginmine.errors import MarginmineError
from marginmine.io.safe import sha256_file

FORMAT = "marginmine-encoder"
MANIFEST = "encoder.json"


class EncoderError(MarginmineError):
    """An encoder directory that cannot (or must not) be loaded."""


@runtime_checkable
class SentenceEncoder(Protocol):
    """Sentences in, L2-normalised float32 embeddings out."""

    kind: str
    dim: int

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        """Embeddings of ``sentences`` (shape ``(len(sentences), dim)``, rows of unit norm)."""
        ...


@dataclass(frozen=True)
class ParallelData:
    """One direction of encoder training data: two line-aligned, cleaned plain-text files."""

    src_lang: str
    tgt_lang: str
    src: Path
    tgt: Path


def read_training_data(manifest_path: str | Path) -> list[ParallelData]:
    """The training-data manifest written by ``marginmine encoder-data`` (JSON list)."""
    items = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    base = Path(manifest_path).parent
    return [ParallelData(i["src_lang"], i["tgt_lang"], base / i["src"], base / i["tgt"]) for i in items]


#: ``train(data, out_dir, params, seed=..., max_minutes=...)`` writes a loadable encoder directory
Trainer = Callable[..., Path]


def write_manifest(directory: str | Path, kind: str, dim: int, langs: Sequence[str],
                   files: dict[str, str], info: dict[str, Any] | None = None) -> Path:
    """Write ``encoder.json`` for files already in ``directory`` (hashes computed here)."""
    d = Path(directory)
    manifest = {"format": FORMAT, "version": 1, "kind": kind, "dim": int(dim), "langs": sorted(langs),
                "files": files, "sha256": {name: sha256_file(d / name) for name in sorted(set(files.values()))},
                "info": info or {}}
    tmp = d / (MANIFEST + ".part")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    tmp.replace(d / MANIFEST)
    return d / MANIFEST


def read_manifest(directory: str | Path, verify: bool = True) -> dict[str, Any]:
    """The manifest of an encoder directory; with ``verify`` every file's SHA-256 is checked."""
    d = Path(directory)
    mpath = d / MANIFEST
    if not d.is_dir():
        raise EncoderError(f"{d}: encoder directory not found (train one with the workflow, "
                           "e.g. `snakemake results/demo/encoder --configfile config/demo.yaml`)")
    if not mpath.exists():
        raise EncoderError(f"{d}: no {MANIFEST}; refusing to load files that marginmine did not write "
                           "(checkpoints are unpickled only when they carry our manifest)")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EncoderError(f"{mpath}: not valid JSON ({exc})") from exc
    if manifest.get("format") != FORMAT:
        raise EncoderError(f"{mpath}: not a marginmine encoder manifest")
    if verify:
        for name, digest in manifest.get("sha256", {}).items():
            f = d / name
            if not f.exists():
                raise EncoderError(f"{f}: listed in {MANIFEST} but missing (incomplete copy?)")
            if sha256_file(f) != digest:
                raise EncoderError(f"{f}: SHA-256 differs from {MANIFEST}; refusing to load a modified "
                                   "or foreign checkpoint")
    return manifest


def encoder_identity(directory: str | Path) -> str:
    """SHA-256 over what decides the encoder's embeddings: the SHA-256 of every file its manifest
    lists, its kind, dimension and the settings it encodes with (``info.settings``, e.g. a
    pre-trained model's sequence length or lower-casing): the same for a copy of the directory,
    another for another encoder, training or setting (what embeddings and fitted heads record,
    :mod:`marginmine.encoders.embed`, :mod:`marginmine.scoring.heads`)."""
    m = read_manifest(directory, verify=False)
    what = {"sha256": m.get("sha256", {}), "kind": m.get("kind"), "dim": m.get("dim"),
            "settings": (m.get("info") or {}).get("settings")}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def export_encoder(src_dir: str | Path, dest_dir: str | Path) -> Path:
    """Copy a finished encoder (its manifest's files, then the manifest) to ``dest_dir``.

    Hard links where possible (same file system), so large models cost no extra space.
    """
    import os
    import shutil

    src, dest = Path(src_dir), Path(dest_dir)
    manifest = read_manifest(src)
    if dest.exists() and dest.resolve() == src.resolve():
        raise EncoderError(f"{dest}: is the encoder being exported; choose another directory")
    dest.mkdir(parents=True, exist_ok=True)
    for name in [*manifest["sha256"], MANIFEST]:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)  # a model directory has sub-folders
        target.unlink(missing_ok=True)
        try:
            os.link(src / name, target)
        except OSError:
            shutil.copy2(src / name, target)
    return dest


def check_time_cap(directory: str | Path, what: str, policy: str | None, max_minutes: float | None) -> None:
    """After a trainer returned: a wall-clock cap that ended training before its steps is an error
    (``policy`` ``error``: the manifest is removed so nothing exports or loads the cut-short model; the
    checkpoint stays and a rerun resumes) or a warning written into ``info.time_cap`` (``warn``);
    :mod:`marginmine.timecap`."""
    from marginmine.encoders import kind_module
    from marginmine.timecap import RESUMES, TimeCapError, enforce, record

    d = Path(directory)
    manifest = read_manifest(d, verify=False)
    module = kind_module(str(manifest.get("kind")))
    try:
        text = enforce({"max_minutes": max_minutes, **(manifest.get("info") or {})}, what, policy,
                       getattr(module, "RERUN_AFTER_CAP", RESUMES))
    except TimeCapError:
        (d / MANIFEST).unlink(missing_ok=True)
        if hasattr(module, "forget_training"):  # a kind whose resume is not the uninterrupted run's model
            module.forget_training(d)
        raise
    if text:
        record(d / MANIFEST, text)


def load_encoder(directory: str | Path, device: str = "cpu") -> SentenceEncoder:
    """Load a trained encoder; ``device`` 'cuda' fails loudly when no GPU is visible."""
    from marginmine.encoders import kind_module

    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise EncoderError(f"device {device!r} requested but no CUDA GPU is visible "
                               "(check CUDA_VISIBLE_DEVICES / the GPU profile); not falling back to CPU")
    manifest = read_manifest(directory)
    return kind_module(manifest["kind"], str(directory)).load(Path(directory), manifest, device)


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, eps)
