"""The pair-label sidecar (``id, origin, kind, clean``) held in memory that does not grow with the
length of its ids: 19 bytes a pair.

The demo and scale corpus builds write one label row per pair; ``composition`` and ``eval-filter``
look the ids of selections and scored shards up in it. Held as Python dicts, a 5M-pair sidecar took
about 3 GB (a dict per row, ~90-character ids); :class:`PairLabels` keeps, per row, the 16-byte
BLAKE2b digest of its id (sorted, looked up with binary search), a group code and the clean flag.
Two ids with one digest are refused when the sidecar is read (odds about n^2 / 2^129); an id that is
not in the sidecar and shares a digest with one that is would be taken for it (the same odds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from marginmine.errors import InputError
from marginmine.io.text import DIGEST_BYTES, LABEL_COLUMNS, check_label_header, text_digests

if TYPE_CHECKING:
    import numpy as np

#: the group of an id the sidecar does not know
UNLABELLED = "unlabelled"

#: ids digested and looked up at a time (bounds the temporary strings)
LOOKUP_CHUNK = 8_192

#: distinct groups a sidecar may have (group codes are 16-bit)
MAX_GROUPS = 65_535


def group_of(origin: str, kind: str, clean: str) -> str:
    """A pair's group: ``clean:<origin>`` for clean pairs, else its noise kind."""
    return f"clean:{origin}" if clean == "1" else kind


@dataclass(frozen=True)
class PairLabels:
    """The sidecar's rows, sorted by id digest: ``digests`` (S16), ``codes`` (index into
    ``groups``) and ``clean`` (bool)."""

    digests: "np.ndarray"
    codes: "np.ndarray"
    clean: "np.ndarray"
    groups: tuple[str, ...]

    @classmethod
    def read(cls, path: str | Path) -> "PairLabels":
        """Read a sidecar (plain UTF-8 TSV with the header ``id origin kind clean`` in any column
        order); a row with too few columns, a ``clean`` other than 0/1 or a repeated id is an error
        naming the file and line."""
        import numpy as np

        path = str(path)
        codes: dict[str, int] = {}
        row_codes = bytearray()  # group codes, uint16 little-endian
        clean = bytearray()
        buf = bytearray()  # the ids' digests, LOOKUP_CHUNK ids at a time
        pending: list[str] = []
        try:
            fh = open(path, encoding="utf-8", newline="")
        except FileNotFoundError as exc:
            raise InputError(path, "file not found",
                             hint="build the corpus first (it writes the label sidecar)") from exc
        with fh:
            header = fh.readline().rstrip("\r\n").split("\t")
            check_label_header(path, header)
            ci, co, ck, cc = (header.index(c) for c in LABEL_COLUMNS)
            need = len(header)
            for n, line in enumerate(fh, 2):
                cols = line.rstrip("\r\n").split("\t")
                if len(cols) < need:
                    raise InputError(path, f"has {len(cols)} columns, the header {need}", line=n)
                flag = cols[cc]
                if flag not in ("0", "1"):
                    raise InputError(path, f"clean is {flag!r}, not 0 or 1", line=n)
                group = group_of(cols[co], cols[ck], flag)
                code = codes.get(group)
                if code is None:
                    if len(codes) == MAX_GROUPS:
                        raise InputError(path, f"has more than {MAX_GROUPS:,} groups (origin/kind values)", line=n)
                    code = codes[group] = len(codes)
                row_codes += code.to_bytes(2, "little")
                clean.append(flag == "1")
                pending.append(cols[ci])
                if len(pending) == LOOKUP_CHUNK:
                    buf += text_digests(pending).tobytes()
                    pending.clear()
        buf += text_digests(pending).tobytes()
        digests = np.frombuffer(bytes(buf), dtype=f"S{DIGEST_BYTES}")
        del buf
        order = np.argsort(digests, kind="stable")
        digests = digests[order]
        same = np.flatnonzero(digests[1:] == digests[:-1])
        if len(same):
            row = int(order[same + 1].min()) + 2  # the first row, in file order, that repeats an earlier id
            raise InputError(path, "repeats the id of an earlier row (or one with the same 16-byte digest)", line=row,
                             hint="every pair id must be unique: rebuild the corpus")
        return cls(digests, np.frombuffer(bytes(row_codes), dtype="<u2")[order],
                   np.frombuffer(bytes(clean), dtype=bool)[order], tuple(codes))

    def __len__(self) -> int:
        return len(self.digests)

    def positions(self, ids: Iterable[str]) -> "np.ndarray":
        """Each id's row in the sorted arrays, -1 where the sidecar does not know it (int64; ids
        digested :data:`LOOKUP_CHUNK` at a time)."""
        import numpy as np

        out = []
        it = iter(ids)
        while chunk := list(islice(it, LOOKUP_CHUNK)):
            d = text_digests(chunk)
            pos = np.searchsorted(self.digests, d)
            inside = pos < len(self.digests)
            hit = np.zeros(len(d), dtype=bool)
            hit[inside] = self.digests[pos[inside]] == d[inside]
            out.append(np.where(hit, pos, -1).astype(np.int64))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    @property
    def unknown_code(self) -> int:
        """The code of ids the sidecar does not know: that of a group named :data:`UNLABELLED` if the
        sidecar has one (so the two are counted together), else ``len(self.groups)``."""
        return self.groups.index(UNLABELLED) if UNLABELLED in self.groups else len(self.groups)

    def group_codes(self, ids: Iterable[str]) -> "np.ndarray":
        """Each id's group code (int64); :attr:`unknown_code` for ids the sidecar does not know."""
        import numpy as np

        pos = self.positions(ids)
        if not len(self):
            return np.full(len(pos), self.unknown_code, dtype=np.int64)
        return np.where(pos >= 0, self.codes[np.maximum(pos, 0)].astype(np.int64), self.unknown_code)

    def group(self, pair_id: str) -> str:
        """One id's group (:data:`UNLABELLED` if unknown)."""
        return self.group_names()[int(self.group_codes([pair_id])[0])]

    def group_names(self) -> tuple[str, ...]:
        """The name of each code: ``groups``, then :data:`UNLABELLED` unless it is one of them."""
        return self.groups if UNLABELLED in self.groups else (*self.groups, UNLABELLED)

    def count_groups(self, ids: Iterable[str]) -> dict[str, int]:
        """Ids per group (unknown ids as :data:`UNLABELLED`), groups with none left out."""
        import numpy as np

        names = self.group_names()
        counts = np.bincount(self.group_codes(ids), minlength=len(names))
        return {names[c]: int(k) for c, k in enumerate(counts) if k}

