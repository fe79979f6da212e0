"""Text normalisation: what a sentence looks like on output, and the key two sentences share
when they are "the same" for deduplication and test-set overlap checks."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_WS = re.compile(r"\s+")
_NON_SPACE_WS = re.compile(r"[^\S ]")


def _is_plain(text: str, form: str) -> bool:
    """Single spaces, no surrounding whitespace, already in normal ``form`` (as ASCII always is):
    then normalising, collapsing whitespace and stripping leave it unchanged."""
    return ("  " not in text and text[:1] != " " and text[-1:] != " " and _NON_SPACE_WS.search(text) is None
            and (text.isascii() or unicodedata.is_normalized(form, text)))


def clean_text(text: str) -> str:
    """Output form of a sentence: Unicode NFC, whitespace runs collapsed to one space, stripped."""
    if _is_plain(text, "NFC"):
        return text
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def match_form(text: str) -> str:
    """Comparison form: NFKC (full-width, ligatures, non-breaking spaces folded), whitespace collapsed.

    Case and punctuation are kept: "Hello." and "hello." are different sentences.
    """
    if _is_plain(text, "NFKC"):
        return text
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def pair_key(src: str, tgt: str) -> bytes:
    """16-byte BLAKE2b digest of the normalised pair (collision odds ~n^2/2^129: none in practice)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(match_form(src).encode("utf-8"))
    h.update(b"\t")
    h.update(match_form(tgt).encode("utf-8"))
    return h.digest()


def sentence_key(text: str) -> bytes:
    """16-byte digest of one normalised sentence (test-set overlap checks)."""
    return hashlib.blake2b(match_form(text).encode("utf-8"), digest_size=16).digest()
