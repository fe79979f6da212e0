"""What the batch size does to the selection (issue 32; stopes warns that shards shift the margin).

The first ``--first`` pairs of a preprocessed shard are scored with ``marginmine score`` in batches of
each size of ``--batches`` (the neighbourhoods of a pair come from its batch only) and compared with
the workflow's score file of the whole shard (``--scores``: the shard's own batch, e.g. 5M pairs),
restricted to the same pairs. Per batch size: wall and CPU seconds, the share of planted true
translations in the top N (N = 10% and 30% of the pairs; precision; ``--labels``), the recall of the
planted pairs at N, the ratio scores' quantiles (how the distribution shifts), and each pair of batch
sizes' top-N overlap |A n B| / N and Spearman correlation. The index is the workflow's (``--index``,
``--nprobe``; ``auto`` searches exactly up to 200k distinct sentences per side).

    .venv/bin/python bench/bench_batch_size.py --pairs work/scale/preprocess/kept/shard0000.tsv.gz \\
        --src work/scale/embed/dan/shard0000.en.npy --tgt work/scale/embed/dan/shard0000.de.npy \\
        --labels work/scale/corpus/scale.labels.tsv --scores work/scale/score/dan/shard0000.scores.tsv.gz \\
        --first 1000000 --batches 100000,1000000

Writes bench/out/batch_size.json and bench/out/batch_size.md (scratch files in bench/out/work/).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from bench_index import add_shard_inputs, clean_ids, top  # noqa: E402

CUTS = (10, 30)
QUANTILES = (0.1, 0.5, 0.7, 0.9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shard_inputs(ap, labels_required=True)
    ap.add_argument("--scores", required=True, help="the workflow's score file of the whole shard")
    ap.add_argument("--shard-batch", default="5M", help="label of the workflow's batch (its batch_size)")
    ap.add_argument("--first", type=int, default=1_000_000)
    ap.add_argument("--batches", default="100000,1000000")
    ap.add_argument("--index", default="auto")
    ap.add_argument("--nprobe", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()

    from scipy.stats import spearmanr

    from marginmine.io.sizes import count_label
    from marginmine.machine import machine as describe_machine
    from marginmine.scoring.files import read_scores

    out = Path(args.out)
    work = out / "work" / "batch_size"
    work.mkdir(parents=True, exist_ok=True)
    n = args.first
    pairs = work / f"first{n}.tsv.gz"
    ids = []
    with gzip.open(args.pairs, "rt", encoding="utf-8") as src, gzip.open(pairs, "wt", encoding="utf-8",
                                                                          compresslevel=1) as dst:
        for i, line in enumerate(src):
            if i == n:
                break
            dst.write(line)
            cols = line.rstrip("\n").split("\t")
            ids.append(cols[2] if len(cols) > 2 else "")
    n = len(ids)
    clean = clean_ids(Path(args.labels))
    planted = np.array([i in clean for i in ids])
    emb = {}
    for side, path in (("src", args.src), ("tgt", args.tgt)):
        emb[side] = work / f"first{n}.{side}.npy"
        np.save(emb[side], np.asarray(np.load(path, mmap_mode="r")[:n]))
    shard_label = f"{args.shard_batch} (the workflow's)"
    scores = {shard_label: read_scores(args.scores, "ratio")[:n]}
    runs = {}
    for b in (int(x) for x in args.batches.split(",")):
        label = count_label(b)
        path = work / f"batch{b}.scores.tsv.gz"
        path.unlink(missing_ok=True)
        cmd = [str(REPO / ".venv/bin/marginmine"), "score", "--input", str(pairs), "--src-embeddings",
               str(emb["src"]), "--tgt-embeddings", str(emb["tgt"]), "--scorers", "ratio", "-k", "4",
               "--batch-size", str(b), "--index", args.index, "--nprobe", str(args.nprobe),
               "--threads", str(args.threads), "--output", str(path)]
        timing = work / f"batch{b}.time"
        with open(work / f"batch{b}.log", "w") as log:
            subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(timing), *cmd], check=True,
                           stdout=subprocess.DEVNULL, stderr=log)
        wall, user, system, rss_kb = timing.read_text().split()[-4:]
        runs[label] = {"pairs_per_batch": b, "batches": -(-n // b), "wall_s": round(float(wall)),
                       "cpu_s": round(float(user) + float(system)), "peak_rss_mib": round(int(rss_kb) / 1024)}
        scores[label] = read_scores(path, "ratio")
        print(label, runs[label], flush=True)
    labels = [lab for lab in scores if lab != shard_label] + [shard_label]
    cuts = {c: max(1, n * c // 100) for c in CUTS}
    tops = {lab: {c: top(scores[lab], m) for c, m in cuts.items()} for lab in labels}
    rows = []
    for lab in labels:
        s = scores[lab]
        row = {"batch": lab, **runs.get(lab, {"note": "the workflow's score file"})}
        for c, m in cuts.items():
            hit = planted[tops[lab][c]].sum()
            row[f"precision@{c}%"] = round(float(hit / m), 4)
            row[f"recall@{c}%"] = round(float(hit / max(1, planted.sum())), 4)
        row.update({f"q{int(q * 100)}": round(float(np.quantile(s, q)), 4) for q in QUANTILES})
        rows.append(row)
    pairs_rows = []
    for a, b in combinations(labels, 2):
        pairs_rows.append({"a": a, "b": b, "spearman": round(float(spearmanr(scores[a], scores[b]).statistic), 5),
                           **{f"overlap@{c}%": round(len(np.intersect1d(tops[a][c], tops[b][c])) / m, 4)
                              for c, m in cuts.items()}})
    report = {"machine": describe_machine(), "threads": args.threads, "pairs_file": args.pairs, "pairs": n,
              "planted": int(planted.sum()), "index": args.index, "nprobe": args.nprobe, "rows": rows,
              "pairwise": pairs_rows}
    (out / "batch_size.json").write_text(json.dumps(report, indent=1) + "\n")
    md = ["# What the batch size does (bench/bench_batch_size.py)", "",
          f"Machine: {report['machine']}; {args.threads} threads. The first {n:,} pairs of `{args.pairs}` "
          f"({report['planted']:,} planted true translations), ratio margin, k = 4, index `{args.index}` "
          f"(nprobe {args.nprobe} where approximate); the {args.shard_batch} row is the workflow's score file of "
          "the whole shard, restricted to these pairs.", ""]
    for table in (rows, pairs_rows):
        cols = list(dict.fromkeys(c for r in table for c in r))
        md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        md += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in table]
        md.append("")
    (out / "batch_size.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
