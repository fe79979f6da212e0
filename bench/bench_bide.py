"""Dual-encoder training speed: Yang et al.'s (2019) BiDE+AM transformer at config.yaml's size beside the
demo DAN (config/demo.yaml), the same real pairs, the same machine, one run.

Each network trains ``--warmup`` steps (sentencepiece, first allocations), then resumes from that
checkpoint for ``--steps`` more; the second call's wall time over its pairs is the rate
(it includes re-reading and tokenising the pairs: a few seconds on these 40,000). The learning-rate
schedule is held constant (speed does not depend on it; a decaying one cannot resume to a new
``max_steps``).

    .venv/bin/python bench/bench_bide.py [--pairs 40000] [--warmup 3] [--steps 20] [--threads 2]
Writes bench/out/bide_training.json and bench/out/bide_training.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from marginmine.encoders import dual  # noqa: E402
from marginmine.encoders.base import ParallelData  # noqa: E402
from marginmine.io.text import read_lines  # noqa: E402


def model_params(config: Path, name: str) -> dict:
    return dict(yaml.safe_load(config.read_text())["encoder"]["models"][name]["params"])


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def rate(out: Path, data: list[ParallelData], params: dict, warmup: int, steps: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    params = {**params, "lr_schedule": "constant", "warmup_steps": 0, "epochs": 1000, "hard_negatives": None}
    params = {k: v for k, v in params.items() if v is not None}
    t0 = time.perf_counter()
    dual.train(data, out, {**params, "max_steps": warmup})
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    dual.train(data, out, {**params, "max_steps": warmup + steps})
    wall = time.perf_counter() - t0
    pairs = steps * int(params["batch_size"])
    params_count = sum(p.numel() for p in dual.load(out, json.loads((out / "encoder.json").read_text()),
                                                    "cpu").model.parameters())
    return {"steps": steps, "batch_size": int(params["batch_size"]), "pairs": pairs, "seconds": wall,
            "pairs_per_s": pairs / wall, "first_call_seconds": first, "parameters": params_count,
            "params": params}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=40_000)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=os.environ.get("MARGINMINE_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    work = out / "work" / "bide"
    work.mkdir(parents=True, exist_ok=True)
    src = Path(args.data_dir) / "tatoeba-manythings-deu-eng-2018"
    for lang in ("en", "de"):
        (work / f"pairs.{lang}").write_text("\n".join(read_lines(src / f"train.nooverlap.{lang}")[: args.pairs]) + "\n")
    data = [ParallelData("en", "de", work / "pairs.en", work / "pairs.de")]
    systems = {
        "BiDE+AM transformer, Yang et al.'s size (config.yaml bide-am-first)":
            model_params(REPO / "config.yaml", "bide-am-first"),
        "DAN, demo size (config/demo.yaml dan)": model_params(REPO / "config" / "demo.yaml", "dan"),
    }
    rows = {}
    for i, (name, params) in enumerate(systems.items()):
        rows[name] = rate(work / f"enc{i}", data, params, args.warmup, args.steps)
        print(name, json.dumps({k: v for k, v in rows[name].items() if k != "params"}), flush=True)
    bide, dan = rows.values()
    result = {"machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "threads": args.threads,
                          "torch": torch.__version__}, "pairs_in_data": args.pairs, "systems": rows,
              "dan_over_bide": dan["pairs_per_s"] / bide["pairs_per_s"]}
    (out / "bide_training.json").write_text(json.dumps(result, indent=1) + "\n")
    md = [f"# Dual-encoder training speed ({result['machine']['cpu']}, {args.threads} threads)", "",
          f"{args.steps} steps after {args.warmup} warm-up steps, on {args.pairs:,} real Tatoeba en-de pairs; "
          "constant learning rate.", "",
          "| network | parameters | batch | pairs/s | time per 1,000 steps |", "|---|---:|---:|---:|---:|"]
    for name, r in rows.items():
        md.append(f"| {name} | {r['parameters']:,} | {r['batch_size']} | {r['pairs_per_s']:,.1f} | "
                  f"{1000 * r['seconds'] / r['steps'] / 60:,.1f} min |")
    md += ["", f"The DAN trains {result['dan_over_bide']:,.1f}x as many pairs per second as Yang et al.'s transformer."]
    (out / "bide_training.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
