"""Two encoders on one scale run (`make scale SCALE=1m SCALE_ENCODER=use`, issue 44 item 5): for each
encoder the run embedded and scored with, the cost of its embedding and scoring jobs and the planted
true translations its selections hold at 10% and 30%, side by side.

Reads only what the run wrote: each rule's Snakemake benchmark file (wall and CPU seconds, peak RSS)
under ``work/<exp>/benchmarks/{embed,score}/<encoder>/``, the embeddings' row counts
(``work/<exp>/embed/<encoder>/*.npy``), the run's row in ``results/<exp>/wall_times.tsv`` and the
planted precision / recall table of ``results/<exp>/select/composition.md``. A scorer's encoder is
taken from its name (``use-ratio`` -> ``use``, else the experiment's default encoder, ``--default``).

    .venv/bin/python bench/bench_scale_encoders.py --exp scale-1m [--default dan]

Writes bench/out/scale_encoders_<exp>.json and .md.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def bench_sum(folder: Path) -> dict:
    """Wall and CPU seconds summed over a rule's benchmark files (one per shard), the largest peak RSS."""
    rows = []
    for path in sorted(folder.glob("*.tsv")):
        with open(path, encoding="utf-8") as fh:
            rows.append(list(csv.DictReader(fh, delimiter="\t"))[-1])
    if not rows:
        raise SystemExit(f"{folder}: no benchmark files (run make scale with this encoder first)")
    return {"jobs": len(rows), "wall_s": sum(float(r["s"]) for r in rows),
            "cpu_s": sum(float(r["cpu_time"]) for r in rows), "rss_mib": max(float(r["max_rss"]) for r in rows)}


def planted(composition_md: Path) -> dict[str, dict]:
    """``method.N`` -> clean selected, precision, recall, from the composition table's planted block."""
    out = {}
    for line in composition_md.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| (\S+) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+|n/a) \|$", line)
        if m:
            out[m.group(1)] = {"clean_selected": int(m.group(2).replace(",", "")), "precision": float(m.group(3)),
                               "recall": None if m.group(4) == "n/a" else float(m.group(4))}
    return out


def encoder_of(method: str, default: str) -> str | None:
    """``use-ratio`` -> ``use``; ``ratio`` -> the default encoder; ``random`` -> None (no encoder)."""
    if method in ("random", "unfiltered"):
        return None
    return method.split("-")[0] if "-" in method else default


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exp", default="scale-1m")
    ap.add_argument("--default", default="dan", help="the experiment's encoder.default (scorers without a prefix)")
    args = ap.parse_args()
    from marginmine.machine import machine

    work, results = REPO / "work" / args.exp, REPO / "results" / args.exp
    encoders = sorted(p.name for p in (work / "benchmarks" / "embed").iterdir() if p.is_dir())
    table = planted(results / "select" / "composition.md")
    rows = []
    for enc in encoders:
        sentences = sum(int(np.load(p, mmap_mode="r").shape[0]) for p in sorted((work / "embed" / enc).glob("*.npy")))
        embed, score = bench_sum(work / "benchmarks" / "embed" / enc), bench_sum(work / "benchmarks" / "score" / enc)
        picks = {sel: v for sel, v in table.items() if encoder_of(sel.split(".")[0], args.default) == enc}
        rows.append({"encoder": enc, "sentences_embedded": sentences, "embed": embed, "score": score,
                     "embed_sentences_per_wall_s": sentences / embed["wall_s"], "selections": picks})
    with open(results / "wall_times.tsv", encoding="utf-8") as fh:
        runs = list(csv.DictReader(fh, delimiter="\t"))
    out = {"exp": args.exp, "machine": machine(), "runs": runs, "encoders": rows,
           "random": {k: v for k, v in table.items() if k.startswith("random.")}}
    dest = REPO / "bench" / "out"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"scale_encoders_{args.exp}.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    lines = [f"Machine: {out['machine']}. Run `{args.exp}` (`results/{args.exp}/wall_times.tsv`): " +
             "; ".join(f"{r['part']}: {float(r['seconds']):.0f} s on {r['machine']}" for r in runs) + ".", "",
             "| encoder | sentences embedded | embed wall s / CPU s | sentences/s (wall) | embed peak RSS MiB "
             "| score wall s / CPU s | score peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        e, s = r["embed"], r["score"]
        lines.append(f"| {r['encoder']} | {r['sentences_embedded']:,} | {e['wall_s']:.0f} / {e['cpu_s']:.0f} | "
                     f"{r['embed_sentences_per_wall_s']:,.0f} | {e['rss_mib']:.0f} | {s['wall_s']:.0f} / "
                     f"{s['cpu_s']:.0f} | {s['rss_mib']:.0f} |")
    lines += ["", "| selection | encoder | clean selected | precision | recall |", "|---|---|---:|---:|---:|"]
    for r in rows:
        for sel, v in r["selections"].items():
            lines.append(f"| {sel} | {r['encoder']} | {v['clean_selected']:,} | {v['precision']:.3f} | "
                         f"{v['recall']:.3f} |")
    for sel, v in out["random"].items():
        lines.append(f"| {sel} | - | {v['clean_selected']:,} | {v['precision']:.3f} | {v['recall']:.3f} |")
    (dest / f"scale_encoders_{args.exp}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
