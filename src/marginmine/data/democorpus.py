"""The demo's noisy English-German corpus, built deterministically from the real data in ``data_dir``.

The demo filters this corpus with margin-based scoring of sentence embeddings (Artetxe & Schwenk,
2019) and trains a small NMT on the top-N pairs; its headline dev/test sets are the clean-mix sets
held out from the corpus' clean pool (:mod:`marginmine.data.cleanmix`). The corpus therefore mixes

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
summary. :func:`marginmine.preprocess.leakage.overlap_report` re-checks any corpus TSV against the protected sets.

Determinism: every component draws from its own ``random.Random(f"{seed}:{component}")`` and the
final order from ``random.Random(seed)``; iteration never depends on set order or ``hash()``, so the
same data, seed and scale give byte-identical files.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from marginmine.data.cleanmix import hold_out
from marginmine.data.demo_noise import (
    make_boilerplate,
    make_duplicates,
    make_misaligned,
    make_near_duplicates,
    make_truncated,
    make_untranslated_copies,
    make_wrong_language_en,
    make_wrong_language_fr,
)
from marginmine.data.demo_sources import (
    HELDOUT_REASON,
    MIN_NOISE_SHARE,
    NOISE_SIZES,
    DemoPair,
    Guard,
    apply_guard,
    component_rng,
    guard_reasons,
    load_m30k,
    load_mlqe,
    load_mono,
    load_paracrawl,
    load_tatoeba,
    load_wmt18,
    protected_sets,
    scaled,
)
from marginmine.defaults import SEED
from marginmine.errors import MarginmineError
from marginmine.io.text import LABEL_COLUMNS, open_text_out
from marginmine.preprocess.leakage import protected_index
from marginmine.preprocess.normalize import pair_key

T = TypeVar("T")


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
    keep = sorted(rng.sample(range(len(pairs)), min(len(pairs), scaled(len(pairs), scale))))
    return [pairs[i] for i in keep]


def _summary(corpus: Sequence[DemoPair], dropped_input: Counter[str], dropped_final: Counter[str],
             notes: Counter[str], seed: int, scale: float) -> dict:
    kinds = Counter(p.kind for p in corpus)
    origins = Counter(p.origin for p in corpus)
    clean_origins = Counter(p.origin for p in corpus if p.clean)
    clean = sum(p.clean for p in corpus)
    total = len(corpus)
    reasons = guard_reasons() + ["duplicate_input_pair"]
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
            "final": {r: dropped_final.get(r, 0) for r in guard_reasons()},
        },
        "notes": dict(sorted(notes.items())),
    }


@dataclass
class DemoInputs:
    """What the demo corpus is built from, read and guarded (:func:`load_demo_inputs`).

    ``clean_pool`` is the guarded, deduplicated clean pool with the clean-mix sets (``held``) carved
    out; ``guard`` also holds the held-out sentences; ``paracrawl`` is scaled, not guarded (the
    caller's final guard sees every pair); ``captions_fr`` maps a Multi30k pair id to its French.
    """

    clean_pool: list[DemoPair]
    held: dict[str, list[DemoPair]]
    guard: Guard
    mlqe_mt: list[DemoPair]
    paracrawl: list[DemoPair]
    captions_fr: dict[str, str]
    wiki: list[tuple[str, str]]
    hplt: list[tuple[str, str]]
    gnad: list[tuple[str, str]]
    dropped_input: Counter[str]
    notes: Counter[str]
    seed: int
    scale: float


def load_demo_inputs(data_dir: Path, *, seed: int = SEED, scale: float = 1.0,
                     heldout: Mapping[str, int] | None = None) -> DemoInputs:
    """Read every real source of ``data_dir``, build the clean pool and hold out the clean-mix sets.

    This is the part of :func:`build_demo_corpus` before any noise is made; the scale corpus
    (:mod:`marginmine.data.scalecorpus`) calls it with the demo's seed, scale and held-out sizes, so
    its clean pool and held-out sets are the demo's. Same arguments, same result.
    """
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    root = Path(data_dir)
    protected = protected_index(protected_sets(root))
    notes: Counter[str] = Counter()

    # real sources
    m30k, m30k_fr = load_m30k(root, notes)
    tatoeba, encoder_keys = load_tatoeba(root, notes)
    wmt18 = load_wmt18(root, notes)
    mlqe_clean, mlqe_mt = load_mlqe(root, notes, scaled(NOISE_SIZES["machine_translated"], scale),
                                     component_rng(seed, "machine_translated"))
    paracrawl = load_paracrawl(root, notes)
    wiki, hplt, gnad = load_mono(root)
    guard = Guard(protected, encoder_keys)

    # the clean pool: scaled, deduplicated, guarded (noise is derived from it, so never from a leak)
    dropped_input: Counter[str] = Counter()
    clean_pool = _scaled_sample(m30k + tatoeba + wmt18 + mlqe_clean, scale, component_rng(seed, "clean"))
    clean_pool = _dedup_pairs(clean_pool, dropped_input)
    clean_pool = apply_guard(clean_pool, guard.reason, dropped_input)
    held: dict[str, list[DemoPair]] = {}
    if heldout:
        held, clean_pool, shared, keys = hold_out(clean_pool, heldout, component_rng(seed, "heldout"))
        dropped_input[HELDOUT_REASON] += shared
        guard = Guard(protected, encoder_keys, keys)
    paracrawl = _scaled_sample(paracrawl, scale, component_rng(seed, "paracrawl"))
    return DemoInputs(clean_pool, held, guard, mlqe_mt, paracrawl, m30k_fr, wiki, hplt, gnad,
                      dropped_input, notes, seed, scale)


def build_demo_corpus(data_dir: Path, out_tsv: Path, labels_tsv: Path, *, seed: int = SEED,
                      scale: float = 1.0, heldout: Mapping[str, int] | None = None,
                      heldout_prefix: Path | None = None) -> dict:
    """Build the demo corpus and its labels; return (and write as JSON) the summary.

    ``scale`` (0 < scale <= 1) multiplies every component size: clean sources are sampled to that
    fraction, noise components get ``round(NOISE_SIZES[k] * scale)`` (at least 1) pairs.
    ``heldout`` (split -> pairs, e.g. ``{"dev": 1000, "test": 2000}``): the clean-mix sets
    (:mod:`marginmine.data.cleanmix`) carved out of the clean pool before noise is derived from it and
    written to ``<heldout_prefix>.<split>.{en,de}`` and ``<heldout_prefix>.<split>.labels.tsv`` (same
    columns as the corpus sidecar, one row per line); no corpus side is a held-out sentence.
    Raises ``InputError`` for missing/misaligned data and ``MarginmineError`` if the noise share
    ends below ``MIN_NOISE_SHARE`` or ids collide.
    """
    if heldout and heldout_prefix is None:
        raise ValueError("heldout needs heldout_prefix")
    inputs = load_demo_inputs(data_dir, seed=seed, scale=scale, heldout=heldout)
    clean_pool, held, guard, notes = inputs.clean_pool, inputs.held, inputs.guard, inputs.notes
    dropped_input, paracrawl, mlqe_mt = inputs.dropped_input, inputs.paracrawl, inputs.mlqe_mt
    m30k_fr, wiki, hplt, gnad = inputs.captions_fr, inputs.wiki, inputs.hplt, inputs.gnad

    size = {k: scaled(v, scale) for k, v in NOISE_SIZES.items()}

    def rng(name: str) -> random.Random:
        return component_rng(seed, name)

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
    summary["heldout"] = {split: {"pairs": len(pairs),
                                  "by_origin": dict(sorted(Counter(p.origin for p in pairs).items()))}
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
