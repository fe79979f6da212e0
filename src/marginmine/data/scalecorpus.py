"""The scale corpus: a large noisy English-German corpus (5M pairs by default) built offline and
deterministically from the real data in ``data_dir``, to run the workflow at 100k, 1M and 5M pairs.

Every side of every pair is a real sentence, a few real sentences joined with a space (as a crawl's
sentence splitter leaves them), a word-boundary cut of one, or a whitespace-changed copy of one.
Nothing is invented. The sources are the demo corpus' (:mod:`marginmine.data.democorpus`): its clean
pool, ParaCrawl and MLQE-PE pairs and monolingual lines, read by
:func:`~marginmine.data.democorpus.load_demo_inputs` with the demo's seed rule, scale 1.0 and the
demo's clean-mix held-out sizes (:data:`HELDOUT`), so the pool and the held-out dev/test sets are
exactly the demo's for the same seed (``make demo``'s with the default seed): no corpus side is a
sentence of them.

Components (``pairs`` times the share; shares in :data:`COMPONENT_PPM`, parts per million, the same
at every size, so a 100k corpus is a small version of the 5M one):

================== ======= =================================================================================
component          ppm     pairs (kind; ``clean`` = 1 only where said)
================== ======= =================================================================================
clean                12000 real clean pairs of the pool (kind ``clean``, clean = 1)
paracrawl              390 real ParaCrawl v3 pairs (kind ``paracrawl_<label>``, clean = 1 for ``V``)
machine_translated     880 real NMT output of MLQE-PE (the demo's 4,500 segments)
clean_joined         50000 2 (a quarter of the time 3) clean pairs of one origin joined on both sides: true
                           translations (clean = 1)
misaligned          100000 English of clean pair a with German of clean pair b of a's origin (*)
partial_joined      250000 ``x_a x_b`` with ``y_a y_c`` (half aligned; the aligned half first or last) (*)
truncated            80000 a clean or joined pair with one side cut to 55-85% of its words (>= 5 words)
wrong_language       20000 a caption (or two joined) with its French; or two English Wikipedia sentences
untranslated_copy    15000 a clean or joined pair's English (7 in 10) or German copied to both sides
boilerplate          15000 a short HPLT web line (menus, link lists) with a random short German news line
duplicate            20000 an exact copy of one of the last :data:`COPY_WINDOW` non-copy pairs, any kind
near_duplicate       20000 such a copy with its whitespace changed on one or both sides
misaligned_joined     rest 2-3 joined English sentences with 2-3 joined unrelated German ones, one origin (*)
================== ======= =================================================================================

(*) the two sides' word counts are within :data:`MISALIGN_MAX_RATIO` of each other, as a length-based
sentence aligner's mistakes are (and as the workflow's length-ratio filter lets through).

At 5M: 60,000 clean + 250,000 joined + ~1,000 ParaCrawl ``V`` = ~311,000 planted true translations.
Joined parts are clean pairs of the same origin (a crawled page is one site) with at most
:data:`JOIN_PART_MAX_WORDS` words a side, a joined side at most :data:`JOIN_MAX_WORDS` words, so
joined pairs stay within the workflow's 80 tokens. A derived noise pair is never a true translation:
a recombination that puts an English sentence beside one of its pool translations (Tatoeba has
several per sentence) is drawn again. The real components are capped by what the pool holds after
the guard; a shortfall of ``clean`` goes to ``clean_joined`` (the planted share stays), any other to
the rest. The workflow's preprocessing is meant to remove under a tenth (the copies, the other
language, copied sides, some boilerplate and cuts): the rest are the hard cases. ``distinct.
pairs_normalised`` in the summary is what its dedup step keeps.

Streaming build: the component of each corpus line comes from one seeded shuffle of component labels
(a ``bytearray``); each component draws its pairs from its own generator (in
:mod:`marginmine.data.scale_components`) and its own ``component_rng(seed, "scale:<component>")``;
copies draw from a window of recent pairs. No list of 5M pair objects is ever held: memory is the
pool plus a 64-bit digest per id (uniqueness) and 16 bytes per side (distinct counts). A line whose
id was used before is drawn again (counted as ``redrawn_id_taken``; also when two ids share a 64-bit
digest, odds ~1e-6 at 5M). Pool sentences' match forms are computed once; a joined side's is the
join of its parts' (NFKC never composes across the joining space; tested), so most lines need no
normalisation of their own.

Test-set hygiene, as in the demo: the pool is guarded (protected sets, the encoder's Tatoeba share,
the clean-mix held-out sentences); ParaCrawl and MLQE MT pairs are guarded before the build (drops
in ``dropped.input``); and every corpus line is checked again (:meth:`Guard.reason_keys`), a hit
drawn again and counted per reason in ``dropped.stream``.

Outputs of :func:`build_scale_corpus` (the demo's formats):

* ``out_tsv``: ``en<TAB>de<TAB>id`` lines, no header (gzip if the name ends ``.gz``);
* ``labels_tsv``: header ``id<TAB>origin<TAB>kind<TAB>clean``, one row per corpus line, same order;
* ``labels_tsv.with_suffix(".summary.json")``: the returned summary: seed, pairs, total, clean,
  noise share, counts per kind, origin and component (with its ppm; the real pairs available),
  distinct sentences per side
  (exact text and :func:`~marginmine.preprocess.normalize.sentence_key`) and distinct normalised
  pairs, dropped pairs per reason, redraw notes, the held-out sets;
* with ``heldout_prefix``: the held-out sets as ``<prefix>.<split>.{en,de,labels.tsv}``.

Ids are stable and name what a pair is made of: ``m30k-train:12`` (clean), ``paracrawl:1999``,
``mlqe-mt:test21:4``, ``joined:m30k-train:12+m30k-train:77``, ``misaligned:a~b``,
``misaligned_joined:a+b~c+d``, ``partial_joined:a+b~a+c``, ``truncated:de@7:<unit>`` (side cut to 7
words; a unit is a pool id or ``a+b``), ``wrong_language:fr:<unit>``,
``wrong_language:en:wiki:3~wiki:9``, ``untranslated_copy:en:<unit>``,
``boilerplate:hplt:5~gnad:7``, ``duplicate:<id>``, ``near_duplicate:<id>``. They are unique
(checked).

Determinism: the same data, seed and pairs give byte-identical files; iteration never depends on set
order or ``hash()``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from marginmine.data.demo_sources import KIND_CLEAN, PARACRAWL_CLEAN_LABEL, PARACRAWL_PREFIX, apply_guard, guard_reasons
from marginmine.data.democorpus import DemoInputs, load_demo_inputs, write_heldout

# the generators' constants are part of this module's contract (and importable from here)
from marginmine.data.scale_components import (  # noqa: F401 (re-exported, see above)
    COPY_EN_SHARE,
    JOIN_MAX_WORDS,
    JOIN_PART_MAX_WORDS,
    JOIN_THREE_SHARE,
    MAX_DRAWS,
    MISALIGN_MAX_RATIO,
    SCALE_TRUNCATE_KEEP_PERCENT,
    UNIT_JOINED_SHARE,
    Window,
    component_generators,
)
from marginmine.defaults import SCALE_PAIRS, SEED
from marginmine.errors import MarginmineError
from marginmine.io.text import LABEL_COLUMNS, open_text_out
from marginmine.preprocess.normalize import match_form

# --------------------------------------------------------------------------------------------------
# constants

#: the sizes the project runs (the default is :data:`marginmine.defaults.SCALE_PAIRS`)
SIZES = (100_000, 1_000_000, 5_000_000)
#: below this some components would be empty
MIN_PAIRS = 10_000

#: the clean-mix held-out sets the demo carves out (config/demo.yaml corpus.source.heldout)
HELDOUT: dict[str, int] = {"dev": 1000, "test": 2000}

#: share of each component in parts per million of ``pairs``; REST_COMPONENT gets what is left
COMPONENT_PPM: dict[str, int] = {
    "clean": 12_000,
    "paracrawl": 390,
    "machine_translated": 880,
    "clean_joined": 50_000,
    "misaligned": 100_000,
    "partial_joined": 250_000,
    "truncated": 80_000,
    "wrong_language": 20_000,
    "untranslated_copy": 15_000,
    "boilerplate": 15_000,
    "duplicate": 20_000,
    "near_duplicate": 20_000,
}
REST_COMPONENT = "misaligned_joined"
COMPONENTS: tuple[str, ...] = (*COMPONENT_PPM, REST_COMPONENT)
#: components that copy an earlier pair (never the first line; never copied themselves)
COPY_COMPONENTS = ("duplicate", "near_duplicate")
#: kinds whose pairs are true translations (clean = 1)
CLEAN_KINDS = frozenset({KIND_CLEAN, "clean_joined", PARACRAWL_PREFIX + PARACRAWL_CLEAN_LABEL})

#: copies draw from the last COPY_WINDOW non-copy pairs
COPY_WINDOW = 100_000

_MILLION = 1_000_000
#: corpus lines written (and counted for the progress log) at a time
_FLUSH = 10_000


# --------------------------------------------------------------------------------------------------
# sizes


def component_counts(pairs: int, available: Mapping[str, int]) -> dict[str, int]:
    """Pairs per component (every name of :data:`COMPONENTS`), summing to ``pairs``.

    ``round(pairs * ppm / 1e6)`` for each share (half up); a component named in ``available`` is
    capped there, the shortfall of ``clean`` going to ``clean_joined`` and any other to the rest.
    """
    if pairs < MIN_PAIRS:
        raise MarginmineError(f"scale corpus: {pairs} pairs is below the minimum {MIN_PAIRS}")
    counts = {name: (ppm * pairs + _MILLION // 2) // _MILLION for name, ppm in COMPONENT_PPM.items()}
    for name, have in available.items():
        short = counts[name] - have
        if short > 0:
            counts[name] = have
            if name == "clean":
                counts["clean_joined"] += short
    counts[REST_COMPONENT] = pairs - sum(counts.values())
    if counts[REST_COMPONENT] < 0:
        raise MarginmineError(f"scale corpus: the component shares leave no room for {REST_COMPONENT}")
    return counts


def line_components(counts: Mapping[str, int], seed: int) -> bytearray:
    """The component (index into :data:`COMPONENTS`) of each corpus line: one seeded shuffle.

    A copy component never comes first (it needs an earlier pair): the first line is swapped with
    the first line of another component.
    """
    order = bytearray()
    for i, name in enumerate(COMPONENTS):
        order += bytes([i]) * counts[name]
    random.Random(f"{seed}:scale:order").shuffle(order)
    copies = {COMPONENTS.index(c) for c in COPY_COMPONENTS}
    if order and order[0] in copies:
        j = next((j for j, c in enumerate(order) if c not in copies), None)
        if j is None:
            raise MarginmineError("scale corpus: every line would copy an earlier one")
        order[0], order[j] = order[j], order[0]
    return order


# --------------------------------------------------------------------------------------------------
# the build


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _distinct(buf: bytearray) -> int:
    import numpy as np

    return int(np.unique(np.frombuffer(buf, dtype="V16")).size) if buf else 0


def build_scale_corpus(data_dir: Path, out_tsv: Path, labels_tsv: Path, *, pairs: int = SCALE_PAIRS,
                       seed: int = SEED, heldout: Mapping[str, int] | None = None,
                       heldout_prefix: Path | None = None) -> dict:
    """Build the scale corpus of ``pairs`` pairs and its labels; return (and write) the summary.

    ``heldout`` (split -> pairs; default :data:`HELDOUT`, the demo's) sizes the clean-mix sets carved
    out of the pool; they are written only with ``heldout_prefix``. Raises ``InputError`` for missing
    data and ``MarginmineError`` for a size below :data:`MIN_PAIRS` or a component that runs dry.
    """
    inputs = load_demo_inputs(data_dir, seed=seed, scale=1.0, heldout=HELDOUT if heldout is None else heldout)
    return write_scale_corpus(inputs, out_tsv, labels_tsv, pairs=pairs, heldout_prefix=heldout_prefix)


def write_scale_corpus(inputs: DemoInputs, out_tsv: Path, labels_tsv: Path, *, pairs: int = SCALE_PAIRS,
                       heldout_prefix: Path | None = None) -> dict:
    """The build from read inputs (:func:`load_demo_inputs` at scale 1.0 with held-out sets; its seed
    is the corpus' seed); ``inputs`` is not changed. :func:`build_scale_corpus` reads and calls this."""
    from marginmine.io.progress import Progress

    if inputs.scale != 1.0 or not inputs.held:
        raise MarginmineError("scale corpus: read the inputs at scale 1.0 with clean-mix held-out sets")
    seed = inputs.seed
    dropped_input = Counter(inputs.dropped_input)
    notes = Counter(inputs.notes)
    guard = inputs.guard
    paracrawl = apply_guard(inputs.paracrawl, guard.reason, dropped_input)
    mlqe_mt = apply_guard(inputs.mlqe_mt, guard.reason, dropped_input)
    available = {"clean": len(inputs.clean_pool), "paracrawl": len(paracrawl),
                 "machine_translated": len(mlqe_mt)}
    counts = component_counts(pairs, available)
    order = line_components(counts, seed)

    window = Window(COPY_WINDOW)
    gens = component_generators(inputs, paracrawl, mlqe_mt, counts, notes, window)
    by_index = [gens[name] for name in COMPONENTS]
    copy_index = {COMPONENTS.index(c) for c in COPY_COMPONENTS}

    n = len(order)
    keys = {name: bytearray(16 * n) for name in ("en_text", "en_key", "de_text", "de_key", "pair")}
    en_text, en_key, de_text, de_key, pair_keys = keys.values()
    seen_ids: set[int] = set()
    dropped_stream: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    origins: Counter[str] = Counter()
    clean_origins: Counter[str] = Counter()
    progress = Progress("scale corpus", total=n, every=30.0)
    blake2b = hashlib.blake2b

    out_lines: list[str] = []
    lab_lines: list[str] = []
    with open_text_out(out_tsv) as out, open_text_out(labels_tsv) as lab:
        lab.write("\t".join(LABEL_COLUMNS) + "\n")
        for line, c in enumerate(order):
            gen = by_index[c]
            for _ in range(MAX_DRAWS):
                try:
                    en, de, pid, origin, kind, men, mde = row = next(gen)
                except StopIteration:
                    raise MarginmineError(f"scale corpus: component {COMPONENTS[c]} ran out of pairs"
                                          ) from None
                if men is None:
                    men = match_form(en)
                if mde is None:
                    mde = match_form(de)
                ks = blake2b(men.encode("utf-8"), digest_size=16).digest()
                kt = blake2b(mde.encode("utf-8"), digest_size=16).digest()
                why = guard.reason_keys(ks, kt)
                if why is not None:
                    dropped_stream[why] += 1
                    continue
                h = int.from_bytes(blake2b(pid.encode("utf-8"), digest_size=8).digest(), "big")
                if h in seen_ids:
                    notes["redrawn_id_taken"] += 1
                    continue
                seen_ids.add(h)
                break
            else:
                raise MarginmineError(f"scale corpus: no new pair for component {COMPONENTS[c]} in "
                                      f"{MAX_DRAWS} draws (its pairs are used up or guarded)")
            at = 16 * line
            en_key[at:at + 16] = ks
            de_key[at:at + 16] = kt
            en_text[at:at + 16] = ks if men == en else _digest(en)
            de_text[at:at + 16] = kt if mde == de else _digest(de)
            pair_keys[at:at + 16] = blake2b(ks + kt, digest_size=16).digest()
            clean = kind in CLEAN_KINDS
            kinds[kind] += 1
            origins[origin] += 1
            if clean:
                clean_origins[origin] += 1
            if c not in copy_index:
                window.add(row if row[5] is not None and row[6] is not None
                           else (en, de, pid, origin, kind, men, mde))
            out_lines.append(f"{en}\t{de}\t{pid}\n")
            lab_lines.append(f"{pid}\t{origin}\t{kind}\t{int(clean)}\n")
            if len(out_lines) == _FLUSH:
                out.write("".join(out_lines))
                lab.write("".join(lab_lines))
                out_lines.clear()
                lab_lines.clear()
                progress.tick(_FLUSH)
        out.write("".join(out_lines))
        lab.write("".join(lab_lines))
        progress.tick(len(out_lines))
        progress.done()

    total = n
    clean = sum(clean_origins.values())
    summary = {
        "seed": seed,
        "pairs": pairs,
        "total": total,
        "clean": clean,
        "noise": total - clean,
        "noise_share": round((total - clean) / total, 6),
        "available": available,
        "components": {name: {"ppm": COMPONENT_PPM.get(name), "pairs": counts[name],
                              "share": round(counts[name] / total, 6)} for name in COMPONENTS},
        "kinds": dict(sorted(kinds.items())),
        "origins": dict(sorted(origins.items())),
        "clean_by_origin": dict(sorted(clean_origins.items())),
        "distinct": {
            "en": {"text": _distinct(en_text), "normalised": _distinct(en_key)},
            "de": {"text": _distinct(de_text), "normalised": _distinct(de_key)},
            "pairs_normalised": _distinct(pair_keys),
        },
        "dropped": {
            "input": {r: dropped_input.get(r, 0) for r in guard_reasons() + ["duplicate_input_pair"]},
            "stream": {r: dropped_stream.get(r, 0) for r in guard_reasons()},
        },
        "notes": dict(sorted(notes.items())),
        "heldout": {split: {"pairs": len(ps),
                            "by_origin": dict(sorted(Counter(p.origin for p in ps).items()))}
                    for split, ps in inputs.held.items()},
    }
    if heldout_prefix is not None:
        for split, ps in inputs.held.items():
            write_heldout(ps, Path(f"{heldout_prefix}.{split}"))
    with open_text_out(Path(labels_tsv).with_suffix(".summary.json")) as fh:
        fh.write(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return summary
