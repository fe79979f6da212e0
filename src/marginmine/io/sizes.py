"""Size labels, parsed in one place: the N of a selection (``20k``, ``1.5M``, ``500``), a share of the
corpus (``10%``, turned into a count by :func:`resolve_sizes`) and a selection by score threshold
(``t1.06``). Labels name files (``select/<method>.<N>.json``) and sort tables, so a count label
is the shortest text that reads back as its number (:func:`count_label`)."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Sequence

from marginmine.errors import MarginmineError

_SUFFIX = {"k": 1_000, "m": 1_000_000, "b": 1_000_000_000}

#: a selection by score threshold's {N}: ``t1.06``, ``t-0.5``
THRESHOLD_PATTERN = r"t-?[0-9.]+"
#: the {N} of a selection file: a count label or a threshold label (the workflow's wildcard)
SIZE_PATTERN = r"[0-9.]+[kKmMbB]?|" + THRESHOLD_PATTERN


def parse_count(text: str) -> int:
    """``"20k"`` -> 20000, ``"1.5M"`` -> 1500000, ``"500"`` -> 500."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([kKmMbB]?)", text.strip())
    if not m:
        raise MarginmineError(f"not a count: {text!r} (use e.g. 500, 20k, 10M)")
    value = Decimal(m.group(1)) * _SUFFIX.get(m.group(2).lower(), 1)  # exact: 64.1k is 64100
    if value != int(value) or value < 1:
        raise MarginmineError(f"not a positive whole count: {text!r}")
    return int(value)


def count_label(n: int) -> str:
    """The shortest label :func:`parse_count` reads back as ``n``: 500000 -> ``500k``, 1500000 ->
    ``1.5M``, 12345 -> ``12345``."""
    for suffix, unit in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
        if n >= unit and n % (unit // 10) == 0:
            return f"{n // unit}.{n % unit // (unit // 10)}{suffix}"
    return str(n)


def resolve_sizes(sizes: Sequence[str | int], expected_pairs: int) -> list[str]:
    """The config's ``selection.sizes`` as count labels: a share such as ``10%`` becomes that share
    of ``expected_pairs`` (the workflow passes the pairs expected after preprocessing,
    :func:`marginmine.workflow.checks.expected_kept`; ``10%`` of 5,000,000: ``500k``), so a config serves
    corpora of any size; counts (``500k``, ``1M``) stay as they are. Two sizes naming the same N are
    an error."""
    out: dict[int, str] = {}
    for size in sizes:
        text = str(size).strip()
        if text.endswith("%"):
            try:
                share = Decimal(text[:-1])
            except ArithmeticError:
                share = Decimal(-1)
            if not 0 < share < 100:
                raise MarginmineError(f"selection.sizes: {text!r} is not a share between 0% and 100%")
            n = max(1, int((expected_pairs * share / 100).to_integral_value(ROUND_HALF_UP)))
            text = count_label(n)
        n = parse_count(text)
        if n in out:
            raise MarginmineError(f"selection.sizes: {size!r} is N = {n:,} again (as {out[n]!r}): "
                                  "give each size once")
        out[n] = text
    return list(out.values())


def threshold_label(t: float) -> str:
    """The {N} of a selection by threshold: ``t1.06`` (:func:`check_thresholds` checks it reads back)."""
    return f"t{t:g}"


def check_thresholds(key: str, thresholds: Sequence[float]) -> list[str]:
    """The labels of one scorer's thresholds (``selection.thresholds.<scorer>`` = ``key``): each must
    be written back exactly (it is the file name and what ``select --threshold`` reads) and given once."""
    labels = [threshold_label(t) for t in thresholds]
    for t, label in zip(thresholds, labels):
        if not re.fullmatch(THRESHOLD_PATTERN, label) or float(label[1:]) != t:
            raise MarginmineError(f"{key}: {t!r} is not written back exactly as {label!r} "
                                  "(give at most 6 significant digits, no exponent)")
    if len(set(labels)) != len(labels):
        raise MarginmineError(f"{key}: {list(thresholds)} repeats a threshold")
    return labels


def size_key(label: str) -> float:
    """A sort key for size labels: counts by their number; anything else (``all``, a threshold) last."""
    try:
        return float(parse_count(label))
    except MarginmineError:
        return math.inf
