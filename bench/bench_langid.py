"""The language identifiers `preprocess.langid_model` offers, side by side on real sentences: the
bundled fastText lid.176.ftz and heliport 1.0.1 (a user's fastText file - lid.176.bin, OpenLID,
GlotLID - is not on this offline machine: not measured).

Sentences (../shared/data, none of them preprocessing input of the demo): WMT newstest2011 in en, de,
fr, es (3,003 each, the multiparallel set) and Tatoeba (en, de, fr, es: the manythings deu-eng export
and the OPUS eng-fra/eng-spa test sets, up to 3,000 per language). For each identifier and language:

* accepted: the share the preprocessing filter keeps for that expected language (fastText:
  P(expected) >= preprocess.langid_min_prob, 0.1; heliport: its first language is the expected one);
* top-1: the share whose most likely language is the expected one;
* the same on the short sentences (fewer than 5 words, from both sources);
* speed: sentences per second on one core, every sentence once, the identifiers interleaved over
  three rounds (median);
* on the 2,000 human-labelled ParaCrawl v3 en-de pairs (1,048 valid `V`, 45 wrong language `L`):
  how many valid and how many wrong-language pairs the langid step removes (a side failing).

    .venv/bin/python bench/bench_langid.py
Writes bench/out/langid.json and bench/out/langid.md.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

LANGS = ("en", "de", "fr", "es")
MIN_PROB = 0.1


def sentences(data: Path) -> dict[str, dict[str, list[str]]]:
    """language -> source (news, tatoeba) -> sentences (whitespace collapsed, empty lines dropped)."""
    news = data / "wmt-newstest2008-2011-multiparallel"
    tat = {"en": data / "tatoeba-manythings-deu-eng-2018/train.nooverlap.en",
           "de": data / "tatoeba-manythings-deu-eng-2018/train.nooverlap.de",
           "fr": data / "tatoeba-opus-eng-fra-spa/tatoeba-tests-union.eng-fra.fra",
           "es": data / "tatoeba-opus-eng-fra-spa/tatoeba-tests-union.eng-spa.spa"}
    out = {}
    for lang in LANGS:
        src = {"news": (news / f"newstest2011.{lang}").read_text(encoding="utf-8").splitlines(),
               "tatoeba": tat[lang].read_text(encoding="utf-8").splitlines()[:3000]}
        out[lang] = {k: [" ".join(t.split()) for t in v if t.strip()] for k, v in src.items()}
    return out


def decide_fasttext(texts: list[str], lang: str) -> tuple[list[bool], list[bool]]:
    from marginmine.preprocess.langid import language_probs

    probs = language_probs(texts)
    return ([p.get(lang, 0.0) >= MIN_PROB for p in probs], [max(p, key=p.get) == lang for p in probs])


def decide_heliport(texts: list[str], lang: str) -> tuple[list[bool], list[bool]]:
    from marginmine.preprocess.langid import _heliport, heliport_code

    code, identify = heliport_code(lang), _heliport().identify
    top = [identify(t) == code for t in texts]
    return top, top


IDENTIFIERS = {"fasttext (lid.176.ftz)": decide_fasttext, "heliport 1.0.1": decide_heliport}


def main() -> int:
    from measure import write_results

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    data = Path(os.environ.get("MARGINMINE_DATA_DIR") or REPO.parent / "shared" / "data")
    sents = sentences(data)
    res: dict = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                 "cpu": _cpu(), "sentences": {k: {s: len(t) for s, t in v.items()} for k, v in sents.items()},
                 "results": {}}
    for name, decide in IDENTIFIERS.items():
        row = {}
        for lang, by_source in sents.items():
            texts = [t for v in by_source.values() for t in v]
            acc, top = decide(texts, lang)
            parts, start = {}, 0
            for source, v in by_source.items():
                parts[source] = range(start, start + len(v))
                start += len(v)
            parts["short"] = [i for i, t in enumerate(texts) if len(t.split()) < 5]
            row[lang] = {part: {"n": len(idx), "accepted": sum(acc[i] for i in idx) / len(idx),
                                "top1": sum(top[i] for i in idx) / len(idx)} for part, idx in parts.items()}
        res["results"][name] = row
    res["paracrawl"] = paracrawl(data)
    every = [(lang, t) for lang, v in sents.items() for texts in v.values() for t in texts]
    speed: dict[str, list[float]] = {name: [] for name in IDENTIFIERS}
    for _ in range(3):
        for name, decide in IDENTIFIERS.items():
            t0 = time.perf_counter()
            for lang in LANGS:
                decide([t for x, t in every if x == lang], lang)
            speed[name].append(len(every) / (time.perf_counter() - t0))
    res["speed"] = {name: statistics.median(v) for name, v in speed.items()}
    write_results("langid", res, render(res))
    return 0


def paracrawl(data: Path) -> dict:
    """Valid (V) and wrong-language (L) ParaCrawl pairs each identifier's langid step removes."""
    rows = []
    path = data / "paracrawl-human-eval-en-de" / "paracrawl-v3-validation-data.sorted.en-de.tsv"
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) >= 8 and cols[7] in ("V", "L"):
            rows.append((" ".join(cols[2].split()), " ".join(cols[3].split()), cols[7]))
    out = {}
    for name, decide in IDENTIFIERS.items():
        ok_en, _ = decide([r[0] for r in rows], "en")
        ok_de, _ = decide([r[1] for r in rows], "de")
        removed = [not (a and b) for a, b in zip(ok_en, ok_de)]
        out[name] = {label: sum(r and row[2] == label for r, row in zip(removed, rows)) for label in ("V", "L")}
    out["pairs"] = {label: sum(row[2] == label for row in rows) for label in ("V", "L")}
    return out


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def render(res: dict) -> str:
    lines = [f"CPU: {res['cpu']} (one core). Accepted: the share the langid step keeps for the expected language "
             "(fastText: P >= 0.1; heliport: its first language); top-1: the most likely language is the expected "
             "one. News: WMT newstest2011; Tatoeba: up to 3,000 sentences; short: fewer than 5 words, both sources.",
             "", "| identifier | language | news: accepted / top-1 | Tatoeba | short (n) |", "|---|---|---|---|---|"]
    for name, row in res["results"].items():
        for lang in LANGS:
            r = row[lang]
            cell = lambda p: f"{100 * r[p]['accepted']:.2f}% / {100 * r[p]['top1']:.2f}%"  # noqa: E731
            lines.append(f"| {name} | {lang} | {cell('news')} | {cell('tatoeba')} | {cell('short')} "
                         f"({r['short']['n']:,}) |")
    lines += ["", "| identifier | sentences/s (1 core, every sentence above, median of 3 rounds) |", "|---|---:|"]
    lines += [f"| {name} | {res['speed'][name]:,.0f} |" for name in res["results"]]
    pc = res["paracrawl"]
    lines += ["", f"On the human-labelled ParaCrawl v3 en-de pairs ({pc['pairs']['V']:,} valid, "
              f"{pc['pairs']['L']} wrong language), the pairs the langid step removes:", "",
              "| identifier | valid pairs removed | wrong-language pairs removed |", "|---|---:|---:|"]
    lines += [f"| {name} | {pc[name]['V']} | {pc[name]['L']} |" for name in IDENTIFIERS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
