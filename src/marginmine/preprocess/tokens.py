"""Moses tokenisation, used to count tokens and compare the two sides of a pair.

:func:`tokenize` gives exactly the tokens of sacremoses'
``MosesTokenizer(lang).tokenize(text, escape=False)`` (the reference, :func:`moses_tokenize`), about
five times faster: :class:`FastMoses` runs the same compiled regular expressions of the same
sacremoses object in the same order, and only leaves out work whose result is known without doing
it (see its docstring). ``tests/test_tokens.py`` proves the two equal on real sentences of the data
directory, and ``bench/bench_preprocess.py --moses-identity`` on more than 100,000 of them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # sacremoses takes ~0.5 s to import: only the commands that tokenize pay it
    from sacremoses import MosesDetokenizer, MosesTokenizer


_HAS_LETTER = re.compile(r"[^\W\d_]")


@lru_cache(maxsize=None)
def moses(lang: str) -> MosesTokenizer:
    """One cached sacremoses tokenizer per language (construction compiles many regexes)."""
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


@lru_cache(maxsize=None)
def moses_detokenizer(lang: str) -> MosesDetokenizer:
    """One cached detokenizer per language."""
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def detokenize(text: str, lang: str) -> str:
    """Running text from a Moses-tokenized line (``it &apos;s , fine .`` -> ``it's, fine.``)."""
    return moses_detokenizer(lang).detokenize(text.split())


_BACKREF = re.compile(r"\\(\d)")


def _replacement(template: str) -> str | Callable[[re.Match[str]], str]:
    """What ``Pattern.sub`` is given for a sacremoses replacement ``template``: the template itself if
    it is literal, else a function building the same string from the match.

    ``Pattern.sub`` with a template that holds a group reference calls ``re._subx`` on every call,
    which hashes the whole compiled pattern (sacremoses' character classes are thousands of code
    points long) before it scans anything; a function is used as it is. The function does what
    ``re``'s template expansion does (an unmatched group gives ""). Templates with anything but
    single-digit group references (``\\g<1>``, ``\\12``, escapes) stay strings."""
    if "\\" not in template:
        return template
    parts = _BACKREF.split(template)
    literals, groups = parts[0::2], [int(g) for g in parts[1::2]]
    if any("\\" in lit or (i > 0 and lit[:1].isdigit()) for i, lit in enumerate(literals)):
        return template
    if len(groups) == 1:
        a, b = literals
        (g,) = groups
        return lambda m: a + (m.group(g) or "") + b
    if len(groups) == 2:
        a, b, c = literals
        g1, g2 = groups
        return lambda m: a + (m.group(g1) or "") + b + (m.group(g2) or "") + c
    return template


class FastMoses:
    """sacremoses' ``tokenize(text, escape=False)`` (no aggressive dash splitting, no protected
    patterns) with the same tokens, built from the sacremoses tokenizer of the language (:func:`moses`).

    Every regular expression, its replacement and its order are the sacremoses object's own (so the
    CJK languages' wider classes, the language's apostrophe rules and its non-breaking prefixes come
    with it); multidots are replaced and restored by its own methods. What is left out or done
    differently, each with why the result cannot change:

    * the whitespace and control-character clean-up is skipped when the text is printable and has
      no double space: every whitespace character but the space, and every character from U+0000 to
      U+001F, is unprintable (``tests/test_tokens.py`` checks every code point), so neither
      expression could match;
    * a step whose expression needs a character the text lacks is skipped: multidots need ``..``,
      the comma rules ``,``, the apostrophe rules ``'``, the final ``.'`` split ``.'``, the
      multidot restore ``MULTI``; an expression that cannot match leaves the text as it is;
    * the non-breaking-prefix pass is sacremoses' ``handles_nonbreaking_prefixes`` with set lookups
      instead of list scans and per-call ``set(IsLower)`` builds, and ``tok[-1] == "."`` instead of
      ``re.search(r"^(\\S+)\\.$", tok)`` (a split token has no whitespace); it is skipped when the
      text has no ``.``, because then no token ends with one;
    * the whitespace clean-up after that pass is left out: the pass joins non-empty tokens without
      whitespace by single spaces, so there is no run of whitespace and nothing to strip;
    * replacement templates with group references become functions (:func:`_replacement`).
    """

    def __init__(self, lang: str):
        ref = self.ref = moses(lang)

        def rule(pair: tuple[re.Pattern[str], str]) -> tuple[re.Pattern[str], Any]:
            return pair[0], _replacement(pair[1])

        self._space, self._junk = ref.DEDUPLICATE_SPACE, ref.ASCII_JUNK
        self._pad = rule(ref.PAD_NOT_ISALNUM)
        self._commas = [rule(r) for r in (ref.COMMA_SEPARATE_1, ref.COMMA_SEPARATE_2, ref.COMMA_SEPARATE_3)]
        if lang == "en":
            apostrophe = ref.ENGLISH_SPECIFIC_APOSTROPHE
        elif lang in ("fr", "it"):
            apostrophe = ref.FR_IT_SPECIFIC_APOSTROPHE
        else:
            apostrophe = [ref.NON_SPECIFIC_APOSTROPHE]
        self._apostrophe = [rule(r) for r in apostrophe]
        self._trailing = rule(ref.TRAILING_DOT_APOSTROPHE)
        numeric = frozenset(ref.NUMERIC_ONLY_PREFIXES)
        self._numeric = numeric
        self._keep_prefix = frozenset(ref.NONBREAKING_PREFIXES) - numeric
        self._lower = frozenset(ref.IsLower)
        self._alpha = frozenset(ref.IsAlpha)

    def tokenize(self, text: str) -> list[str]:
        if not text.isprintable() or "  " in text:
            for regexp, substitution in (self._space, self._junk):
                text = regexp.sub(substitution, text)
        text = text.strip()
        regexp, substitution = self._pad
        text = regexp.sub(substitution, text)
        if ".." in text:
            text = self.ref.replace_multidots(text)
        if "," in text:
            for regexp, substitution in self._commas:
                text = regexp.sub(substitution, text)
        if "'" in text:
            for regexp, substitution in self._apostrophe:
                text = regexp.sub(substitution, text)
        tokens = text.split()
        if "." not in text:
            if "MULTI" in text:
                return self.ref.restore_multidots(" ".join(tokens)).split()
            return tokens
        n = len(tokens)
        lower, alpha, keep, numeric = self._lower, self._alpha, self._keep_prefix, self._numeric
        for i, token in enumerate(tokens):
            if token[-1] == "." and len(token) > 1:
                prefix = token[:-1]
                if (("." in prefix and not alpha.isdisjoint(prefix)) or prefix in keep
                        or (i != n - 1 and tokens[i + 1][0] in lower)):
                    continue
                if prefix in numeric and i + 1 < n and tokens[i + 1][0] in "0123456789":
                    continue
                tokens[i] = prefix + " ."
        text = " ".join(tokens)
        if ".'" in text:
            regexp, substitution = self._trailing
            text = regexp.sub(substitution, text)
        if "MULTI" in text:
            text = self.ref.restore_multidots(text)
        return text.split()


@lru_cache(maxsize=None)
def fast_moses(lang: str) -> FastMoses:
    """One cached :class:`FastMoses` per language."""
    return FastMoses(lang)


def moses_tokenize(text: str, lang: str) -> list[str]:
    """The reference: sacremoses' Moses tokens of ``text``, unescaped, aggressive dash splitting off."""
    return moses(lang).tokenize(text, escape=False)


def tokenize(text: str, lang: str) -> list[str]:
    """Moses tokens of ``text``, unescaped (``&`` stays ``&``), aggressive dash splitting off: the
    tokens of :func:`moses_tokenize`, computed by :class:`FastMoses`."""
    return fast_moses(lang).tokenize(text)


def content_tokens(tokens: list[str]) -> set[str]:
    """Lower-cased tokens containing at least one letter; all tokens if there are none.

    Punctuation and numbers are left out so that "Hello , world ." and "Hallo , Welt ." do not
    count as 50% overlapping, while an untranslated copy overlaps 100%.
    """
    words = {t.lower() for t in tokens if t.isalpha() or _HAS_LETTER.search(t)}
    return words if words else {t.lower() for t in tokens}


def token_overlap(src_tokens: list[str], tgt_tokens: list[str]) -> float:
    """Jaccard overlap of the two sides' content-token sets, in [0, 1] (1 = untranslated copy).

    The paper does not define its "token overlap"; on the 1,048 valid ParaCrawl v3 en-de pairs
    (mostly short, name-heavy web strings) a 50% threshold flags 96 with Jaccard, 183 with the
    shared share of the larger side and 224 of the smaller side, while copies score 1 under all.
    """
    return jaccard(content_tokens(src_tokens), content_tokens(tgt_tokens))


def jaccard(s: set[str], t: set[str]) -> float:
    """``|s & t| / |s | t|``; 0 if either set is empty."""
    if not s or not t:
        return 0.0
    both = len(s & t)
    return both / (len(s) + len(t) - both)


def length_ratio(n_src: int, n_tgt: int) -> float:
    """Longer side over shorter side in tokens (inf if one side has none)."""
    lo, hi = min(n_src, n_tgt), max(n_src, n_tgt)
    return float("inf") if lo == 0 else hi / lo
