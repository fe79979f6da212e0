"""Preprocessing throughput and memory on >= 1M crawl-like real-text pairs, beside its libraries alone.

Corpus (deterministic, from the shared real data): real aligned pairs (Tatoeba, Multi30k,
newstest2008-2011, WMT18 filtering test sets), the same sentences recombined into unique
misaligned pairs (what a crawl mostly is: every sentence recurs, about 5 times a side in 1M pairs)
and 15% exact duplicates - shuffled, n pairs.

Measured in one run, same machine, same sentences:
  * ours end to end: ``marginmine preprocess --workers W`` (subprocess; wall time, peak RSS of the
    tree, how many sentences' filter facts it computed)
  * sacremoses' Moses tokenisation alone and fastText language id alone, both sides of a sample of
    the pairs, in W processes (the cores ours has) and in one; ours / sacremoses alone
  * our Moses tokenizer (FastMoses) alone on the same sentences, compared token for token with
    sacremoses (count of sentences and of differences)
  * pass 1 alone (read + normalise + hash for dedup), reading alone
  * the machine: CPU model and vector ISA, and the CPU time other processes used while each part
    ran (a shared machine measures the sharing)

    .venv/bin/python bench/bench_preprocess.py --pairs 1000000 --workers 2
Writes bench/out/preprocess.json and bench/out/preprocess.md. With ``--corpus FILE`` (a TSV, .gz
allowed, e.g. the scale corpus, whose sentences repeat far less) its first ``--pairs`` lines are the
corpus instead, and the outputs are bench/out/preprocess_<file stem>.{json,md}.

    .venv/bin/python bench/bench_preprocess.py --moses-identity
compares FastMoses with sacremoses on every sentence of the data directory's en and de files
listed in MOSES_SOURCES (more than 400,000) and writes bench/out/moses_identity.{json,md}; exit
status 1 if one sentence differs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import platform
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any, Callable

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from marginmine.io.text import ReadStats  # noqa: E402
from marginmine.preprocess.langid import language_probs  # noqa: E402
from marginmine.preprocess.normalize import pair_key  # noqa: E402
from marginmine.preprocess.pipeline import InputSpec  # noqa: E402
from marginmine.preprocess.tokens import moses_tokenize, tokenize  # noqa: E402
from measure import measure_tree  # noqa: E402

#: (language, file in the data directory, TSV column or None) of --moses-identity; every line a sentence
MOSES_SOURCES = [
    ("en", "tatoeba-manythings-deu-eng-2018/train.nooverlap.en", None),
    ("de", "tatoeba-manythings-deu-eng-2018/train.nooverlap.de", None),
    ("de", "mono-de-news/10kGNAD.test.sentences.de", None),
    ("en", "mono-en-wiki-web/wikitext2.valid+test.sentences.detok.en", None),
    ("en", "mono-en-wiki-web/hplt-en_100+101.en-lines.tsv", 2),
    ("en", "multi30k/train.en.gz", None),
    ("de", "multi30k/train.de.gz", None),
    *[(lang, f"wmt18-pcf-testsets-deen/{name}.{lang}", None)
      for name in ("Acquis", "EMEA", "KDE4", "globalvoices-2017", "iwslt2017-tst2017") for lang in ("en", "de")],
    *[(lang, f"wmt-newstest2008-2011-multiparallel/{name}.{lang}", None)
      for name in ("news-test2008", "newstest2009", "newstest2010", "newstest2011") for lang in ("en", "de")],
    ("en", "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv", 2),
    ("de", "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv", 3),
]


def lines_of(p: Path) -> list[str]:
    op = gzip.open if p.suffix == ".gz" else open
    with op(p, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh]


def real_pairs(data: Path) -> list[tuple[str, str]]:
    sets = [("tatoeba-manythings-deu-eng-2018/train.nooverlap.en",
             "tatoeba-manythings-deu-eng-2018/train.nooverlap.de"),
            ("multi30k/train.en.gz", "multi30k/train.de.gz")]
    sets += [(f"wmt-newstest2008-2011-multiparallel/{s}.en", f"wmt-newstest2008-2011-multiparallel/{s}.de")
             for s in ("news-test2008", "newstest2009", "newstest2010", "newstest2011")]
    sets += [(f"wmt18-pcf-testsets-deen/{s}.en", f"wmt18-pcf-testsets-deen/{s}.de")
             for s in ("Acquis", "EMEA", "KDE4", "globalvoices-2017", "iwslt2017-tst2017")]
    out: list[tuple[str, str]] = []
    for en, de in sets:
        out += [(a, b) for a, b in zip(lines_of(data / en), lines_of(data / de)) if a.strip() and b.strip()]
    return out


def copy_corpus(source: Path, n: int, path: Path) -> dict[str, Any]:
    """The first ``n`` lines of ``source`` (columns 0 and 1) written to ``path``; counts."""
    from marginmine.io.text import open_binary

    src, tgt, done = set(), set(), 0
    with open_binary(str(source)) as fh, open(path, "w", encoding="utf-8") as out:
        for raw in fh:
            if done == n:
                break
            cols = raw.decode("utf-8", errors="replace").rstrip("\r\n").split("\t")
            if len(cols) < 2:
                raise SystemExit(f"{source}: line {done + 1} has no second column (give a TSV: source, target)")
            out.write(f"{cols[0]}\t{cols[1]}\n")
            src.add(cols[0])
            tgt.add(cols[1])
            done += 1
    return {"from": str(source), "pairs": done, "distinct_src": len(src), "distinct_tgt": len(tgt)}


def build_corpus(data: Path, n: int, path: Path, seed: int = 1) -> dict[str, int]:
    rng = random.Random(seed)
    pairs = real_pairs(data)
    n_dup = int(0.15 * n)
    n_real = min(len(pairs), (n - n_dup) // 2)
    chosen = rng.sample(pairs, n_real)
    srcs, tgts = [p[0] for p in pairs], [p[1] for p in pairs]
    mixed = [(rng.choice(srcs), rng.choice(tgts)) for _ in range(n - n_dup - n_real)]
    rows = chosen + mixed
    rows += [rng.choice(rows) for _ in range(n_dup)]
    rng.shuffle(rows)
    with open(path, "w", encoding="utf-8") as fh:
        for a, b in rows:
            fh.write(f"{a}\t{b}\n")
    return {"pairs": len(rows), "real_aligned": n_real, "recombined": len(mixed), "duplicates": n_dup,
            "distinct_src": len({a for a, _ in rows}), "distinct_tgt": len({b for _, b in rows})}


# --- the machine and who else uses it ---------------------------------------------------------

def machine() -> dict[str, Any]:
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line + " "
    except OSError:
        pass
    model = model or platform.processor() or "unknown CPU"
    isa = "avx512f" if " avx512f " in flags else ("avx2" if " avx2 " in flags else "neither avx2 nor avx512f")
    return {"cpu_model": model, "vector_isa": isa, "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


class Load:
    """CPU seconds the whole machine and this process's tree spent between start and stop; the
    difference is what other processes used meanwhile."""

    def __enter__(self) -> "Load":
        self.t0 = time.perf_counter()
        self.busy0 = self._busy()
        self.own0 = self._own()
        self.loadavg0 = os.getloadavg()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.own = self._own() - self.own0
        self.others = max(0.0, self._busy() - self.busy0 - self.own)
        self.loadavg1 = os.getloadavg()[0]

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0)

    @staticmethod
    def _own() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def as_dict(self) -> dict[str, float]:
        cores = os.cpu_count() or 1
        return {"wall_s": self.wall, "own_cpu_s": self.own, "others_cpu_s": self.others,
                "others_share_of_machine": self.others / (self.wall * cores), "loadavg_1min_before": self.loadavg0,
                "loadavg_1min_after": self.loadavg1}


# --- the libraries alone ----------------------------------------------------------------------

def _moses_part(pairs: list[tuple[str, str]]) -> int:
    return sum(len(moses_tokenize(s, "en")) + len(moses_tokenize(t, "de")) for s, t in pairs)


def _langid_part(pairs: list[tuple[str, str]]) -> int:
    return len(language_probs([s for s, _ in pairs])) + len(language_probs([t for _, t in pairs]))


def in_processes(fn: Callable[[list[tuple[str, str]]], int], pairs: list[tuple[str, str]], n: int) -> Load:
    """``fn`` over ``pairs`` split into ``n`` processes, forked after ``fn`` built its tokenizers or
    loaded its model here (on a few pairs), so no process times that."""
    fn(pairs[:50])
    parts = [pairs[i::n] for i in range(n)]
    with mp.get_context("fork").Pool(n) as pool:
        with Load() as load:
            pool.map(fn, parts, chunksize=1)
    return load


def moses_identity(by_lang: dict[str, list[str]]) -> dict[str, Any]:
    """sacremoses and FastMoses on the same sentences, one process: speed and every difference."""
    out: dict[str, Any] = {"sentences": 0, "distinct_sentences": 0, "differences": [], "per_lang": {}}
    for lang, sentences in by_lang.items():
        for s in sentences[:20]:  # build and warm both tokenizers outside the timing
            moses_tokenize(s, lang), tokenize(s, lang)
        t0 = time.perf_counter()
        ref = [moses_tokenize(s, lang) for s in sentences]
        t1 = time.perf_counter()
        ours = [tokenize(s, lang) for s in sentences]
        t2 = time.perf_counter()
        diff = [{"lang": lang, "sentence": s, "sacremoses": a, "ours": b}
                for s, a, b in zip(sentences, ref, ours) if a != b]
        out["per_lang"][lang] = {"sentences": len(sentences), "distinct": len(set(sentences)),
                                 "sacremoses_sent_per_s": len(sentences) / (t1 - t0),
                                 "ours_sent_per_s": len(sentences) / (t2 - t1), "differences": len(diff)}
        out["sentences"] += len(sentences)
        out["distinct_sentences"] += len(set(sentences))
        out["differences"] += diff
    return out


def identity_main(data: Path, out: Path) -> int:
    by_lang: dict[str, list[str]] = {"en": [], "de": []}
    for lang, name, column in MOSES_SOURCES:
        lines = lines_of(data / name)
        by_lang[lang] += [line.split("\t")[column] for line in lines] if column is not None else lines
    res = moses_identity(by_lang)
    res["machine"] = machine()
    res["sources"] = [name for _, name, _ in MOSES_SOURCES]
    out.mkdir(parents=True, exist_ok=True)
    (out / "moses_identity.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    md = ["# FastMoses against sacremoses", "",
          f"{res['sentences']:,} sentences ({res['distinct_sentences']:,} distinct per language, summed) of "
          f"{len(MOSES_SOURCES)} files of the data directory: **{len(res['differences'])} differ**.", "",
          "| language | sentences | distinct | differences | sacremoses (sent/s, 1 core) | ours (sent/s, 1 core) |",
          "|---|---:|---:|---:|---:|---:|"]
    md += [f"| {lang} | {r['sentences']:,} | {r['distinct']:,} | {r['differences']} | "
           f"{r['sacremoses_sent_per_s']:,.0f} | {r['ours_sent_per_s']:,.0f} |" for lang, r in res["per_lang"].items()]
    md += ["", f"Machine: {res['machine']['cpu_model']} ({res['machine']['vector_isa']}), "
           f"{res['machine']['cpus']} CPUs."]
    (out / "moses_identity.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    for d in res["differences"][:10]:
        print(d, file=sys.stderr)
    return 1 if res["differences"] else 0


def timed(fn, *args) -> tuple[float, object]:  # noqa: ANN001
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache-mb", type=int, default=None, help="passed to marginmine preprocess (default: its own)")
    ap.add_argument("--langid-model", default=None,
                    help="passed to marginmine preprocess (fasttext, heliport or a model file; outputs named by it)")
    ap.add_argument("--sample", type=int, default=100_000, help="pairs for the library-alone timings")
    ap.add_argument("--moses-identity", action="store_true",
                    help="only compare FastMoses with sacremoses on every sentence of MOSES_SOURCES")
    ap.add_argument("--corpus", default=None, help="use the first --pairs lines of this TSV (src, tgt columns 0, 1)")
    ap.add_argument("--data-dir", default=os.environ.get("MARGINMINE_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = ap.parse_args()
    out = Path(args.out)
    if args.moses_identity:
        return identity_main(Path(args.data_dir), out)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.tsv"
    tag = ""
    if args.corpus:
        tag = "_" + Path(args.corpus).name.split(".")[0]
        comp = copy_corpus(Path(args.corpus), args.pairs, corpus)
        args.pairs = comp["pairs"]
    else:
        comp = build_corpus(Path(args.data_dir), args.pairs, corpus)
    print(f"corpus: {comp}", flush=True)
    mach = machine()
    if args.langid_model:
        tag += "_" + Path(args.langid_model).name.split(".")[0]

    cmd = [sys.executable, "-m", "marginmine.cli.main", "preprocess", "--src-lang", "en", "--tgt-lang", "de",
           "--input", str(corpus), "--output", str(work / "kept.tsv"), "--rejects", str(work / "rejects.tsv"),
           "--ledger", str(work / "ledger.json"), "--workers", str(args.workers)]
    if args.cache_mb is not None:
        cmd += ["--cache-mb", str(args.cache_mb)]
    if args.langid_model:
        cmd += ["--langid-model", args.langid_model]
    err: list[str] = []
    with Load() as e2e_load:
        wall, peak_mb, rc = measure_tree(cmd, stderr_lines=err)
    if rc:
        return rc
    facts_line = next((line.split("INFO: ", 1)[-1] for line in err if "sentence facts:" in line), "")
    ledger = json.loads((work / "ledger.json").read_text())
    e2e = args.pairs / wall
    print(f"end to end: {wall:.1f} s, {e2e:.0f} pairs/s, peak RSS {peak_mb:.0f} MiB; {facts_line}", flush=True)

    # the libraries alone, on a sample of the same pairs
    sample = []
    for i, p in enumerate(InputSpec((str(corpus),)).open(10_000, ReadStats())):
        if i >= args.sample:
            break
        sample.append((p.src, p.tgt))
    n = len(sample)
    moses_w = in_processes(_moses_part, sample, args.workers)
    langid_w = in_processes(_langid_part, sample, args.workers)
    with Load() as ident_load:
        ident = moses_identity({"en": [s for s, _ in sample], "de": [t for _, t in sample]})
    with Load() as langid_1:
        _langid_part(sample)
    t_hash, _ = timed(lambda: [pair_key(s, t) for s, t in sample])
    t_read, _ = timed(lambda: sum(1 for _ in InputSpec((str(corpus),)).open(10_000, ReadStats())))

    def per_pair_1core(lang_rates: dict[str, Any], key: str) -> float:  # both sides of a pair, one core
        return 1 / sum(1 / lang_rates[lang][key] for lang in ("en", "de"))

    libs = {
        f"sacremoses_pairs_per_s_{args.workers}proc": n / moses_w.wall,
        f"langid_pairs_per_s_{args.workers}proc": n / langid_w.wall,
        "sacremoses_pairs_per_s_1core": per_pair_1core(ident["per_lang"], "sacremoses_sent_per_s"),
        "fastmoses_pairs_per_s_1core": per_pair_1core(ident["per_lang"], "ours_sent_per_s"),
        "langid_pairs_per_s_1core": n / langid_1.wall,
        "dedup_hash_pairs_per_s_1core": n / t_hash,
        "read_pairs_per_s_1core": args.pairs / t_read,
    }
    sacre_w = libs[f"sacremoses_pairs_per_s_{args.workers}proc"]
    result = {
        "machine": mach,
        "corpus": comp,
        "workers": args.workers,
        "end_to_end": {"seconds": wall, "pairs_per_s": e2e, "peak_rss_mib": peak_mb, "sentence_facts": facts_line,
                       "kept": ledger["kept"], "steps": {s["step"]: s["removed"] for s in ledger["steps"]},
                       "load": e2e_load.as_dict()},
        "libraries_alone": libs,
        "library_loads": {"sacremoses": moses_w.as_dict(), "langid": langid_w.as_dict(),
                          "moses_identity": ident_load.as_dict(), "langid_1core": langid_1.as_dict()},
        "ours_vs_sacremoses_alone": e2e / sacre_w,
        "moses_identity": {"sentences": ident["sentences"], "distinct_sentences": ident["distinct_sentences"],
                           "differences": ident["differences"][:100], "n_differences": len(ident["differences"])},
        "goal_pairs_per_s": 20_000,
    }
    (out / f"preprocess{tag}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    others = e2e_load.others / (e2e_load.wall * (os.cpu_count() or 1))
    w = args.workers
    md = [
        f"# Preprocessing benchmark ({args.pairs:,} pairs, {w} workers, {os.cpu_count()} CPUs)",
        "",
        f"Machine: {mach['cpu_model']} ({mach['vector_isa']}), {mach['cpus']} CPUs. While ours ran, other "
        f"processes used {e2e_load.others:.0f} CPU-seconds ({100 * others:.0f}% of the machine; 1-min load "
        f"average {e2e_load.loadavg0:.1f} before, {e2e_load.loadavg1:.1f} after)"
        f"{'' if others < 0.05 else ': the machine was shared, so these numbers measure the sharing too'}.",
        "",
        (f"Corpus: the first {comp['pairs']:,} pairs of `{comp['from']}`" if "from" in comp else
         f"Corpus: {comp['real_aligned']:,} real aligned pairs, {comp['recombined']:,} recombined real sentences, "
         f"{comp['duplicates']:,} exact duplicates")
        + f"; {comp['distinct_src']:,} distinct English and {comp['distinct_tgt']:,} distinct German sentences.",
        "",
        "| measurement | pairs/s | note |",
        "|---|---:|---|",
        f"| **ours** end to end, `marginmine preprocess --workers {w}"
        f"{' --langid-model ' + args.langid_model if args.langid_model else ''}` | {e2e:,.0f} | "
        f"{wall:.0f} s, peak RSS {peak_mb:,.0f} MiB, kept {ledger['kept']:,}; {facts_line} |",
        f"| sacremoses Moses tokenisation alone, {w} processes | {sacre_w:,.0f} | both sides of {n:,} pairs |",
        f"| fastText language id alone, {w} processes | {libs[f'langid_pairs_per_s_{w}proc']:,.0f} | both sides |",
        f"| **ours / sacremoses alone** | {e2e / sacre_w:.2f} | |",
        f"| sacremoses alone, 1 core | {libs['sacremoses_pairs_per_s_1core']:,.0f} | |",
        f"| our Moses tokenizer (FastMoses) alone, 1 core | {libs['fastmoses_pairs_per_s_1core']:,.0f} | "
        f"{ident['sentences']:,} sentences ({ident['distinct_sentences']:,} distinct per language): "
        f"{len(ident['differences'])} differ from sacremoses |",
        f"| fastText language id alone, 1 core | {libs['langid_pairs_per_s_1core']:,.0f} | |",
        f"| dedup key (normalise + BLAKE2b, 1 core) | {libs['dedup_hash_pairs_per_s_1core']:,.0f} | |",
        f"| reading + defect checks (1 core) | {libs['read_pairs_per_s_1core']:,.0f} | |",
        "",
        f"Goal: 20,000 pairs/s end to end -> {'met' if e2e >= 20_000 else 'not met'} ({e2e / 20_000:.2f}x).",
    ]
    (out / f"preprocess{tag}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 1 if ident["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
