"""The cost curve of `make scale` and the paper's run projected from it (issue 32).

Reads what `make scale` runs wrote - each rule's Snakemake benchmark file (wall seconds, CPU
seconds, peak RSS), the preprocessing ledgers (pairs in, pairs kept) and the run's row in
``results/<exp>/wall_times.tsv`` - for each ``--runs`` experiment (e.g. the 100k, 1M and 5M builds),
and writes:

* the cost curve: per rule and size, wall and CPU seconds and peak RSS, with the CPU microseconds per
  pair (per raw pair for splitting and preprocessing, per kept pair after), and the wall time per
  kept pair of the largest run over the second largest's (1.0 = linear in pairs; the smallest run is
  mostly process start-up). Snakemake samples a job's CPU time, and a short or chained job can be
  under-counted: read its wall time;
* the paper's run (Artetxe & Schwenk 2019: 4.59 billion raw ParaCrawl pairs, 64.4 million left after
  deduplication and the length/overlap filters, scored in batches of 5 million) on this machine's
  rates: each stage's CPU-hours from the largest run's CPU seconds per pair, scaled by the dimension
  where the cost grows with it (``--paper-dim``, LASER: 1,024; the DAN here: 320), and the
  embedding at the rate given by ``--embed-rate`` (sentences per second on two cores, e.g. the
  LASER-style encoder's from bench_encoders.py).

    .venv/bin/python bench/bench_scale_cost.py --runs scale-100k scale-1m scale

Writes bench/out/scale_cost.json and bench/out/scale_cost.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

#: the paper's ParaCrawl en-de run (seed paper 004, Section 4.2)
PAPER_RAW = 4_590_000_000
PAPER_KEPT = 64_400_000


def paper_shards() -> int:
    """The shard count ``config.yaml`` plans for the paper's corpus (each shard is one scoring batch's
    worth after preprocessing)."""
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    return -(-cfg["corpus"]["expected_pairs"] // cfg["preprocess"]["shard_size"])
#: rules whose cost is per raw pair (the rest: per kept pair)
RAW_RULES = ("split_corpus", "preprocess")


def read_bench(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        row = list(csv.DictReader(fh, delimiter="\t"))[-1]
    return {"wall_s": float(row["s"]), "cpu_s": float(row["cpu_time"]), "rss_mib": float(row["max_rss"])}


def run_facts(work: Path, results: Path) -> dict:
    split = json.loads((work / "preprocess/split/ledger.json").read_text())
    kept = sum(json.loads(p.read_text())["kept"] for p in sorted((work / "preprocess/ledger").glob("shard*.json")))
    rows = []
    wall = results / "wall_times.tsv"
    if wall.exists():
        with open(wall, encoding="utf-8") as fh:
            rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["exit"] == "0"]
    rules = {}
    for p in sorted((work / "benchmarks").rglob("*.tsv")):
        name = str(p.relative_to(work / "benchmarks"))[:-4]
        if name.startswith(("train_encoder", "encoder_data", "scale_corpus")):
            continue  # the corpus build and the reused encoder's check are not part of the timed run
        rules[canonical(name, split["pairs_in"])] = read_bench(p)
    return {"raw_pairs": split["pairs_in"], "kept_pairs": kept, "rules": rules,
            "run": rows[-1] if rows else None}


def canonical(name: str, raw_pairs: int) -> str:
    """``select/ratio.500k`` -> ``select/ratio.10%`` (N as a share of the raw pairs), so the
    selections of different sizes line up; other names unchanged."""
    if not name.startswith("select/") or "." not in name:
        return name
    method, _, size = name.partition("/")[2].partition(".")  # scorer names hold no "."
    scale = {"k": 1e3, "M": 1e6, "B": 1e9}.get(size[-1:], 1)
    try:
        n = float(size[:-1] if scale != 1 else size) * scale
    except ValueError:
        return name
    return f"select/{method}.{round(100 * n / raw_pairs)}%"


def stage(name: str) -> str:
    return name.split("/")[0] if "/" in name else name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=["scale-100k", "scale-1m", "scale"])
    ap.add_argument("--dim", type=int, default=320, help="the runs' encoder dimension")
    ap.add_argument("--paper-dim", type=int, default=1024)
    ap.add_argument("--embed-rate", type=float, default=345.0,
                    help="sentences/s on this machine of the paper's encoder (bench/RESULTS.md: LASER-style, 345)")
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()

    from marginmine.machine import machine as describe_machine

    runs = {r: run_facts(REPO / "work" / r, REPO / "results" / r) for r in args.runs}
    last = runs[args.runs[-1]]
    ref = args.runs[-2] if len(args.runs) > 1 else args.runs[0]  # compared with the largest (the smallest is start-up)
    curve = []
    for name in last["rules"]:
        row = {"rule": name}
        for r, facts in runs.items():
            b = facts["rules"].get(name)
            if b is None:
                continue
            pairs = facts["raw_pairs"] if stage(name) in RAW_RULES else facts["kept_pairs"]
            row[r] = {**b, "cpu_us_per_pair": round(b["cpu_s"] / pairs * 1e6, 2)}
        base = row.get(ref)
        if base and args.runs[-1] in row:
            row["per_pair_ratio"] = round(row[args.runs[-1]]["wall_s"] / max(base["wall_s"], 1e-9)
                                          * runs[ref]["kept_pairs"] / last["kept_pairs"], 2)
        curve.append(row)

    # the paper's run at this machine's rates (the largest run's)
    per_pair, wall_per_pair = {}, {}
    for name, b in last["rules"].items():
        s = "select" if stage(name) == "select" else stage(name)
        pairs = last["raw_pairs"] if s in RAW_RULES else last["kept_pairs"]
        per_pair[s] = per_pair.get(s, 0.0) + b["cpu_s"] / pairs
        wall_per_pair[s] = wall_per_pair.get(s, 0.0) + b["wall_s"] / pairs
    scale_dim = args.paper_dim / args.dim
    shards = paper_shards()
    paper = [
        {"stage": "split (deduplication over the whole corpus, one process; a lower bound: at this size its "
                  "records spill to disk, which the 5M run never did)", "pairs": PAPER_RAW,
         "cpu_h": PAPER_RAW * per_pair["split_corpus"] / 3600,
         "wall_h": PAPER_RAW * wall_per_pair["split_corpus"] / 3600,
         "parallel": "no: one pass over all pairs"},
        {"stage": "preprocess (an upper bound: it sees what deduplication leaves, which the paper does not "
                  "report)", "pairs": PAPER_RAW,
         "cpu_h": PAPER_RAW * per_pair["preprocess"] / 3600,
         "parallel": f"per shard (config.yaml): {shards} shards of ~{PAPER_RAW / shards / 1e6:.0f}M raw pairs keep "
                     f"~{PAPER_KEPT / shards / 1e6:.1f}M each (a scoring batch never spans a shard)"},
        {"stage": f"embed ({args.paper_dim}-dim, {args.embed_rate:g} sentences/s on 2 cores)", "pairs": PAPER_KEPT,
         "cpu_h": 2 * PAPER_KEPT * 2 / args.embed_rate / 3600, "parallel": "per shard"},
        {"stage": f"score (one batch per shard, ivf-blas, x{scale_dim:.1f} for the dimension)", "pairs": PAPER_KEPT,
         "cpu_h": PAPER_KEPT * per_pair["score"] * scale_dim / 3600,
         "parallel": f"{shards} batches of ~{PAPER_KEPT / shards / 1e6:.1f}M"},
        {"stage": "select (the top-N, per method and N)", "pairs": PAPER_KEPT,
         "cpu_h": PAPER_KEPT * per_pair["select"] / 3600, "parallel": "per method and N"},
    ]
    for p in paper:
        p["cpu_h"] = round(p["cpu_h"], 1)
        p["hours_on_2_cores"] = round(p.pop("wall_h", p["cpu_h"] / 2), 1)  # a serial stage: its wall time
    report = {"machine": describe_machine(), "runs": {r: {k: v for k, v in f.items() if k != "rules"}
                                                      for r, f in runs.items()},
              "curve": curve, "paper": paper, "dim": args.dim, "paper_dim": args.paper_dim,
              "embed_rate": args.embed_rate}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale_cost.json").write_text(json.dumps(report, indent=1) + "\n")

    md = ["# `make scale`: the cost curve and the paper's run (bench/bench_scale_cost.py)", "",
          f"Machine: {report['machine']} (the runs' own: see their wall-time rows). Pairs: raw (in) / kept: "
          + "; ".join(f"{r} {f['raw_pairs']:,} / {f['kept_pairs']:,}" for r, f in runs.items()) + ".", "",
          "Whole runs (`results/<exp>/wall_times.tsv`, from the built corpus): "
          + "; ".join(f"{r} {f['run']['seconds']} s on {f['run']['machine']}" for r, f in runs.items() if f["run"])
          + ".",
          "", "| rule | " + " | ".join(f"{r}: wall s / CPU s / peak RSS MiB / CPU us per pair" for r in runs)
          + f" | wall per pair, {args.runs[-1]} / {ref} |",
          "|---|" + "---|" * (len(runs) + 1)]
    for row in curve:
        cells = []
        for r in runs:
            c = row.get(r)
            cells.append(f"{c['wall_s']:.0f} / {c['cpu_s']:.0f} / {c['rss_mib']:.0f} / {c['cpu_us_per_pair']}"
                         if c else "")
        md.append(f"| {row['rule']} | " + " | ".join(cells) + f" | {row.get('per_pair_ratio', '')} |")
    md += ["", f"The paper's run on this machine's rates ({args.runs[-1]}'s; {PAPER_RAW:,} raw pairs, "
           f"{PAPER_KEPT:,} kept, {args.paper_dim}-dim embeddings):", "",
           "| stage | pairs | CPU-hours | wall hours on 2 cores | parallel |", "|---|---:|---:|---:|---|"]
    md += [f"| {p['stage']} | {p['pairs']:,} | {p['cpu_h']:,} | {p['hours_on_2_cores']:,} | {p['parallel']} |"
           for p in paper]
    total_h = sum(p["hours_on_2_cores"] for p in paper)
    md.append(f"| total | | {sum(p['cpu_h'] for p in paper):,.1f} | {total_h:,.1f} ({total_h / 24:.1f} days) | |")
    (out / "scale_cost.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
