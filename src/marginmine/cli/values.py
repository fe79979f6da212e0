"""The domains of the command line's numbers: every numeric option names one, so that a value out of
range (0 threads, -1 pairs, nan, 10**30, a word) is refused while the arguments are read - one
line naming the option, exit status 2 - and never reaches the code as a value it cannot use.

``Whole(lo, hi)`` and ``Real(lo, hi, ...)`` are argparse ``type=`` callables; the named domains
below are the ones the commands share. ``OneLineParser`` prints argparse's own errors (a missing
option, an unknown choice, a value out of its domain) as one line instead of a usage block.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import NoReturn

#: the largest count any option takes (pairs, sentences, megabytes ...): beyond it a value is a typo
HUGE = 10**12


def _plain(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


class Whole:
    """An integer in [lo, hi] (``hi=None``: HUGE)."""

    def __init__(self, lo: int, hi: int | None = None, note: str = "") -> None:
        self.lo, self.hi, self.note = lo, HUGE if hi is None else hi, note
        self.__name__ = "whole number"  # argparse names the type with it

    @property
    def domain(self) -> str:
        return f"a whole number from {_plain(self.lo)} to {_plain(self.hi)}" + (f" ({self.note})" if self.note else "")

    def __call__(self, text: str) -> int:
        try:
            value = int(str(text).strip().replace("_", ""), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.domain}, got {text!r}") from None
        if not self.lo <= value <= self.hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range: expected {self.domain}")
        return value


class Real:
    """A finite number between lo and hi (either end open or None = unbounded)."""

    def __init__(self, lo: float | None, hi: float | None, *, lo_open: bool = False, hi_open: bool = False,
                 note: str = "") -> None:
        self.lo, self.hi, self.lo_open, self.hi_open, self.note = lo, hi, lo_open, hi_open, note
        self.__name__ = "number"

    @property
    def domain(self) -> str:
        if self.lo is None and self.hi is None:
            text = "a finite number"
        elif self.hi is None:
            text = f"a number {'>' if self.lo_open else '>='} {_plain(self.lo)}"
        elif self.lo is None:
            text = f"a number {'<' if self.hi_open else '<='} {_plain(self.hi)}"
        else:
            text = (f"a number in {'(' if self.lo_open else '['}{_plain(self.lo)}, "
                    f"{_plain(self.hi)}{')' if self.hi_open else ']'}")
        return text + (f" ({self.note})" if self.note else "")

    def __call__(self, text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.domain}, got {text!r}") from None
        low_ok = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
        high_ok = self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)
        if not math.isfinite(value) or not low_ok or not high_ok:
            raise argparse.ArgumentTypeError(f"{text} is out of range: expected {self.domain}")
        return value


SEED = Whole(0, 2**32 - 1, "a seed")
THREADS = Whole(1, 1024)
COUNT = Whole(1)                        # pairs, sentences, lines, megabytes: at least one
COUNT0 = Whole(0, note="0: the option's stated default meaning")
COLUMN = Whole(0, 10_000, "0-based")
K = Whole(1, 10_000)
MINUTES = Real(0, 10**7, lo_open=True)
SHARE = Real(0, 1, lo_open=True, hi_open=True)
PROBABILITY = Real(0, 1)
FINITE = Real(None, None)


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors on one line (``marginmine CMD: error: ...``, exit 2), as the commands' own
    errors are; ``--help`` shows the usage."""

    def _get_value(self, action: argparse.Action, arg_string: str):  # noqa: ANN202 - argparse's hook
        """A value parser (``type=``) that raises MarginmineError (a malformed NAME=PATH, ...) is an
        argument error too: one line naming the option, not a traceback."""
        from marginmine.errors import MarginmineError

        try:
            return super()._get_value(action, arg_string)
        except MarginmineError as exc:
            raise argparse.ArgumentError(action, str(exc)) from None

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
