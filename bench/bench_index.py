"""Approximate kNN judged by the selection it makes (issue 32): each index setting against exact
search on the same filtering batch, in one run.

For the first ``n`` pairs of a preprocessed shard (each size of ``--sizes``) and their embeddings,
the batch's distinct sentences are searched both ways exactly (``flat``, the reference) and with
every setting of ``--settings``; each gives the ratio margin of every pair (k = 4). Reported per
setting: wall and CPU seconds of both searches (index training included), the speed-up over exact
search, the peak RSS of the process during the setting (``VmHWM`` reset before each; with the
score file's batch in memory), the speed-up in wall and in CPU seconds (the latter holds on a
machine other jobs share), the Spearman correlation of the margin scores with the exact ones, the
overlap |A n B| / N of the top-N at N = 10% and 30% of the batch, and, with ``--labels`` (the scale
or demo corpus' sidecar, matched by the id column the shard carries), the share of planted true
translations in each top-N.

    .venv/bin/python bench/bench_index.py --pairs work/scale/preprocess/kept/shard0000.tsv.gz \\
        --src work/scale/embed/dan/shard0000.en.npy --tgt work/scale/embed/dan/shard0000.de.npy \\
        --labels work/scale/corpus/scale.labels.tsv --sizes 100000,1000000

Writes bench/out/index.json and bench/out/index.md (one table per size). The exact searches are
cached in bench/out/cache/ (they take most of the time at 1M pairs).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

#: kind[:key=value,...] settings; nlist 0 = about 4 sqrt(n)
DEFAULT_SETTINGS = ("ivf:nprobe=4", "ivf:nprobe=8", "ivf:nprobe=16", "ivf:nprobe=32",
                    "ivf-fp16:nprobe=4", "ivf-fp16:nprobe=8", "ivf-fp16:nprobe=16", "ivf-fp16:nprobe=32",
                    "ivf-sq8:nprobe=8", "ivf-sq8:nprobe=8,refine=4", "ivfpq:nprobe=16,refine=8")
K = 4


def parse_setting(text: str):
    from marginmine.search.knn import IndexSpec

    kind, _, rest = text.partition(":")
    kw = {k: int(v) for k, v in (kv.split("=") for kv in rest.split(",") if kv)}
    return IndexSpec(kind=kind, **kw)


def add_shard_inputs(ap: argparse.ArgumentParser, labels_required: bool = False) -> None:
    """The inputs every index and batch benchmark reads: a preprocessed shard, its embeddings, and
    the corpus' labels sidecar."""
    ap.add_argument("--pairs", required=True, help="a preprocessed shard (TSV.gz: src, tgt, carried id column)")
    ap.add_argument("--src", required=True, help="its source embeddings (.npy, line for line)")
    ap.add_argument("--tgt", required=True, help="its target embeddings (.npy)")
    ap.add_argument("--labels", required=labels_required, default=None,
                    help="the corpus' labels sidecar (id, ..., clean)")


def read_batch(path: Path, n: int) -> tuple[list[str], list[str], list[str]]:
    src, tgt, ids = [], [], []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            cols = line.rstrip("\n").split("\t")
            src.append(cols[0])
            tgt.append(cols[1])
            ids.append(cols[2] if len(cols) > 2 else "")
            if len(src) == n:
                break
    return src, tgt, ids


def clean_ids(path: Path) -> set[str]:
    out = set()
    with open(path, encoding="utf-8") as fh:
        head = fh.readline().rstrip("\n").split("\t")
        i_id, i_clean = head.index("id"), head.index("clean")
        for line in fh:
            cols = line.rstrip("\n").split("\t")
            if cols[i_clean] == "1":
                out.add(cols[i_id])
    return out


def _reset_peak() -> int:
    """Reset the process' peak RSS (Linux clear_refs 5) and return the current RSS in bytes."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status("VmRSS")


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def means(xu: np.ndarray, yu: np.ndarray, gx: np.ndarray, gy: np.ndarray, spec,
          with_partners: bool = True) -> tuple[np.ndarray, np.ndarray, dict]:
    """Both directions' mean k-NN similarity as the scoring does it (an approximate index also
    considers each sentence's partners), with wall, CPU seconds and peak RSS."""
    from marginmine.search.knn import knn
    from marginmine.search.margin import knn_mean, partners

    base = _reset_peak()
    t0, c0 = time.perf_counter(), time.process_time()
    cx = partners(gx, gy, len(xu)) if with_partners else None
    cy = partners(gy, gx, len(yu)) if with_partners else None
    xm = knn_mean(knn(xu, yu, K, spec=spec, candidates=cx)[0])
    ym = knn_mean(knn(yu, xu, K, spec=spec, candidates=cy)[0])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _status("VmHWM")
    return xm, ym, {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mib": round(peak / 2**20),
                    "extra_rss_mib": round(max(0, peak - base) / 2**20)}


def top(scores: np.ndarray, n: int) -> np.ndarray:
    return np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shard_inputs(ap)
    ap.add_argument("--sizes", default="100000,1000000", help="batch sizes: the first n pairs of the shard")
    ap.add_argument("--settings", default=";".join(DEFAULT_SETTINGS),
                    help="index settings separated by ';' (kind:key=value,...; a trailing '!': without the "
                         "pairs' partners as candidates)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()

    import faiss
    from scipy.stats import spearmanr

    from marginmine.machine import machine as describe_machine
    from marginmine.search.knn import IndexSpec
    from marginmine.search.margin import gathered_cosines, unique_groups

    faiss.omp_set_num_threads(args.threads)
    out = Path(args.out)
    (out / "cache").mkdir(parents=True, exist_ok=True)
    settings = [s for s in args.settings.split(";") if s]
    clean = clean_ids(Path(args.labels)) if args.labels else None
    src_all = np.load(args.src, mmap_mode="r")
    tgt_all = np.load(args.tgt, mmap_mode="r")
    report = {"machine": describe_machine(), "threads": args.threads, "k": K, "faiss": faiss.__version__,
              "pairs_file": args.pairs, "sizes": {}}
    for n in (int(s) for s in args.sizes.split(",")):
        src, tgt, ids = read_batch(Path(args.pairs), n)
        n = len(src)
        fx, gx = unique_groups(src)
        fy, gy = unique_groups(tgt)
        xu, yu = np.asarray(src_all[fx]), np.asarray(tgt_all[fy])
        cos = gathered_cosines(xu, yu, gx, gy).astype(np.float64)
        planted = np.array([i in clean for i in ids]) if clean is not None else None
        key = hashlib.blake2b(xu.tobytes() + yu.tobytes(), digest_size=8).hexdigest()
        cache = out / "cache" / f"index-exact-{n}-{key}.npz"
        if cache.exists():
            z = np.load(cache)
            xm, ym, exact_cost = z["xm"], z["ym"], json.loads(str(z["cost"]))
        else:
            xm, ym, exact_cost = means(xu, yu, gx, gy, IndexSpec(kind="flat"))
            np.savez(cache, xm=xm, ym=ym, cost=json.dumps(exact_cost))
        ref = cos / ((xm[gx].astype(np.float64) + ym[gy]) / 2)
        cuts = {f"{p}%": max(1, n * p // 100) for p in (10, 30)}
        ref_top = {c: top(ref, m) for c, m in cuts.items()}
        rows = [{"setting": "flat (exact)", **exact_cost, "speedup": 1.0, "cpu_speedup": 1.0, "spearman": 1.0,
                 **{f"overlap@{c}": 1.0 for c in cuts},
                 **({f"planted@{c}": round(float(planted[ref_top[c]].mean()), 4) for c in cuts}
                    if planted is not None else {})}]
        print(f"n={n}: {len(xu)} x {len(yu)} distinct; exact {exact_cost}", flush=True)
        for text in settings:
            bare = text.endswith("!")  # "kind:...!": without the partners as candidates
            spec = parse_setting(text.rstrip("!"))
            xa, ya, cost = means(xu, yu, gx, gy, spec, with_partners=not bare)
            score = cos / ((xa[gx].astype(np.float64) + ya[gy]) / 2)
            row = {"setting": f"{text} -> {spec.resolved(len(yu)).kind}, nlist {spec.resolved(len(yu)).nlist}",
                   **cost, "speedup": round(exact_cost["wall_s"] / max(cost["wall_s"], 1e-9), 1),
                   "cpu_speedup": round(exact_cost["cpu_s"] / max(cost["cpu_s"], 1e-9), 1),
                   "spearman": round(float(spearmanr(ref, score).statistic), 5)}
            for c, m in cuts.items():
                a = top(score, m)
                row[f"overlap@{c}"] = round(len(np.intersect1d(a, ref_top[c])) / m, 4)
                if planted is not None:
                    row[f"planted@{c}"] = round(float(planted[a].mean()), 4)
            row["mean_abs_err"] = round(float(np.mean(np.abs(np.concatenate([xa - xm, ya - ym])))), 5)
            rows.append(row)
            print(json.dumps(row), flush=True)
        report["sizes"][str(n)] = {"pairs": n, "distinct_src": len(xu), "distinct_tgt": len(yu),
                                   "planted": int(planted.sum()) if planted is not None else None, "rows": rows}
        (out / "index.json").write_text(json.dumps(report, indent=1) + "\n")
    write_md(report, out / "index.md")
    return 0


def write_md(report: dict, path: Path) -> None:
    lines = ["# Approximate kNN judged by the selection (bench/bench_index.py)", "",
             f"Machine: {report['machine']}; {report['threads']} threads; FAISS {report['faiss']}; k = {report['k']}; "
             f"ratio margin; pairs from `{report['pairs_file']}`.", ""]
    for size in report["sizes"].values():
        rows = size["rows"]
        cols = list(rows[0].keys()) + [c for c in rows[-1] if c not in rows[0]]
        lines += [f"## {size['pairs']:,} pairs ({size['distinct_src']:,} x {size['distinct_tgt']:,} distinct sentences"
                  + (f", {size['planted']:,} planted" if size["planted"] is not None else "") + ")", "",
                  "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
        lines.append("")
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
