"""Where a scoring batch's vectors come from: an encoder run on the batch's distinct sentences, or
the line-aligned ``.npy`` files ``marginmine embed`` wrote (memory-mapped, read in chunks).

:class:`Embeddings` is what :func:`marginmine.scoring.files.score_batch` asks of either: the rows
of a batch's distinct sentences (and, for the kinds that vote over translations, of their
translations), and whether it reads the texts (``needs_texts``: files do not, so a batch can hold
the lines' digests instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, Sequence

import numpy as np

from marginmine.encoders.base import SentenceEncoder
from marginmine.errors import InputError
from marginmine.io.text import count_lines
from marginmine.search.knn import first_nonfinite_row


class Embeddings(Protocol):
    """Where a batch's unique sentences get their vectors from. ``needs_texts``: whether
    :meth:`unique_rows` reads the texts; if not, it is given the lines' digests
    (:func:`~marginmine.search.margin.text_digests`) and only counts them."""

    needs_texts: bool

    def unique_rows(self, start: int, texts: Sequence[str], first: np.ndarray, side: str) -> np.ndarray: ...

    def check_input(self, input_path: str) -> None:
        """Raise if these embeddings cannot belong to ``input_path``."""


@dataclass
class EncoderEmbeddings:
    """Embed each batch's distinct sentences with an encoder (stored as float16, as on disk)."""

    encoder: SentenceEncoder
    src_lang: str
    tgt_lang: str
    needs_texts: ClassVar[bool] = True
    dtype: str = "float16"
    chunk: int = 50_000
    #: each side's translation into the other language, line for line with the input (vote kinds)
    translated: tuple[Sequence[str], Sequence[str]] | None = None

    def translated_rows(self, start: int, texts: Sequence[str], first: np.ndarray, side: str) -> np.ndarray:
        """The translations of ``side``'s distinct sentences, embedded in the language they are in."""
        if self.translated is None:
            raise ValueError("no translations given")
        lines = self.translated[0 if side == "src" else 1]
        return self._embed([lines[start + int(i)] for i in first], self.tgt_lang if side == "src" else self.src_lang)

    def unique_rows(self, start: int, texts: Sequence[str], first: np.ndarray, side: str) -> np.ndarray:
        return self._embed([texts[i] for i in first], self.src_lang if side == "src" else self.tgt_lang)

    def _embed(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        out = np.empty((len(sentences), self.encoder.dim), dtype=self.dtype)
        for a in range(0, len(sentences), self.chunk):
            out[a:a + self.chunk] = self.encoder.encode(list(sentences[a:a + self.chunk]), lang)
        return out

    def check_input(self, input_path: str) -> None:
        return None  # computed from the input's own lines


def _whole_npy(arr: np.memmap) -> bool:
    """``arr`` maps a whole C-ordered ``.npy`` file from its header on (not a slice or view of one)."""
    try:
        with open(arr.filename, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(fh)
            header = fh.tell()
    except (OSError, ValueError):
        return False
    return not fortran and tuple(shape) == arr.shape and dtype == arr.dtype and header == arr.offset


def gather_rows(arr: np.ndarray, rows: np.ndarray, chunk: int = 65_536) -> np.ndarray:
    """``arr[rows]`` for ascending ``rows``; from a memory-mapped ``.npy`` the file is read in
    chunks of ``chunk`` rows instead (plain reads, no mapping), so the job's resident memory holds
    the gathered rows only, not the file's pages as well (a 5M-line float16 file is 3 GB a side)."""
    if (not isinstance(arr, np.memmap) or arr.filename is None or len(rows) == 0
            or not arr.flags.c_contiguous or bool(np.any(np.diff(rows) < 0)) or not _whole_npy(arr)):
        return np.asarray(arr[rows])
    out = np.empty((len(rows), *arr.shape[1:]), dtype=arr.dtype)
    row_bytes = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
    with open(arr.filename, "rb") as fh:
        done = 0
        while done < len(rows):
            lo = int(rows[done])
            hi = min(lo + chunk, len(arr))
            take = int(np.searchsorted(rows, hi, side="left")) - done
            fh.seek(arr.offset + lo * row_bytes)
            block = np.frombuffer(fh.read((hi - lo) * row_bytes), dtype=arr.dtype).reshape(hi - lo, *arr.shape[1:])
            out[done:done + take] = block[rows[done:done + take] - lo]
            done += take
    return out


@dataclass
class ArrayEmbeddings:
    """Precomputed line-aligned embeddings (``marginmine embed`` output, memory-mapped); optionally
    the embeddings of each side's translation into the other language (``translated``: source
    side's, target side's), for the kinds that vote over translations."""

    src: np.ndarray
    tgt: np.ndarray
    needs_texts: ClassVar[bool] = False
    paths: tuple[str, str] = ("<src embeddings>", "<tgt embeddings>")
    translated: tuple[np.ndarray, np.ndarray] | None = None
    translated_paths: tuple[str, str] = ("<src translated>", "<tgt translated>")

    @classmethod
    def load(cls, src: str | Path, tgt: str | Path, src_translated: str | Path | None = None,
             tgt_translated: str | Path | None = None) -> "ArrayEmbeddings":
        paths = [p for p in (src, tgt, src_translated, tgt_translated) if p is not None]
        arrays = []
        for p in paths:
            try:
                arrays.append(np.load(p, mmap_mode="r"))
            except (OSError, ValueError) as exc:
                raise InputError(str(p), f"cannot read embeddings: {exc}", hint="re-run marginmine embed") from exc
        for p, a in zip(paths[1:], arrays[1:]):
            if a.shape != arrays[0].shape:
                raise InputError(str(p), f"shape {a.shape} differs from {src}'s {arrays[0].shape}",
                                 hint="every embedding file must have one row per line of the scored input "
                                      "(translations: one per line of the side they translate)")
        if len(arrays) == 4:
            return cls(arrays[0], arrays[1], (str(src), str(tgt)), (arrays[2], arrays[3]),
                       (str(src_translated), str(tgt_translated)))
        return cls(arrays[0], arrays[1], (str(src), str(tgt)))

    def check_input(self, input_path: str) -> None:
        """One row per input line, or refuse: a longer or shorter ``.npy`` belongs to another file."""
        n_lines = count_lines(input_path)
        rows = len(self.src)
        if rows != n_lines:
            raise InputError(self.paths[0], f"has {rows} embedding rows (and {self.paths[1]} too), but "
                             f"{input_path} has {n_lines} lines",
                             hint="embed the same file that is being scored (marginmine embed --input "
                                  "<the scored file>), or score the file these embeddings were made from")

    def translated_rows(self, start: int, texts: Sequence[str], first: np.ndarray, side: str) -> np.ndarray:
        """The embeddings of the translations of ``side``'s distinct sentences (as :meth:`unique_rows`)."""
        if self.translated is None:
            raise InputError(self.paths[0], "no translations' embeddings were given",
                             hint="give marginmine score --src-translated and --tgt-translated")
        i = 0 if side == "src" else 1
        return self._rows(self.translated[i], self.translated_paths[i], start, texts, first)

    def unique_rows(self, start: int, texts: Sequence[str], first: np.ndarray, side: str) -> np.ndarray:
        arr, path = (self.src, self.paths[0]) if side == "src" else (self.tgt, self.paths[1])
        return self._rows(arr, path, start, texts, first)

    @staticmethod
    def _rows(arr: np.ndarray, path: str, start: int, texts: Sequence[str], first: np.ndarray) -> np.ndarray:
        if start + len(texts) > len(arr):
            raise InputError(path, f"has {len(arr)} rows, the input has more lines",
                             hint="embed the same file that is being scored")
        rows = gather_rows(arr, start + first)
        bad = first_nonfinite_row(rows)
        if bad is not None:
            row = start + int(first[bad])
            raise InputError(path, f"embedding row {row} (0-based; line {row + 1} of the scored input) holds "
                             "NaN or inf", hint="re-run marginmine embed; if it recurs, the encoder is broken")
        return rows
