"""``laser-pretrained``: a LASER2 or LASER3 checkpoint in LASER's own format, used as released.

Config (``encoder.models``)::

    laser2:
      kind: laser-pretrained
      params:
        model: models/laser2.pt          # local files: absolute, or relative to data_dir
        spm: models/laser2.spm
        cvocab: models/laser2.cvocab     # the vocabulary of transformer (LASER3) checkpoints
        sha256: {model: <hex>, spm: <hex>, cvocab: <hex>}   # every file pinned
        langs: [de, en]                  # the languages this encoder will be asked for
        lang_models:                     # optional: a LASER3 student per language it covers
          wo: {model: models/laser3-wol_Latn.v1.pt, spm: models/laser2.spm, cvocab: models/laser2.cvocab,
               sha256: {...}}

``train`` imports (no training): pins checked, files linked into the encoder directory, manifest
written. A LASER3 checkpoint covers one language (its file name says which, e.g. ``wol_Latn``): as
the main model it must be given exactly one language; to score a pair, give LASER2 as the main model
and LASER3 under ``lang_models``. ``untrained`` (the random-init twin) builds the same BiLSTM with
seeded random weights (LASER2-format checkpoints only).

Text is prepared as LASER prepares it (:mod:`marginmine.encoders.laser_format`); BiLSTM checkpoints
are read without unpickling code and run by our own module (tested against ``laser_encoders``);
transformer checkpoints are fully unpickled - their digests are pinned - and run by the official
``laser_encoders`` package (an optional install: ``pip install --no-deps laser_encoders==0.0.2
unicategories appdirs``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, l2_normalize, write_manifest
from marginmine.encoders.laser_format import LaserTokenizer, batches, build_lstm, laser3_language, read_checkpoint
from marginmine.encoders.pretrained import check_keys, local_file, pinned, place
from marginmine.io.safe import sha256_file

KIND = "laser-pretrained"
SETTINGS = {"lower_case": True, "normalize_punct": True, "max_tokens": 12000, "max_sentences": 512,
            "fp16": False}
FILE_KEYS = ("model", "spm", "cvocab")
EXTENSION = {"model": ".pt", "spm": ".spm", "cvocab": ".cvocab"}   # of the copies in the encoder directory
KNOWN = (*FILE_KEYS, "sha256", "langs", "lang_models", *SETTINGS)


def _checked_files(spec: dict[str, Any], where: str,
                   digest: Callable[[Path], str] = sha256_file) -> Iterator[tuple[str, Path]]:
    """(key, path) of one model's files (``cvocab`` when given), each present and its pin its digest."""
    pins = spec.get("sha256") or {}
    if not isinstance(pins, dict):
        raise EncoderError(f"{KIND} {where}sha256: a mapping {{model: <hex>, spm: <hex>, ...}}")
    for key in FILE_KEYS:
        if key == "cvocab" and not spec.get(key):
            continue
        path = local_file(KIND, where + key, spec.get(key))
        pinned(KIND, key, path, pins, where, digest)
        yield key, path


def _import_files(spec: dict[str, Any], where: str, out: Path, stem: str) -> dict[str, str]:
    """Check one model's files against their pins and place them as ``<stem>.pt/.spm/.cvocab``."""
    files = {}
    for key, path in _checked_files(spec, where):
        place(path, out / (stem + EXTENSION[key]))
        files[key] = stem + EXTENSION[key]
    return files


def _describe(out: Path, files: dict[str, str], source: str, langs: list[str], where: str) -> dict[str, Any]:
    """Format and embedding size of an imported checkpoint (``source``: the user's file, whose
    released name says which language a LASER3 student covers); LASER3's coverage checked."""
    ckpt = read_checkpoint(out / files["model"], pinned=True)
    if "params" in ckpt:
        p = ckpt["params"]
        dim = int(p.get("hidden_size", 512)) * (2 if p.get("bidirectional") else 1)
        return {"format": "lstm", "dim": dim}
    if "cvocab" not in files:
        raise EncoderError(f"{KIND} {where}cvocab: a transformer (LASER3) checkpoint needs its .cvocab")
    covers = laser3_language(source)
    cfg = ckpt["cfg"]["model"]
    dim = int(cfg["encoder_embed_dim"] if isinstance(cfg, dict) else cfg.encoder_embed_dim)
    if len(langs) != 1:
        raise EncoderError(f"{KIND} {where}langs: a LASER3 checkpoint covers one language "
                           f"({covers or 'see its file name'}), asked for {langs}; give LASER2 as the main "
                           "model and this one under params.lang_models.<lang>")
    return {"format": "transformer", "dim": dim, "covers": covers}


def _langs(p: dict[str, Any]) -> list[str]:
    check_keys(KIND, p, KNOWN)
    langs = p.get("langs")
    if not isinstance(langs, list) or not langs or not all(isinstance(x, str) for x in langs):
        raise EncoderError(f"{KIND} params.langs: list the languages this encoder will embed (e.g. [de, en])")
    return langs


def plan_check(params: dict, digest: Callable[[Path], str]) -> list[str]:
    """What ``train`` would refuse, checked while the workflow plans (no job run yet): unknown keys,
    no languages, a file missing, a pin missing, malformed or not the file's digest (``digest``, which
    may remember digests of unchanged files). Returns the languages the encoder will embed."""
    p = dict(params or {})
    langs = _langs(p)
    specs = [("params.", p)] + [(f"params.lang_models.{lang}.", spec or {})
                                for lang, spec in (p.get("lang_models") or {}).items()]
    for lang in p.get("lang_models") or {}:
        if lang not in langs:
            raise EncoderError(f"{KIND} params.lang_models.{lang}: {lang!r} is not in params.langs {langs}")
    for where, spec in specs:
        list(_checked_files(spec, where, digest))
    if p.get("lang_models"):
        import importlib.util

        if importlib.util.find_spec("laser_encoders") is None:  # LASER3 students are transformers
            raise EncoderError(f"{KIND} params.lang_models: LASER3 (transformer) checkpoints run with the official "
                               "package, which is not installed: pip install --no-deps laser_encoders==0.0.2 "
                               "unicategories appdirs")
    return langs


def train(data: Sequence[ParallelData], out_dir: Path, params: dict, *, seed: int = SEED,
          max_minutes: float | None = None, untrained: bool = False) -> Path:
    """Import the configured checkpoint(s) into ``out_dir`` (``data`` and ``max_minutes`` unused)."""
    p = dict(params or {})
    langs = _langs(p)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lang_models = p.get("lang_models") or {}
    main_langs = [x for x in langs if x not in lang_models]
    files = _import_files(p, "params.", out, "model")
    info: dict[str, Any] = {"settings": {k: p.get(k, v) for k, v in SETTINGS.items()},
                            "sources": {k: str(p[k]) for k in FILE_KEYS if p.get(k)}, "models": {}}
    main = _describe(out, files, str(p["model"]), main_langs or langs, "params.")
    info["models"]["*"] = {**main, "files": files, "langs": main_langs}
    for lang, spec in lang_models.items():
        if lang not in langs:
            raise EncoderError(f"{KIND} params.lang_models.{lang}: {lang!r} is not in params.langs {langs}")
        where = f"params.lang_models.{lang}."
        lf = _import_files(spec or {}, where, out, f"lang-{lang}")
        desc = _describe(out, lf, str(spec.get("model", "")), [lang], where)
        if desc["dim"] != main["dim"]:
            raise EncoderError(f"{KIND} {where}model: {desc['dim']}-dim embeddings, the main model {main['dim']}")
        info["models"][lang] = {**desc, "files": lf, "langs": [lang]}
    if untrained:
        _randomize(out, info, seed)
    all_files = {f"{m}.{k}": v for m, d in info["models"].items() for k, v in d["files"].items()}
    write_manifest(out, KIND, main["dim"], langs, all_files, info)
    return out


def _randomize(out: Path, info: dict[str, Any], seed: int) -> None:
    """The random-init twin: each BiLSTM replaced by the same network with seeded random weights."""
    import torch

    from marginmine.io.safe import atomic_path

    for name, d in info["models"].items():
        if d["format"] != "lstm":
            raise EncoderError(f"{KIND}: no random-init twin of a transformer (LASER3) checkpoint; set "
                               "encoder.eval_random_init: false")
        path = out / d["files"]["model"]
        ckpt = read_checkpoint(path, pinned=True)
        torch.manual_seed(seed)
        net = build_lstm(ckpt["params"])
        twin = path.with_name("random-" + path.name)
        with atomic_path(twin) as tmp:
            torch.save({"params": ckpt["params"], "model": net.state_dict(), "dictionary": ckpt["dictionary"]}, tmp)
        d["files"] = {**d["files"], "model": twin.name}
        path.unlink()
    info["untrained"] = True


class LaserPretrained:
    """One or more LASER checkpoints behind the SentenceEncoder interface."""

    kind = KIND

    def __init__(self, directory: Path, manifest: dict[str, Any], device: str = "cpu"):
        self.directory, self.device = Path(directory), device
        self.dim = int(manifest["dim"])
        self.langs = list(manifest["langs"])
        self.info = manifest["info"]
        self.settings = {**SETTINGS, **self.info.get("settings", {})}
        self._models: dict[str, tuple[Any, Any]] = {}

    def _model_for(self, lang: str) -> tuple[Any, Any]:
        models = self.info["models"]
        name = lang if lang in models else "*"
        if lang not in self.langs or (name == "*" and lang not in models["*"]["langs"]):
            covers = {n: d.get("covers") or d["langs"] for n, d in models.items()}
            raise EncoderError(f"{self.directory}: no model for language {lang!r} (this encoder covers "
                               f"{self.langs}; models: {covers}). A LASER3 checkpoint covers only its own "
                               "language: add one under params.lang_models or use LASER2")
        if name not in self._models:
            self._models[name] = self._load(models[name])
        return self._models[name]

    def _load(self, d: dict[str, Any]) -> tuple[Any, Any]:
        files = {k: self.directory / v for k, v in d["files"].items()}
        lower, punct = bool(self.settings["lower_case"]), bool(self.settings["normalize_punct"])
        # the manifest's SHA-256 matched the pinned files just now (load_encoder), so a transformer
        # checkpoint may be unpickled
        ckpt = read_checkpoint(files["model"], pinned=True)
        if d["format"] == "lstm":
            net = build_lstm(ckpt["params"])
            net.load_state_dict(ckpt["model"], strict=True)
            tok = LaserTokenizer(files["spm"], ckpt["dictionary"], lower_case=lower, normalize_punct=punct)
        else:
            try:
                from laser_encoders.models import LaserTransformerEncoder
            except ImportError as exc:
                raise EncoderError("a LASER3 (transformer) checkpoint runs with the official package: "
                                   "pip install --no-deps laser_encoders==0.0.2 unicategories appdirs") from exc
            net = LaserTransformerEncoder(ckpt, str(files["cvocab"]))
            cfg = ckpt["cfg"]["model"]
            tok = LaserTokenizer(files["spm"], dict(net.dictionary.indices), lower_case=lower,
                                 normalize_punct=punct, prepend_bos=bool(getattr(cfg, "prepend_bos", False)))
            if getattr(cfg, "left_pad_source", False):
                raise EncoderError(f"{files['model']}: left-padded transformer checkpoints are not supported")
        net.eval().to(self.device)
        if self.device.startswith("cuda") and self.settings["fp16"]:
            net.half()
        return net, tok

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        import torch

        net, tok = self._model_for(lang)
        ids = [tok.ids(s) for s in sentences]
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for idx, batch, lengths in batches(ids, 1, int(self.settings["max_tokens"]),
                                               int(self.settings["max_sentences"])):
                emb = net(batch.to(self.device), lengths)
                emb = emb["sentemb"] if isinstance(emb, dict) else emb
                out[idx] = emb.float().cpu().numpy()
        return l2_normalize(out)


def load(directory: Path, manifest: dict[str, Any], device: str = "cpu") -> LaserPretrained:
    if manifest.get("kind") != KIND or "models" not in manifest.get("info", {}):
        raise EncoderError(f"{directory}: not a {KIND} encoder directory ({json.dumps(manifest.get('kind'))})")
    return LaserPretrained(directory, manifest, device)
