"""The fast Moses tokenizer gives sacremoses' tokens: on real en and de sentences of the data
directory, on made-up strings full of the characters its shortcuts depend on, and with the facts
about Unicode those shortcuts rest on checked for every code point.

This file samples the real sentences so that it runs in seconds; ``bench/bench_preprocess.py
--moses-identity`` compares every sentence of the same files (more than 400,000).
"""

from __future__ import annotations

import gzip
import random
import re
import sys
from pathlib import Path

import pytest

from marginmine.preprocess.tokens import FastMoses, _replacement, moses_tokenize, tokenize

#: (language, file in the data directory, TSV column or None); every line is a sentence
SOURCES = [
    ("en", "tatoeba-manythings-deu-eng-2018/train.nooverlap.en", None),
    ("de", "tatoeba-manythings-deu-eng-2018/train.nooverlap.de", None),
    ("de", "mono-de-news/10kGNAD.test.sentences.de", None),
    ("en", "mono-en-wiki-web/wikitext2.valid+test.sentences.detok.en", None),
    ("en", "mono-en-wiki-web/hplt-en_100+101.en-lines.tsv", 2),
    ("en", "multi30k/train.en.gz", None),
    ("de", "multi30k/train.de.gz", None),
    *[(lang, f"wmt18-pcf-testsets-deen/{name}.{lang}", None)
      for name in ("Acquis", "EMEA", "KDE4", "globalvoices-2017", "iwslt2017-tst2017") for lang in ("en", "de")],
    ("en", "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv", 2),
    ("de", "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv", 3),
]


def sample(data: Path, per_file: int) -> dict[str, list[str]]:
    """About ``per_file`` evenly spaced lines of each source, by language."""
    out: dict[str, list[str]] = {"en": [], "de": []}
    for lang, name, column in SOURCES:
        path = data / name
        with (gzip.open(path, "rt", encoding="utf-8") if name.endswith(".gz") else open(path, encoding="utf-8")) as fh:
            lines = [line.rstrip("\n") for line in fh]
        if column is not None:
            lines = [line.split("\t")[column] for line in lines]
        step = max(1, len(lines) // per_file)
        out[lang] += lines[::step]
    return out


def differences(sentences: list[str], lang: str) -> list[tuple[str, list[str], list[str]]]:
    return [(s, ref, ours) for s in sentences
            if (ref := moses_tokenize(s, lang)) != (ours := tokenize(s, lang))]


def test_the_tokens_of_sacremoses_on_real_sentences(real_data: Path) -> None:
    by_lang = sample(real_data, 700)
    assert min(len(v) for v in by_lang.values()) > 5000
    for lang, sentences in by_lang.items():
        assert differences(sentences, lang) == [], lang


#: the characters and strings the fast path's shortcuts and sacremoses' rules turn on
PIECES = ["a", "A", "b", "s", "T", "1", "9", ".", "..", ",", "'", '"', "`", "´", "’", " ", "  ", "\t", "\n",
          "\r", "\x01", "\x1c", "\x85", "\xa0", "\u2009", "\u200b", "\u3000", "-", "--", "_", "/", "@", "#",
          "$", "%", "&", "(", ")", "[", "]", "?", "!", "…", "é", "ß", "Ü", "²", "½", "٣", "中", "DOT", "MULTI",
          "DOTMULTI", "THISISPROTECTED", "No", "Nr", "Art", "pp", "Dr", "St", "e.g", "U.S", "http://x.y/z", "n't",
          "'s", "'ll", "ca", "cannot"]


@pytest.mark.parametrize("lang", ["en", "de", "fr", "zh"])
def test_the_tokens_of_sacremoses_on_made_up_strings(lang: str) -> None:
    rng = random.Random(7)
    n = 1000 if lang == "zh" else 6000  # sacremoses takes ~1 ms a string with the CJK classes
    strings = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 16))) for _ in range(n)]
    strings += ["Wait... what?", "U.S. Army", "No. 5 and No. five", "Nr. 5", "e.g. this", "''quoted''",
                "It's 'quoted.'", "He said: 'yes.'", "a.'", "x..y", "....", "Mr. Smith", "A. B. c", "DOTDOTMULTI x",
                "", " ", "\t\n", "\x00\x1f", "5,300 and A,B,C", "foo-bar and/or", "(1) [2] {3} <4>"]
    assert differences(strings, lang) == []


def test_the_unicode_facts_the_shortcuts_rest_on() -> None:
    """Every whitespace character but the space, and U+0000-U+001F, is unprintable; re's ``\\s``
    is str.isspace(): so a printable text without a double space has nothing for sacremoses'
    whitespace and control-character clean-up to change."""
    space = re.compile(r"\s")
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        assert (space.match(c) is not None) == c.isspace(), hex(cp)
        if (c.isspace() and c != " ") or cp < 0x20:
            assert not c.isprintable(), hex(cp)


def test_replacement_functions_build_the_templates_strings() -> None:
    pattern = re.compile(r"(a)(b)?")
    for template in (r" \1 ", r"\1 , ", r" , \1", r"\1 ' \2", r"\1 '\2", r"\1' \2", " ' ", ""):
        rep = _replacement(template)
        for text in ("ab", "a", "xaby a"):
            assert pattern.sub(rep, text) == pattern.sub(template, text), (template, text)
    for template in (r"\g<1>", r"\12", r"\1\n"):  # anything else stays a template
        assert _replacement(template) == template


def test_every_language_follows_its_sacremoses_object() -> None:
    """Apostrophe rules and prefixes come from sacremoses per language (fr splits l'homme; en
    keeps "Mr." whole; de keeps "Nr." before a number)."""
    assert tokenize("l'homme", "fr") == moses_tokenize("l'homme", "fr") == ["l'", "homme"]
    assert FastMoses("en").tokenize("Mr. Smith's car.") == ["Mr.", "Smith", "'s", "car", "."]
    assert tokenize("Nr. 5 ist da.", "de") == moses_tokenize("Nr. 5 ist da.", "de")
