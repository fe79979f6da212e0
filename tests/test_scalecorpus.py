"""Tests for marginmine.data.scalecorpus on the real shared data (a 20,000-pair build) and on its
pure parts (sizes, line order, the join of match forms)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import REPO, data_dir
from marginmine.data.demo_sources import protected_sets
from marginmine.data.democorpus import load_demo_inputs
from marginmine.data.scalecorpus import (
    COMPONENT_PPM,
    COMPONENTS,
    HELDOUT,
    JOIN_MAX_WORDS,
    JOIN_PART_MAX_WORDS,
    MIN_PAIRS,
    REST_COMPONENT,
    SIZES,
    build_scale_corpus,
    component_counts,
    line_components,
    write_scale_corpus,
)
from marginmine.defaults import SCALE_PAIRS, SEED
from marginmine.errors import InputError, MarginmineError
from marginmine.preprocess.leakage import overlap_report
from marginmine.preprocess.normalize import match_form, sentence_key

DATA = data_dir()
PAIRS = 20_000
CLEAN_KINDS = {"clean", "clean_joined", "paracrawl_V"}
DERIVED = ("clean_joined", "misaligned", "misaligned_joined", "partial_joined", "truncated", "wrong_language",
           "untranslated_copy", "boilerplate", "duplicate", "near_duplicate")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_rows(path: Path) -> list[list[str]]:
    """TSV rows split on \\n only (gzip or plain)."""
    import gzip

    raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    text = raw.decode("utf-8")
    assert text.endswith("\n")
    return [line.split("\t") for line in text[:-1].split("\n")]


def outputs(d: Path) -> list[Path]:
    return [d / "corpus.tsv.gz", d / "labels.tsv", d / "labels.summary.json",
            *(d / f"cm.{s}.{x}" for s in HELDOUT for x in ("en", "de", "labels.tsv"))]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("scale")
    inputs = load_demo_inputs(DATA, seed=SEED, heldout=HELDOUT)
    summary = write_scale_corpus(inputs, d / "corpus.tsv.gz", d / "labels.tsv", pairs=PAIRS,
                                 heldout_prefix=d / "cm")
    rows = read_rows(d / "corpus.tsv.gz")
    labels = read_rows(d / "labels.tsv")
    return {"dir": d, "inputs": inputs, "summary": summary, "rows": rows, "header": labels[0],
            "labels": labels[1:], "kind": {r[0]: r[2] for r in labels[1:]},
            "pool": {p.id: p for p in inputs.clean_pool}, "line": {r[2]: i for i, r in enumerate(rows)}}


def of_kind(built: dict, kind: str) -> list[list[str]]:
    rows = [r for r in built["rows"] if built["kind"][r[2]] == kind]
    assert rows, f"no {kind} pairs"
    return rows


# ---------------------------------------------------------------------------------------------
# determinism, size, labels


def test_the_cli_in_another_process_builds_the_same_bytes(built, tmp_path):
    """marginmine scale-corpus reads the data itself, in a process with other str hashes."""
    argv = ["scale-corpus", "--data-dir", str(DATA), "--output", str(tmp_path / "corpus.tsv.gz"),
            "--labels", str(tmp_path / "labels.tsv"), "--pairs", str(PAIRS), "--seed", str(SEED),
            "--heldout", ",".join(f"{k}={v}" for k, v in HELDOUT.items()), "--heldout-prefix", str(tmp_path / "cm")]
    r = subprocess.run([sys.executable, "-m", "marginmine.cli.main", *argv], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONHASHSEED="4321"), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for mine, theirs in zip(outputs(tmp_path), outputs(built["dir"]), strict=True):
        assert sha256(mine) == sha256(theirs), mine.name


def test_size_is_exact_and_labels_follow_the_corpus_line_by_line(built):
    rows, labels, summary = built["rows"], built["labels"], built["summary"]
    assert len(rows) == len(labels) == summary["total"] == summary["pairs"] == PAIRS
    assert built["header"] == ["id", "origin", "kind", "clean"]
    assert all(len(r) == 3 and r[0].strip() and r[1].strip() for r in rows)
    ids = [r[2] for r in rows]
    assert len(set(ids)) == len(ids), "ids must be unique"
    assert [r[0] for r in labels] == ids
    for _, origin, kind, clean in labels:
        assert origin and clean == ("1" if kind in CLEAN_KINDS else "0"), (kind, clean)
    kinds = Counter(r[2] for r in labels)
    assert summary["kinds"] == dict(sorted(kinds.items()))
    assert summary["clean"] == sum(kinds[k] for k in CLEAN_KINDS)
    assert summary["noise_share"] == pytest.approx(1 - summary["clean"] / PAIRS, abs=1e-6)
    on_disk = json.loads((built["dir"] / "labels.summary.json").read_text(encoding="utf-8"))
    assert on_disk == summary
    # every component got exactly its count; ParaCrawl pairs keep their human label as kind
    made = {k: kinds[k] for k in COMPONENTS if k != "paracrawl"}
    made["paracrawl"] = sum(v for k, v in kinds.items() if k.startswith("paracrawl_"))
    assert made == {k: v["pairs"] for k, v in summary["components"].items()}
    assert set(summary["dropped"]["stream"]) >= {"encoder_share", "clean_mix_heldout", "protected:multi30k"}


def test_every_kind_is_present(built):
    kinds = built["summary"]["kinds"]
    for kind in ("clean", "machine_translated", "paracrawl_V", *DERIVED):
        assert kinds.get(kind, 0) > 0, kind
    assert any(k.startswith("paracrawl_") and k != "paracrawl_V" for k in kinds)
    paracrawl = {k for k in kinds if k.startswith("paracrawl_")}
    assert set(kinds) <= {"clean", "machine_translated", *DERIVED} | paracrawl


# ---------------------------------------------------------------------------------------------
# what the pairs are made of


def test_planted_translations_are_real_clean_pairs_or_joins_of_them(built):
    pool = built["pool"]
    for en, de, pid in of_kind(built, "clean"):
        assert (en, de) == (pool[pid].en, pool[pid].de)
    for en, de, pid in of_kind(built, "clean_joined"):
        parts = [pool[i] for i in pid.removeprefix("joined:").split("+")]
        assert 2 <= len(parts) <= 3 and len({p.origin for p in parts}) == 1
        assert en == " ".join(p.en for p in parts) and de == " ".join(p.de for p in parts)
        assert len(en.split()) <= JOIN_MAX_WORDS and len(de.split()) <= JOIN_MAX_WORDS
        assert len({match_form(p.en) for p in parts}) == len(parts)


def test_recombinations_are_built_from_pool_pairs_and_are_not_translations(built):
    pool = built["pool"]
    true = {(match_form(p.en), match_form(p.de)) for p in pool.values()}

    def parts(unit: str) -> list:
        return [pool[i] for i in unit.split("+")]

    for en, de, pid in of_kind(built, "misaligned"):
        a, b = (pool[i] for i in pid.removeprefix("misaligned:").split("~"))
        assert (en, de) == (a.en, b.de) and a.origin == b.origin
        assert (match_form(en), match_form(de)) not in true
    for en, de, pid in of_kind(built, "misaligned_joined"):
        src, tgt = (parts(u) for u in pid.removeprefix("misaligned_joined:").split("~"))
        assert en == " ".join(p.en for p in src) and de == " ".join(p.de for p in tgt)
        assert not any((match_form(s.en), match_form(t.de)) in true for s in src for t in tgt)
    for en, de, pid in of_kind(built, "partial_joined"):
        src, tgt = (parts(u) for u in pid.removeprefix("partial_joined:").split("~"))
        assert en == " ".join(p.en for p in src) and de == " ".join(p.de for p in tgt)
        shared = {p.id for p in src} & {p.id for p in tgt}
        assert len(src) == len(tgt) == 2 and len(shared) == 1, pid
        aligned = shared.pop()  # first on both sides or last on both
        assert [p.id for p in src].index(aligned) == [p.id for p in tgt].index(aligned)
        other_en, other_de = (p for p in src if p.id != aligned), (p for p in tgt if p.id != aligned)
        assert (match_form(next(other_en).en), match_form(next(other_de).de)) not in true


def test_cuts_copies_and_other_languages(built):
    pool = built["pool"]
    rows, line = built["rows"], built["line"]
    for en, de, pid in of_kind(built, "truncated"):
        side_keep, unit = pid.removeprefix("truncated:").split(":", 1)
        side, keep = side_keep.split("@")
        src = [pool[i] for i in unit.split("+")]
        full_en, full_de = " ".join(p.en for p in src), " ".join(p.de for p in src)
        cut, full = (de, full_de) if side == "de" else (en, full_en)
        assert (en if side == "de" else de) == (full_en if side == "de" else full_de)
        assert cut.split() == full.split()[:int(keep)] and int(keep) < len(full.split())
    for en, de, pid in of_kind(built, "untranslated_copy"):
        assert en == de
    assert any(pid.startswith("untranslated_copy:de:") for *_, pid in of_kind(built, "untranslated_copy"))
    wrong = of_kind(built, "wrong_language")
    assert {pid.split(":")[1] for *_, pid in wrong} == {"fr", "en"}
    for en, de, pid in wrong:
        if pid.startswith("wrong_language:fr:"):
            assert en == " ".join(pool[i].en for i in pid.removeprefix("wrong_language:fr:").split("+"))
    for en, de, pid in of_kind(built, "duplicate"):
        source = pid.removeprefix("duplicate:")
        assert line[source] < line[pid]
        assert rows[line[source]][:2] == [en, de]
        assert built["kind"][source] not in ("duplicate", "near_duplicate")
    for en, de, pid in of_kind(built, "near_duplicate"):
        src_en, src_de, _ = rows[line[pid.removeprefix("near_duplicate:")]]
        assert line[pid.removeprefix("near_duplicate:")] < line[pid]
        assert (en, de) != (src_en, src_de) and (match_form(en), match_form(de)) == (match_form(src_en),
                                                                                        match_form(src_de))


# ---------------------------------------------------------------------------------------------
# test-set hygiene


def test_no_side_is_a_protected_encoder_or_held_out_sentence(built):
    report = overlap_report([built["dir"] / "corpus.tsv.gz"], protected_sets(DATA))
    assert report["pairs"] == PAIRS and report["overlapping_pairs"] == 0, report
    held = set()
    for split in HELDOUT:
        for side in ("en", "de"):
            held |= {sentence_key(s) for s in (built["dir"] / f"cm.{split}.{side}").read_text(
                encoding="utf-8").split("\n")[:-1]}
    assert len(held) > 2 * sum(HELDOUT.values()) - 10
    guard = built["inputs"].guard
    for en, de, pid in built["rows"]:
        assert sentence_key(en) not in held and sentence_key(de) not in held, pid
        assert guard.reason_keys(sentence_key(en), sentence_key(de)) is None, pid


def test_held_out_sets_are_the_demo_configs():
    """The pool is read with the demo's held-out sizes and seed, so its held-out sets are make demo's."""
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text(encoding="utf-8"))
    source = demo["corpus"]["source"]
    assert source["heldout"] == HELDOUT and source["scale"] == 1.0 and source["seed"] == SEED


def test_held_out_files_have_the_demo_format(built):
    for split, size in HELDOUT.items():
        en = (built["dir"] / f"cm.{split}.en").read_text(encoding="utf-8").split("\n")[:-1]
        labels = read_rows(built["dir"] / f"cm.{split}.labels.tsv")
        assert len(en) == size == len(labels) - 1 == built["summary"]["heldout"][split]["pairs"]
        assert labels[0] == ["id", "origin", "kind", "clean"]


# ---------------------------------------------------------------------------------------------
# distinct sentences and shares


def test_distinct_sentence_counts_are_those_of_the_file(built):
    rows, distinct = built["rows"], built["summary"]["distinct"]
    for side, col in (("en", 0), ("de", 1)):
        assert distinct[side]["text"] == len({r[col] for r in rows})
        assert distinct[side]["normalised"] == len({sentence_key(r[col]) for r in rows})
    assert distinct["pairs_normalised"] == len({(match_form(r[0]), match_form(r[1])) for r in rows})
    # joined components make most sentences new
    assert distinct["en"]["normalised"] > 0.8 * PAIRS and distinct["de"]["normalised"] > 0.8 * PAIRS


def test_shares_are_the_same_at_every_size_and_5m_plants_200k(built):
    available = built["summary"]["available"]
    assert available["clean"] == len(built["inputs"].clean_pool) > 60_000
    sizes = {n: component_counts(n, available) for n in (PAIRS, *SIZES)}
    for n, counts in sizes.items():
        assert sum(counts.values()) == n and set(counts) == set(COMPONENTS)
        for name, ppm in COMPONENT_PPM.items():
            assert abs(counts[name] - ppm * n / 1e6) <= 0.5, (n, name)
    assert 2 * JOIN_PART_MAX_WORDS <= JOIN_MAX_WORDS, "two joinable parts always fit"
    big = sizes[SCALE_PAIRS]
    assert big["clean"] + big["clean_joined"] >= 200_000
    assert {k: v["pairs"] for k, v in built["summary"]["components"].items()} == sizes[PAIRS]
    rest = [sizes[n][REST_COMPONENT] / n for n in sizes]
    assert max(rest) - min(rest) < 1e-4


def test_a_real_component_short_of_pairs_hands_them_on():
    counts = component_counts(20_000_000, {"clean": 60_000, "paracrawl": 2000, "machine_translated": 4500})
    assert counts["clean"] == 60_000 and counts["clean_joined"] == 1_000_000 + 240_000 - 60_000
    assert counts["paracrawl"] == 2000 and sum(counts.values()) == 20_000_000
    with pytest.raises(MarginmineError, match="minimum"):
        component_counts(MIN_PAIRS - 1, {})


def test_a_copy_never_comes_first():
    counts = dict.fromkeys(COMPONENTS, 0) | {"duplicate": 50, "near_duplicate": 50, "clean": 1}
    for seed in range(20):
        order = line_components(counts, seed)
        assert len(order) == 101 and COMPONENTS[order[0]] == "clean"
        assert Counter(COMPONENTS[c] for c in order) == {"duplicate": 50, "near_duplicate": 50, "clean": 1}
    with pytest.raises(MarginmineError):
        line_components(dict.fromkeys(COMPONENTS, 0) | {"duplicate": 3}, 1)


def test_a_joins_match_form_is_the_join_of_its_parts_match_forms(built):
    pool = built["inputs"].clean_pool
    for a, b in zip(pool[::4], pool[1::4]):
        for x, y in ((a.en, b.en), (a.de, b.de)):
            assert match_form(x + " " + y) == match_form(x) + " " + match_form(y)
    odd = ["Tab\u00a0 ", "\u0301combining first", "ﬁne  ligature ", " x"]
    for x in odd:
        for y in odd:
            assert match_form(x + " " + y) == match_form(x) + " " + match_form(y), (x, y)


def test_missing_data_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="data directory not found"):
        build_scale_corpus(tmp_path / "nope", tmp_path / "c.tsv", tmp_path / "l.tsv", pairs=PAIRS)
    assert not (tmp_path / "c.tsv").exists()
