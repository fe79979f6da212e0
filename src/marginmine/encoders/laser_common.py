"""What the LASER-style encoder's training and loading share: its parameters and their defaults,
the text preparation they record, the fairseq LASER task's location, and small text helpers."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from marginmine.encoders.base import EncoderError, ParallelData
from marginmine.machine import dist_version

log = logging.getLogger(__name__)

KIND = "laser"

DEFAULTS: dict[str, Any] = {
    "embed_dim": 256, "encoder_hidden": 256, "encoder_layers": 1, "decoder_hidden": 512,
    "lang_embed_dim": 32, "bpe_vocab": 8000, "bpe_sample": 1_000_000, "character_coverage": 0.9999,
    "lr": 0.001, "dropout": 0.1, "clip_norm": 5.0, "max_epoch": 10, "max_update": 0,
    "max_tokens": 4000, "max_len": 250, "update_freq": 1, "log_interval": 50,
    "save_interval_updates": 1000, "encode_max_len": 1000, "threads": 0,
    "lower_case": True, "normalize_punct": True,
}
#: the paper's sizes (pass them as params for a paper-scale run)
PAPER_PARAMS: dict[str, Any] = {"embed_dim": 512, "encoder_hidden": 512, "encoder_layers": 1,
                                "decoder_hidden": 2048, "lang_embed_dim": 32, "bpe_vocab": 40000}

#: how text is prepared before sentencepiece, in training and embedding alike
#: (:func:`marginmine.encoders.laser_format.normalize`; the defaults are LASER's own preparation)
TEXT_KEYS = ("lower_case", "normalize_punct")
PREP_KEYS = ("bpe_vocab", "bpe_sample", "character_coverage", *TEXT_KEYS)
#: version of the data preparation (2: text prepared as LASER prepares it); a new version never
#: reuses a work directory's BPE and binarized data
PREP_VERSION = 2
MODEL_KEYS = ("embed_dim", "encoder_hidden", "encoder_layers", "decoder_hidden", "lang_embed_dim")
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
LANG_RE = re.compile(r"^[A-Za-z0-9_]{1,16}$")
BPE_SAMPLE_SEED = 12345  # fixed: the vocabulary must not change with the training seed


# ----------------------------------------------------------------------------------------------
# small helpers


def laser_src_dir() -> Path:
    """fairseq's LASER example (task + models), shipped inside the fairseq package."""
    import importlib.util

    spec = importlib.util.find_spec("fairseq")  # where it is installed, without importing it (~8 s)
    if spec is None or spec.origin is None:
        raise EncoderError("the LASER-style encoder needs fairseq (pinned in requirements.txt as fairseq-fixed)")
    d = Path(spec.origin).parent / "examples" / "laser" / "laser_src"
    if not (d / "laser_task.py").exists() or not (d / "laser_lstm.py").exists():
        version = dist_version("fairseq-fixed", "fairseq")
        raise EncoderError(f"{d}: fairseq's LASER example task not found (fairseq {version}); "
                           "install a fairseq build that ships fairseq/examples/laser")
    return d


def resolve_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """``params`` over :data:`DEFAULTS` (unknown keys are logged and ignored)."""
    p = dict(params or {})
    if "bpe_merges" in p and "bpe_vocab" not in p:
        p["bpe_vocab"] = p.pop("bpe_merges")
    p.pop("bpe_merges", None)
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        log.warning("laser: ignoring unknown params %s (known: %s)", unknown, ", ".join(sorted(DEFAULTS)))
    out = dict(DEFAULTS)
    out.update({k: v for k, v in p.items() if k in DEFAULTS})
    for k in ("embed_dim", "encoder_hidden", "encoder_layers", "decoder_hidden", "bpe_vocab", "max_tokens",
              "max_len", "max_epoch", "update_freq", "log_interval", "encode_max_len"):
        if int(out[k]) < 1:
            raise EncoderError(f"laser param {k} must be >= 1 (got {out[k]!r})")
    for k in ("lang_embed_dim", "threads", "max_update", "save_interval_updates"):
        if int(out[k]) < 0:
            raise EncoderError(f"laser param {k} must be >= 0 (got {out[k]!r})")
    for k in TEXT_KEYS:
        if not isinstance(out[k], bool):
            raise EncoderError(f"laser param {k} must be true or false (got {out[k]!r})")
    return out


def text_settings(info: dict[str, Any], where: Path) -> dict[str, bool] | None:
    """The text preparation a trained encoder's manifest records (``info.settings``), or None for an
    encoder trained before it was recorded: such an encoder was trained on raw text and embeds raw
    text (a warning says so; it is never silently changed)."""
    settings = info.get("settings")
    if settings is None:
        log.warning("%s: a laser encoder trained before its text preparation was recorded: it was trained "
                    "on raw text and embeds raw text (not lower-cased or punctuation-normalised as LASER "
                    "prepares text); retrain it for LASER's preparation", where)
        return None
    if not isinstance(settings, dict) or any(not isinstance(settings.get(k), bool) for k in TEXT_KEYS):
        raise EncoderError(f"{where}: manifest info.settings must give {' and '.join(TEXT_KEYS)} as true or "
                           f"false (got {settings!r})")
    return {k: settings[k] for k in TEXT_KEYS}


def iter_lines(path: Path) -> Iterator[str]:
    """Lines split on '\\n' only (a stray '\\r' or U+2028 inside a sentence must not shift alignment)."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
        for line in fh:
            yield line.rstrip("\n").rstrip("\r")


def count_lines(path: Path) -> int:
    return sum(1 for _ in iter_lines(path))


def piece_table(sp: Any) -> list[str]:
    """spm id -> token written for fairseq; pieces fairseq would misread become <unk>."""
    table = []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        bad = (not piece or piece in FAIRSEQ_SPECIALS or sp.is_control(i) or sp.is_unknown(i)
               or any(c.isspace() for c in piece))
        table.append("<unk>" if bad else piece)
    return table


def pair_files(data: Sequence[ParallelData]) -> dict[tuple[str, str], list[tuple[Path, Path]]]:
    """Unordered language pair (a < b) -> list of (file_a, file_b), in data order."""
    pairs: dict[tuple[str, str], list[tuple[Path, Path]]] = {}
    for d in data:
        for lang in (d.src_lang, d.tgt_lang):
            if not LANG_RE.match(lang):
                raise EncoderError(f"laser: unsupported language code {lang!r} (letters, digits, '_')")
        if d.src_lang == d.tgt_lang:
            raise EncoderError(f"laser: {d.src} and {d.tgt} have the same language {d.src_lang!r}")
        a, b = sorted((d.src_lang, d.tgt_lang))
        fa, fb = (Path(d.src), Path(d.tgt)) if d.src_lang == a else (Path(d.tgt), Path(d.src))
        files = pairs.setdefault((a, b), [])
        if (fa, fb) not in files:  # de->en and en->de listing the same files: one corpus
            files.append((fa, fb))
    if not pairs:
        raise EncoderError("laser: no training data")
    return pairs
