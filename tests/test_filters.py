"""The paper's filters on hand-made cases, and fastText language id on real sentences."""

from __future__ import annotations

from marginmine.preprocess.filters import Candidate, LengthFilter, LengthRatioFilter, TokenOverlapFilter, apply_filters
from marginmine.preprocess.langid import LangIdFilter, language_probs
from marginmine.preprocess.tokens import token_overlap, tokenize


def cand(src: str, tgt: str) -> Candidate:
    return Candidate(src, tgt, "en", "de")


def test_moses_tokens_and_overlap() -> None:
    assert tokenize("Hello, world!", "en") == ["Hello", ",", "world", "!"]
    # punctuation does not count as overlap; a copy overlaps fully
    assert token_overlap(tokenize("Hello , world .", "en"), tokenize("Hallo , Welt .", "de")) == 0.0
    assert token_overlap(["Same", "words"], ["same", "words"]) == 1.0


def test_each_filter_verdict() -> None:
    batch = [
        cand("The cat sits on the mat.", "Die Katze sitzt auf der Matte."),    # kept
        cand("Hi", "Hallo"),                                                     # too short
        cand("This is a copied sentence here.", "This is a copied sentence here."),  # copy
        cand("A short one here.", "Ein sehr viel längerer deutscher Satz mit vielen , vielen Wörtern ."),
    ]
    verdicts = apply_filters([LengthFilter(3, 80), TokenOverlapFilter(0.5), LengthRatioFilter(2.0)], batch)
    assert verdicts == [None, ("length", "too_short"), ("overlap", "copy"), ("ratio", "length_ratio")]
    assert LengthFilter(3, 5).reason((3, 6)) == "too_many_tokens"


def test_langid_real_sentences() -> None:
    probs = language_probs(["Die Katze sitzt auf der Matte und schläft.", "The weather is nice today."])
    assert max(probs[0], key=probs[0].get) == "de" and max(probs[1], key=probs[1].get) == "en"
    flt = LangIdFilter(min_prob=0.1)
    batch = [cand("The weather is nice today.", "Das Wetter ist heute schön."),
             cand("The weather is nice today.", "Il fait beau aujourd'hui."),
             cand("Das Wetter ist heute schön.", "The weather is nice today.")]
    assert [flt.accept(s) or flt.reason(s) for s in flt.score(batch)] == [True, "wrong_lang_tgt",
                                                                          "wrong_lang_both"]
