"""fairseq's binarized translation data, written in this process: the bytes ``fairseq-preprocess
--joined-dictionary --dataset-impl mmap`` writes (fairseq 0.12: ``Dictionary`` built over the
training files and finalized, ``MMapIndexedDataset``'s ``.bin``/``.idx``), without starting a fairseq
process for it (its start-up alone is 8-12 s of a test-sized NMT job; binarizing in Python with a
dict lookup per piece is several times faster than fairseq's Binarizer); a test compares
the files byte for byte with fairseq-preprocess's on real text (tests/test_binarize.py).

The contract, as fairseq defines it:

* a line's words: runs of whitespace become one space, the line is stripped and split
  (``fairseq.tokenizer.tokenize_line``); every line ends with ``</s>``;
* the dictionary: ``<s> <pad> </s> <unk>`` (ids 0-3), then every other word of the training files of
  both languages by count (descending), ties in code-point order of the words, then
  ``madeupword0000``... (count 0) until the size is a multiple of 8; ``dict.<lang>.txt`` holds
  ``word count`` for every word after the four specials (one file per language, the same content);
* a word missing from the dictionary (only in the dev set) gets ``<unk>``;
* ``<prefix>.bin``: the ids as uint16 (a dictionary under 65,500 words) or uint32, line after line;
  ``<prefix>.idx``: ``MMIDIDX\\0\\0``, version 1 (uint64), the dtype code (uint8: 8 uint16, 9 uint32), the
  line count (uint64), the lengths (int32) and the byte offsets (int64).
"""

from __future__ import annotations

import logging
import re
import struct
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from marginmine.io.safe import atomic_path, write_bytes, write_text

log = logging.getLogger(__name__)

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
EOS, UNK = 2, 3
PADDING_FACTOR = 8
MAGIC = b"MMIDIDX\x00\x00"
_SPACE = re.compile(r"\s+")


def words(line: str) -> list[str]:
    """fairseq's ``tokenize_line``."""
    return _SPACE.sub(" ", line).strip().split()


def _lines(path: Path):
    with open(path, encoding="utf-8") as fh:  # universal newlines, as fairseq reads
        yield from fh


def build_dictionary(files: Sequence[Path]) -> list[tuple[str, int]]:
    """(word, count) of the joined dictionary, specials first (their counts as fairseq keeps them)."""
    counts: Counter[str] = Counter()
    lines = 0
    for path in files:
        for line in _lines(path):
            counts.update(words(line))
            lines += 1
    special = {w: 1 + counts.pop(w, 0) for w in SPECIALS}
    special["</s>"] += lines
    ordered = sorted(counts.items())                   # code-point order, then a stable sort by count
    ordered.sort(key=lambda wc: wc[1], reverse=True)
    entries = [(w, special[w]) for w in SPECIALS] + ordered
    known, i = {w for w, _ in entries}, 0
    while len(entries) % PADDING_FACTOR:
        pad = f"madeupword{i:04d}"
        if pad not in known:
            entries.append((pad, 0))
            known.add(pad)
        i += 1
    return entries


def _dtype(size: int) -> tuple[type, int]:
    return (np.uint16, 8) if size < 65500 else (np.uint32, 9)


def binarize_file(text: Path, prefix: Path, index: dict[str, int], chunk_lines: int = 100_000) -> dict[str, int]:
    """``<prefix>.bin`` / ``.idx`` of one text file, the ids written ``chunk_lines`` lines at a time
    (memory: one chunk's ids, and the index - about 40 bytes a line while it is built; fairseq keeps a
    Python list of the sizes); counts of lines, tokens and ``<unk>`` replacements."""
    dtype, code = _dtype(len(index))
    sizes = array("i")
    replaced = tokens = 0
    with atomic_path(Path(f"{prefix}.bin")) as tmp, open(tmp, "wb") as out:
        ids = array("I")
        for n, line in enumerate(_lines(text), 1):
            ws = words(line)
            row = [index.get(w, UNK) for w in ws]
            replaced += sum(1 for w, i in zip(ws, row) if i == UNK and w != "<unk>")
            row.append(EOS)
            ids.extend(row)
            sizes.append(len(row))
            if n % chunk_lines == 0:
                out.write(np.frombuffer(ids, dtype=np.uint32).astype(dtype).tobytes())
                tokens, ids = tokens + len(ids), array("I")
        if len(ids):
            out.write(np.frombuffer(ids, dtype=np.uint32).astype(dtype).tobytes())
            tokens += len(ids)
    size_arr = np.frombuffer(sizes, dtype=np.int32) if len(sizes) else np.zeros(0, np.int32)
    pointers = np.zeros(len(size_arr), dtype=np.int64)
    if len(size_arr) > 1:
        np.cumsum(size_arr[:-1].astype(np.int64) * np.dtype(dtype).itemsize, out=pointers[1:])
    header = MAGIC + struct.pack("<Q", 1) + struct.pack("<B", code) + struct.pack("<Q", len(size_arr))
    write_bytes(Path(f"{prefix}.idx"), header + size_arr.astype("<i4").tobytes() + pointers.astype("<i8").tobytes())
    return {"lines": len(size_arr), "tokens": tokens, "replaced": replaced}


def binarize(pieces: Path, destdir: Path, src: str, tgt: str, splits: Sequence[str] = ("train", "valid")) -> int:
    """fairseq-preprocess's output for ``<pieces>/<split>.<lang>`` (the dictionary from the train
    split of both languages) in ``destdir``; returns the dictionary's size."""
    entries = build_dictionary([pieces / f"{splits[0]}.{src}", pieces / f"{splits[0]}.{tgt}"])
    index = {w: i for i, (w, _) in enumerate(entries)}
    text = "".join(f"{w} {c}\n" for w, c in entries[len(SPECIALS):])
    destdir.mkdir(parents=True, exist_ok=True)
    for lang in (src, tgt):
        write_text(destdir / f"dict.{lang}.txt", text)
    for split in splits:
        for lang in (src, tgt):
            s = binarize_file(pieces / f"{split}.{lang}", destdir / f"{split}.{src}-{tgt}.{lang}", index)
            log.info("nmt: [%s] %s: %d sents, %d tokens, %.3g%% replaced (by <unk>)", lang, split, s["lines"],
                     s["tokens"], 100 * s["replaced"] / max(s["tokens"], 1))
    return len(entries)
