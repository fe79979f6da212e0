"""The demo's noisy English-German corpus, built deterministically from the real data in ``data_dir``.

The demo filters this corpus with margin-based scoring of sentence embeddings (Artetxe & Schwenk,
2019) and trains a small NMT on the top-N pairs; its headline dev/test sets are Multi30k ``val`` and
``test_2016_flickr``. The corpus therefore mixes

* **clean pairs** (kind ``clean``), mostly image captions: Multi30k train (in-domain), the corpus
  share of the Tatoeba manythings de-en pairs (:func:`tatoeba_split`), the WMT18 parallel-corpus-
  filtering test sets and MLQE-PE (English source, human post-edited German);
* **real noisy pairs**: ParaCrawl v3 pairs with their human label (kind ``paracrawl_<label>``, clean
  only for ``V``) and real NMT output from MLQE-PE (kind ``machine_translated``);
* **noise derived from real sentences**, one small pure function per kind: ``misaligned``,
  ``wrong_language``, ``untranslated_copy``, ``truncated``, ``boilerplate``, ``duplicate``,
  ``near_duplicate``.

Noise is at least half of the pairs (checked; a build that falls below raises). Nothing is invented:
every side of every pair is a real sentence (or a cut/whitespace-changed copy of one).

Outputs of :func:`build_demo_corpus`:

* ``out_tsv``: ``en<TAB>de<TAB>id`` lines, raw text as a crawled corpus would look, no header;
* ``labels_tsv``: header ``id<TAB>origin<TAB>kind<TAB>clean``, one row per corpus line, same order;
* ``labels_tsv.with_suffix(".summary.json")``: the returned summary (counts per kind and origin,
  total, noise share, every dropped pair counted per reason).

Ids are stable: clean and real pairs are ``<source>:<1-based line>`` (``m30k-train:123``,
``tatoeba-deu-eng:17``, ``wmt18-pcf:EMEA:5``, ``mlqe-pe:dev:9``, ``mlqe-mt:test21:4``,
``paracrawl:1999``); derived noise is ``<kind>:...`` naming the real pair(s) or lines it was made
from (``truncated:m30k-train:123``, ``misaligned:m30k-train:5~m30k-train:77``).

Test-set hygiene: no side of any pair (match_form) is a sentence of a protected set
(:func:`protected_sets`: Multi30k val and all test sets, newstest2012-2019, the Tatoeba test sets)
or of the sentence encoder's Tatoeba share. The guard runs twice - on the clean input pool (so noise
is never derived from a leaked pair) and on the final corpus - and every drop is counted in the
summary. :func:`marginmine.leakage.overlap_report` re-checks any corpus TSV against the protected sets.

Determinism: every component draws from its own ``random.Random(f"{seed}:{component}")`` and the
final order from ``random.Random(seed)``; iteration never depends on set order or ``hash()``, so the
same data, seed and scale give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .defaults import SEED
from .cleanmix import hold_out
from .errors import InputError, MarginmineError
from .normalize import match_form, pair_key, sentence_key
from .leakage import protected_index
from .textio import LABEL_COLUMNS, open_text_out, read_aligned, read_lines

T = TypeVar("T")

# --------------------------------------------------------------------------------------------------
# constants

#: percent of Tatoeba de-en English sentences (by hash bucket) that go to the demo corpus; the rest
#: is reserved for training the sentence encoder
TATOEBA_CORPUS_PERCENT = 15

ORIGIN_M30K = "multi30k"
ORIGIN_TATOEBA = "tatoeba-manythings-deu-eng-2018"
ORIGIN_WMT18 = "wmt18-pcf-testsets-deen"
ORIGIN_MLQE = "mlqe-pe-en-de"
ORIGIN_PARACRAWL = "paracrawl-human-eval-en-de"
ORIGIN_WIKI = "mono-en-wiki-web"
ORIGIN_GNAD = "mono-de-news"

#: pair kinds (ParaCrawl pairs are ``paracrawl_<label>`` with the label as given: V, F, E, MT, A, L, T)
KIND_CLEAN = "clean"
DERIVED_KINDS = ("misaligned", "wrong_language", "untranslated_copy", "truncated", "boilerplate",
                 "duplicate", "near_duplicate")
KINDS = (KIND_CLEAN, "machine_translated") + DERIVED_KINDS
PARACRAWL_PREFIX = "paracrawl_"
PARACRAWL_CLEAN_LABEL = "V"

#: default number of pairs per noise component at scale 1.0 (clean sources are used whole).
#: Clean is ~70k pairs, so noise (~86k) keeps the noise share above 0.5.
NOISE_SIZES: dict[str, int] = {
    "machine_translated": 4500,
    "misaligned": 16000,
    "wrong_language_fr": 8000,   # English caption + its French Multi30k translation
    "wrong_language_en": 4000,   # English Wikipedia sentence + another English sentence
    "untranslated_copy_en": 7000,  # English copied to the German side
    "untranslated_copy_de": 3000,  # German copied to the English side
    "truncated": 10000,
    "boilerplate": 6000,
    "duplicate": 13000,
    "near_duplicate": 13000,
}

MIN_NOISE_SHARE = 0.5
TRUNCATE_MIN_WORDS = 5
TRUNCATE_KEEP_PERCENT = (30, 60)
BOILERPLATE_MAX_WORDS = 12
NBSP = "\u00a0"

#: characters that would break a TSV line (or that str.splitlines() treats as a line break)
_BREAKS = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

#: protected files: (folder, glob); each glob must match at least one file
_PROTECTED_GLOBS: tuple[tuple[str, str], ...] = (
    ("multi30k", "val.en.gz"),
    ("multi30k", "val.de.gz"),
    ("multi30k", "test_*.en.gz"),
    ("multi30k", "test_*.de.gz"),
    ("wmt-newstest-ende", "newstest20*.en"),
    ("wmt-newstest-ende", "newstest20*.de"),
    ("laser-tatoeba-v1", "tatoeba.*"),
    ("tatoeba-opus-deu-eng", "tatoeba-test-*"),
)

_WMT18_SETS = ("Acquis", "EMEA", "KDE4", "globalvoices-2017", "iwslt2017-tst2017")
_MLQE_SPLITS = ("train", "dev", "test20")


@dataclass(frozen=True, slots=True)
class DemoPair:
    """One corpus pair with its provenance. ``clean`` follows from ``kind``."""

    id: str
    en: str
    de: str
    origin: str
    kind: str

    @property
    def clean(self) -> bool:
        return self.kind == KIND_CLEAN or self.kind == PARACRAWL_PREFIX + PARACRAWL_CLEAN_LABEL


# --------------------------------------------------------------------------------------------------
# small helpers


def _sanitize(text: str) -> tuple[str, bool]:
    """Replace tabs and line breaks inside a sentence by a space; says whether anything changed."""
    if _BREAKS.search(text):
        return _BREAKS.sub(" ", text), True
    return text, False


def _scaled(n: int, scale: float) -> int:
    """Component size at ``scale``: at least 1, so every kind exists at any scale."""
    return max(1, round(n * scale))


def _sample(items: Sequence[T], n: int, rng: random.Random) -> list[T]:
    """``n`` distinct items (all of them, in a random order, if there are fewer)."""
    return rng.sample(list(items), min(n, len(items)))


def _component_rng(seed: int, name: str) -> random.Random:
    """An independent, reproducible stream per component (str seeds are hashed with SHA-512)."""
    return random.Random(f"{seed}:{name}")


# --------------------------------------------------------------------------------------------------
# Tatoeba split (shared with the encoder)


def _tatoeba_bucket(en: str) -> int:
    """Hash bucket 0..99 of an English sentence: BLAKE2b-64 of its match_form, big-endian, mod 100."""
    digest = hashlib.blake2b(match_form(en).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 100


def tatoeba_split(en: list[str], de: list[str]) -> tuple[list[int], list[int]]:
    """Split Tatoeba de-en pairs into (demo-corpus indices, encoder-training indices).

    A pair goes to the corpus iff ``blake2b(match_form(en), digest_size=8)`` read as a big-endian
    integer is ``< TATOEBA_CORPUS_PERCENT`` mod 100 (~15% of the pairs). The choice depends on the
    English sentence only, so all German translations of one English sentence fall on the same side,
    and it is independent of file order, seed and scale. Both lists are sorted and together cover
    ``range(len(en))`` exactly once.
    """
    if len(en) != len(de):
        raise ValueError(f"tatoeba_split: {len(en)} English but {len(de)} German sentences")
    corpus: list[int] = []
    encoder: list[int] = []
    for i, sent in enumerate(en):
        (corpus if _tatoeba_bucket(sent) < TATOEBA_CORPUS_PERCENT else encoder).append(i)
    return corpus, encoder


def tatoeba_pairs(data_dir: Path) -> tuple[list[str], list[str]]:
    """The Tatoeba manythings de-en pairs (``train.nooverlap.{en,de}``) as two aligned lists."""
    folder = Path(data_dir) / ORIGIN_TATOEBA
    return read_aligned(folder / "train.nooverlap.en", folder / "train.nooverlap.de")


# --------------------------------------------------------------------------------------------------
# protected sets and overlap checks


def protected_sets(data_dir: Path) -> list[Path]:
    """Every file whose sentences must never be in the corpus, sorted within each group.

    Multi30k ``val`` and all ``test_*`` (en, de), WMT newstest2012-2019 (en, de), LASER Tatoeba v1
    (all files) and the Tatoeba test v2021-08-07 (deu-eng). A group that matches no file raises
    ``InputError`` (a missing test set must not silently weaken the check).
    """
    root = Path(data_dir)
    if not root.is_dir():
        raise InputError(str(root), "data directory not found",
                         hint="pass the shared data folder (../shared/data)")
    out: list[Path] = []
    for folder, pattern in _PROTECTED_GLOBS:
        found = sorted(p for p in (root / folder).glob(pattern) if p.is_file())
        if not found:
            raise InputError(str(root / folder / pattern), "no protected test-set file found",
                             hint="the data folder is incomplete")
        out.extend(found)
    return out


@dataclass(frozen=True)
class _Guard:
    """Sentences no corpus side may be: protected test sets (key -> file) and the encoder share."""

    protected: dict[bytes, str]
    encoder: frozenset[bytes]
    heldout: frozenset[bytes] = frozenset()  # sentences of the clean-mix dev/test sets

    def reason(self, pair: DemoPair) -> str | None:
        ks, kt = sentence_key(pair.en), sentence_key(pair.de)
        hit = self.protected.get(ks) or self.protected.get(kt)
        if hit:
            return "protected:" + hit.split("/", 1)[0]
        if ks in self.encoder or kt in self.encoder:
            return "encoder_share"
        if ks in self.heldout or kt in self.heldout:
            return HELDOUT_REASON
        return None


#: drop reason of a pair sharing a sentence with a clean-mix held-out pair
HELDOUT_REASON = "clean_mix_heldout"


def _guard_reasons() -> list[str]:
    folders = sorted({folder for folder, _ in _PROTECTED_GLOBS})
    return [f"protected:{f}" for f in folders] + ["encoder_share", HELDOUT_REASON]


def apply_guard(pairs: Iterable[DemoPair], reason: Callable[[DemoPair], str | None],
                dropped: Counter[str]) -> list[DemoPair]:
    """Keep the pairs ``reason`` returns None for; count the others per reason in ``dropped``."""
    kept = []
    for p in pairs:
        why = reason(p)
        if why is None:
            kept.append(p)
        else:
            dropped[why] += 1
    return kept


# --------------------------------------------------------------------------------------------------
# noise kinds: pure functions (lists in, lists out, rng passed in)


def make_misaligned(pool: Sequence[DemoPair], n: int, rng: random.Random) -> tuple[list[DemoPair], int]:
    """English of clean pair i with German of clean pair j != i, j from the same origin.

    ``n`` pairs are drawn, grouped by origin, and the German sides are rotated by a random cyclic
    permutation (Sattolo), a derangement. Pairs where either side of i equals that of j (match_form,
    e.g. two translations of one Tatoeba sentence) would be correct translations and are skipped;
    the second value is how many.
    """
    chosen = _sample(pool, n, rng)
    groups: dict[str, list[DemoPair]] = {}
    for p in chosen:
        groups.setdefault(p.origin, []).append(p)
    out: list[DemoPair] = []
    skipped = 0
    for origin in sorted(groups):
        group = groups[origin]
        if len(group) < 2:
            skipped += len(group)
            continue
        perm = list(range(len(group)))
        for i in range(len(perm) - 1, 0, -1):  # Sattolo: one cycle, so perm[i] != i
            j = rng.randrange(i)
            perm[i], perm[j] = perm[j], perm[i]
        for i, j in enumerate(perm):
            a, b = group[i], group[j]
            if match_form(a.en) == match_form(b.en) or match_form(a.de) == match_form(b.de):
                skipped += 1
                continue
            out.append(DemoPair(f"misaligned:{a.id}~{b.id}", a.en, b.de, origin, "misaligned"))
    return out, skipped


def make_wrong_language_fr(captions: Sequence[tuple[DemoPair, str]], n: int,
                           rng: random.Random) -> list[DemoPair]:
    """English caption with its real French translation in place of the German (Multi30k fr)."""
    return [DemoPair(f"wrong_language:fr:{p.id}", p.en, fr, p.origin, "wrong_language")
            for p, fr in _sample(captions, n, rng)]


def make_wrong_language_en(sentences: Sequence[tuple[str, str]], n: int,
                           rng: random.Random) -> list[DemoPair]:
    """Two different real English sentences ``(id, text)`` as a pair (English on the German side)."""
    chosen = _sample(sentences, 2 * n, rng)
    out = []
    for (ia, a), (ib, b) in zip(chosen[0::2], chosen[1::2]):
        if match_form(a) != match_form(b):
            out.append(DemoPair(f"wrong_language:en:{ia}~{ib}", a, b, ORIGIN_WIKI, "wrong_language"))
    return out


def make_untranslated_copies(pool: Sequence[DemoPair], n_en: int, n_de: int,
                             rng: random.Random) -> list[DemoPair]:
    """English copied to the German side (``n_en``) and German copied to the English side (``n_de``)."""
    chosen = _sample(pool, n_en + n_de, rng)
    out = [DemoPair(f"untranslated_copy:en:{p.id}", p.en, p.en, p.origin, "untranslated_copy")
           for p in chosen[:n_en]]
    out += [DemoPair(f"untranslated_copy:de:{p.id}", p.de, p.de, p.origin, "untranslated_copy")
            for p in chosen[n_en:]]
    return out


def truncate_words(text: str, keep: int) -> str:
    """The first ``keep`` words (at least 1, always fewer than all), joined by single spaces."""
    words = text.split()
    return " ".join(words[:min(len(words) - 1, max(1, keep))])


def make_truncated(pool: Sequence[DemoPair], n: int, rng: random.Random,
                   min_words: int = TRUNCATE_MIN_WORDS) -> list[DemoPair]:
    """A clean pair whose German keeps only its first 30-60% of words (German of >= min_words words).

    The number of kept words is drawn uniformly from the integers k with 30% <= k/words <= 60%.
    """
    lo_pct, hi_pct = TRUNCATE_KEEP_PERCENT
    candidates = [p for p in pool if len(p.de.split()) >= min_words]
    out = []
    for p in _sample(candidates, n, rng):
        words = len(p.de.split())
        keep = rng.randint((lo_pct * words + 99) // 100, hi_pct * words // 100)
        out.append(DemoPair(f"truncated:{p.id}", p.en, truncate_words(p.de, keep), p.origin, "truncated"))
    return out


def make_boilerplate(en_lines: Sequence[tuple[str, str]], de_lines: Sequence[tuple[str, str]], n: int,
                     rng: random.Random) -> list[DemoPair]:
    """Short English web lines (in order of preference) paired with random short German news lines.

    ``en_lines``/``de_lines`` are ``(id, text)``; the first ``n`` English lines are used (the caller
    puts the lowest HPLT quality scores first), each with a distinct random German line.
    """
    en = list(en_lines[:n])
    de = _sample(de_lines, len(en), rng)
    return [DemoPair(f"boilerplate:{ie}~{ig}", e, g, f"{ORIGIN_WIKI}+{ORIGIN_GNAD}", "boilerplate")
            for (ie, e), (ig, g) in zip(en, de)]


def make_duplicates(pool: Sequence[DemoPair], n: int, rng: random.Random) -> list[DemoPair]:
    """Exact copies of random clean pairs."""
    return [DemoPair(f"duplicate:{p.id}", p.en, p.de, p.origin, "duplicate")
            for p in _sample(pool, n, rng)]


def whitespace_variant(text: str, rng: random.Random) -> str:
    """``text`` with its whitespace changed (double space, non-breaking space or trailing space).

    The result differs from ``text`` but has the same ``match_form``.
    """
    spaces = [m.start() for m in re.finditer(" ", text)]
    choice = rng.randrange(3) if spaces else 2
    if choice == 0:
        i = rng.choice(spaces)
        return text[:i] + "  " + text[i + 1:]
    if choice == 1:
        i = rng.choice(spaces)
        return text[:i] + NBSP + text[i + 1:]
    return text + rng.choice((" ", NBSP, "  "))


def make_near_duplicates(pool: Sequence[DemoPair], n: int, rng: random.Random) -> list[DemoPair]:
    """Copies of random clean pairs that differ only in whitespace (one or both sides changed)."""
    out = []
    for p in _sample(pool, n, rng):
        side = rng.randrange(3)  # 0: English, 1: German, 2: both
        en = whitespace_variant(p.en, rng) if side != 1 else p.en
        de = whitespace_variant(p.de, rng) if side != 0 else p.de
        out.append(DemoPair(f"near_duplicate:{p.id}", en, de, p.origin, "near_duplicate"))
    return out


# --------------------------------------------------------------------------------------------------
# loaders (I/O): raw real pairs of each source


def _pair(pid: str, en: str, de: str, origin: str, kind: str, notes: Counter[str]) -> DemoPair | None:
    en, c1 = _sanitize(en)
    de, c2 = _sanitize(de)
    notes["break_chars_replaced"] += c1 + c2
    if not en.strip() or not de.strip():
        notes["empty_side_skipped"] += 1
        return None
    return DemoPair(pid, en, de, origin, kind)


def _load_m30k(root: Path, notes: Counter[str]) -> tuple[list[DemoPair], dict[str, str]]:
    d = root / ORIGIN_M30K
    en, de = read_aligned(d / "train.en.gz", d / "train.de.gz")
    fr = read_lines(d / "train.fr.gz")
    if len(fr) != len(en):
        raise InputError(str(d / "train.fr.gz"), f"has {len(fr)} lines, train.en.gz has {len(en)}")
    pairs, french = [], {}
    for i, (e, g, f) in enumerate(zip(en, de, fr), 1):
        p = _pair(f"m30k-train:{i}", e, g, ORIGIN_M30K, KIND_CLEAN, notes)
        if p is not None:
            pairs.append(p)
            f, _ = _sanitize(f)
            if f.strip():
                french[p.id] = f
    return pairs, french


def _load_tatoeba(root: Path, notes: Counter[str]) -> tuple[list[DemoPair], frozenset[bytes]]:
    en, de = tatoeba_pairs(root)
    corpus_idx, encoder_idx = tatoeba_split(en, de)
    encoder = frozenset(k for i in encoder_idx for k in (sentence_key(en[i]), sentence_key(de[i])))
    notes["tatoeba_corpus_share"] = len(corpus_idx)
    notes["tatoeba_encoder_share"] = len(encoder_idx)
    pairs = [_pair(f"tatoeba-deu-eng:{i + 1}", en[i], de[i], ORIGIN_TATOEBA, KIND_CLEAN, notes)
             for i in corpus_idx]
    return [p for p in pairs if p is not None], encoder


def _load_wmt18(root: Path, notes: Counter[str]) -> list[DemoPair]:
    d = root / ORIGIN_WMT18
    out = []
    for name in _WMT18_SETS:
        en, de = read_aligned(d / f"{name}.en", d / f"{name}.de")
        for i, (e, g) in enumerate(zip(en, de), 1):
            p = _pair(f"wmt18-pcf:{name}:{i}", e, g, ORIGIN_WMT18, KIND_CLEAN, notes)
            if p is not None:
                out.append(p)
    return out


def _read_da(path: Path) -> list[tuple[str, str]]:
    """(original, translation) rows of an MLQE-PE direct-assessment TSV (header checked)."""
    lines = read_lines(path)
    if not lines or lines[0].split("\t")[1:3] != ["original", "translation"]:
        raise InputError(str(path), "expected a header with columns index, original, translation", line=1)
    rows = []
    for n, line in enumerate(lines[1:], 2):
        cols = line.split("\t")
        if len(cols) < 3:
            raise InputError(str(path), "fewer than 3 columns", line=n)
        rows.append((cols[1], cols[2]))
    return rows


def _no_space(text: str) -> str:
    return "".join(text.split())


def _load_mlqe(root: Path, notes: Counter[str], n_mt: int,
               rng: random.Random) -> tuple[list[DemoPair], list[DemoPair]]:
    """(clean post-edit pairs, machine-translated pairs); each segment is on one side only.

    MT pairs are (raw original, raw NMT output) of segments a post-editor changed (HTER > 0), drawn
    from train/dev/test20 and test21; every other train/dev/test20 segment is a clean pair (raw
    original English, Moses-detokenized human post-edit). The raw English is the DA file's
    ``original``; where it does not match the tokenized ``.src`` (spaces ignored) the detokenized
    ``.src`` is used instead (counted as ``mlqe_src_mismatch``).
    """
    d = root / ORIGIN_MLQE
    segments: list[tuple[str, str, str, str, float]] = []  # (split, line, en, de_mt, hter)
    pe_text: dict[tuple[str, str], tuple[str, str]] = {}    # (split, line) -> (tokenized src, pe)
    for split in _MLQE_SPLITS:
        rows = _read_da(d / "direct-assessments" / f"{split}.ende.df.short.tsv")
        pe_dir = d / "post-editing"
        src, pe = read_aligned(pe_dir / f"{split}.src", pe_dir / f"{split}.pe")
        hter = read_lines(pe_dir / f"{split}.hter")
        if not (len(rows) == len(src) == len(hter)):
            raise InputError(str(pe_dir / f"{split}.src"),
                             f"{len(src)} lines but the DA file has {len(rows)} rows and hter {len(hter)}")
        for i, ((orig, mt), s, p, h) in enumerate(zip(rows, src, pe, hter), 1):
            segments.append((split, str(i), orig, mt, float(h)))
            pe_text[(split, str(i))] = (s, p)
    t21 = d / "test21"
    src21, mt21 = read_aligned(t21 / "test21.src", t21 / "test21.mt")
    hter21 = read_lines(t21 / "test21.hter")
    if len(hter21) != len(src21):
        raise InputError(str(t21 / "test21.hter"), f"{len(hter21)} lines, test21.src has {len(src21)}")
    extra = [("test21", str(i), s, m, float(h))
             for i, (s, m, h) in enumerate(zip(src21, mt21, hter21), 1)]

    candidates = [seg for seg in segments + extra if seg[4] > 0]
    chosen = _sample(candidates, n_mt, rng)
    chosen_keys = {(seg[0], seg[1]) for seg in chosen}
    chosen.sort(key=lambda seg: (seg[0], int(seg[1])))
    mt_pairs = [_pair(f"mlqe-mt:{sp}:{ln}", en, mt, ORIGIN_MLQE, "machine_translated", notes)
                for sp, ln, en, mt, _ in chosen]

    from .tokens import detokenize

    clean = []
    for sp, ln, orig, _mt, _h in segments:
        if (sp, ln) in chosen_keys:
            continue
        tok_src, tok_pe = pe_text[(sp, ln)]
        en = orig
        if _no_space(orig) != _no_space(tok_src):
            notes["mlqe_src_mismatch"] += 1
            en = detokenize(tok_src, "en")
        de = detokenize(tok_pe, "de")
        clean.append(_pair(f"mlqe-pe:{sp}:{ln}", en, de, ORIGIN_MLQE, KIND_CLEAN, notes))
    return [p for p in clean if p is not None], [p for p in mt_pairs if p is not None]


def _load_paracrawl(root: Path, notes: Counter[str]) -> list[DemoPair]:
    path = root / ORIGIN_PARACRAWL / "paracrawl-v3-validation-data.sorted.en-de.tsv"
    out = []
    for n, line in enumerate(read_lines(path), 1):
        cols = line.split("\t")
        if len(cols) < 8 or not cols[7].strip():
            raise InputError(str(path), "expected 9 columns with the human label in column 8", line=n)
        p = _pair(f"paracrawl:{n}", cols[2], cols[3], ORIGIN_PARACRAWL,
                  PARACRAWL_PREFIX + cols[7].strip(), notes)
        if p is not None:
            out.append(p)
    return out


def _load_mono(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """(wiki sentences, short HPLT lines lowest score first, short German news lines), deduplicated."""
    def dedup(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        seen: set[bytes] = set()
        out = []
        for ident, text in items:
            text, _ = _sanitize(text)
            k = sentence_key(text)
            if text.strip() and k not in seen:
                seen.add(k)
                out.append((ident, text))
        return out

    mono_en = root / ORIGIN_WIKI
    wiki = dedup((f"wiki:{i}", s) for i, s in
                 enumerate(read_lines(mono_en / "wikitext2.valid+test.sentences.detok.en"), 1))
    hplt_path = mono_en / "hplt-en_100+101.en-lines.tsv"
    scored = []
    for n, line in enumerate(read_lines(hplt_path), 1):
        cols = line.split("\t")
        if len(cols) < 3:
            raise InputError(str(hplt_path), "expected score, doc id, text", line=n)
        try:
            score = float(cols[0])
        except ValueError as exc:
            raise InputError(str(hplt_path), f"score {cols[0]!r} is not a number", line=n) from exc
        if len(cols[2].split()) <= BOILERPLATE_MAX_WORDS:
            scored.append((score, n, cols[2]))
    scored.sort(key=lambda t: (t[0], t[1]))
    hplt = dedup((f"hplt:{n}", text) for _, n, text in scored)
    gnad = dedup((f"gnad:{i}", s) for i, s in
                 enumerate(read_lines(root / ORIGIN_GNAD / "10kGNAD.test.sentences.de"), 1)
                 if len(s.split()) <= BOILERPLATE_MAX_WORDS)
    return wiki, hplt, gnad


# --------------------------------------------------------------------------------------------------
# the build


def _dedup_pairs(pairs: Iterable[DemoPair], dropped: Counter[str]) -> list[DemoPair]:
    """First occurrence of each normalised pair; later copies counted as ``duplicate_input_pair``."""
    seen: set[bytes] = set()
    out = []
    for p in pairs:
        k = pair_key(p.en, p.de)
        if k in seen:
            dropped["duplicate_input_pair"] += 1
        else:
            seen.add(k)
            out.append(p)
    return out


def _scaled_sample(pairs: list[DemoPair], scale: float, rng: random.Random) -> list[DemoPair]:
    if scale >= 1.0:
        return list(pairs)
    keep = sorted(rng.sample(range(len(pairs)), min(len(pairs), _scaled(len(pairs), scale))))
    return [pairs[i] for i in keep]


def _summary(corpus: Sequence[DemoPair], dropped_input: Counter[str], dropped_final: Counter[str],
             notes: Counter[str], seed: int, scale: float) -> dict:
    kinds = Counter(p.kind for p in corpus)
    origins = Counter(p.origin for p in corpus)
    clean_origins = Counter(p.origin for p in corpus if p.clean)
    clean = sum(p.clean for p in corpus)
    total = len(corpus)
    reasons = _guard_reasons() + ["duplicate_input_pair"]
    return {
        "seed": seed,
        "scale": scale,
        "total": total,
        "clean": clean,
        "noise": total - clean,
        "noise_share": round((total - clean) / total, 6) if total else 0.0,
        "kinds": dict(sorted(kinds.items())),
        "origins": dict(sorted(origins.items())),
        "clean_by_origin": dict(sorted(clean_origins.items())),
        "dropped": {
            "input": {r: dropped_input.get(r, 0) for r in reasons},
            "final": {r: dropped_final.get(r, 0) for r in _guard_reasons()},
        },
        "notes": dict(sorted(notes.items())),
    }


def build_demo_corpus(data_dir: Path, out_tsv: Path, labels_tsv: Path, *, seed: int = SEED,
                      scale: float = 1.0, heldout: Mapping[str, int] | None = None,
                      heldout_prefix: Path | None = None) -> dict:
    """Build the demo corpus and its labels; return (and write as JSON) the summary.

    ``scale`` (0 < scale <= 1) multiplies every component size: clean sources are sampled to that
    fraction, noise components get ``round(NOISE_SIZES[k] * scale)`` (at least 1) pairs.
    ``heldout`` (split -> pairs, e.g. ``{"dev": 1000, "test": 2000}``): the clean-mix sets
    (:mod:`marginmine.cleanmix`) carved out of the clean pool before noise is derived from it and
    written to ``<heldout_prefix>.<split>.{en,de}`` and ``<heldout_prefix>.<split>.labels.tsv`` (same
    columns as the corpus sidecar, one row per line); no corpus side is a held-out sentence.
    Raises ``InputError`` for missing/misaligned data and ``MarginmineError`` if the noise share
    ends below ``MIN_NOISE_SHARE`` or ids collide.
    """
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    root = Path(data_dir)
    protected = protected_index(protected_sets(root))
    notes: Counter[str] = Counter()

    # real sources
    m30k, m30k_fr = _load_m30k(root, notes)
    tatoeba, encoder_keys = _load_tatoeba(root, notes)
    wmt18 = _load_wmt18(root, notes)
    mlqe_clean, mlqe_mt = _load_mlqe(root, notes, _scaled(NOISE_SIZES["machine_translated"], scale),
                                     _component_rng(seed, "machine_translated"))
    paracrawl = _load_paracrawl(root, notes)
    wiki, hplt, gnad = _load_mono(root)
    guard = _Guard(protected, encoder_keys)

    # the clean pool: scaled, deduplicated, guarded (noise is derived from it, so never from a leak)
    dropped_input: Counter[str] = Counter()
    clean_pool = _scaled_sample(m30k + tatoeba + wmt18 + mlqe_clean, scale, _component_rng(seed, "clean"))
    clean_pool = _dedup_pairs(clean_pool, dropped_input)
    clean_pool = apply_guard(clean_pool, guard.reason, dropped_input)
    held: dict[str, list[DemoPair]] = {}
    if heldout:
        if heldout_prefix is None:
            raise ValueError("heldout needs heldout_prefix")
        held, clean_pool, shared, keys = hold_out(clean_pool, heldout, _component_rng(seed, "heldout"))
        dropped_input[HELDOUT_REASON] += shared
        guard = _Guard(protected, encoder_keys, keys)
    paracrawl = _scaled_sample(paracrawl, scale, _component_rng(seed, "paracrawl"))

    size = {k: _scaled(v, scale) for k, v in NOISE_SIZES.items()}

    def rng(name: str) -> random.Random:
        return _component_rng(seed, name)

    captions = [(p, m30k_fr[p.id]) for p in clean_pool if p.id in m30k_fr]
    misaligned, skipped = make_misaligned(clean_pool, size["misaligned"], rng("misaligned"))
    notes["misaligned_same_sentence_skipped"] = skipped
    noise = (
        mlqe_mt
        + misaligned
        + make_wrong_language_fr(captions, size["wrong_language_fr"], rng("wrong_language_fr"))
        + make_wrong_language_en(wiki, size["wrong_language_en"], rng("wrong_language_en"))
        + make_untranslated_copies(clean_pool, size["untranslated_copy_en"], size["untranslated_copy_de"],
                                   rng("untranslated_copy"))
        + make_truncated(clean_pool, size["truncated"], rng("truncated"))
        + make_boilerplate(hplt, gnad, size["boilerplate"], rng("boilerplate"))
        + make_duplicates(clean_pool, size["duplicate"], rng("duplicate"))
        + make_near_duplicates(clean_pool, size["near_duplicate"], rng("near_duplicate"))
    )

    # final guard over everything, then one deterministic shuffle
    dropped_final: Counter[str] = Counter()
    corpus = apply_guard(clean_pool + paracrawl + noise, guard.reason, dropped_final)
    ids = Counter(p.id for p in corpus)
    clashes = [i for i, c in ids.items() if c > 1]
    if clashes:
        raise MarginmineError(f"demo corpus: {len(clashes)} duplicate pair ids, e.g. {clashes[0]}")
    random.Random(seed).shuffle(corpus)

    summary = _summary(corpus, dropped_input, dropped_final, notes, seed, scale)
    summary["heldout"] = {split: {"pairs": len(pairs), "by_origin": dict(sorted(Counter(p.origin for p in pairs).items()))}
                          for split, pairs in held.items()}
    if summary["noise_share"] < MIN_NOISE_SHARE:
        raise MarginmineError(f"demo corpus: noise share {summary['noise_share']:.3f} is below "
                              f"{MIN_NOISE_SHARE} (raise NOISE_SIZES)")

    with open_text_out(out_tsv) as fh:
        for p in corpus:
            fh.write(f"{p.en}\t{p.de}\t{p.id}\n")
    with open_text_out(labels_tsv) as fh:
        fh.write("id\torigin\tkind\tclean\n")
        for p in corpus:
            fh.write(f"{p.id}\t{p.origin}\t{p.kind}\t{int(p.clean)}\n")
    for split, pairs in held.items():
        write_heldout(pairs, Path(f"{heldout_prefix}.{split}"))
    with open_text_out(Path(labels_tsv).with_suffix(".summary.json")) as fh:
        fh.write(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return summary


def write_heldout(pairs: Sequence[DemoPair], stem: Path) -> None:
    """``<stem>.en``, ``<stem>.de`` (line-aligned) and ``<stem>.labels.tsv`` (the sidecar's columns)."""
    with open_text_out(f"{stem}.en") as fe, open_text_out(f"{stem}.de") as fd:
        for p in pairs:
            fe.write(p.en + "\n")
            fd.write(p.de + "\n")
    with open_text_out(f"{stem}.labels.tsv") as fh:
        fh.write("\t".join(LABEL_COLUMNS) + "\n")
        for p in pairs:
            fh.write(f"{p.id}\t{p.origin}\t{p.kind}\t{int(p.clean)}\n")
