"""Encoder throughput: ``encode()`` beside a bare torch forward pass of the same network, training
throughput, and peak RSS while embedding a file larger than the RAM budget.

Encoders (trained ones come from the demo: run ``make demo`` first):
  * dual DAN, demo size           results/demo/encoder
  * dual DAN, large (512/1024)     untrained (speed does not depend on the weights)
  * LASER-style, CPU demo size    results/demo/encoders/laser-cpu
  * LASER-style, paper size       trained for one update here (512/512/2048), BPE 8k

The bare forward runs the same network on the same batches, tokenised and padded beforehand,
so ``ours / bare`` is the cost of our tokenisation, batching and normalisation.

    .venv/bin/python bench/bench_encoders.py [--sentences 20000] [--threads 2]
Writes bench/out/encoders.json and bench/out/encoders.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from marginmine.encoders import dual, dual_model, laser, laser_common  # noqa: E402
from marginmine.encoders.base import ParallelData, load_encoder, read_manifest  # noqa: E402
from marginmine.io.text import read_lines  # noqa: E402
from measure import best_of, measure_tree  # noqa: E402


def sentences(data: Path, n: int) -> list[str]:
    """A mix of short (Tatoeba) and long (news) real German sentences."""
    news = [s for y in (2012, 2013, 2014) for s in read_lines(data / f"wmt-newstest-ende/newstest{y}.de")]
    tat = read_lines(data / "tatoeba-manythings-deu-eng-2018/train.nooverlap.de")
    rng = np.random.default_rng(0)
    mix = [news[i] for i in rng.choice(len(news), n // 2)] + [tat[i] for i in rng.choice(len(tat), n - n // 2)]
    return mix


def dual_bare(enc: dual.DualEncoder, sents: list[str]) -> Callable[[], Any]:
    flat, lengths = dual_model.tokenize(enc.sp, sents, enc.max_len)
    order = np.argsort(lengths, kind="stable")
    starts = dual_model.row_starts(lengths)
    batches = []
    for part in dual_model.length_batches(lengths[order], enc.batch_size, enc.max_tokens):
        sub, sub_len = dual_model.gather(flat, starts, lengths, order[part])
        batches.append(enc.model.inputs(sub, sub_len))

    def run() -> None:
        with torch.inference_mode():
            for inputs in batches:
                enc.model(*inputs)
    return run


def laser_bare(enc: laser.LaserEncoder, sents: list[str]) -> Callable[[], Any]:
    batches = [(batch, lens) for _, batch, lens in enc.batches(sents)]

    def run() -> None:
        with torch.inference_mode():
            for batch, lens in batches:
                enc.encoder(batch, lens, "encode")
    return run


def untrained_dual(out: Path, data: list[ParallelData], params: dict[str, Any]) -> Path:
    if not (out / "encoder.json").exists():
        dual.train(data, out, {**params, "max_steps": 0, "vocab_size": 8000})
    return out


def one_update_laser(out: Path, data: list[ParallelData]) -> Path:
    if not (out / "encoder.json").exists():
        laser.train(data, out, {**laser_common.PAPER_PARAMS, "bpe_vocab": 8000, "max_update": 1, "max_epoch": 1})
    return out


def training_rate(directory: Path) -> dict[str, Any]:
    info = read_manifest(directory, verify=False).get("info", {})
    if "pairs_seen" in info and info.get("minutes"):
        return {"pairs_per_s": info["pairs_seen"] / (60 * info["minutes"]), "minutes": info["minutes"]}
    if info.get("train_wps"):
        return {"words_per_s": info["train_wps"], "seconds": info.get("train_seconds_total")}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rss-sentences", type=int, default=2_500_000, help="size of the larger-than-budget file")
    ap.add_argument("--ram-budget-mib", type=int, default=1024)
    ap.add_argument("--data-dir", default=os.environ.get("MARGINMINE_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--results", default=str(REPO / "results" / "demo"))
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data_dir, res, out = Path(args.data_dir), Path(args.results), Path(args.out)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    sents = sentences(data_dir, args.sentences)

    tiny = work / "tiny"
    tiny.mkdir(exist_ok=True)
    en = read_lines(data_dir / "tatoeba-manythings-deu-eng-2018/train.nooverlap.en")[:3000]
    de = read_lines(data_dir / "tatoeba-manythings-deu-eng-2018/train.nooverlap.de")[:3000]
    (tiny / "t.en").write_text("\n".join(en) + "\n")
    (tiny / "t.de").write_text("\n".join(de) + "\n")
    tiny_data = [ParallelData("en", "de", tiny / "t.en", tiny / "t.de")]

    encoders = {
        "dual DAN (demo: 320)": res / "encoder",
        "dual DAN (large: 512/1024)": untrained_dual(work / "dan-large", tiny_data,
                                                       {"dim": 512, "emb_dim": 512, "hidden": 1024}),
        "LASER-style (CPU demo: 256/256/512)": res / "encoders" / "laser-cpu",
        "LASER-style (paper: 512/512/2048)": one_update_laser(work / "laser-paper", tiny_data),
    }
    rows = []
    for name, d in encoders.items():
        if not (d / "encoder.json").exists():
            print(f"skip {name}: {d} not trained (run make demo)", flush=True)
            continue
        enc = load_encoder(d)
        bare = dual_bare(enc, sents) if enc.kind == "dual" else laser_bare(enc, sents)
        enc.encode(sents[:200], "de")  # warm-up
        t_ours = best_of(lambda: enc.encode(sents, "de"))
        t_bare = best_of(bare)
        row = {"encoder": name, "dir": str(d), "dim": enc.dim, "sentences": len(sents),
               "ours_sent_per_s": len(sents) / t_ours, "bare_forward_sent_per_s": len(sents) / t_bare,
               "overhead_ratio": t_ours / t_bare, "training": training_rate(d)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    # embedding a file larger than the RAM budget (default encoder, through the CLI)
    big = work / "big.de"
    if not big.exists() or sum(1 for _ in open(big, encoding="utf-8")) != args.rss_sentences:
        pool = read_lines(data_dir / "tatoeba-manythings-deu-eng-2018/train.nooverlap.de")
        with open(big, "w", encoding="utf-8") as fh:
            for i in range(args.rss_sentences):
                fh.write(pool[i % len(pool)] + "\n")
    npy = work / "big.de.npy"
    npy.unlink(missing_ok=True)
    wall, peak, rc = measure_tree([sys.executable, "-m", "marginmine.cli.main", "-q", "embed", "--encoder",
                                   str(res / "encoder"), "--lang", "de", "--input", str(big), "--output", str(npy),
                                   "--threads", str(args.threads)])
    rss = {"sentences": args.rss_sentences, "output_mib": npy.stat().st_size / 2**20 if npy.exists() else None,
           "ram_budget_mib": args.ram_budget_mib, "peak_rss_mib": peak, "seconds": wall,
           "sent_per_s": args.rss_sentences / wall, "exit": rc}
    npy.unlink(missing_ok=True)
    print(json.dumps(rss), flush=True)

    result = {"machine": {"cpus": os.cpu_count(), "threads": args.threads, "python": platform.python_version(),
                          "torch": torch.__version__}, "encoders": rows, "embed_large_file": rss}
    (out / "encoders.json").write_text(json.dumps(result, indent=1) + "\n")
    md = [f"# Encoder benchmark ({args.threads} threads, {len(sents):,} real German sentences: "
          "half news, half Tatoeba)",
          "", "| encoder | dim | ours (sent/s) | bare torch forward (sent/s) | ours / bare time | training |",
          "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        tr = r["training"]
        tr_s = (f"{tr['pairs_per_s']:,.0f} pairs/s" if "pairs_per_s" in tr else
                f"{tr['words_per_s']:,.0f} words/s" if "words_per_s" in tr else "-")
        md.append(f"| {r['encoder']} | {r['dim']} | {r['ours_sent_per_s']:,.0f} | {r['bare_forward_sent_per_s']:,.0f} "
                  f"| {r['overhead_ratio']:.2f} | {tr_s} |")
    md += ["", f"Embedding {rss['sentences']:,} sentences with the default encoder through `marginmine embed` "
               f"(float16 output {rss['output_mib'] or 0:,.0f} MiB, RAM budget {rss['ram_budget_mib']:,} MiB): "
               f"peak RSS {rss['peak_rss_mib']:,.0f} MiB, {rss['sent_per_s']:,.0f} sentences/s, exit {rss['exit']}."]
    (out / "encoders.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
