"""The demo corpus' inputs: its constants, the Tatoeba split it shares with the encoder, the
protected sets it must never touch (and the guard that drops pairs touching them), and the
loaders of the raw real pairs of each source in ``data_dir``. Used by :mod:`.democorpus`."""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from marginmine.errors import InputError
from marginmine.io.text import read_aligned, read_lines
from marginmine.preprocess.normalize import match_form, sentence_key

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
#: noise kinds whose pairs are translations of each other by construction: copies of clean pairs
#: (exact, or differing in whitespace) and machine translations (built here, or labelled MT in
#: ParaCrawl) - what a translation score and the noise baseline cannot tell from clean pairs
TRANSLATION_KINDS = ("duplicate", "near_duplicate", "machine_translated", f"{PARACRAWL_PREFIX}MT")

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


def scaled(n: int, scale: float) -> int:
    """Component size at ``scale``: at least 1, so every kind exists at any scale."""
    return max(1, round(n * scale))


def sample_items(items: Sequence[T], n: int, rng: random.Random) -> list[T]:
    """``n`` distinct items (all of them, in a random order, if there are fewer)."""
    return rng.sample(list(items), min(n, len(items)))


def component_rng(seed: int, name: str) -> random.Random:
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
class Guard:
    """Sentences no corpus side may be: protected test sets (key -> file) and the encoder share."""

    protected: dict[bytes, str]
    encoder: frozenset[bytes]
    heldout: frozenset[bytes] = frozenset()  # sentences of the clean-mix dev/test sets

    def reason(self, pair: DemoPair) -> str | None:
        return self.reason_keys(sentence_key(pair.en), sentence_key(pair.de))

    def reason_keys(self, ks: bytes, kt: bytes) -> str | None:
        """:meth:`reason` of a pair given its sides' :func:`sentence_key` (None: the pair may stay)."""
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


def guard_reasons() -> list[str]:
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
# loaders (I/O): raw real pairs of each source


def _pair(pid: str, en: str, de: str, origin: str, kind: str, notes: Counter[str]) -> DemoPair | None:
    en, c1 = _sanitize(en)
    de, c2 = _sanitize(de)
    notes["break_chars_replaced"] += c1 + c2
    if not en.strip() or not de.strip():
        notes["empty_side_skipped"] += 1
        return None
    return DemoPair(pid, en, de, origin, kind)


def load_m30k(root: Path, notes: Counter[str]) -> tuple[list[DemoPair], dict[str, str]]:
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


def load_tatoeba(root: Path, notes: Counter[str]) -> tuple[list[DemoPair], frozenset[bytes]]:
    en, de = tatoeba_pairs(root)
    corpus_idx, encoder_idx = tatoeba_split(en, de)
    encoder = frozenset(k for i in encoder_idx for k in (sentence_key(en[i]), sentence_key(de[i])))
    notes["tatoeba_corpus_share"] = len(corpus_idx)
    notes["tatoeba_encoder_share"] = len(encoder_idx)
    pairs = [_pair(f"tatoeba-deu-eng:{i + 1}", en[i], de[i], ORIGIN_TATOEBA, KIND_CLEAN, notes)
             for i in corpus_idx]
    return [p for p in pairs if p is not None], encoder


def load_wmt18(root: Path, notes: Counter[str]) -> list[DemoPair]:
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


def load_mlqe(root: Path, notes: Counter[str], n_mt: int,
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
    chosen = sample_items(candidates, n_mt, rng)
    chosen_keys = {(seg[0], seg[1]) for seg in chosen}
    chosen.sort(key=lambda seg: (seg[0], int(seg[1])))
    mt_pairs = [_pair(f"mlqe-mt:{sp}:{ln}", en, mt, ORIGIN_MLQE, "machine_translated", notes)
                for sp, ln, en, mt, _ in chosen]

    from marginmine.preprocess.tokens import detokenize

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


def load_paracrawl(root: Path, notes: Counter[str]) -> list[DemoPair]:
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


def load_mono(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
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


