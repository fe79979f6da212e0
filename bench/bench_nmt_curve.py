"""The demo NMT's learning curve: dev loss and dev BLEU against updates, on the DAN's ratio-margin
selection of the demo (run ``make demo`` first).

One system (the demo's NMT settings, one training seed) is trained in steps: to the first point,
decoded on the dev set, then trained further to the next point (``train-nmt`` resumes from its last
checkpoint when ``max_update`` is raised), and so on. Each point's model is what the demo would
evaluate at that update count (``average_last`` of the demo config); the dev set is the demo's
clean-mix dev. Wall time per point is recorded, so the curve says what each extra update costs.

    .venv/bin/python bench/bench_nmt_curve.py [--points 250,500,750,1000,1500,2000] [--threads 2]
Writes bench/out/nmt_curve.json and bench/out/nmt_curve.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from marginmine.nmt.evaluate import score_bleu, translate  # noqa: E402
from marginmine.nmt.train import load_manifest, train_nmt  # noqa: E402


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--selection", default=str(REPO / "work/demo/select/ratio.20k.tsv.gz"))
    ap.add_argument("--dev-src", default=str(REPO / "work/demo/corpus/heldout.dev.en"))
    ap.add_argument("--dev-ref", default=str(REPO / "work/demo/corpus/heldout.dev.de"))
    ap.add_argument("--config", default=str(REPO / "config/demo.yaml"))
    ap.add_argument("--points", default="250,500,750,1000,1500,2000")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    ap.add_argument("--decoder", default="fairseq", choices=("fairseq", "ctranslate2"),
                    help="fairseq (default: the decoder of the curve's first rows, kept for one curve)")
    args = ap.parse_args()
    for f in (args.selection, args.dev_src, args.dev_ref):
        if not Path(f).is_file():
            print(f"bench_nmt_curve: {f} not found (run `make demo` first)", file=sys.stderr)
            return 2
    points = sorted(int(x) for x in args.points.split(","))
    cfg = yaml.safe_load(Path(args.config).read_text())["nmt"]
    params = {"arch": cfg.get("arch", "transformer"), **cfg.get("params", {})}
    out = Path(args.out)
    work = out / "nmt_curve" / "work"
    rows = []
    for point in points:
        t0 = time.monotonic()
        train_nmt(args.selection, args.dev_src, args.dev_ref, work, "en", "de", {**params, "max_update": point},
                  threads=args.threads, seed=args.seed)
        train_s = time.monotonic() - t0
        info = load_manifest(work)["info"]
        hyp = out / "nmt_curve" / f"dev.{point}.de"
        t1 = time.monotonic()
        translate(work, args.dev_src, hyp, beam=int(cfg.get("beam", 5)), threads=args.threads, decoder=args.decoder)
        decode_s = time.monotonic() - t1
        bleu = score_bleu(hyp, args.dev_ref, lang="de")
        rows.append({"updates": info["num_updates"], "epoch": info["epoch"], "dev_loss": info["dev_loss"],
                     "dev_bleu": round(bleu["bleu"], 2), "train_seconds_total": info["train_seconds_total"],
                     "step_wall_seconds": round(train_s, 1), "decode_seconds": round(decode_s, 1),
                     "decoder": args.decoder})
        print(json.dumps(rows[-1]), flush=True)
        write(out, args, cfg, params, rows)  # after every point: a stopped run keeps what it measured
    return 0


def write(out: Path, args: argparse.Namespace, cfg: dict, params: dict, rows: list[dict]) -> None:
    meta = {"cpu": cpu_model(), "threads": args.threads, "seed": args.seed, "selection": args.selection,
            "dev": args.dev_src, "params": params}
    (out / "nmt_curve.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    md = [f"# Demo NMT learning curve ({meta['cpu']}, {args.threads} threads, seed {args.seed})", "",
          f"Selection {args.selection}; dev = {args.dev_src} (clean-mix); demo NMT settings, beam "
          f"{cfg.get('beam', 5)}.", "",
          "| updates | epoch | dev loss | dev BLEU | training s (cumulative) |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['updates']:,} | {r['epoch']} | {r['dev_loss']:.2f} | {r['dev_bleu']:.2f} | "
                  f"{r['train_seconds_total']:.0f} |")
    (out / "nmt_curve.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    sys.exit(main())
