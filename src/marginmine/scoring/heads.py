"""Fitting the head of a *fitted* score kind (a kind with ``fitted = True``, e.g. ``calibrated``)
on an encoder's embeddings of clean pairs (``marginmine fit-scorer``, the workflow's ``fit_scorer``
rule).

The *positives* (:class:`Positives`) are clean parallel data of the domains to be kept: by
default a seeded sample of the encoder data's pairs in the corpus' language pair
(``encoder_data``, already free of dev/test/corpus sentences), or given files (``files``), or the
held-out pairs themselves (``held_out``). The *held-out* pairs (``heads.held_out``, e.g. newstest2019)
check the fit. Both are cleaned like encoder training data and checked for leakage: a held-out pair
with a side in a protected set (dev/test, intrinsic, mining benchmark) is an error naming the file,
its line and the set (the check would be unsound); a positive pair with one - sampled from the
encoder data or read from files, training data either way - is removed and counted, as encoder
training data is (public test sets share a few short sentences: newstest2010's "Vielen Dank!" is in
Tatoeba); a held-out or file pair with a side in the encoder data of an encoder trained on it is
removed and counted (``data/report.json``), never silently. Every pair is oriented to the corpus' direction
(``src_lang`` -> ``tgt_lang``), whichever side the file pair names first. A tenth of the positives
(every tenth, in order) is kept out of the fit (``positives_check.tsv``, read by the shortcut check)
and a tenth of the held-out pairs is used to report the head's separation of each source's
translation from the other targets (AUC of the fitted score vs raw cosine), for each of the two.
A kind whose negatives come from the corpus (``corpus_negatives``, e.g. ``mlp``) gets as many as it
has positives from the corpus' shards and their embeddings (:func:`corpus_negatives`); a tenth of
them is kept out too.

Output: ``head.npz`` (the kind's arrays, no pickle), ``data/`` (the cleaned pairs and their
``report.json``), ``positives_check.tsv`` and, last, ``head.json``: the kind, its params, the npz's
SHA-256, the encoder's manifest digest and identity, the positives' and held-out pairs' counts and
the fit's stats. Scoring with a head checks that the embeddings (their record,
:func:`marginmine.encoders.embed.embedded_by`) or the encoder given are the ones it was fitted on
(:func:`check_fitted_on`). A head whose ``head.json`` is there is complete; a rerun rewrites it (the
output is never an input).
"""

from __future__ import annotations

import functools
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from marginmine.defaults import HEAD_POSITIVES, HEAD_POSITIVES_SIZE, POSITIVE_SOURCES
from marginmine.errors import InputError, MarginmineError
from marginmine.scoring.kinds import Batch
from marginmine.scoring.metrics import pair_auc, roc_auc

log = logging.getLogger(__name__)


def _fields(text: str, n: int, usage: str) -> list[str]:
    """``n`` non-empty comma-separated fields of a command-line value, or ``usage`` as the error."""
    parts = text.split(",")
    if len(parts) != n or not all(parts):
        raise MarginmineError(f"{usage}, got {text!r}")
    return parts


class FittedKind:
    """What every fitted kind does the same way: score a batch's pairs, or given pairs, with the
    head in its ``head`` directory; the kind itself implements ``apply(arrays, u, v)`` and ``fit``."""

    head: str
    texts: ClassVar[bool] = False  # scores from the vectors alone

    def score(self, batch: Batch) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros(0, np.float32)
        return self.pair_scores(np.asarray(batch.xu)[batch.gx], np.asarray(batch.yu)[batch.gy])

    def pair_scores(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The fitted score of the pairs ``(u[i], v[i])`` (also of mined pairs)."""
        if not self.head:
            raise MarginmineError(f"{type(self).kind_name}: no fitted head (param head: the directory "  # type: ignore[attr-defined]
                                  "marginmine fit-scorer wrote)")
        return self.apply(load_arrays(self.head), u, v)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class HeldOut:
    """One held-out parallel set: two aligned files and their languages."""

    src_lang: str
    tgt_lang: str
    src: str
    tgt: str

    @classmethod
    def parse(cls, text: str) -> "HeldOut":
        return cls(*_fields(text, 4, "--held-out takes SRC_LANG,TGT_LANG,SRC_FILE,TGT_FILE"))


CHECK_FILE = "positives_check.tsv"  #: the positives kept out of the fit, in a head's directory


@dataclass(frozen=True)
class Positives:
    """Where a fitted head's positives come from: ``encoder_data`` (a seeded sample of ``size`` of the
    encoder's training pairs in the corpus' language pair; 0: all), ``files`` (the pairs of ``files``,
    sampled to ``size`` likewise) or ``held_out`` (the held-out pairs themselves, all of them)."""

    source: str = HEAD_POSITIVES
    size: int = HEAD_POSITIVES_SIZE
    files: tuple[HeldOut, ...] = ()

    def __post_init__(self) -> None:
        if self.source not in POSITIVE_SOURCES:
            raise MarginmineError(f"positives: {self.source!r} is not one of {', '.join(POSITIVE_SOURCES)}")
        if self.size < 0:
            raise MarginmineError(f"positives: size must be >= 0 (0 = all), got {self.size}")
        if (self.source == "files") != bool(self.files):
            raise MarginmineError("positives: files are given exactly when the positives come from files")

    def record(self) -> dict[str, Any]:
        return {"from": self.source, "size": None if self.source == "held_out" else self.size,
                "files": [[h.src, h.tgt] for h in self.files]}


@dataclass(frozen=True)
class CorpusShard:
    """One preprocessed shard of the corpus and its encoder's embeddings (line-aligned)."""

    pairs: str
    src: str
    tgt: str

    @classmethod
    def parse(cls, text: str) -> "CorpusShard":
        return cls(*_fields(text, 3, "--corpus takes SHARD_TSV,SRC_NPY,TGT_NPY"))


def negative_rows(kind: Any, shards: Sequence[CorpusShard], n: int, seed: int,
                  exclude: Sequence[tuple[str, str]] = ()) -> tuple[np.ndarray, list[Any], dict[str, Any]]:
    """The rows (0-based, over the shards in order) of the corpus pairs ``kind.choose_negatives``
    picks (``n`` of them) among those not in ``exclude`` (text pairs, e.g. the human-labelled
    evaluation file), the shards' memory-mapped embeddings and the counts."""
    from marginmine.preprocess.normalize import sentence_key
    from marginmine.scoring.files import ArrayEmbeddings, iter_pairs

    if not shards:
        raise MarginmineError(f"kind {type(kind).kind_name} draws its negatives from the corpus: give --corpus")
    banned = {(sentence_key(a), sentence_key(b)) for a, b in exclude}
    embs, cos, eligible = [], [], []
    for sh in shards:  # memory-mapped: only the cosines and the chosen rows are held
        emb = ArrayEmbeddings.load(sh.src, sh.tgt)
        emb.check_input(sh.pairs)
        embs.append(emb)
        for a in range(0, len(emb.src), 65_536):
            cos.append(np.einsum("ij,ij->i", np.asarray(emb.src[a:a + 65_536], np.float64),
                                 np.asarray(emb.tgt[a:a + 65_536], np.float64)))
        eligible += [(sentence_key(a), sentence_key(b)) not in banned for a, b in iter_pairs([sh.pairs])]
    cosines = np.concatenate(cos)
    ok = np.array(eligible, dtype=bool)
    idx = np.asarray(kind.choose_negatives(cosines, ok, n, seed))
    stats = {"corpus_pairs": len(ok), "excluded": int((~ok).sum()), "negatives": len(idx),
             "negative_cosine": [float(cosines[idx].min()), float(cosines[idx].max())] if len(idx) else None}
    return idx, embs, stats


def fitted_negatives(head: str | Path, kind: Any, shards: Sequence[CorpusShard],
                     exclude: Sequence[tuple[str, str]] = ()) -> np.ndarray:
    """The corpus rows a fitted head (``head``'s ``head.json``) took as its negatives, chosen again
    (the choice is deterministic) and checked against the counts the fit recorded."""
    manifest = json.loads((Path(head) / "head.json").read_text(encoding="utf-8"))
    recorded = manifest.get("negatives") or {}
    if not recorded:
        raise MarginmineError(f"{head}: this head was fitted without corpus negatives")
    idx, _, stats = negative_rows(kind, shards, int(recorded["negatives"]), int(manifest["seed"]), exclude)
    if json.loads(json.dumps(stats)) != recorded:
        raise InputError(str(Path(head) / "head.json"), f"records negatives {recorded}, the given corpus gives "
                         f"{stats}",
                         hint="give the corpus shards and embeddings (and --paracrawl file) it was fitted on")
    return idx


def corpus_negatives(kind: Any, shards: Sequence[CorpusShard], n: int, seed: int,
                     exclude: Sequence[tuple[str, str]] = ()) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The corpus pairs ``kind.choose_negatives`` picks (:func:`negative_rows`): their embeddings and counts."""
    idx, embs, stats = negative_rows(kind, shards, n, seed, exclude)
    starts = np.cumsum([0] + [len(e.src) for e in embs])
    shard_of = np.searchsorted(starts, idx, side="right") - 1
    u = np.empty((len(idx), embs[0].src.shape[1]), np.float32)
    v = np.empty((len(idx), embs[0].tgt.shape[1]), np.float32)
    for i, e in enumerate(embs):  # each shard's chosen rows, in the kind's order
        at = np.flatnonzero(shard_of == i)
        u[at], v[at] = e.src[idx[at] - starts[i]], e.tgt[idx[at] - starts[i]]
    return u, v, stats


def _oriented(sets: Sequence[HeldOut], prefix: str, src_lang: str, tgt_lang: str, flag: str) -> list[Any]:
    """File pairs as training sources named ``<prefix><i>``, each oriented to ``src_lang`` -> ``tgt_lang``."""
    from marginmine.encoders.data import TrainingSource

    sources = []
    for i, h in enumerate(sets):
        if {h.src_lang, h.tgt_lang} != {src_lang, tgt_lang}:
            raise MarginmineError(f"{flag} {h.src},{h.tgt}: {h.src_lang}-{h.tgt_lang} is not the corpus' "
                                  f"{src_lang}-{tgt_lang}")
        files = (h.src, h.tgt) if h.src_lang == src_lang else (h.tgt, h.src)
        sources.append(TrainingSource(f"{prefix}{i}", src_lang, tgt_lang, files))
    return sources


def _cleaned(sources: Sequence[Any], outdir: Path, protect: Sequence[str | Path], exclude: Sequence[str | Path],
             src_lang: str, tgt_lang: str,
             protected_is_error: bool = True) -> tuple[list[str], list[str], dict[str, Any]]:
    """The sources' pairs cleaned and leakage-checked (:func:`marginmine.encoders.data.prepare`): a
    protected side is an error (``protected_is_error``) or removed and counted, an ``exclude`` side
    removed and counted."""
    from marginmine.encoders.data import prepare
    from marginmine.io.text import read_lines

    report = prepare(sources, outdir, [Path(p) for p in protect], exclude_files=exclude,
                     protected_is_error=protected_is_error)
    src = [t for s in sources for t in read_lines(outdir / f"{s.name}.{src_lang}")]
    tgt = [t for s in sources for t in read_lines(outdir / f"{s.name}.{tgt_lang}")]
    return src, tgt, report


def positive_pairs(positives: Positives, out: Path, src_lang: str, tgt_lang: str, *, protect: Sequence[str | Path],
                   encoder_data: str | Path | None, exclude: Sequence[str | Path],
                   seed: int) -> tuple[list[str], list[str], dict[str, Any]]:
    """The positives of ``positives`` (not ``held_out``), cleaned and checked into ``out``
    (``data/positives/``): the sample of the encoder data without a pair sharing a side with
    ``protect`` (removed and counted: the encoder data is checked against the dev/test sets, not
    against every set a head is protected from, e.g. the mining benchmark), or the files' pairs without
    a side in ``protect`` or ``exclude`` (the encoder's training data and the held-out pairs; removed
    and counted), sampled to ``size``; and what was done."""
    from marginmine.encoders.data import TrainingSource, sample_pairs

    out.mkdir(parents=True, exist_ok=True)
    if positives.source == "encoder_data":
        if not encoder_data:
            raise MarginmineError("positives from encoder_data need the encoder's training-data manifest "
                                  "(--encoder-data)")
        sample = sample_pairs(encoder_data, src_lang, tgt_lang, out / "sample.tsv", max_pairs=positives.size,
                              seed=seed, purpose="to take the fitted scorer's positives from")
        src, tgt, report = _cleaned([TrainingSource("encoder-data", src_lang, tgt_lang, (str(out / "sample.tsv"),))],
                                    out, (), protect, src_lang, tgt_lang)
        return src, tgt, {"sample": sample, "report": report}
    src, tgt, report = _cleaned(_oriented(positives.files, "positives", src_lang, tgt_lang, "positives file"),
                                out, protect, exclude, src_lang, tgt_lang, protected_is_error=False)
    keep = np.arange(len(src))
    if positives.size and positives.size < len(src):
        keep = np.sort(np.random.default_rng(seed).choice(len(src), positives.size, replace=False))
    return [src[i] for i in keep], [tgt[i] for i in keep], {"available": len(src), "report": report}


def fit_head(name: str, kind: Any, encoder_dir: str | Path, held_out: Sequence[HeldOut], src_lang: str,
             tgt_lang: str, out_dir: str | Path, *, protect: Sequence[str | Path] = (),
             encoder_data: str | Path | None = None, seed: int, device: str = "cpu",
             corpus: Sequence[CorpusShard] = (), exclude: Sequence[tuple[str, str]] = (),
             positives: Positives = Positives(), encoder_trained: bool = True) -> dict[str, Any]:
    """Fit ``kind`` (a fitted kind instance) for scorer ``name`` on ``positives``; return the manifest
    written. ``encoder_trained``: the encoder trained on ``encoder_data``, whose pairs therefore leave
    the held-out pairs and the positives files; a pre-trained encoder (False) never saw them, and
    ``encoder_data`` is then only where ``encoder_data`` positives are sampled."""
    from marginmine.encoders.base import MANIFEST, encoder_identity, load_encoder, read_training_data
    from marginmine.io.safe import sha256_file, write_bytes, write_text
    from marginmine.io.text import format_tsv_line

    if not getattr(kind, "fitted", False):
        raise MarginmineError(f"scorer {name}: kind {type(kind).kind_name} has nothing to fit")
    out = Path(out_dir)
    # the encoder's own training pairs are not held out (removed, counted); an evaluation set's are an error
    trained = ([p for d in read_training_data(encoder_data) for p in (d.src, d.tgt)]
               if encoder_data and encoder_trained else [])
    sources = _oriented(held_out, "held-out", src_lang, tgt_lang, "--held-out")
    src, tgt, report = _cleaned(sources, out / "data", protect, trained, src_lang, tgt_lang)
    if not src:
        raise MarginmineError(f"scorer {name}: no held-out pair is left after the leakage check "
                              f"({out / 'data' / 'report.json'})")
    pos_src, pos_tgt, pos_info = src, tgt, {"report": "data/report.json"}
    if positives.source != "held_out":  # the held-out pairs stay out of the positives
        held = [str(out / "data" / f"{s.name}.{lang}") for s in sources for lang in (src_lang, tgt_lang)]
        pos_src, pos_tgt, pos_info = positive_pairs(positives, out / "data" / "positives", src_lang, tgt_lang,
                                                    protect=protect, encoder_data=encoder_data,
                                                    exclude=trained + held, seed=seed)
        if not pos_src:
            raise MarginmineError(f"scorer {name}: no positive pair is left ({out / 'data' / 'positives'})")
    identity = encoder_identity(encoder_dir)
    check_corpus_embeddings(corpus, identity, str(encoder_dir))
    encoder = load_encoder(encoder_dir, device)
    u, v = encoder.encode(pos_src, src_lang), encoder.encode(pos_tgt, tgt_lang)
    dev = np.arange(len(pos_src)) % 10 == 9
    log.info("%s: fitting %s on %d positives from %s (%d kept out to check the fit)", name, type(kind).kind_name,
             int((~dev).sum()), positives.source, int(dev.sum()))
    negatives: dict[str, Any] = {}
    if getattr(kind, "corpus_negatives", False):
        nu, nv, negatives = corpus_negatives(kind, corpus, len(pos_src), seed, exclude)
        ndev = np.arange(len(nu)) % 10 == 9
        arrays, stats = kind.fit(u[~dev], v[~dev], seed, negatives=(nu[~ndev], nv[~ndev]))
    else:
        arrays, stats = kind.fit(u[~dev], v[~dev], seed)

    def own_vs_other(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
        return {"auc_fitted": pair_auc(a, b, lambda x, y: kind.apply(arrays, x, y)),
                "auc_cosine": pair_auc(a, b, lambda x, y: np.einsum("ij,ij->i", x, y))}

    hdev = np.arange(len(src)) % 10 == 9  # the held-out pairs' check: every tenth (= dev when they are the positives)
    if positives.source == "held_out":
        check = own_vs_other(u[dev], v[dev])
    else:  # the held-out pairs' every tenth, as when they were the positives, and the positives' kept-out tenth
        check = own_vs_other(encoder.encode([s for s, d in zip(src, hdev) if d], src_lang),
                             encoder.encode([s for s, d in zip(tgt, hdev) if d], tgt_lang))
        check["positives"] = own_vs_other(u[dev], v[dev])
    if negatives:  # kept-out positives against kept-out negatives
        label = np.r_[np.ones(int(dev.sum()), bool), np.zeros(int(ndev.sum()), bool)]
        check["auc_fitted_vs_negatives"] = roc_auc(np.r_[kind.apply(arrays, u[dev], v[dev]),
                                                         kind.apply(arrays, nu[ndev], nv[ndev])], label)
    log.info("%s: held-out check, own target vs the others: AUC %.4f (cosine %.4f)", name,
             check["auc_fitted"], check["auc_cosine"])
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    out.mkdir(parents=True, exist_ok=True)
    write_bytes(out / "head.npz", buf.getvalue())
    write_text(out / CHECK_FILE, "".join(format_tsv_line([a, b]) for a, b, d in zip(pos_src, pos_tgt, dev) if d))
    manifest = {  # written last: its presence means the head is complete
        "scorer": name, "kind": type(kind).kind_name, "params": _params(kind), "file": "head.npz",
        "sha256": sha256_file(out / "head.npz"), "seed": seed,
        "encoder": {"dir": str(encoder_dir), "manifest_sha256": sha256_file(Path(encoder_dir) / MANIFEST),
                    "identity": identity},
        "held_out": {"pairs": len(src), "check": int(hdev.sum()), "report": report},
        "positives": {**positives.record(), "pairs": len(pos_src), "fit": int((~dev).sum()), "check": int(dev.sum()),
                      "check_file": CHECK_FILE, **pos_info},
        "fit": stats, "check": check, "negatives": negatives,
    }
    write_text(out / "head.json", json.dumps(manifest, indent=1) + "\n")
    return manifest


def check_corpus_embeddings(corpus: Sequence[CorpusShard], identity: str, encoder: str) -> None:
    """The corpus shards' embeddings (an mlp's negatives) must be the fitting encoder's, as their
    records say (:func:`marginmine.encoders.embed.embedded_by`; none recorded: not checked)."""
    from marginmine.encoders.embed import embedded_by, embeddings_identity

    files = [npy for sh in corpus for npy in (sh.src, sh.tgt)]
    found = embeddings_identity(files)
    if found is not None and found != identity:
        where = next(f for f in files if embedded_by(f) == found)  # a file that records it
        raise InputError(where, f"embedded by another encoder ({found[:12]}) than {encoder} ({identity[:12]}), "
                                   "whose head is being fitted", hint="give the shard embeddings of that encoder")


def _head_manifest(directory: str | Path, *keys: str) -> dict[str, Any]:
    """A fitted head's ``head.json``, with ``keys`` present."""
    manifest_path = Path(directory) / "head.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        missing = [key for key in keys if key not in manifest]
        if missing:
            raise KeyError(", ".join(missing))
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise InputError(str(manifest_path), f"cannot read the fitted head's manifest ({exc!r})",
                         hint="fit it: marginmine fit-scorer (the workflow's fit_scorer rule)") from exc
    return manifest


def load_arrays(directory: str | Path) -> dict[str, np.ndarray]:
    """A fitted head's arrays, its npz checked against the manifest's SHA-256 (once per process)."""
    manifest = _head_manifest(directory, "file", "sha256")
    return _verified_arrays(str(Path(directory) / manifest["file"]), manifest["sha256"])


def check_fitted_on(name: str, kind: Any, identity: str | None, what: str) -> None:
    """A fitted scorer's head must have been fitted on the encoder ``identity``
    (:func:`marginmine.encoders.base.encoder_identity`) of the embeddings or encoder ``what``
    describes; another encoder's head is an :class:`InputError` (same dimension or not: its scores
    would be meaningless). ``identity`` None (embeddings without a record) or a head fitted before
    heads recorded it: a warning."""
    if not getattr(kind, "fitted", False) or not getattr(kind, "head", ""):
        return
    manifest = _head_manifest(kind.head, "encoder")
    fitted = manifest["encoder"].get("identity") if isinstance(manifest["encoder"], dict) else None
    where = str(Path(kind.head) / "head.json")
    if not fitted:  # fitted before heads recorded it
        log.warning("scorer %s: %s records no encoder identity, so its encoder cannot be checked (fit it again "
                    "to have it checked)", name, where)
    elif identity is None:
        log.warning("scorer %s: %s records no encoder, so the head's encoder (%s) cannot be checked", name, what,
                    manifest["encoder"].get("dir"))
    elif identity != fitted:
        raise InputError(where, f"scorer {name}: fitted on the encoder {manifest['encoder'].get('dir')} "
                                f"({fitted[:12]}), but {what} comes from another encoder ({identity[:12]})",
                         hint="score with that encoder's embeddings, or fit the head on this encoder "
                              "(marginmine fit-scorer --encoder DIR)")


@functools.lru_cache(maxsize=8)
def _verified_arrays(npz: str, digest: str) -> dict[str, np.ndarray]:
    from marginmine.io.safe import sha256_file

    found = sha256_file(npz) if Path(npz).is_file() else None
    if found != digest:
        raise InputError(npz, f"SHA-256 {found} is not the manifest's {digest}",
                         hint="the head was changed or half-written: fit it again")
    with np.load(npz, allow_pickle=False) as data:
        return {name: np.array(data[name]) for name in data.files}


def _params(kind: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(kind, f.name) for f in dataclasses.fields(kind) if f.init and f.name != "head"}
