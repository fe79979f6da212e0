"""The score-kind plug-in interface: what turns one batch of pairs into one score per pair.

A *scorer* is a name given in the config (``scorers:``): an encoder, a *kind* and the kind's
params. A kind is a frozen dataclass registered with :func:`register`; its fields are its params
(their defaults are the CLI's defaults; the schema's ``scoring.k`` must agree, tested), and it
scores a :class:`Batch`:

    @register("length-ratio")
    @dataclass(frozen=True)
    class LengthRatio:
        mines: ClassVar[str | None] = None        # no margin function: not usable for mining
        def score(self, batch: Batch) -> np.ndarray:
            ...one float per pair...

Kinds that are a margin function of the kNN neighbourhoods set ``mines`` to that function's name
(:mod:`marginmine.search.margin`), which lets the BUCC-style mining benchmark retrieve with them. A
user's own kinds live in any importable module named in the config's ``plugins:`` list (the CLI
imports it before looking kinds up); nothing in the workflow changes.

A *fitted* kind (``fitted: ClassVar[bool] = True``, e.g. ``calibrated``) has a head trained on an
encoder's embeddings of held-out pairs: ``fit(u, v, seed) -> (arrays, stats)`` and
``apply(arrays, u, v) -> scores``, and a ``head`` param naming the fitted head's directory, which
the workflow fits once per scorer (``marginmine fit-scorer``, :mod:`marginmine.scoring.heads`) and
fills in. Kinds with ``pair_scores(u, v)`` score pairs found by mining with their own score.

A kind that votes over translations (``translated: ClassVar[bool] = True``, e.g. ``vote``) needs
each side's sentences translated into the other language and embedded (the workflow translates and
embeds them, ``marginmine score --src-translated/--tgt-translated`` passes them to the batch).

A kind that scores from the vectors alone says ``texts: ClassVar[bool] = False`` (every built-in
kind does): when no kind of a score file reads texts and its embeddings are precomputed, the batch
holds each line's 16-byte digest in place of its text (a 5M-pair batch: 160 MB instead of about
2 GB). A kind that does not say gets the texts.

A :class:`Batch` computes what several kinds share once: the pairs' cosines, per ``k`` the
neighbourhood means and the translate-then-vote candidate sets. Kinds must score each pair from its
batch only (the scoring contract in :mod:`marginmine.scoring.files`: split files give
byte-identical scores).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Protocol, Sequence

import numpy as np

from marginmine.errors import MarginmineError
from marginmine.search.knn import IndexSpec

#: scorer names: also file-name parts (``<name>.<N>.tsv.gz``) and score-file column names
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: selection methods that are not scorers
BUILTIN_METHODS = ("random", "unfiltered")


def repairing(n: int, seed: int | Sequence[int]) -> np.ndarray:
    """A seeded permutation of ``range(n)`` that is one cycle through all ``n`` (for ``n >= 2`` no
    index maps to itself; ``n = 1``: the identity). ``seed``: an int or a sequence of ints (e.g. the
    run's seed and the batch's first line)."""
    order = np.random.default_rng(seed).permutation(n)
    perm = np.empty(n, dtype=np.int64)
    perm[order] = np.roll(order, -1)
    return perm


@dataclass
class Batch:
    """One scoring batch: the pairs' texts, the distinct sentences' embeddings (``xu[gx[i]]`` is
    pair i's source), and the kNN index to search them with. Shared results are cached. When the
    embeddings are read from files and no kind reads texts (``texts = False``), ``src`` and ``tgt``
    hold the lines' 16-byte digests instead (:func:`marginmine.search.margin.text_digests`)."""

    src: Sequence[str] | np.ndarray
    tgt: Sequence[str] | np.ndarray
    xu: np.ndarray
    yu: np.ndarray
    gx: np.ndarray
    gy: np.ndarray
    spec: IndexSpec = IndexSpec(kind="flat")
    #: ``translated("src")``: the embeddings of the distinct sources' translations into the target
    #: language, row for row with ``xu`` (``"tgt"``: the targets' into the source language, as ``yu``)
    translated: Callable[[str], np.ndarray] | None = None
    #: a directory where each kNN search keeps its finished query blocks (a killed job resumes)
    scratch: Path | None = None
    _cos: np.ndarray | None = field(default=None, repr=False)
    _means: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False)
    _votes: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # k -> vote_partners
    #: the batch this one re-pairs (:meth:`repaired`): its neighbourhood means are used
    _origin: "Batch | None" = field(default=None, repr=False)
    #: each distinct source's two nearest distinct targets, kept from the first source-side search
    _nearest: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.gx)

    def cosine(self) -> np.ndarray:
        """float32 cosine of every pair (unit rows, accumulated in float64)."""
        if self._cos is None:
            from marginmine.search.margin import gathered_cosines

            self._cos = gathered_cosines(self.xu, self.yu, self.gx, self.gy)
        return self._cos

    def repaired(self, seed: int | Sequence[int]) -> "Batch":
        """The same sentences re-paired at random: pair i's source with the target of pair
        ``repairing(len(self), seed)[i]``, a seeded single cycle, so no line keeps its own target.
        Pairs that are almost surely not translations, scored against the same neighbourhoods: the
        new batch takes its k-NN means from this one (each sentence's neighbours among the batch's
        distinct sentences do not depend on the pairing; an approximate index's candidates are this
        batch's partners) and the vote searches' mutual-best partners (they depend on the distinct
        sentences only), and computes its cosines and vote sets anew. Where sentences repeat, a
        re-paired line can still be a pair of this batch (another line with the same source and
        target): :meth:`original_pairs` marks those. A batch of fewer than two pairs, or one that is
        itself re-paired, is refused."""
        if self._origin is not None:
            raise ValueError("a re-paired batch cannot be re-paired again (two cycles can restore original pairs)")
        if len(self) < 2:
            raise ValueError(f"a batch of {len(self)} pair(s) cannot be re-paired")
        perm = repairing(len(self), seed)
        tgt = self.tgt[perm] if isinstance(self.tgt, np.ndarray) else [self.tgt[i] for i in perm]
        return dataclasses.replace(self, tgt=tgt, gy=self.gy[perm], _cos=None, _means={}, _votes={}, _origin=self)

    def hard_repaired(self) -> "Batch":
        """The same sources each paired with its nearest target that is not its own (among the
        batch's distinct targets, by the batch's index): a *hard* re-pairing, the kind of noise a
        misaligned neighbour or a related sentence makes, scored against the same neighbourhoods as
        :meth:`repaired`. A target may serve several sources. :meth:`original_pairs` marks the
        re-paired lines that are still a pair of this batch. A batch whose targets are all one
        sentence, or one that is itself re-paired, is refused. The neighbours come from the margin's
        source-side search where it ran (k >= 2), else from a search of their own. A neighbour an
        approximate index did not find (-1) leaves the line its own target: an original pair, left
        out by :meth:`original_pairs`."""
        if self._origin is not None:
            raise ValueError("a re-paired batch cannot be re-paired again")
        if len(self.yu) < 2:
            raise ValueError(f"a batch of {len(self.yu)} distinct target(s) cannot be re-paired by neighbour")
        idx = self._nearest
        if idx is None:
            from marginmine.search.knn import knn

            idx = knn(self.xu, self.yu, 2, spec=self.spec, what="kNN hard re-pairing")[1]
        own = self.gy
        first, second = idx[self.gx, 0], idx[self.gx, 1]
        gy = np.where(first == own, second, first)
        gy = np.where(gy < 0, own, gy).astype(self.gy.dtype)
        line_of = np.empty(len(self.yu), np.int64)  # a line holding each distinct target
        line_of[self.gy[::-1]] = np.arange(len(self.gy))[::-1]
        lines = line_of[gy]
        tgt = self.tgt[lines] if isinstance(self.tgt, np.ndarray) else [self.tgt[i] for i in lines]
        return dataclasses.replace(self, tgt=tgt, gy=gy, _cos=None, _means={}, _votes={}, _origin=self,
                                   _nearest=None)

    def original_pairs(self) -> np.ndarray:
        """bool per pair: the pair (its distinct source and target) is also a pair of the batch this
        one re-pairs (all False for a batch that is not re-paired)."""
        if self._origin is None:
            return np.zeros(len(self), dtype=bool)
        width = np.int64(max(int(self.yu.shape[0]), 1))
        keys = self._origin.gx.astype(np.int64) * width + self._origin.gy.astype(np.int64)
        return np.isin(self.gx.astype(np.int64) * width + self.gy.astype(np.int64), keys)

    def side_mean(self, side: str, k: int) -> np.ndarray:
        """float32 per distinct sentence of ``side`` (``src``: its k-NN among the batch's distinct
        targets; ``tgt``: among the distinct sources): the mean similarity. One kNN search per side
        and k, shared by every scorer; an approximate index always considers the sentence's own
        partners in the batch (:func:`marginmine.search.margin.partners`)."""
        if self._origin is not None:
            return self._origin.side_mean(side, k)
        if (side, k) not in self._means:
            from marginmine.search.knn import knn
            from marginmine.search.margin import knn_mean, partners

            query, base = (self.xu, self.yu) if side == "src" else (self.yu, self.xu)
            gq, go = (self.gx, self.gy) if side == "src" else (self.gy, self.gx)
            scratch = self.scratch / f"{side}-k{k}" if self.scratch is not None else None
            approximate = self.spec.resolved(len(base)).kind != "flat"
            sims, idx = knn(query, base, k, spec=self.spec, scratch=scratch, what=f"kNN {side} (k={k})",
                            candidates=partners(gq, go, len(query)) if approximate else None)
            self._means[(side, k)] = knn_mean(sims)
            if side == "src" and idx.shape[1] >= 2:
                self._nearest = idx[:, :2]  # the hard re-pairing's neighbours, from the search already made
        return self._means[(side, k)]

    def neighbourhood_mean(self, k: int) -> np.ndarray:
        """float64 per pair: the mean of its source's k-NN similarity (among the batch's distinct
        targets) and its target's (among the distinct sources), averaged - the margin's ``b``."""
        if len(self) == 0:
            return np.zeros(0)
        return (self.side_mean("src", k)[self.gx].astype(np.float64)
                + self.side_mean("tgt", k)[self.gy].astype(np.float64)) / 2

    def source_mean(self, k: int) -> np.ndarray:
        """float64 per pair: its source's k-NN similarity alone (a one-sided margin's ``b``)."""
        if len(self) == 0:
            return np.zeros(0)
        return self.side_mean("src", k)[self.gx].astype(np.float64)


    def vote_partners(self, k: int) -> np.ndarray:
        """The original, forward-translated and backward-translated searches' mutual-best partners of
        the batch's distinct sentences (:func:`marginmine.scoring.votes.vote_partners`): a re-paired
        batch takes its origin's, as they do not depend on the pairing."""
        if self._origin is not None:
            return self._origin.vote_partners(k)
        if k not in self._votes:
            from marginmine.scoring.votes import vote_partners

            if self.translated is None:
                raise MarginmineError("a vote scorer needs both sides' translations embedded: give marginmine score "
                                      "--src-translated and --tgt-translated (the workflow translates and embeds "
                                      "them for kinds that say `translated`)")
            self._votes[k] = vote_partners(self.xu, self.yu, self.translated("src"), self.translated("tgt"), k,
                                           self.spec)
        return self._votes[k]

    def vote_sets(self, k: int) -> np.ndarray:
        """bool ``(pairs, 3)``: each pair found (or not) by the original, forward-translated and
        backward-translated searches of this batch (:func:`marginmine.scoring.votes.found_in`)."""
        from marginmine.scoring.votes import found_in

        return found_in(self.vote_partners(k), self.gx, self.gy)


class ScoreKind(Protocol):
    """A registered kind (a frozen dataclass whose fields are its params)."""

    mines: ClassVar[str | None]

    def score(self, batch: Batch) -> np.ndarray: ...


KINDS: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make a score kind available under ``name`` (config ``kind:``)."""
    if not NAME.fullmatch(name):
        raise ValueError(f"score kind name {name!r}: letters, digits, '_' and '-', starting with a letter")

    def deco(cls: type) -> type:
        if name in KINDS and KINDS[name] is not cls:
            raise ValueError(f"score kind {name!r} is registered twice ({KINDS[name].__module__}, {cls.__module__})")
        if not dataclasses.is_dataclass(cls) or not callable(getattr(cls, "score", None)):
            raise TypeError(f"score kind {name!r}: register a dataclass with a score(batch) method")
        cls.kind_name = name  # type: ignore[attr-defined]
        KINDS[name] = cls
        return cls

    return deco


def load_plugins(modules: Sequence[str]) -> None:
    """Import the user's modules that register further kinds (config ``plugins:``)."""
    for mod in modules:
        try:
            importlib.import_module(mod)
        except ImportError as exc:
            raise MarginmineError(f"plugins: cannot import {mod!r} ({exc}); it must be importable "
                                  "(on PYTHONPATH or installed)") from exc


def kind_params(kind: str) -> dict[str, Any]:
    """A registered kind's params and their defaults."""
    return {f.name: f.default for f in dataclasses.fields(KINDS[kind]) if f.init}


def make_kind(kind: str, params: Mapping[str, Any] | None = None, where: str = "scorer") -> ScoreKind:
    """An instance of a registered kind; unknown kinds and params are refused naming ``where``."""
    if kind not in KINDS:
        raise MarginmineError(f"{where}: score kind {kind!r} is not registered (known: {', '.join(sorted(KINDS))}; "
                              "a kind of your own is registered by a module listed in the config's plugins)")
    params = dict(params or {})
    allowed = kind_params(kind)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise MarginmineError(f"{where}: kind {kind} takes no param(s) {unknown} "
                              f"(its params: {', '.join(allowed) or 'none'})")
    try:
        return KINDS[kind](**params)
    except (TypeError, ValueError) as exc:
        raise MarginmineError(f"{where}: {exc}") from exc


def describe(name: str, kind: ScoreKind) -> dict[str, Any]:
    """``{"kind": ..., **params}``: what a scorer is, for fingerprints and reports."""
    return {"kind": type(kind).kind_name, **dataclasses.asdict(kind)}  # type: ignore[attr-defined]


def parse_scorers(spec: Mapping[str, Mapping[str, Any]], where: str = "--scorers") -> dict[str, ScoreKind]:
    """``{name: {"kind": K, **params}}`` (the form rules pass) -> ``{name: kind instance}``. An
    ``encoder`` entry is ignored here (the caller chose the encoder)."""
    out: dict[str, ScoreKind] = {}
    for name, entry in spec.items():
        if not NAME.fullmatch(name) or name in BUILTIN_METHODS:
            raise MarginmineError(f"{where}: scorer name {name!r} must match {NAME.pattern} and not be "
                                  f"{' or '.join(BUILTIN_METHODS)}")
        entry = dict(entry)
        entry.pop("encoder", None)
        if "kind" not in entry:
            raise MarginmineError(f"{where}: scorer {name!r} names no kind")
        out[name] = make_kind(entry.pop("kind"), entry, f"{where} {name}")
    if not out:
        raise MarginmineError(f"{where}: no scorer given")
    return out
