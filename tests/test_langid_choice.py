"""The language identifier is a choice (preprocess.langid_model): the bundled fastText lid.176.ftz
(default), a fastText model file of the user's (lid.176.bin; OpenLID/GlotLID labels ``eng_Latn``) or
heliport. Each keeps real sentences of the expected language and removes swapped pairs; the config's
languages are mapped to the identifier's codes, and one it lacks fails the plan."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import heliport  # noqa: F401 (must import: a missing library fails, never skips)
import pytest

from marginmine import cli
from marginmine.errors import MarginmineError
from marginmine.preprocess import langid
from test_workflow_plan import plan


def test_the_plans_list_of_lid176_labels_is_the_models() -> None:
    assert langid.LID176_LABELS == langid.model_labels(None) and len(langid.LID176_LABELS) == 176


def test_languages_map_to_each_identifiers_codes() -> None:
    assert [langid.heliport_code(x) for x in ("en", "de", "fr", "es", "hr", "zh", "eng")] == [
        "eng", "deu", "fra", "spa", "hbs", "cmn", "eng"]
    assert langid.model_labels_of("de", langid.LID176_LABELS) == ["de"]
    openlid = {"eng_Latn", "deu_Latn", "arb_Arab", "zho_Hans", "zho_Hant", "pes_Arab"}   # OpenLID-style labels
    assert langid.model_labels_of("en", openlid) == ["eng_Latn"]
    assert langid.model_labels_of("ar", openlid) == ["arb_Arab"] and langid.model_labels_of("fa", openlid) == [
        "pes_Arab"]                                       # OpenLID's individual languages for the macrolanguages
    assert langid.model_labels_of("zh", openlid) == ["zho_Hans", "zho_Hant"]   # every script of the language
    assert langid.model_labels_of("fr", openlid) == []
    with pytest.raises(MarginmineError, match="heliport identifies no 'xx'"):
        langid.check_language("xx", "heliport")
    with pytest.raises(MarginmineError, match=re.escape("lid.176.ftz (bundled) has no label for 'xx'")):
        langid.check_language("xx")
    with pytest.raises(MarginmineError, match=re.escape("openlid.bin has no label for 'fr' (looked for fr, fra)")):
        langid.check_language("fr", "openlid.bin", openlid)


def test_a_model_files_labels_decide_a_sides_score(monkeypatch) -> None:
    """An OpenLID-style model: the side's score is the probability of its language's label, summed
    over its scripts (the probabilities stand in for the model's)."""
    monkeypatch.setattr(langid, "model_labels", lambda path: frozenset({"zho_Hans", "zho_Hant", "eng_Latn"}))
    monkeypatch.setattr(langid, "language_probs", lambda texts, path: [
        {"zho_Hans": 0.07, "zho_Hant": 0.06, "eng_Latn": 0.8}, {"eng_Latn": 0.99}][:len(texts)])
    facts = [langid.Facts(), langid.Facts()]
    langid.fill_lang_probs(facts, ["a", "b"], "zh", "openlid.bin")
    assert facts[0].lang_prob == pytest.approx(0.13) and facts[1].lang_prob == 0.0
    langid.fill_lang_probs(facts, ["a", "b"], "en", "openlid.bin")
    assert [f.lang_prob for f in facts] == [0.8, 0.99]


@pytest.mark.parametrize("model", [None, "heliport"])
def test_each_identifier_keeps_real_pairs_and_removes_swapped_ones(model, real_data: Path, tmp_path: Path) -> None:
    news = real_data / "wmt-newstest-ende"
    en = (news / "newstest2013.en").read_text(encoding="utf-8").splitlines()[:400]
    de = (news / "newstest2013.de").read_text(encoding="utf-8").splitlines()[:400]
    rows = [f"{a}\t{b}" for a, b in zip(en, de)] + [f"{b}\t{a}" for a, b in zip(en[:50], de[:50])]
    src = tmp_path / "in.tsv.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    extra = ["--langid-model", model] if model else []
    assert cli.main(["preprocess", "--src-lang", "en", "--tgt-lang", "de", "--input", str(src), "--output",
                     str(out / "kept.tsv.gz"), "--rejects", str(out / "rej.tsv.gz"), "--ledger",
                     str(out / "ledger.json"), *extra]) == 0
    step = next(s for s in json.loads((out / "ledger.json").read_text())["steps"] if s["step"] == "langid")
    assert step["reasons"].get("wrong_lang_both", 0) >= 48            # the 50 swapped pairs (2 may be duplicates)
    assert step["removed"] <= 50 + 400 * 0.02                          # and few of the 400 real news pairs


def test_the_plan_passes_the_identifier_and_refuses_a_missing_model(real_data: Path) -> None:
    assert plan("config/test.yaml", real_data).langid_args == ""       # the default: the command as before
    p = plan("config/test.yaml", real_data, lambda c: c["preprocess"].update(langid_model="heliport"))
    assert p.langid_args == "--langid-model heliport"
    with pytest.raises(ValueError, match=re.escape("preprocess.langid_model: ")):
        plan("config/test.yaml", real_data, lambda c: c["preprocess"].update(langid_model="models/lid.176.bin"))
