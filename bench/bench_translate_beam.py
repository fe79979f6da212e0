"""Translate-then-vote's decoding cost: a translator of the demo (``work/demo/translate/en-de/seed*``,
trained by ``make published``) on 3,000 real corpus sentences, greedy (beam 1, the demo's setting) against
beam 5, each through ``marginmine translate`` end to end (start-up, CTranslate2 conversion of a fresh
copy, decoding) in the same run, one thread; and the BLEU each beam gives on the demo's clean-mix
test, so the speed is weighed against what it costs. The decision this measured: the demo's
translators decode greedily (the corpus' 2 x 90,999 sentences on 2 cores in ~15 minutes instead of
~34, over the issue's 30).

    .venv/bin/python bench/bench_translate_beam.py [--system work/demo/translate/en-de/seed1234]
Writes bench/out/translate_beam.{json,md}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from bench_nmt_curve import cpu_model  # noqa: E402
from marginmine.nmt.evaluate import score_bleu  # noqa: E402
from marginmine.nmt.train import load_manifest  # noqa: E402


def translate(system: Path, src: Path, out: Path, beam: int, threads: int) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "marginmine.cli.main", "translate", "--workdir", str(system), "--src-lang",
                    "en", "--tgt-lang", "de", "--input", str(src), "--output", str(out), "--beam", str(beam),
                    "--threads", str(threads)], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    systems = sorted((REPO / "work/demo/translate/en-de").glob("seed*"))
    ap.add_argument("--system", default=str(systems[0]) if systems else None)
    ap.add_argument("--shard", default=str(REPO / "work/demo/preprocess/kept/shard0001.tsv.gz"))
    ap.add_argument("--work", default=str(REPO / "work/demo"))
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()
    if not args.system or not Path(args.shard).is_file():
        print("bench_translate_beam: no translator or shard (run `make demo` and `make published` first)",
              file=sys.stderr)
        return 2
    system, work, out = Path(args.system), Path(args.work), Path(args.out)
    load_manifest(system, verify=True)  # our own checkpoint, hash-checked, before anything loads it
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench_translate_beam.", dir=out))
    with gzip.open(args.shard, "rt", encoding="utf-8") as fh:
        lines = [next(fh).split("\t")[0] for _ in range(args.lines)]
    src = tmp / "corpus.en"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    rows = []
    for beam in (1, 5):
        copy = tmp / f"system.beam{beam}"  # a fresh copy: the CTranslate2 conversion is part of the cost
        shutil.copytree(system, copy, ignore=shutil.ignore_patterns("ct2", "checkpoints", "data", "*.log"))
        seconds = translate(copy, src, tmp / f"corpus.beam{beam}.de", beam, args.threads)
        test = work / "corpus/heldout.test.en"
        translate(copy, test, tmp / f"test.beam{beam}.de", beam, args.threads)
        bleu = score_bleu(tmp / f"test.beam{beam}.de", work / "corpus/heldout.test.de", lang="de")["bleu"]
        rows.append({"beam": beam, "seconds": round(seconds, 1), "sentences_per_s": round(len(lines) / seconds, 1),
                     "test_bleu": round(bleu, 2)})
    shutil.rmtree(tmp)
    res = {"cpu": cpu_model(), "threads": args.threads, "system": str(system), "sentences": len(lines),
           "rows": rows, "speedup_beam1": round(rows[1]["seconds"] / rows[0]["seconds"], 2)}
    (out / "translate_beam.json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"# Translating the corpus: greedy vs beam 5 ({res['cpu']}, {args.threads} thread)", "",
          f"{len(lines):,} real corpus sentences (en, {args.shard}) translated by {system} through `marginmine "
          "translate`, end to end (start-up, CTranslate2 conversion of a fresh copy, decoding); test BLEU: the "
          "demo's clean-mix test (2,000 lines) with the same beam.", "",
          "| beam | seconds | sentences/s | time / beam 1's | test BLEU |", "|---:|---:|---:|---:|---:|"]
    md += [f"| {r['beam']} | {r['seconds']:.1f} | {r['sentences_per_s']:.1f} | "
           f"{r['seconds'] / rows[0]['seconds']:.2f} | {r['test_bleu']:.2f} |" for r in rows]
    (out / "translate_beam.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
