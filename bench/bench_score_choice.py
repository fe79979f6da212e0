"""Which score ranks real web pairs best? Cosine against the margins (distance, ratio, Eq. 9) at
several k, per encoder, on the ParaCrawl v3 en-de human labels (issue 44, item 4).

What it measures. The 2,000 labelled ParaCrawl v3 en-de pairs (V valid 1048, MT 343, E 257, A 253,
L 45, F 43, T 11) are scored with :func:`marginmine.search.margin.filter_scores` (exact k-NN, keys =
the texts, so repeated sentences share one neighbourhood entry, as in the workflow) for every
``--encoder``, ``--k`` and margin, in these settings:

* ``own batch``: the 2,000 pairs are the batch (each side's neighbourhood is the other side of
  the 2,000 pairs) - what ``marginmine eval-filter`` does;
* ``corpus:<NAME>`` (one per ``--context``): the labelled pairs *plus* every pair of a corpus
  are one batch, so the k nearest neighbours come mostly from the corpus - the paper's setting.
  The labelled pairs come first in the batch (so a labelled sentence that also occurs in the
  corpus keeps its own embedding and the cosine is exactly that of ``own batch``); only their
  scores are evaluated.

Each score's ROC-AUC (:func:`marginmine.scoring.metrics.roc_auc`) is reported for three
contrasts: ``V vs rest`` (2,000 pairs), ``V vs rest w/o MT`` (the labelled machine translations
left out) and ``V vs A+L`` (valid against pairs that are not translations at all: wrong alignment
or wrong language; MT, E, F, T left out). Uncertainty: one set of ``--resamples`` bootstrap
resamples of the 2,000 labelled pairs (with replacement, seeded by ``--seed``), shared by every
encoder, setting, score and contrast (a contrast uses the resampled pairs that belong to it): the
percentile 95% interval of each AUC, and, paired on the same resamples, the difference to the
cosine's AUC with its interval and a two-sided bootstrap p-value
``(1 + #{|d_b - d| >= |d|}) / (B + 1)`` (the resampled differences centred on the observed one as
the null distribution). DeLong's test for two correlated AUCs (DeLong et al. 1988, computed with
mid-ranks as Sun & Xu 2014) is given beside it as an analytic check.

Inputs.

* ``--encoder NAME=DIR`` (repeatable): an encoder directory (``load_encoder``), e.g. the demo's DAN
  ``results/demo/encoder`` or a ``use-multilingual`` directory made by ``marginmine train-encoder
  --kind use-multilingual ...``.
* ``--context [NAME=]TSV[,TSV...]`` (repeatable): a corpus to add the labelled pairs to. Each TSV
  (plain or ``.gz``, globs allowed, quote them) has no header; column 1 is the English side,
  column 2 the German side, an optional column 3 a pair id (further columns ignored). Rows whose
  id matches ``--drop-ids`` (default ``paracrawl:``) are dropped first: the demo corpus holds the
  labelled ParaCrawl pairs themselves (preprocessed: NFC, whitespace collapsed, so near-copies of
  the raw labelled text) and noise derived from them, which would sit in the labelled pairs' own
  neighbourhoods. The demo's preprocessed corpus is ``work/demo/preprocess/kept/shard*.tsv.gz``
  (columns en, de, id; docs/outputs.md).
* ``--build-wmt18-mlqe OUT.tsv``: write a second context (en, de, id) from the data directory and
  exit: the WMT18 parallel-corpus-filtering test sets de-en (Acquis, EMEA, KDE4, Global Voices,
  IWSLT17: 13,000 clean pairs, raw) and the MLQE-PE en-de direct-assessment pairs (raw English
  original, raw German NMT output: train/dev/test20 9,000 + test21 1,000). Write it outside the
  repository (e.g. ``/work/scratch``): it is data.

Caching. Embeddings are cached under ``--cache`` (default ``work/bench/score_choice``, git-ignored)
as ``emb/<encoder identity>/<digest of language and texts>.npy`` (float32 unit rows, one per
distinct text, embedded ``--chunk`` sentences at a time into a memory-mapped file), the labelled
pairs' scores as ``scores/<encoder identity>/<digest of the batch>.k<k>.npz``: a rerun neither
embeds nor searches again. The encoder identity is :func:`marginmine.encoders.base.encoder_identity`.

Run::

    .venv/bin/python bench/bench_score_choice.py \\
        --encoder dan=results/demo/encoder --encoder usem=/work/scratch/use-enc \\
        --context 'demo=work/demo/preprocess/kept/shard*.tsv.gz' \\
        --context wmt18-mlqe=/work/scratch/context-wmt18-mlqe.tsv \\
        --resamples 2000 --seed 1234 --out bench/out/score_choice

Writes ``<out>.json`` (every number, the machine, the files with their SHA-256, timings) and
``<out>.md`` (a summary of AUCs, a per-label diagnostic, the full table: encoder, setting, contrast,
score, k, AUC [95% CI], difference to cosine [95% CI], p; ``--note`` lines). For each corpus
setting it also reports how much the corpus changes the neighbourhoods: the share of the labelled
sentences' k nearest neighbours that are labelled-set sentences (exact ``knn``), beside the share a
random neighbour would give. Deterministic: the same inputs and seed give the same numbers (checked
across a rerun from an empty cache). Memory: the batch's embeddings (pairs x dim float32 per side)
plus FAISS's search blocks (peak RSS 2.7 GB for a 91k-pair batch at 512 dimensions).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from marginmine.encoders.base import encoder_identity, load_encoder, read_manifest  # noqa: E402
from marginmine.evaluate.filtereval import read_paracrawl_eval  # noqa: E402
from marginmine.io.text import iter_sentences, read_aligned, read_lines  # noqa: E402
from marginmine.scoring.metrics import average_ranks, roc_auc  # noqa: E402
from marginmine.search.knn import knn  # noqa: E402
from marginmine.search.margin import filter_scores, unique_groups  # noqa: E402

LABELS_FILE = "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv"
MARGINS = ("distance", "ratio", "eq9")
#: contrast name -> (labels on the negative side, or None for every label but V)
CONTRASTS: dict[str, frozenset[str] | None] = {
    "V vs rest": None,
    "V vs rest w/o MT": frozenset({"E", "A", "L", "F", "T"}),
    "V vs A+L": frozenset({"A", "L"}),
}
#: diagnostic contrasts (valid against one label), in the JSON and a summary table of the Markdown
DIAGNOSTIC: dict[str, frozenset[str] | None] = {f"V vs {lab}": frozenset({lab})
                                                for lab in ("MT", "E", "A", "L", "F", "T")}
OWN = "own batch"
WMT18_SETS = ("Acquis", "EMEA", "KDE4", "globalvoices-2017", "iwslt2017-tst2017")
MLQE_SPLITS = ("train", "dev", "test20")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def data_dir() -> Path:
    return Path(os.environ.get("MARGINMINE_DATA_DIR", REPO.parent / "shared" / "data"))


def sha256_of(path: Path) -> str:
    from marginmine.io.safe import sha256_file

    return sha256_file(path)


def texts_digest(texts: Sequence[str], tag: str = "") -> str:
    """SHA-256 over a tag and the texts in order (each length-prefixed, so no two lists collide)."""
    h = hashlib.sha256(tag.encode() + b"\0")
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# the second context: WMT18 PCF test sets + MLQE-PE direct-assessment pairs


def build_wmt18_mlqe(root: Path, out: Path) -> dict[str, int]:
    """Write ``en<TAB>de<TAB>id`` lines: the WMT18 PCF test sets (raw), the MLQE-PE DA pairs (raw
    original, raw NMT output) and test21 (src, mt). Returns the rows per part."""
    rows: list[tuple[str, str, str]] = []
    counts: dict[str, int] = {}
    for name in WMT18_SETS:
        en, de = read_aligned(root / "wmt18-pcf-testsets-deen" / f"{name}.en",
                              root / "wmt18-pcf-testsets-deen" / f"{name}.de")
        rows += [(e, g, f"wmt18-pcf:{name}:{i}") for i, (e, g) in enumerate(zip(en, de), 1)]
        counts[f"wmt18-pcf:{name}"] = len(en)
    for split in MLQE_SPLITS:
        path = root / "mlqe-pe-en-de" / "direct-assessments" / f"{split}.ende.df.short.tsv"
        lines = read_lines(path)
        if not lines or lines[0].split("\t")[1:3] != ["original", "translation"]:
            raise SystemExit(f"{path}: expected a header index, original, translation")
        n = 0
        for i, line in enumerate(lines[1:], 1):
            cols = line.split("\t")
            rows.append((cols[1], cols[2], f"mlqe-mt:{split}:{i}"))
            n += 1
        counts[f"mlqe-mt:{split}"] = n
    t21 = root / "mlqe-pe-en-de" / "test21"
    src21, mt21 = read_aligned(t21 / "test21.src", t21 / "test21.mt")
    rows += [(s, m, f"mlqe-mt:test21:{i}") for i, (s, m) in enumerate(zip(src21, mt21), 1)]
    counts["mlqe-mt:test21"] = len(src21)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        for e, g, i in rows:
            if "\t" in e + g or "\n" in e + g:
                raise SystemExit(f"{i}: a tab or newline inside a sentence")
            fh.write(f"{e}\t{g}\t{i}\n")
    tmp.replace(out)
    return counts


# --------------------------------------------------------------------------------------------
# inputs


@dataclass
class Context:
    name: str
    files: list[Path]
    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    rows_read: int = 0
    dropped_ids: int = 0
    dropped_examples: list[str] = field(default_factory=list)
    #: rows used, by the part of their id before the first ':' (the demo: origin or noise kind)
    id_prefixes: dict[str, int] = field(default_factory=dict)


def parse_context(spec: str) -> Context:
    name, _, paths = spec.rpartition("=") if "=" in spec else ("", "", spec)
    files: list[Path] = []
    for part in paths.split(","):
        hits = sorted(glob.glob(part)) if any(c in part for c in "*?[") else [part]
        if not hits:
            raise SystemExit(f"--context {spec!r}: {part!r} matches no file")
        files += [Path(h) for h in hits]
    if not name:
        name = files[0].name.split(".")[0]
    return Context(name, files)


def read_context(ctx: Context, drop_ids: re.Pattern | None) -> Context:
    for f in ctx.files:
        for n, line in enumerate(iter_sentences(f), 1):
            cols = line.split("\t")
            if len(cols) < 2:
                raise SystemExit(f"{f}:{n}: fewer than 2 columns (expected en<TAB>de[<TAB>id])")
            ctx.rows_read += 1
            if drop_ids is not None and len(cols) >= 3 and drop_ids.search(cols[2]):
                ctx.dropped_ids += 1
                if len(ctx.dropped_examples) < 5:
                    ctx.dropped_examples.append(cols[2])
                continue
            ctx.src.append(cols[0])
            ctx.tgt.append(cols[1])
            prefix = cols[2].split(":", 1)[0] if len(cols) >= 3 else "(no id)"
            ctx.id_prefixes[prefix] = ctx.id_prefixes.get(prefix, 0) + 1
    return ctx


# --------------------------------------------------------------------------------------------
# embeddings, cached


@dataclass
class Encoder:
    name: str
    dir: Path
    kind: str
    dim: int
    identity: str
    model: Any = None
    embed_seconds: float = 0.0
    embedded: int = 0
    cached_seconds: float = 0.0  # what the cached embeddings took when they were computed
    cached: int = 0

    def get(self) -> Any:
        if self.model is None:
            self.model = load_encoder(self.dir)
        return self.model


def embed_cached(enc: Encoder, texts: Sequence[str], lang: str, cache: Path, chunk: int) -> np.ndarray:
    """Unit float32 rows of ``texts`` (one per text, in order), from the cache when present. Each
    distinct text is embedded once, ``chunk`` at a time, into a memory-mapped ``.npy``."""
    uniq = list(dict.fromkeys(texts))
    digest = texts_digest(uniq, lang)
    d = cache / "emb" / enc.identity[:20]
    path = d / f"{digest[:32]}.{lang}.npy"
    meta = path.with_suffix(".npy.json")
    if path.exists() and meta.exists():
        rec = json.loads(meta.read_text())
        arr = np.load(path, mmap_mode="r")
        if rec.get("identity") == enc.identity and arr.shape == (len(uniq), enc.dim):
            log(f"  {enc.name} {lang}: {len(uniq):,} distinct sentences from the cache")
            enc.cached_seconds += float(rec.get("seconds") or 0.0)
            enc.cached += len(uniq)
            return _expand(arr, uniq, texts)
    d.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(uniq), enc.dim))
    model = enc.get()
    t0 = time.perf_counter()
    for a in range(0, len(uniq), chunk):
        rows = np.asarray(model.encode(uniq[a:a + chunk], lang), dtype=np.float32)
        if rows.shape != (min(chunk, len(uniq) - a), enc.dim) or not np.isfinite(rows).all():
            raise SystemExit(f"{enc.name}: encode() returned {rows.shape} (or non-finite rows)")
        out[a:a + chunk] = rows
        log(f"  {enc.name} {lang}: {min(a + chunk, len(uniq)):,}/{len(uniq):,} embedded "
            f"({time.perf_counter() - t0:.0f} s)")
    out.flush()
    del out
    secs = time.perf_counter() - t0
    enc.embed_seconds += secs
    enc.embedded += len(uniq)
    os.replace(tmp, path)
    meta.write_text(json.dumps({"identity": enc.identity, "encoder_dir": str(enc.dir), "lang": lang,
                                "rows": len(uniq), "dim": enc.dim, "digest": digest, "seconds": secs}) + "\n")
    return _expand(np.load(path, mmap_mode="r"), uniq, texts)


def _expand(arr: np.ndarray, uniq: list[str], texts: Sequence[str]) -> np.ndarray:
    pos = {t: i for i, t in enumerate(uniq)}
    return np.asarray(arr[np.fromiter((pos[t] for t in texts), np.int64, len(texts))], dtype=np.float32)


# --------------------------------------------------------------------------------------------
# scores, cached


def batch_scores(enc: Encoder, src: list[str], tgt: list[str], x: np.ndarray, y: np.ndarray, n_eval: int,
                 ks: Sequence[int], cache: Path
                 ) -> tuple[dict[tuple[str, int], np.ndarray], dict[int, dict[str, Any]]]:
    """Scores of the first ``n_eval`` pairs of the batch ``(src, tgt)`` for every k and margin
    (``filter_scores``; ``cosine`` included per k), and per k the seconds the search and scoring
    took and whether they came from the cache (then the seconds of the run that computed them)."""
    key = texts_digest(src, "src") + texts_digest(tgt, "tgt") + str(n_eval)
    digest = hashlib.sha256(key.encode()).hexdigest()
    d = cache / "scores" / enc.identity[:20]
    d.mkdir(parents=True, exist_ok=True)
    out: dict[tuple[str, int], np.ndarray] = {}
    secs: dict[int, dict[str, Any]] = {}
    for k in ks:
        path = d / f"{digest[:32]}.k{k}.npz"
        meta = path.with_suffix(".json")
        if path.exists():
            with np.load(path) as z:
                got = {m: z[m] for m in z.files}
            rec = json.loads(meta.read_text()) if meta.exists() else {}
            secs[k] = {"seconds": rec.get("seconds"), "cached": True, "computed": rec.get("computed")}
            log(f"  {enc.name} k={k}: scores from the cache")
        else:
            t0 = time.perf_counter()
            allscores = filter_scores(x, y, src, tgt, k, ("absolute", *MARGINS))
            took = time.perf_counter() - t0
            secs[k] = {"seconds": took, "cached": False, "computed": time.strftime("%Y-%m-%d %H:%M:%S")}
            got = {m: np.asarray(v[:n_eval]) for m, v in allscores.items()}
            tmp = path.with_name(path.name + ".part.npz")
            np.savez(tmp, **got)
            os.replace(tmp, path)
            meta.write_text(json.dumps({"seconds": took, "computed": secs[k]["computed"], "pairs": len(src),
                                        "encoder_dir": str(enc.dir), "k": k}) + "\n")
            log(f"  {enc.name} k={k}: {len(src):,} pairs scored in {took:.0f} s")
        for m, v in got.items():
            out[(m, k)] = v
    return out, secs


def neighbour_share(x: np.ndarray, y: np.ndarray, src: list[str], tgt: list[str], n_src: int, n_tgt: int,
                    ks: Sequence[int]) -> dict[str, Any]:
    """In a batch whose first rows are the labelled pairs (``n_src``/``n_tgt`` distinct sentences,
    which :func:`unique_groups` numbers first): the share of the labelled sentences' k nearest
    neighbours on the other side that are labelled-set sentences (mean of both directions), per k,
    and the labelled sentences' share of the batch's distinct sentences."""
    fx, _ = unique_groups(src)
    fy, _ = unique_groups(tgt)
    xu, yu = x[fx], y[fy]
    kmax = max(ks)
    _, ix = knn(xu[:n_src], yu, kmax)
    _, iy = knn(yu[:n_tgt], xu, kmax)
    share = {str(k): float(((ix[:, :k] < n_tgt).mean() + (iy[:, :k] < n_src).mean()) / 2) for k in ks}
    return {"share": share, "chance": (n_tgt / len(yu) + n_src / len(xu)) / 2}


# --------------------------------------------------------------------------------------------
# statistics


def bootstrap_counts(n: int, rounds: int, seed: int) -> np.ndarray:
    """(rounds, n) int32: how often each labelled pair is drawn in each resample."""
    rng = np.random.default_rng(seed)
    out = np.empty((rounds, n), np.int32)
    for b in range(rounds):
        out[b] = np.bincount(rng.integers(0, n, n), minlength=n)
    return out


def weighted_auc(scores: np.ndarray, positive: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The AUC (Mann-Whitney, ties half) of each row of ``weights`` (resample counts per item):
    the AUC of the resampled list, for all resamples at once."""
    order = np.argsort(np.asarray(scores, np.float64), kind="stable")
    s = np.asarray(scores, np.float64)[order]
    pos = np.asarray(positive, bool)[order]
    w = weights[:, order].astype(np.float64)
    starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
    gp = np.add.reduceat(w * pos, starts, axis=1)
    gn = np.add.reduceat(w * ~pos, starts, axis=1)
    below = np.cumsum(gn, axis=1) - gn
    with np.errstate(invalid="ignore", divide="ignore"):  # a resample without a class: NaN
        return (gp * (below + 0.5 * gn)).sum(1) / (gp.sum(1) * gn.sum(1))


def delong(a: np.ndarray, b: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """DeLong's test of AUC(a) = AUC(b) on the same items: (z, two-sided p)."""
    positive = np.asarray(positive, bool)
    m, n = int(positive.sum()), int((~positive).sum())
    v10, v01 = [], []
    for s in (a, b):
        s = np.asarray(s, np.float64)
        tz = average_ranks(s)
        tx = average_ranks(s[positive])
        ty = average_ranks(s[~positive])
        v10.append((tz[positive] - tx) / n)
        v01.append(1.0 - (tz[~positive] - ty) / m)
    s10 = np.cov(np.vstack(v10))
    s01 = np.cov(np.vstack(v01))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    diff = float(np.mean(v10[0]) - np.mean(v10[1]))
    if var <= 0:
        return (0.0, 1.0) if diff == 0 else (math.inf, 0.0)
    z = diff / math.sqrt(var)
    return z, math.erfc(abs(z) / math.sqrt(2))


def contrast_items(labels: np.ndarray, negatives: frozenset[str] | None) -> np.ndarray:
    if negatives is None:
        return np.ones(len(labels), bool)
    return (labels == "V") | np.isin(labels, sorted(negatives))


def evaluate(scores: dict[tuple[str, int], np.ndarray], labels: np.ndarray, counts: np.ndarray,
             ks: Sequence[int]) -> list[dict[str, Any]]:
    """Rows (contrast, score, k, AUC, CI, difference to cosine, CI, p) for one encoder and setting."""
    rows = []
    cos = scores[("absolute", ks[0])]
    for cname, neg in {**CONTRASTS, **DIAGNOSTIC}.items():
        items = contrast_items(labels, neg)
        pos = labels[items] == "V"
        w = counts[:, items]
        cos_auc = roc_auc(cos[items], pos)
        cos_boot = weighted_auc(cos[items], pos, w)
        entries = [("cosine", None, cos)] + [(m, k, scores[(m, k)]) for m in MARGINS for k in ks]
        for score, k, s in entries:
            auc = roc_auc(s[items], pos)
            boot = cos_boot if score == "cosine" else weighted_auc(s[items], pos, w)
            ok = np.isfinite(boot) & np.isfinite(cos_boot)  # a resample without a class: no AUC
            boot = boot[ok]
            row: dict[str, Any] = {"contrast": cname, "diagnostic": cname in DIAGNOSTIC, "score": score,
                                   "k": k,
                                   "pairs": int(items.sum()),
                                   "positives": int(pos.sum()), "negatives": int((~pos).sum()), "auc": auc,
                                   "auc_low": float(np.percentile(boot, 2.5)),
                                   "auc_high": float(np.percentile(boot, 97.5)),
                                   "auc_boot_mean": float(boot.mean()),
                                   "resamples_used": int(ok.sum())}
            if score != "cosine":
                d = auc - cos_auc
                db = boot - cos_boot[ok]
                z, p_dl = delong(s[items], cos[items], pos)
                row.update({"diff": d, "diff_low": float(np.percentile(db, 2.5)),
                            "diff_high": float(np.percentile(db, 97.5)),
                            "p_boot": float((1 + np.sum(np.abs(db - d) >= abs(d))) / (len(db) + 1)),
                            "share_boot_better": float(np.mean(db > 0)),
                            "delong_z": z, "p_delong": p_dl})
            rows.append(row)
    return rows


def self_check_auc(scores: np.ndarray, labels: np.ndarray, counts: np.ndarray, rounds: int = 25) -> float:
    """The vectorised bootstrap AUC against ``roc_auc`` on explicitly resampled lists (max |diff|)."""
    pos = labels == "V"
    fast = weighted_auc(scores, pos, counts[:rounds])
    ones = np.ones((1, len(scores)), np.int32)
    worst = abs(float(weighted_auc(scores, pos, ones)[0]) - roc_auc(scores, pos))
    for b in range(rounds):
        idx = np.repeat(np.arange(len(scores)), counts[b])
        worst = max(worst, abs(float(fast[b]) - roc_auc(scores[idx], pos[idx])))
    return worst


# --------------------------------------------------------------------------------------------
# machine and report


def machine() -> dict[str, Any]:
    model, avx512 = platform.processor(), None
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("Flags"):
                avx512 = "avx512f" in line.split()
    except OSError:
        pass
    mem = None
    try:
        mem = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    import faiss

    return {"cpu_model": model, "cpus": os.cpu_count(), "avx512": avx512, "mem_gib": mem,
            "python": platform.python_version(), "numpy": np.__version__,
            "faiss": getattr(faiss, "__version__", "?"), "platform": platform.platform()}


def git_head() -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                           capture_output=True, text=True, check=False)
        return r.stdout.strip() or None
    except OSError:
        return None


def fmt(v: float | None, nd: int = 3) -> str:
    return "" if v is None else f"{v:.{nd}f}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return ""
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def write_markdown(path: Path, res: dict[str, Any]) -> None:
    m = res["machine"]
    ks = res["args"]["k"]
    L: list[str] = [
        "# Score choice on the ParaCrawl v3 en-de human labels (issue 44, item 4)", "",
        f"Written by `bench/bench_score_choice.py` on {res['finished']} (git {res.get('git_head') or '?'}). "
        f"Machine: {m['cpu_model']}, {m['cpus']} CPUs (AVX-512: {m['avx512']}), {m['mem_gib']} GiB; "
        f"wall time {res['wall_seconds'] / 60:.1f} min; load average at start {res['load_start']}, "
        f"at end {res['load_end']}.", "",
        f"Labelled pairs: `{res['labels']['file']}` (sha256 {res['labels']['sha256'][:12]}), "
        f"{res['labels']['pairs']:,} pairs; labels "
        + ", ".join(f"{k} {v}" for k, v in res["labels"]["counts"].items()) + ". "
        f"Bootstrap: {res['args']['resamples']:,} resamples of the labelled pairs, "
        f"seed {res['args']['seed']}, "
        "shared by every row (paired differences); p (boot) = (1 + #|d_b - d| >= |d|) / (B + 1), "
        "p (DeLong) = DeLong's test of two correlated AUCs. "
        "Scores: `filter_scores` (exact k-NN, keys = texts).", "",
        "## Encoders", "",
        "| name | kind | dim | directory | identity | embedded in this run: s (sentences) | "
        "from the cache: s when computed (sentences) |",
        "|---|---|---|---|---|---|---|"]
    for e in res["encoders"]:
        L.append(f"| {e['name']} | {e['kind']} | {e['dim']} | `{e['dir']}` | {e['identity'][:12]} | "
                 f"{e['embed_seconds']:.0f} ({e['embedded']:,}) | "
                 f"{e.get('cached_embed_seconds', 0):.0f} ({e.get('cached_sentences', 0):,}) |")
    L += ["", "## Settings (the batch the neighbourhoods come from)", "",
          "| setting | batch pairs | distinct en | distinct de | context rows read | dropped (id) | "
          "context rows sharing a side with a labelled pair | files |", "|---|---|---|---|---|---|---|---|"]
    for s in res["settings"]:
        files = "; ".join(f"`{f['path']}` ({f['sha256'][:12]})" for f in s.get("files", [])) or "-"
        L.append(f"| {s['name']} | {s['batch_pairs']:,} | {s['distinct_src']:,} | {s['distinct_tgt']:,} | "
                 f"{s.get('rows_read', 0):,} | {s.get('dropped_ids', 0):,} | "
                 f"{s.get('shared_side_rows', 0):,} | {files} |")
    for s in res["settings"]:
        if s.get("id_prefixes"):
            L += ["", f"`{s['name']}` context rows used, by id prefix (origin or noise kind): "
                  + ", ".join(f"{k} {v:,}" for k, v in s["id_prefixes"].items())
                  + (f"; dropped ids e.g. {', '.join(s['dropped_examples'])}"
                     if s.get("dropped_examples") else "")]
    if res.get("neighbour_share"):
        L += ["", "How much the corpus changes the neighbourhoods: the share of the labelled sentences' "
              "k nearest neighbours (both directions) that are themselves labelled-set sentences, beside "
              "the share the labelled sentences have of the batch's distinct sentences (what a random "
              "neighbour would give).", "",
              "| encoder | setting | " + " | ".join(f"k={k}" for k in ks)
              + " | labelled share of the batch |",
              "|---|---|" + "---|" * len(ks) + "---|"]
        for n in res["neighbour_share"]:
            L.append(f"| {n['encoder']} | {n['setting']} | "
                     + " | ".join(f"{n['share'][str(k)]:.3f}" for k in ks) + f" | {n['chance']:.3f} |")
    if res.get("notes"):
        L += ["", "Notes:", ""] + [f"- {n}" for n in res["notes"]]
    L += ["", "Cosine check (the cosine must not depend on k or the setting): "
          + "; ".join(f"{c['encoder']}: max |diff| {c['max_abs_diff']:.2e}" for c in res["cosine_check"]), ""]
    cols = ["cosine"] + [f"{mg} k={k}" for mg in MARGINS for k in ks]

    def pivot(rows: list[dict[str, Any]]) -> list[str]:
        out = ["| encoder | setting | contrast | pos/neg | " + " | ".join(cols) + " |",
               "|---|---|---|---|" + "---|" * len(cols)]
        groups: dict[tuple[str, str, str, str], dict[str, float]] = {}
        for r in rows:
            key = (r["encoder"], r["setting"], r["contrast"], f"{r['positives']}/{r['negatives']}")
            col = "cosine" if r["score"] == "cosine" else f"{r['score']} k={r['k']}"
            groups.setdefault(key, {})[col] = r["auc"]
        for key, vals in groups.items():
            best = max(vals.values())
            cells = [(f"**{vals[c]:.3f}**" if vals[c] == best else f"{vals[c]:.3f}") for c in cols]
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) + " |")
        return out

    main_rows = [r for r in res["rows"] if not r.get("diagnostic")]
    L += ["## Summary: AUC per score (best of each row in bold)", ""] + pivot(main_rows)
    L += ["", "## Per label (diagnostic): valid against one label at a time "
          "(AUC; the JSON has intervals and p)", ""]
    L += pivot([r for r in res["rows"] if r.get("diagnostic")])
    L += ["", "## Full table", "",
          "| encoder | setting | contrast | pos/neg | score | k | AUC [95% CI] | diff vs cosine [95% CI] | "
          "p (boot) | p (DeLong) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in main_rows:
        diff = ("" if r["score"] == "cosine"
                else f"{r['diff']:+.3f} [{r['diff_low']:+.3f}, {r['diff_high']:+.3f}]")
        L.append(f"| {r['encoder']} | {r['setting']} | {r['contrast']} | {r['positives']}/{r['negatives']} | "
                 f"{r['score']} | {r['k'] if r['k'] is not None else '-'} | "
                 f"{r['auc']:.3f} [{r['auc_low']:.3f}, {r['auc_high']:.3f}] | {diff} | "
                 f"{fmt_p(r.get('p_boot'))} | {fmt_p(r.get('p_delong'))} |")
    L += ["", "## Timings of the k-NN search and scoring (`filter_scores`, exact, whole batch)", "",
          "| encoder | setting | batch pairs | k | seconds | from the cache (computed on) |",
          "|---|---|---|---|---|---|"]
    for t in res["timings"]:
        sec = "?" if t.get("seconds") is None else f"{t['seconds']:.0f}"
        cached = f"yes ({t.get('computed') or '?'})" if t.get("cached") else "no"
        L.append(f"| {t['encoder']} | {t['setting']} | {t['pairs']:,} | {t['k']} | {sec} | {cached} |")
    path.write_text("\n".join(L) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--encoder", action="append", default=[], metavar="NAME=DIR", help="repeatable")
    p.add_argument("--context", action="append", default=[], metavar="[NAME=]TSV[,TSV...]",
                   help="corpus to add the labelled pairs to (en, de[, id] columns); repeatable, "
                        "globs allowed")
    p.add_argument("--labels", default=None, help=f"ParaCrawl human-eval TSV (default <data>/{LABELS_FILE})")
    p.add_argument("--drop-ids", default="paracrawl:",
                   help="regex: context rows whose 3rd column matches are dropped ('' keeps all; "
                        "default %(default)r)")
    p.add_argument("--k", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--chunk", type=int, default=8192, help="sentences per encode() call")
    p.add_argument("--cache", default=str(REPO / "work" / "bench" / "score_choice"))
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "score_choice"),
                   help="output stem: <out>.json and <out>.md")
    p.add_argument("--note", action="append", default=[], help="a line for the Markdown's notes; repeatable")
    p.add_argument("--build-wmt18-mlqe", default=None, metavar="OUT.tsv",
                   help="write the WMT18 PCF + MLQE-PE context TSV from the data directory and exit")
    args = p.parse_args(argv)

    if args.build_wmt18_mlqe:
        counts = build_wmt18_mlqe(data_dir(), Path(args.build_wmt18_mlqe))
        print(json.dumps({"out": args.build_wmt18_mlqe, "rows": sum(counts.values()), "parts": counts},
                         indent=1))
        return 0
    if not args.encoder:
        p.error("give at least one --encoder NAME=DIR")
    if args.resamples < 1000:
        log(f"warning: {args.resamples} resamples (>= 1,000 recommended)")

    t_start = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    cache = Path(args.cache)
    ks = sorted(set(args.k))
    labels_path = Path(args.labels) if args.labels else data_dir() / LABELS_FILE
    lab = read_paracrawl_eval(labels_path)
    labels = np.array(lab.labels)
    n_lab = len(lab.src)
    names, numbers = np.unique(labels, return_counts=True)
    lab_counts = {str(k): int(v) for k, v in sorted(zip(names, numbers), key=lambda kv: -kv[1])}
    log(f"{n_lab:,} labelled pairs from {labels_path}: {lab_counts}")

    encoders = []
    for spec in args.encoder:
        name, _, d = spec.partition("=")
        if not d:
            p.error(f"--encoder {spec!r}: expected NAME=DIR")
        man = read_manifest(d)  # verifies the files' SHA-256
        encoders.append(Encoder(name, Path(d), man["kind"], int(man["dim"]), encoder_identity(d)))

    drop = re.compile(args.drop_ids) if args.drop_ids else None
    contexts = [read_context(parse_context(c), drop) for c in args.context]
    lab_src_set, lab_tgt_set = set(lab.src), set(lab.tgt)
    settings: list[dict[str, Any]] = [{"name": OWN, "batch_pairs": n_lab, "distinct_src": len(lab_src_set),
                                       "distinct_tgt": len(lab_tgt_set)}]
    for c in contexts:
        shared = sum(1 for s, t in zip(c.src, c.tgt) if s in lab_src_set or t in lab_tgt_set)
        settings.append({"name": f"corpus:{c.name}", "batch_pairs": n_lab + len(c.src),
                         "distinct_src": len(lab_src_set | set(c.src)),
                         "distinct_tgt": len(lab_tgt_set | set(c.tgt)),
                         "context_pairs": len(c.src), "rows_read": c.rows_read, "dropped_ids": c.dropped_ids,
                         "dropped_examples": c.dropped_examples, "shared_side_rows": shared,
                         "id_prefixes": dict(sorted(c.id_prefixes.items(), key=lambda kv: -kv[1])),
                         "files": [{"path": str(f.resolve()), "sha256": sha256_of(f)} for f in c.files]})
        log(f"context {c.name}: {c.rows_read:,} rows read, {c.dropped_ids:,} dropped by id, "
            f"{len(c.src):,} used, "
            f"{shared:,} share a side with a labelled pair")

    counts = bootstrap_counts(n_lab, args.resamples, args.seed)
    rows: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []
    cos_check = []
    shares: list[dict[str, Any]] = []
    auc_check = 0.0
    for enc in encoders:
        log(f"encoder {enc.name} ({enc.kind}, {enc.dim} dims, {enc.dir})")
        x_lab = embed_cached(enc, lab.src, "en", cache, args.chunk)
        y_lab = embed_cached(enc, lab.tgt, "de", cache, args.chunk)
        cosines = []
        batches: list[tuple[str, list[str], list[str], Any]] = [(OWN, lab.src, lab.tgt, None)]
        batches += [(f"corpus:{c.name}", c.src, c.tgt, c) for c in contexts]
        for setting, _, _, c in batches:
            if c is None:
                src, tgt, x, y = lab.src, lab.tgt, x_lab, y_lab
            else:
                xc = embed_cached(enc, c.src, "en", cache, args.chunk)
                yc = embed_cached(enc, c.tgt, "de", cache, args.chunk)
                src, tgt = lab.src + c.src, lab.tgt + c.tgt
                x, y = np.concatenate([x_lab, xc]), np.concatenate([y_lab, yc])
                del xc, yc
            log(f" {enc.name} / {setting}: {len(src):,} pairs")
            scores, secs = batch_scores(enc, src, tgt, x, y, n_lab, ks, cache)
            if c is not None:
                own = neighbour_share(x, y, src, tgt, len(lab_src_set), len(lab_tgt_set), ks)
                shares.append({"encoder": enc.name, "setting": setting, **own})
            del x, y
            for k in ks:
                timings.append({"encoder": enc.name, "setting": setting, "k": k, "pairs": len(src),
                                **secs[k]})
                cosines.append(scores[("absolute", k)])
                if not np.array_equal(scores[("absolute", k)], scores[("cosine", k)]):
                    raise SystemExit("filter_scores: 'absolute' differs from 'cosine'")
            auc_check = max(auc_check, self_check_auc(scores[("ratio", ks[0])], labels, counts))
            for r in evaluate(scores, labels, counts, ks):
                rows.append({"encoder": enc.name, "setting": setting, **r})
        diff = max(float(np.max(np.abs(c.astype(np.float64) - cosines[0]))) for c in cosines)
        cos_check.append({"encoder": enc.name, "max_abs_diff": diff, "compared": len(cosines)})
        log(f" cosine across k and settings: max |diff| {diff:.2e}")
        enc.model = None

    res = {"finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "git_head": git_head(), "machine": machine(),
           "load_start": load_start, "load_end": [round(x, 2) for x in os.getloadavg()],
           "wall_seconds": time.perf_counter() - t_start,
           "args": {**vars(args), "k": ks},
           "labels": {"file": str(labels_path.resolve()), "sha256": sha256_of(labels_path), "pairs": n_lab,
                      "counts": lab_counts},
           "encoders": [{"name": e.name, "dir": str(e.dir.resolve()), "kind": e.kind, "dim": e.dim,
                         "identity": e.identity, "embed_seconds": e.embed_seconds, "embedded": e.embedded,
                         "cached_embed_seconds": e.cached_seconds, "cached_sentences": e.cached}
                        for e in encoders],
           "settings": settings, "cosine_check": cos_check, "neighbour_share": shares, "notes": args.note,
           "bootstrap_auc_self_check_max_abs_diff": auc_check,
           "contrasts": {k: ("every label but V" if v is None else sorted(v))
                         for k, v in {**CONTRASTS, **DIAGNOSTIC}.items()},
           "rows": rows, "timings": timings}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    write_markdown(out.with_suffix(".md"), res)
    log(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')} ({res['wall_seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
