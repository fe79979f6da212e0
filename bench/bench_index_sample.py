"""Approximate kNN judged by the selection, on batches too large to search exactly here (issue 32).

`bench_index.py` compares whole batches with exact search; at 1M pairs that search takes hours on
two cores, at 5M days. This benchmark estimates the same numbers from a uniform random sample of
the batch's pairs (``--sample``, seeded): for every sampled pair both sentences are searched
exactly (against all distinct sentences of the other side, in database chunks) and with each index
setting (the index built over the whole batch, the sentences' partners as candidates, as the
scoring does), which gives the pair's exact and approximate ratio margin (k = 4). From the sample:

* the Spearman correlation of approximate and exact scores;
* the top-N overlap |A n B| / N at N = 10% and 30% of the batch: a sampled pair is in B when its
  exact score passes the sample's exact quantile, in A when its approximate score passes the
  approximate quantile; overlap = P(A and B) / P(B), with a 95% bootstrap interval (resampling the
  sample, both quantiles re-estimated each time);
* the share of planted true translations in A and in B (``--labels``);
* the cost: exact search projected from the sample (its cost is linear in the queries), each
  setting from its index build plus one block of queries searched on its own, both projected to
  all distinct sentences of both sides, as CPU seconds; the speed-up is their ratio.

``--scores`` (the workflow's score file of the same batch) checks that the recomputed approximate
scores of the setting the workflow used equal the file's (six decimals).

    .venv/bin/python bench/bench_index_sample.py --pairs work/scale/preprocess/kept/shard0000.tsv.gz \\
        --src work/scale/embed/dan/shard0000.en.npy --tgt work/scale/embed/dan/shard0000.de.npy \\
        --labels work/scale/corpus/scale.labels.tsv --scores work/scale/score/dan/shard0000.scores.tsv.gz \\
        --sample 10000 --settings "ivf-blas:nprobe=4;ivf-blas:nprobe=8;ivf-blas:nprobe=16"

Writes bench/out/index_sample_<pairs>.json and .md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from bench_index import add_shard_inputs, clean_ids, parse_setting  # noqa: E402
from marginmine.search.knn import BLAS_NPROBE, BLAS_QUERY_BLOCK  # noqa: E402

K = 4
CUTS = (10, 30)
BOOTSTRAP = 1000


def read_shard(path: Path, clean: set[str] | None, chunk: int = 65_536):
    """Digests of both sides and, with ``clean``, a planted flag per line (the shard's id column)."""
    from marginmine.search.margin import text_digests

    src, tgt, planted = [], [], []
    buf: list[list[str]] = []

    def flush() -> None:
        src.append(text_digests([c[0] for c in buf]))
        tgt.append(text_digests([c[1] for c in buf]))
        if clean is not None:
            planted.append(np.array([len(c) > 2 and c[2] in clean for c in buf]))
        buf.clear()

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            buf.append(line.rstrip("\n").split("\t"))
            if len(buf) == chunk:
                flush()
    if buf:
        flush()
    return np.concatenate(src), np.concatenate(tgt), (np.concatenate(planted) if clean is not None else None)


def exact_means(queries: np.ndarray, database: np.ndarray, chunk: int = 262_144) -> np.ndarray:
    """Each query's mean similarity to its K nearest database rows, exactly (database in chunks)."""
    import faiss

    from marginmine.search.knn import best_k

    q = np.ascontiguousarray(queries, np.float32)
    sims = np.full((len(q), 0), -np.inf, np.float32)
    ids = np.zeros((len(q), 0), np.int64)
    for a in range(0, len(database), chunk):
        rows = np.ascontiguousarray(database[a:a + chunk], np.float32)
        d, i = faiss.knn(q, rows, min(K, len(rows)), metric=faiss.METRIC_INNER_PRODUCT)
        sims, ids = best_k(np.concatenate([sims, d], 1), np.concatenate([ids, i + a], 1), K)
    return sims.mean(axis=1, dtype=np.float64).astype(np.float32)


def ratio(cos: np.ndarray, xm: np.ndarray, ym: np.ndarray) -> np.ndarray:
    from marginmine.search.margin import apply_margin

    return apply_margin(cos.astype(np.float64), (xm.astype(np.float64) + ym.astype(np.float64)) / 2, "ratio")


def overlap(e: np.ndarray, a: np.ndarray, p: float) -> float:
    in_b = e > np.quantile(e, 1 - p)
    in_a = a > np.quantile(a, 1 - p)
    return float((in_a & in_b).sum() / max(1, in_b.sum()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shard_inputs(ap)  # the shard is the batch
    ap.add_argument("--scores", default=None, help="the workflow's score file of this batch (ratio column)")
    ap.add_argument("--workflow-setting", default=f"ivf-blas:nprobe={BLAS_NPROBE}",
                    help="the setting the score file was made with (checked against it)")
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--settings", default="ivf-blas:nprobe=4;ivf-blas:nprobe=8;ivf-blas:nprobe=16")
    ap.add_argument("--timing-block", type=int, default=BLAS_QUERY_BLOCK, help="queries searched to time a setting")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()

    import faiss
    from scipy.stats import spearmanr

    from marginmine.machine import machine as describe_machine
    from marginmine.scoring.files import gather_rows
    from marginmine.search.knn import build_index, search
    from marginmine.search.margin import gathered_cosines, partners, unique_groups

    faiss.omp_set_num_threads(args.threads)
    t_start = time.time()
    clean = clean_ids(Path(args.labels)) if args.labels else None
    sd, td, planted = read_shard(Path(args.pairs), clean)
    n = len(sd)
    fx, gx = unique_groups(sd)
    fy, gy = unique_groups(td)
    del sd, td
    xu = gather_rows(np.load(args.src, mmap_mode="r"), fx)
    yu = gather_rows(np.load(args.tgt, mmap_mode="r"), fy)
    print(f"{n:,} pairs, {len(xu):,} x {len(yu):,} distinct, read in {time.time() - t_start:.0f} s", flush=True)

    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(n, size=min(args.sample, n), replace=False))
    qx, inv_x = np.unique(gx[sample], return_inverse=True)  # the sampled pairs' distinct sentences
    qy, inv_y = np.unique(gy[sample], return_inverse=True)
    cos = gathered_cosines(xu, yu, gx[sample], gy[sample])

    c0 = time.process_time()
    ex = exact_means(xu[qx], yu)
    cpu_x = time.process_time() - c0
    ey = exact_means(yu[qy], xu)
    cpu_y = time.process_time() - c0 - cpu_x
    exact_cpu = cpu_x + cpu_y
    exact_full_cpu = cpu_x * len(xu) / len(qx) + cpu_y * len(yu) / len(qy)  # each side by its own rate
    exact = ratio(cos, ex[inv_x], ey[inv_y])
    print(f"exact: {exact_cpu:.0f} CPU s for {len(qx) + len(qy):,} queries -> {exact_full_cpu:,.0f} CPU s "
          "for the batch", flush=True)

    cx_all, cy_all = partners(gx, gy, len(xu)), partners(gy, gx, len(yu))
    boot = rng.integers(0, len(sample), size=(BOOTSTRAP, len(sample)))
    rows = []

    def judge(name: str, score: np.ndarray, extra: dict) -> dict:
        row = {"setting": name, **extra,
               "spearman": round(float(spearmanr(exact, score).statistic), 5)}
        for c in CUTS:
            p = c / 100
            row[f"overlap@{c}%"] = round(overlap(exact, score, p), 4)
            bs = np.array([overlap(exact[b], score[b], p) for b in boot])
            row[f"overlap@{c}% 95% CI"] = f"{np.quantile(bs, 0.025):.3f}-{np.quantile(bs, 0.975):.3f}"
            if planted is not None:
                row[f"planted@{c}%"] = round(float(planted[sample][score > np.quantile(score, 1 - p)].mean()), 4)
        return row

    rows.append(judge("flat (exact)", exact, {"cpu_s": round(exact_full_cpu), "cpu_speedup": 1.0}))
    by_index: dict[tuple, list] = {}
    for text in (s for s in args.settings.split(";") if s):
        spec = parse_setting(text)
        by_index.setdefault((spec.kind, spec.nlist), []).append((text, spec))
    workflow = None
    for group in by_index.values():
        built = []
        for side, (base, query_rows) in (("src", (yu, qx)), ("tgt", (xu, qy))):
            c0 = time.process_time()
            index = build_index(base, group[0][1].resolved(len(base)))
            built.append((index, time.process_time() - c0))
        for text, spec in group:
            means, cpu = [], 0.0
            for (index, build_cpu), (query, base, q, cand) in zip(
                    built, ((xu, yu, qx, cx_all), (yu, xu, qy, cy_all))):
                resolved = spec.resolved(len(base))
                index.nprobe = resolved.nprobe
                s, _ = search(index, query[q], K, block=len(q) or 1, database=base, candidates=cand[q])
                means.append(s.mean(axis=1, dtype=np.float64).astype(np.float32))
                tb = min(args.timing_block, len(query))
                c0 = time.process_time()
                search(index, query[:tb], K, block=tb, database=base, candidates=cand[:tb])
                cpu += build_cpu + (time.process_time() - c0) * len(query) / tb
            score = ratio(cos, means[0][inv_x], means[1][inv_y])
            r = spec.resolved(len(yu))
            rows.append(judge(f"{text} ({r.nprobe} of {r.nlist} cells)", score,
                              {"cpu_s": round(cpu), "cpu_speedup": round(exact_full_cpu / cpu, 1)}))
            print(json.dumps(rows[-1]), flush=True)
            if text == args.workflow_setting:
                workflow = score
    check = None
    if args.scores and workflow is not None:
        from marginmine.scoring.files import read_scores

        filed = read_scores(args.scores, "ratio")
        if len(filed) != n:
            raise SystemExit(f"{args.scores}: {len(filed)} scores, the batch has {n} pairs")
        diff = np.abs(filed[sample] - np.round(workflow, 6))
        check = {"file": args.scores, "setting": args.workflow_setting, "max_abs_diff": float(diff.max()),
                 "lines_over_1e-6": int((diff > 1.5e-6).sum())}
        print("score file check:", check, flush=True)
    report = {"machine": describe_machine(), "threads": args.threads, "faiss": faiss.__version__, "k": K,
              "pairs_file": args.pairs, "pairs": n, "distinct_src": len(xu), "distinct_tgt": len(yu),
              "planted": int(planted.sum()) if planted is not None else None, "sample": len(sample),
              "sample_queries": [len(qx), len(qy)], "seed": args.seed, "bootstrap": BOOTSTRAP,
              "score_file_check": check, "rows": rows, "wall_s": round(time.time() - t_start)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"index_sample_{n}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    write_md(report, stem.with_suffix(".md"))
    return 0


def write_md(report: dict, path: Path) -> None:
    rows = report["rows"]
    cols = list(rows[0].keys())
    lines = [f"# Approximate kNN judged on a sample of a {report['pairs']:,}-pair batch "
             "(bench/bench_index_sample.py)", "",
             f"Machine: {report['machine']}; {report['threads']} threads; FAISS {report['faiss']}; "
             f"k = {report['k']}; ratio margin; `{report['pairs_file']}`: "
             f"{report['distinct_src']:,} x {report['distinct_tgt']:,} distinct sentences"
             + (f", {report['planted']:,} planted" if report["planted"] is not None else "")
             + f"; {report['sample']:,} sampled pairs (seed {report['seed']}), {report['bootstrap']} bootstrap "
             "resamples (the intervals cover the sampling of pairs, not the k-means seed of the index).", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    if report["score_file_check"]:
        c = report["score_file_check"]
        lines += ["", f"The workflow's score file `{c['file']}` ({c['setting']}) against the recomputed scores of "
                  f"the sampled pairs: largest difference {c['max_abs_diff']:.2g}, {c['lines_over_1e-6']} lines "
                  "differ by more than rounding."]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
