"""Decoding: the two decoders of ``marginmine.nmt.evaluate.translate_files`` (one start-up for all
sets) on the same trained demo system, each measured end to end in the same run: fairseq-generate,
and CTranslate2 including the checkpoint's conversion (the system is copied to a temporary
directory, so nothing is converted in advance). The decision this measured: CTranslate2 became the
default decoder (the measured speed-up: bench/RESULTS.md).

    .venv/bin/python bench/bench_decoding.py [--system work/demo/nmt/use-ratio.20k/seed1]
The length limit is fairseq's ``1.5 * source pieces + 10`` per sentence in both. Writes
bench/out/decoding.{json,md}.
"""

from __future__ import annotations

import argparse
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
from marginmine.io.text import read_lines  # noqa: E402
from marginmine.nmt.evaluate import score_bleu  # noqa: E402
from marginmine.nmt.train import load_manifest  # noqa: E402

SETS = ("corpus/heldout.test", "corpus/heldout.dev", "eval/tatoeba", "eval/newstest2014")

def run_ours(system: Path, jobs: list[tuple[str, str]], threads: int, beam: int, decoder: str) -> float:
    code = ("import sys, json; sys.path.insert(0, %r); from marginmine.nmt.evaluate import translate_files; "
            "translate_files(%r, json.loads(sys.argv[1]), beam=%d, threads=%d, decoder=%r)"
            % (str(REPO / "src"), str(system), beam, threads, decoder))
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", code, json.dumps(jobs)], check=True, capture_output=True)
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", default=str(REPO / "work/demo/nmt/use-ratio.20k/seed1"))
    ap.add_argument("--work", default=str(REPO / "work/demo"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()
    system, work, out = Path(args.system), Path(args.work), Path(args.out)
    manifest = load_manifest(system, verify=True)  # our own checkpoint, hash-checked, before anything loads it
    data = Path(os.environ.get("MARGINMINE_DATA_DIR", REPO.parent / "shared" / "data"))
    sets = [(name, work / f"{name}.en", work / f"{name}.de") for name in SETS]
    sets.append(("multi30k-flickr2016", data / "multi30k/test_2016_flickr.en.gz",
                 data / "multi30k/test_2016_flickr.de.gz"))
    missing = [str(p) for _, s, r in sets for p in (s, r) if not p.is_file()]
    if missing:
        print(f"bench_decoding: missing {missing} (run `make demo` first)", file=sys.stderr)
        return 2
    n = sum(len(read_lines(s)) for _, s, _ in sets)
    out.mkdir(parents=True, exist_ok=True)  # bench/out/ is git-ignored: absent from a fresh clone
    tmp = Path(tempfile.mkdtemp(prefix="bench_decoding.", dir=out))
    plain = []  # both paths read the same plain-text sources
    for name, src, ref in sets:
        p = tmp / "src" / f"{Path(name).name}.en"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(x + "\n" for x in read_lines(src)), encoding="utf-8")
        plain.append((name, p, ref))
    sets = plain
    ours_jobs = [(str(s), str(tmp / "ours" / f"{Path(name).name}.de")) for name, s, _ in sets]
    ours_s = run_ours(system, ours_jobs, args.threads, args.beam, "fairseq")
    copy = tmp / "system"  # no CTranslate2 conversion from an earlier run: it is part of the cost
    shutil.copytree(system, copy, ignore=shutil.ignore_patterns("ct2", "checkpoints", "data", "*.log"))
    ct2_jobs = [(str(s), str(tmp / f"ct2.{Path(name).name}.de")) for name, s, _ in sets]
    ct2_s = run_ours(copy, ct2_jobs, args.threads, args.beam, "ctranslate2")
    tgt = manifest["tgt_lang"]
    rows = []
    for (name, _, ref), (_, o), (_, c) in zip(sets, ours_jobs, ct2_jobs):
        rows.append({"set": name, "lines": len(read_lines(ref)),
                     "ours_bleu": round(score_bleu(o, ref, lang=tgt)["bleu"], 2),
                     "ct2_bleu": round(score_bleu(c, ref, lang=tgt)["bleu"], 2)})
    res = {"cpu": cpu_model(), "threads": args.threads, "beam": args.beam, "system": str(system), "sentences": n,
           "fairseq_seconds": round(ours_s, 1), "ct2_seconds_with_conversion": round(ct2_s, 1),
           "fairseq_sentences_per_s": round(n / ours_s, 1), "ct2_sentences_per_s": round(n / ct2_s, 1),
           "speedup": round(ours_s / ct2_s, 2), "sets": rows}
    (out / "decoding.json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"# Decoding: fairseq-generate vs CTranslate2 ({res['cpu']}, {args.threads} threads, beam {args.beam})",
          "", f"{n:,} sentences of the demo's test sets, one trained system ({system}), both through "
          "translate_files; times include process start-up, model loading and (CTranslate2) conversion.", "",
          "| decoder | seconds | sentences/s | fairseq / it (time ratio) |", "|---|---:|---:|---:|",
          f"| fairseq-generate | {ours_s:.1f} | {n / ours_s:.0f} | 1.00 |",
          f"| CTranslate2 (convert + translate) | {ct2_s:.1f} | {n / ct2_s:.0f} | {res['speedup']:.2f} |", "",
          "| set | lines | BLEU fairseq | BLEU CTranslate2 |", "|---|---:|---:|---:|"]
    md += [f"| {r['set']} | {r['lines']:,} | {r['ours_bleu']:.2f} | {r['ct2_bleu']:.2f} |" for r in rows]
    (out / "decoding.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
