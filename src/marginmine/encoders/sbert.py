"""``sentence-transformers``: any local sentence-transformers model directory (LaBSE, multilingual
MiniLM, ...) as an encoder. An optional extra: ``pip install 'marginmine[st]'``.

Config (``encoder.models``)::

    labse:
      kind: sentence-transformers
      params:
        path: models/LaBSE               # a directory saved by SentenceTransformer.save (has modules.json)
        langs: [de, en]                  # the languages this encoder will be asked for
        sha256: {model.safetensors: <hex>}   # pins, by path inside the directory (see below)
        batch_size: 64
        fp16: false                      # half precision on cuda
        max_seq_length: null             # the model's own unless set

``train`` imports (no training): every file of the directory is linked into the encoder directory
and listed in its manifest with its SHA-256, so later loads verify the copy. Files that torch would
unpickle (``*.bin``, ``*.pt``, ``*.pth``, ``*.pkl``, ``*.ckpt``) are imported only when
``params.sha256`` pins them; ``*.safetensors`` weights need no pin (no code runs when they load),
and any pin given is checked. Loading never touches the network (``local_files_only``) and never
runs code shipped with the model (``trust_remote_code=False``). No random-init twin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, l2_normalize, write_manifest
from marginmine.encoders.pretrained import check_keys, pinned, place
from marginmine.io.safe import sha256_file

KIND = "sentence-transformers"
SETTINGS = {"batch_size": 64, "fp16": False, "max_seq_length": None}
KNOWN = ("path", "langs", "sha256", *SETTINGS)
PICKLED = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
MODEL_DIR = "model"


def _hide_broken_torchaudio() -> None:
    """fairseq pins torchaudio 2.11, whose compiled library does not load with our torch 2.13;
    transformers imports torchaudio whenever it is installed. A torchaudio that fails to load is
    hidden from it (marked absent), so text models load; a working one is left alone."""
    import sys

    if "torchaudio" in sys.modules:
        return
    try:
        import torchaudio  # noqa: F401
    except OSError:
        for name in [n for n in sys.modules if n == "torchaudio" or n.startswith("torchaudio.")]:
            del sys.modules[name]
        sys.modules["torchaudio"] = None  # type: ignore[assignment]  # find_spec -> None: "not installed"
    except ImportError:
        pass


def _require_library() -> Any:
    _hide_broken_torchaudio()
    try:
        import sentence_transformers
    except ImportError as exc:
        raise EncoderError("the sentence-transformers kind needs the optional extra: "
                           "pip install 'marginmine[st]' (or sentence-transformers)") from exc
    return sentence_transformers


def _checked(p: dict[str, Any], digest: Callable[[Path], str] = sha256_file) -> tuple[list[str], Path, list[str]]:
    """(languages, model directory, its files) after what a run would refuse: unknown keys, no
    languages, no model directory, a pickled file without a pin, a pin that is not its file's digest."""
    check_keys(KIND, p, KNOWN)
    langs = p.get("langs")
    if not isinstance(langs, list) or not langs or not all(isinstance(x, str) for x in langs):
        raise EncoderError(f"{KIND} params.langs: list the languages this encoder will embed (e.g. [de, en])")
    src = Path(str(p.get("path") or "")).expanduser()
    if not p.get("path") or not src.is_dir():
        raise EncoderError(f"{KIND} params.path: {src} is not a directory (a model saved by "
                           "SentenceTransformer.save, e.g. a download of sentence-transformers/LaBSE)")
    if not (src / "modules.json").is_file():
        raise EncoderError(f"{src}: no modules.json - not a sentence-transformers model directory (its "
                           "config is missing; save the model with SentenceTransformer.save(DIR))")
    pins = p.get("sha256") or {}
    if not isinstance(pins, dict):
        raise EncoderError(f"{KIND} params.sha256: a mapping {{<file in the directory>: <hex>}}")
    rel_files = sorted(f.relative_to(src).as_posix() for f in src.rglob("*")
                       if f.is_file() and ".cache" not in f.relative_to(src).parts)
    unknown = sorted(set(pins) - set(rel_files))
    if unknown:
        raise EncoderError(f"{KIND} params.sha256: {unknown} not in {src}")
    for rel in rel_files:
        if rel.endswith(PICKLED) or rel in pins:
            pinned(KIND, rel, src / rel, pins, digest=digest)
    return langs, src, rel_files


def plan_check(params: dict, digest: Callable[[Path], str]) -> list[str]:
    """What ``train`` would refuse, checked while the workflow plans (and sentence-transformers
    installed, without importing it); returns the languages the encoder will embed."""
    import importlib.util

    langs, _, _ = _checked(dict(params or {}), digest)
    if importlib.util.find_spec("sentence_transformers") is None:
        raise EncoderError("the sentence-transformers kind needs the optional extra: "
                           "pip install 'marginmine[st]' (or sentence-transformers)")
    return langs


def train(data: Sequence[ParallelData], out_dir: Path, params: dict, *, seed: int = SEED,
          max_minutes: float | None = None, untrained: bool = False) -> Path:
    """Import the model directory ``params.path`` into ``out_dir`` (``data`` unused)."""
    p = dict(params or {})
    if untrained:
        check_keys(KIND, p, KNOWN)
        raise EncoderError(f"{KIND}: no random-init twin of a pre-trained model; set encoder.eval_random_init: "
                           "false")
    langs, src, rel_files = _checked(p)
    out = Path(out_dir)
    for rel in rel_files:
        place(src / rel, out / MODEL_DIR / rel)
    probe = _open(out / MODEL_DIR, "cpu", p)
    get_dim = getattr(probe, "get_embedding_dimension", None) or probe.get_sentence_embedding_dimension
    dim = int(get_dim() or probe.encode(["a"]).shape[1])
    write_manifest(out, KIND, dim, langs, {f"file:{rel}": f"{MODEL_DIR}/{rel}" for rel in rel_files},
                   {"settings": {k: p.get(k, v) for k, v in SETTINGS.items()}, "source": str(src)})
    return out


def _open(model_dir: Path, device: str, settings: dict[str, Any]) -> Any:
    st = _require_library()
    try:
        model = st.SentenceTransformer(str(model_dir), device=device, local_files_only=True,
                                       trust_remote_code=False)
    except (OSError, ValueError, KeyError) as exc:
        raise EncoderError(f"{model_dir}: sentence-transformers could not load it: {str(exc).splitlines()[0]}") \
            from exc
    if settings.get("max_seq_length"):
        model.max_seq_length = int(settings["max_seq_length"])
    if device.startswith("cuda") and settings.get("fp16"):
        model.half()
    return model


class SentenceTransformerEncoder:
    kind = KIND

    def __init__(self, model: Any, dim: int, langs: Sequence[str], batch_size: int):
        self.model, self.dim, self.langs, self.batch_size = model, int(dim), list(langs), int(batch_size)

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        if lang not in self.langs:
            raise EncoderError(f"{KIND} encoder configured for {self.langs}; no {lang!r} (add it to params.langs "
                               "if the model covers it)")
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        emb = self.model.encode(list(sentences), batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=True, show_progress_bar=False)
        return l2_normalize(np.asarray(emb, dtype=np.float32))


def load(directory: Path, manifest: dict[str, Any], device: str = "cpu") -> SentenceTransformerEncoder:
    settings = {**SETTINGS, **manifest.get("info", {}).get("settings", {})}
    model = _open(Path(directory) / MODEL_DIR, device, settings)
    return SentenceTransformerEncoder(model, manifest["dim"], manifest["langs"], settings["batch_size"])
