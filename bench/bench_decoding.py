"""Decoding: our fairseq-generate path (``marginmine.evaluate.translate_files``, one start-up for all
sets) against CTranslate2 on the same trained demo system, each measured end to end (process
start-up, model load or conversion, tokenisation, beam search, detokenisation) in the same run.

CTranslate2 is not a dependency of marginmine: install it beside the venv for this benchmark only,
    .venv/bin/pip install --no-deps --target /tmp/ct2 ctranslate2==4.8.5
    PYTHONPATH=/tmp/ct2 .venv/bin/python bench/bench_decoding.py [--system work/demo/nmt/ratio.20k/seed1]
The length limit is fairseq's ``1.5 * source pieces + 10`` in both (CTranslate2 applies it per batch
of length-sorted sentences, the closest it offers). Writes bench/out/decoding.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from bench_nmt_curve import cpu_model  # noqa: E402
from marginmine.evaluate import score_bleu  # noqa: E402
from marginmine.nmt import load_manifest  # noqa: E402
from marginmine.textio import read_lines  # noqa: E402

SETS = ("corpus/heldout.test", "corpus/heldout.dev", "eval/tatoeba", "eval/newstest2014")

CT2_SCRIPT = r'''
import json, math, sys, time
t0 = time.monotonic()
import ctranslate2, sentencepiece as spm
spec = json.loads(sys.argv[1])
sp = spm.SentencePieceProcessor(model_file=spec["spm"])
tr = ctranslate2.Translator(spec["model"], device="cpu", intra_threads=spec["threads"], inter_threads=1)
for src, out in spec["jobs"]:
    lines = [l.rstrip("\n") for l in open(src, encoding="utf-8")]
    pieces = [sp.encode(l, out_type=str)[: spec["max_src"]] for l in lines]
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    hyps = [""] * len(lines)
    for b in range(0, len(order), spec["batch"]):
        idx = [i for i in order[b:b + spec["batch"]] if pieces[i]]
        if not idx:
            continue
        limit = math.ceil(1.5 * max(len(pieces[i]) for i in idx) + 10)
        res = tr.translate_batch([pieces[i] + ["</s>"] for i in idx], beam_size=spec["beam"],
                                 max_decoding_length=limit, max_batch_size=spec["batch"])
        for i, r in zip(idx, res):
            hyps[i] = sp.decode_pieces([t for t in r.hypotheses[0] if t != "</s>"])
    with open(out, "w", encoding="utf-8") as fh:
        fh.writelines(h + "\n" for h in hyps)
print(json.dumps({"inner_seconds": time.monotonic() - t0}))
'''


def run_ours(system: Path, jobs: list[tuple[str, str]], threads: int, beam: int) -> float:
    code = ("import sys, json; sys.path.insert(0, %r); from marginmine.evaluate import translate_files; "
            "translate_files(%r, json.loads(sys.argv[1]), beam=%d, threads=%d)" % (str(REPO / "src"), str(system), beam,
                                                                                   threads))
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", code, json.dumps(jobs)], check=True, capture_output=True)
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", default=str(REPO / "work/demo/nmt/ratio.20k/seed1"))
    ap.add_argument("--work", default=str(REPO / "work/demo"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()
    system, work, out = Path(args.system), Path(args.work), Path(args.out)
    manifest = load_manifest(system, verify=True)  # our own checkpoint, hash-checked, before anything loads it
    data = Path(os.environ.get("MARGINMINE_DATA_DIR", REPO.parent / "shared" / "data"))
    sets = [(name, work / f"{name}.en", work / f"{name}.de") for name in SETS]
    sets.append(("multi30k-flickr2016", data / "multi30k/test_2016_flickr.en.gz", data / "multi30k/test_2016_flickr.de.gz"))
    missing = [str(p) for _, s, r in sets for p in (s, r) if not p.is_file()]
    if missing:
        print(f"bench_decoding: missing {missing} (run `make demo` first)", file=sys.stderr)
        return 2
    n = sum(len(read_lines(s)) for _, s, _ in sets)
    tmp = Path(tempfile.mkdtemp(prefix="bench_decoding.", dir=out))
    plain = []  # both paths read the same plain-text sources
    for name, src, ref in sets:
        p = tmp / "src" / f"{Path(name).name}.en"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(x + "\n" for x in read_lines(src)), encoding="utf-8")
        plain.append((name, p, ref))
    sets = plain
    ours_jobs = [(str(s), str(tmp / "ours" / f"{Path(name).name}.de")) for name, s, _ in sets]
    ours_s = run_ours(system, ours_jobs, args.threads, args.beam)

    import ctranslate2  # noqa: F401 - fails here, with the install hint above, when missing
    from ctranslate2.converters import FairseqConverter

    t0 = time.monotonic()
    dicts = tmp / "dicts"
    dicts.mkdir()
    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    for key, lang in (("src_dict", src), ("tgt_dict", tgt)):
        (dicts / f"dict.{lang}.txt").write_bytes((system / manifest["files"][key]).read_bytes())
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # our own checkpoint, SHA-256 checked above
    FairseqConverter(str(system / manifest["files"]["model"]), str(dicts), source_lang=src,
                     target_lang=tgt).convert(str(tmp / "ct2"), force=True)
    del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
    convert_s = time.monotonic() - t0
    ct2_jobs = [(str(s), str(tmp / f"ct2.{Path(name).name}.de")) for name, s, _ in sets]
    spec = {"spm": str(system / manifest["files"]["spm"]), "model": str(tmp / "ct2"), "threads": args.threads,
            "beam": args.beam, "batch": 64, "max_src": int(manifest["params"]["max_positions"]) - 1, "jobs": ct2_jobs}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", CT2_SCRIPT, json.dumps(spec)], check=True, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    ct2_s = time.monotonic() - t0
    rows = []
    for (name, _, ref), (_, o), (_, c) in zip(sets, ours_jobs, ct2_jobs):
        rows.append({"set": name, "lines": len(read_lines(ref)), "ours_bleu": round(score_bleu(o, ref, lang=tgt)["bleu"], 2),
                     "ct2_bleu": round(score_bleu(c, ref, lang=tgt)["bleu"], 2)})
    res = {"cpu": cpu_model(), "threads": args.threads, "beam": args.beam, "system": str(system), "sentences": n,
           "ours_seconds": round(ours_s, 1), "ct2_convert_seconds": round(convert_s, 1),
           "ct2_translate_seconds": round(ct2_s, 1), "ct2_inner_seconds": json.loads(r.stdout)["inner_seconds"],
           "ours_sentences_per_s": round(n / ours_s, 1), "ct2_sentences_per_s_with_conversion":
           round(n / (ct2_s + convert_s), 1), "speedup_with_conversion": round(ours_s / (ct2_s + convert_s), 2),
           "speedup_translate_only": round(ours_s / ct2_s, 2), "sets": rows}
    (out / "decoding.json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"# Decoding: fairseq-generate (ours) vs CTranslate2 ({res['cpu']}, {args.threads} threads, beam {args.beam})",
          "", f"{n:,} sentences of the demo's test sets, one trained system ({system}); times include process "
          "start-up and model loading.", "",
          "| path | seconds | sentences/s | ours / it (time ratio) |", "|---|---:|---:|---:|",
          f"| ours: translate_files, one fairseq-generate call | {ours_s:.1f} | {n / ours_s:.0f} | 1.00 |",
          f"| CTranslate2: convert + translate | {convert_s + ct2_s:.1f} | {n / (convert_s + ct2_s):.0f} | "
          f"{res['speedup_with_conversion']:.2f} |",
          f"| CTranslate2: translate only (model converted) | {ct2_s:.1f} | {n / ct2_s:.0f} | "
          f"{res['speedup_translate_only']:.2f} |", "",
          "| set | lines | BLEU ours | BLEU CTranslate2 |", "|---|---:|---:|---:|"]
    md += [f"| {r['set']} | {r['lines']:,} | {r['ours_bleu']:.2f} | {r['ct2_bleu']:.2f} |" for r in rows]
    (out / "decoding.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
