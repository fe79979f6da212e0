"""The sentence cache and the fast tokenizer change no byte of the preprocessing's outputs: the
kept pairs, the rejects and the ledger of a crawl-like sample of real sentences (recurring
boilerplate, recombined and swapped sides, copies, duplicates, defects) are those of the filter
stage as it was (tests/preprocess_reference.py), with 1 or 2 workers, with and without protected
sets, with a cache that holds everything, one that keeps dropping entries and none; and the cache
stays within its budget."""

from __future__ import annotations

import gzip
import random
import tracemalloc
import unicodedata
from pathlib import Path

import pytest
import yaml

import preprocess_reference as reference
from marginmine import defaults
from marginmine.preprocess import pipeline
from marginmine.preprocess.facts import FactCache, entry_bytes, sentence_facts
from marginmine.preprocess.filters import Facts
from marginmine.preprocess.leakage import protected_keys
from marginmine.preprocess.pipeline import InputSpec, PreprocessSettings, preprocess

REPO = Path(__file__).resolve().parents[1]
OUTPUTS = ("kept.tsv", "rejects.tsv", "ledger.json", "ledger.tsv")


def _lines(path: Path) -> list[str]:
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")) as fh:
        return [line.rstrip("\n") for line in fh]


def crawl_like(data: Path, n: int, seed: int = 3) -> tuple[list[bytes], list[str]]:
    """``n`` TSV lines (source, target, an id column) of real sentences the way a crawl has them,
    and a few German sentences of the sample to protect."""
    rng = random.Random(seed)
    pc_file = data / "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv"
    pc = [line.split("\t") for line in _lines(pc_file)]
    aligned = [(r[2], r[3]) for r in pc]
    tat = list(zip(_lines(data / "tatoeba-manythings-deu-eng-2018/train.nooverlap.en"),
                   _lines(data / "tatoeba-manythings-deu-eng-2018/train.nooverlap.de")))
    aligned += rng.sample(tat, 1500)
    for name in ("KDE4", "globalvoices-2017", "Acquis"):
        d = data / "wmt18-pcf-testsets-deen"
        aligned += rng.sample(list(zip(_lines(d / f"{name}.en"), _lines(d / f"{name}.de"))), 300)
    en = [a for a, _ in aligned]
    de = [b for _, b in aligned]
    boiler_en, boiler_de = rng.sample(en, 40), rng.sample(de, 40)  # navigation, cookie notices, ...
    rows: list[tuple[str, str]] = []
    while len(rows) < n:
        r = rng.random()
        if r < 0.35:
            rows.append(rng.choice(aligned))
        elif r < 0.55:
            rows.append((rng.choice(en), rng.choice(de)))  # misaligned
        elif r < 0.75:
            rows.append((rng.choice(boiler_en), rng.choice(boiler_de if rng.random() < 0.7 else de)))
        elif r < 0.78:
            s = rng.choice(en)
            rows.append((s, s))  # untranslated copy
        elif r < 0.81:
            a, b = rng.choice(aligned)
            rows.append((b, a))  # swapped languages
        elif r < 0.83:
            a, b = rng.choice(aligned)
            rows.append((f"  {a} ", b.replace(" ", "  ")))  # the same pair after normalisation
        elif r < 0.84:
            rows.append((" ".join(rng.sample(en, 6)), " ".join(rng.sample(de, 6))))  # > 80 tokens
        else:
            rows.append(rng.choice(rows) if rows else rng.choice(aligned))  # exact duplicate
    lines = [f"{a}\t{b}\tid{i}".encode() for i, (a, b) in enumerate(rows)]
    lines[5] = b"bad\x01control\tKontrolle\tid5"
    lines[9] = b"\xff\xfe broken\tkaputt\tid9"
    lines[11] = b"\tleer\tid11"
    lines[13] = b"only one column"
    lines[15] = lines[16].replace(b"\t", b"\r\t", 1) + b"\r"  # CR inside and at the end
    lines[17] = lines[18].replace(b" ", "\u2028".encode(), 1)  # a line separator inside
    a, b, _ = lines[20].decode().split("\t")
    lines[21] = f"{a}\t{unicodedata.normalize('NFD', b)}\tid21".encode()  # decomposed: same pair after NFC
    lines[23] = f"{a.replace(' ', chr(0xA0), 2)}\t{b}\tid23".encode()  # no-break spaces
    lines[25] = f"\uff21\uff22\uff23 {a}\t{b}\tid25".encode()  # full-width letters (NFKC folds them)
    lines[27] = lines[20]
    return lines, rng.sample(de, 25)


@pytest.fixture(scope="module")
def sample(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("crawl")
    lines, protect = crawl_like(real_data, 6000)
    (d / "crawl.tsv").write_bytes(b"\n".join(lines) + b"\n")
    (d / "test.de").write_text("".join(f"{s}\n" for s in protect), encoding="utf-8")
    return d / "crawl.tsv", d / "test.de"


def run(fn, corpus: Path, out: Path, protect: Path | None, **kw) -> None:  # noqa: ANN001
    out.mkdir()
    settings = PreprocessSettings("en", "de", protected=protected_keys([protect]) if protect else frozenset())
    fn(InputSpec((str(corpus),)), out / "kept.tsv", out / "rejects.tsv", out / "ledger.json", settings, **kw)


#: (workers, chunk_size, protected set?) of the old runs, and the cache sizes (MB) of the new runs
#: compared with each (the rejects file interleaves read and dedup rejects with filter rejects by
#: how far reading runs ahead, which the workers and the chunk size set, so each pair of runs
#: shares them)
RUNS = [((2, 2000, False), (defaults.PREPROCESS_CACHE_MB,)),
        ((1, 2000, False), (0, defaults.PREPROCESS_CACHE_MB)),
        ((2, 300, True), (1, defaults.PREPROCESS_CACHE_MB))]


@pytest.mark.parametrize(("old", "caches"), RUNS, ids=[f"workers{w}-chunk{c}-protect{p}" for (w, c, p), _ in RUNS])
def test_outputs_are_the_pair_by_pair_filters_byte_for_byte(sample: tuple[Path, Path], tmp_path: Path,
                                                            old: tuple[int, int, bool],
                                                            caches: tuple[int, ...]) -> None:
    corpus, protect_file = sample
    workers, chunk_size, protected = old
    protect = protect_file if protected else None
    run(reference.preprocess, corpus, tmp_path / "old", protect, workers=workers, chunk_size=chunk_size)
    for cache_mb in caches:  # 1 MB keeps dropping entries: a quarter of it per side and generation
        out = tmp_path / f"cache{cache_mb}"
        run(preprocess, corpus, out, protect, workers=workers, chunk_size=chunk_size, cache_mb=cache_mb)
        for f in OUTPUTS:
            assert (out / f).read_bytes() == (tmp_path / "old" / f).read_bytes(), f"cache_mb={cache_mb}: {f}"
    rejects = (tmp_path / "old" / "rejects.tsv").read_text(encoding="utf-8")
    for reason in ("duplicate", "control_chars", "invalid_utf8", "empty", "missing_column", "wrong_lang_both",
                   "too_many_tokens", "copy", "length_ratio", *(["test_set_overlap"] if protected else [])):
        assert f"\t{reason}\t" in rejects, reason  # the sample exercises every step


def test_each_distinct_sentence_is_computed_once(sample: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for all of them, the workers see each distinct sentence of a side once, although
    they recur in many chunks (also while the chunk that asked for them is still in flight)."""
    corpus, _ = sample
    asked: dict[str, list[str]] = {"en": [], "de": []}

    def counting(texts, lang, settings):  # noqa: ANN001, ANN202
        asked[lang] += texts
        return sentence_facts(texts, lang, settings)

    monkeypatch.setattr(pipeline, "sentence_facts", counting)
    run(preprocess, corpus, tmp_path / "new", None, workers=1, chunk_size=200)
    kept = [line.split("\t") for line in (tmp_path / "new" / "kept.tsv").read_text(encoding="utf-8").splitlines()]
    for lang in ("en", "de"):
        assert len(asked[lang]) == len(set(asked[lang]))
    assert len(kept) > len({row[0] for row in kept}) + 500  # kept pairs share sentences
    assert {row[0] for row in kept} <= set(asked["en"])


def _facts(i: int) -> tuple[str, Facts]:
    return f"sentence number {i} of the cache test", Facts(False, 0.9, 6, "sentence number of the")


def test_the_cache_stays_within_its_budget() -> None:
    budget = 200_000
    cache = FactCache(budget)
    for i in range(5000):
        cache.put(*_facts(i))
        assert cache.bytes <= budget
        assert cache.get(_facts(0)[0]) is not None  # used all the time: never dropped
        if i >= 1:
            assert cache.get(_facts(i - 1)[0]) is not None
    assert cache.dropped > 0 and cache.get(_facts(1)[0]) is None
    held = [0, *range(5000 - len(cache) + 1, 5000)]  # the least recently used went first
    assert all(cache.get(_facts(i)[0]) is not None for i in held)
    assert budget - entry_bytes(*_facts(4999)) < cache.bytes == sum(entry_bytes(*_facts(i)) for i in held)
    nothing = FactCache(0)
    nothing.put(*_facts(1))
    assert nothing.get(_facts(1)[0]) is None and len(nothing) == 0


def test_the_cache_estimate_errs_high() -> None:
    """What the entries really take (tracemalloc: sentences, facts, dict slots) is less than the
    bytes they are counted as, so ``cache_mb`` bounds the memory."""
    tracemalloc.start()
    cache = FactCache(1 << 40)
    for i in range(20_000):
        text = f"{i} " + "Ein Satz über die Grenze des Speichers. " * (1 + i % 3)
        words = " ".join(dict.fromkeys(w.lower() for w in text.split()[1:]))
        cache.put(text, Facts(False, 0.5 + i / 1e6, len(text.split()), words))
    used, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert used < cache.bytes, (used, cache.bytes)


def test_the_cache_setting_has_one_home() -> None:
    """defaults.PREPROCESS_CACHE_MB is the CLI's and the function's default and the schema's;
    the workflow passes the config key to every shard's job."""
    import inspect

    from marginmine.cli.main import build_parser

    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    assert schema["properties"]["preprocess"]["properties"]["cache_mb"]["default"] == defaults.PREPROCESS_CACHE_MB
    assert inspect.signature(preprocess).parameters["cache_mb"].default == defaults.PREPROCESS_CACHE_MB
    args = build_parser().parse_args(["preprocess", "--src-lang", "en", "--tgt-lang", "de", "--input", "x",
                                      "--output", "o", "--rejects", "r", "--ledger", "l.json"])
    assert args.cache_mb == defaults.PREPROCESS_CACHE_MB
    rule = (REPO / "rules" / "preprocess.smk").read_text()
    assert 'cache_mb=PRE["cache_mb"]' in rule and "--cache-mb {params.cache_mb:q}" in rule
