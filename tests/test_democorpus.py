"""Tests for marginmine.data.democorpus on the real shared data (small scale) and on toy lists."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path

import pytest

import marginmine.data.demo_sources as dc
from conftest import data_dir
from marginmine.data.demo_noise import make_misaligned, truncate_words, whitespace_variant
from marginmine.data.demo_sources import DemoPair, protected_sets, tatoeba_pairs, tatoeba_split
from marginmine.data.democorpus import build_demo_corpus
from marginmine.errors import InputError, MarginmineError
from marginmine.preprocess.leakage import overlap_report, protected_index
from marginmine.preprocess.normalize import match_form, sentence_key

DATA = data_dir()
SCALE = 0.05


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_rows(path: Path) -> list[list[str]]:
    """TSV rows split on \\n only (str.splitlines would also split on U+2028 etc.)."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [line.split("\t") for line in text[:-1].split("\n")]


def build(tmp: Path, seed: int = 1234) -> tuple[dict, Path, Path]:
    out, labels = tmp / "corpus.tsv", tmp / "labels.tsv"
    summary = build_demo_corpus(DATA, out, labels, seed=seed, scale=SCALE)
    return summary, out, labels


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    summary, out, labels = build(tmp_path_factory.mktemp("demo"))
    rows = read_rows(out)
    label_rows = read_rows(labels)
    return {
        "summary": summary,
        "out": out,
        "labels": labels,
        "rows": rows,
        "header": label_rows[0],
        "label_rows": label_rows[1:],
        "by_id": {r[2]: r for r in rows},
        "kind": {r[0]: r[2] for r in label_rows[1:]},
    }


# ---------------------------------------------------------------------------------------------
# determinism


def test_build_is_byte_identical_for_same_seed_and_differs_for_another(built, tmp_path):
    _, out, labels = build(tmp_path / "again")
    assert sha256(out) == sha256(built["out"])
    assert sha256(labels) == sha256(built["labels"])
    summary_file = labels.with_suffix(".summary.json")
    assert sha256(summary_file) == sha256(built["labels"].with_suffix(".summary.json"))

    _, out2, labels2 = build(tmp_path / "other", seed=99)
    assert sha256(out2) != sha256(built["out"])
    assert sha256(labels2) != sha256(built["labels"])


# ---------------------------------------------------------------------------------------------
# contents


def test_noise_share_kinds_ids_and_labels(built):
    rows, label_rows, summary = built["rows"], built["label_rows"], built["summary"]
    assert built["header"] == ["id", "origin", "kind", "clean"]
    assert all(len(r) == 3 and r[0].strip() and r[1].strip() for r in rows)
    assert all(len(r) == 4 for r in label_rows)

    ids = [r[2] for r in rows]
    assert len(set(ids)) == len(ids), "pair ids must be unique"
    assert [r[0] for r in label_rows] == ids, "labels must be line-aligned with the corpus by id"

    kinds = Counter(r[2] for r in label_rows)
    for kind in dc.KINDS:
        assert kinds[kind] > 0, f"kind {kind} missing"
    assert kinds["paracrawl_V"] > 0 and any(k.startswith("paracrawl_") and k != "paracrawl_V" for k in kinds)
    assert set(kinds) <= set(dc.KINDS) | {k for k in kinds if k.startswith("paracrawl_")}

    for _, origin, kind, clean in label_rows:
        assert clean == ("1" if kind in ("clean", "paracrawl_V") else "0"), (kind, clean)
        assert origin

    noise = sum(r[3] == "0" for r in label_rows)
    assert noise / len(label_rows) >= 0.5
    assert summary["total"] == len(rows)
    assert summary["noise"] == noise
    assert summary["kinds"] == dict(sorted(kinds.items()))
    assert summary["noise_share"] == pytest.approx(noise / len(rows), abs=1e-6)
    on_disk = json.loads(built["labels"].with_suffix(".summary.json").read_text(encoding="utf-8"))
    assert on_disk == summary
    # every drop is counted per reason, with the reasons listed even when zero
    reasons = set(summary["dropped"]["input"])
    assert reasons >= {"encoder_share", "protected:multi30k", "protected:wmt-newstest-ende"}


def test_clean_part_is_mostly_captions_and_uses_every_source(built):
    by_origin = built["summary"]["clean_by_origin"]
    for origin in (dc.ORIGIN_M30K, dc.ORIGIN_TATOEBA, dc.ORIGIN_WMT18, dc.ORIGIN_MLQE, dc.ORIGIN_PARACRAWL):
        assert by_origin.get(origin, 0) > 0, origin
    assert by_origin[dc.ORIGIN_M30K] == max(by_origin.values())


def test_untranslated_copies_have_identical_sides(built):
    copies = [r for r in built["rows"] if built["kind"][r[2]] == "untranslated_copy"]
    assert copies
    assert all(en == de for en, de, _ in copies)
    assert any(pid.startswith("untranslated_copy:de:") for _, _, pid in copies)


def test_near_duplicates_normalise_to_an_existing_clean_pair(built):
    near = [r for r in built["rows"] if built["kind"][r[2]] == "near_duplicate"]
    assert near
    for en, de, pid in near:
        source = built["by_id"][pid.removeprefix("near_duplicate:")]
        assert built["kind"][source[2]] == "clean"
        assert (en, de) != (source[0], source[1]), "a near duplicate must differ in raw form"
        assert (match_form(en), match_form(de)) == (match_form(source[0]), match_form(source[1]))


def test_exact_duplicates_copy_a_clean_pair(built):
    dups = [r for r in built["rows"] if built["kind"][r[2]] == "duplicate"]
    assert dups
    for en, de, pid in dups:
        source = built["by_id"][pid.removeprefix("duplicate:")]
        assert (en, de) == (source[0], source[1]) and built["kind"][source[2]] == "clean"


def test_truncated_targets_are_strict_word_prefixes_of_their_clean_german(built):
    cut = [r for r in built["rows"] if built["kind"][r[2]] == "truncated"]
    assert cut
    for en, de, pid in cut:
        source = built["by_id"][pid.removeprefix("truncated:")]
        words, full = de.split(), source[1].split()
        assert en == source[0]
        assert 1 <= len(words) < len(full) and full[: len(words)] == words
        assert 3 * len(full) <= 10 * len(words) <= 6 * len(full), "keeps 30-60% of the words"


def test_misaligned_pairs_join_two_different_clean_pairs(built):
    mis = [r for r in built["rows"] if built["kind"][r[2]] == "misaligned"]
    assert mis
    for en, de, pid in mis:
        a_id, b_id = pid.removeprefix("misaligned:").split("~")
        a, b = built["by_id"][a_id], built["by_id"][b_id]
        assert a_id != b_id and en == a[0] and de == b[1]
        assert match_form(de) != match_form(a[1])


# ---------------------------------------------------------------------------------------------
# overlap with protected sets


def test_protected_sets_lists_every_test_set():
    files = protected_sets(DATA)
    names = {f"{p.parent.name}/{p.name}" for p in files}
    for must in ("multi30k/val.en.gz", "multi30k/val.de.gz", "multi30k/test_2016_flickr.de.gz",
                 "multi30k/test_2018_flickr.en.gz", "wmt-newstest-ende/newstest2013.en",
                 "wmt-newstest-ende/newstest2014.de", "wmt-newstest-ende/newstest2019-ende.en",
                 "laser-tatoeba-v1/tatoeba.deu-eng.deu", "tatoeba-opus-deu-eng/tatoeba-test-v2021-08-07.eng"):
        assert must in names, must
    assert not any(n.startswith("multi30k/train") or n.endswith(".fr.gz") for n in names)
    assert len(files) == len(set(files)) == 36


def test_protected_sets_missing_data_dir_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="data directory not found"):
        protected_sets(tmp_path / "nope")
    (tmp_path / "multi30k").mkdir()
    with pytest.raises(InputError, match="no protected test-set file"):
        protected_sets(tmp_path)


def test_built_corpus_has_no_overlap_with_protected_sets(built):
    report = overlap_report([built["out"]], protected_sets(DATA))
    assert report["pairs"] == len(built["rows"])
    assert report["overlapping_pairs"] == 0, report


def test_overlap_report_finds_one_newstest2014_sentence(tmp_path):
    newstest = (DATA / "wmt-newstest-ende" / "newstest2014.de").read_text(encoding="utf-8").split("\n")
    tsv = tmp_path / "c.tsv"
    tsv.write_text("A dog runs.\tEin Hund rennt.\tx:1\n"
                   f"Some English.\t {newstest[41]}  \tx:2\n"          # whitespace differs
                   "The cat sleeps.\tDie Katze schläft.\tx:3\n", encoding="utf-8")
    report = overlap_report([tsv], protected_sets(DATA))
    assert report["pairs"] == 3
    assert report["overlapping_pairs"] == 1
    assert report["tgt_hits"] == 1 and report["src_hits"] == 0
    assert report["examples"] == [f"{tsv}:2 (x:2)"]
    assert sum(report["by_file"].values()) == 1


def test_guard_drops_protected_and_encoder_share_sentences():
    en, de = tatoeba_pairs(DATA)
    _, enc = tatoeba_split(en, de)
    guard = dc.Guard(protected_index(protected_sets(DATA)),
                      frozenset(sentence_key(x) for i in enc[:50] for x in (en[i], de[i])))
    test_en = (DATA / "wmt-newstest-ende" / "newstest2014.en").read_text(encoding="utf-8").split("\n")[7]
    pairs = [DemoPair("a", test_en, "Etwas.", "x", "clean"),
             DemoPair("b", en[enc[3]] + " ", "Etwas anderes.", "x", "clean"),
             DemoPair("c", "A caption nobody wrote in a test set.", "Eine Beschreibung.", "x", "clean")]
    dropped: Counter[str] = Counter()
    kept = dc.apply_guard(pairs, guard.reason, dropped)
    assert [p.id for p in kept] == ["c"]
    assert dropped == {"protected:wmt-newstest-ende": 1, "encoder_share": 1}


# ---------------------------------------------------------------------------------------------
# Tatoeba split


def test_tatoeba_split_is_disjoint_complete_and_keyed_by_english():
    en, de = tatoeba_pairs(DATA)
    corpus, encoder = tatoeba_split(en, de)
    assert set(corpus).isdisjoint(encoder)
    assert sorted(corpus + encoder) == list(range(len(en)))
    assert 0.12 < len(corpus) / len(en) < 0.18
    side: dict[str, bool] = {}
    for i in corpus:
        assert side.setdefault(match_form(en[i]), True) is True
    for i in encoder:
        assert side.setdefault(match_form(en[i]), False) is False
    assert len(side) < len(en), "the data repeats English sentences, so this checks grouping"
    assert (corpus, encoder) == tatoeba_split(en, de)


def test_tatoeba_split_groups_whitespace_variants_and_checks_lengths():
    en = [f"Sentence number {i}." for i in range(400)]
    en += ["Sentence  number 7. ", "Sentence number\u00a07."]
    de = [f"Satz {i}." for i in range(len(en))]
    corpus, encoder = tatoeba_split(en, de)
    same = {7, 400, 401}
    assert same <= set(corpus) or same <= set(encoder)
    assert 0 < len(corpus) < len(encoder)
    with pytest.raises(ValueError):
        tatoeba_split(en, de[:-1])


# ---------------------------------------------------------------------------------------------
# pure noise functions on toy lists


def test_truncate_words_keeps_a_strict_prefix():
    text = "Ein Mann in  einem blauen Hemd steht auf einer Leiter."
    words = text.split()
    for keep in range(15):
        cut = truncate_words(text, keep).split()
        assert 1 <= len(cut) < len(words) and words[: len(cut)] == cut
        assert len(cut) == min(max(keep, 1), len(words) - 1)


def test_whitespace_variant_changes_only_whitespace():
    rng = random.Random(3)
    for text in ("A dog runs on the beach.", "Hallo!", "Zwei  Leute ", "x"):
        for _ in range(20):
            v = whitespace_variant(text, rng)
            assert v != text and match_form(v) == match_form(text)


def test_make_misaligned_is_a_derangement_within_origin():
    pool = [DemoPair(f"a:{i}", f"English {i}.", f"Deutsch {i}.", "A", "clean") for i in range(30)]
    pool += [DemoPair(f"b:{i}", f"Other {i}.", f"Anders {i}.", "B", "clean") for i in range(30)]
    pool.append(DemoPair("a:dup", "English 0.", "Deutsch X.", "A", "clean"))  # same English as a:0
    out, skipped = make_misaligned(pool, len(pool), random.Random(5))
    assert len(out) + skipped == len(pool)
    by_id = {p.id: p for p in pool}
    for p in out:
        a, b = (by_id[x] for x in p.id.removeprefix("misaligned:").split("~"))
        assert a.id != b.id and a.origin == b.origin == p.origin
        assert p.en == a.en and p.de == b.de and match_form(a.en) != match_form(b.en)


def test_noise_share_below_half_is_an_error(tmp_path, monkeypatch):
    import marginmine.data.democorpus as build  # where the build reads it

    monkeypatch.setattr(build, "NOISE_SIZES", {k: 1 for k in dc.NOISE_SIZES})
    with pytest.raises(MarginmineError, match="noise share"):
        build_demo_corpus(DATA, tmp_path / "c.tsv", tmp_path / "l.tsv", scale=SCALE)
    assert not (tmp_path / "c.tsv").exists()


def test_scale_out_of_range_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        build_demo_corpus(DATA, tmp_path / "c.tsv", tmp_path / "l.tsv", scale=0)
    with pytest.raises(ValueError):
        build_demo_corpus(DATA, tmp_path / "c.tsv", tmp_path / "l.tsv", scale=1.5)
