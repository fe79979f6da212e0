"""Progress of long steps: a tqdm bar on an interactive terminal, plain log lines in log files.

Snakemake sends each job's stderr to a log file, where a redrawn bar would be one endless line;
there a line every ``every`` seconds says how far the step is and how fast it goes. On a
terminal (``marginmine ...`` run by hand) the same counter drives a tqdm bar.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("marginmine.io.progress")


class Progress:
    """Count items of a long step; ``tick(n)`` as they are done, ``done()`` at the end."""

    def __init__(self, what: str, every: float = 10.0, total: int | None = None, unit: str = "pairs",
                 bar: bool | None = None):
        self.what, self.every, self.total, self.unit = what, every, total, unit
        self.t0 = self.last = time.monotonic()
        self.n = 0
        use_bar = sys.stderr.isatty() if bar is None else bar
        self._bar: Any = None
        if use_bar:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit=f" {unit}", unit_scale=True, file=sys.stderr,
                             mininterval=0.5, dynamic_ncols=True)

    def tick(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            of = f"/{self.total}" if self.total else ""
            log.info("%s: %d%s %s, %.0f %s/s", self.what, self.n, of, self.unit, self.n / (now - self.t0), self.unit)

    def done(self) -> float:
        dt = time.monotonic() - self.t0
        if self._bar is not None:
            self._bar.close()
        log.info("%s: %d %s in %.1f s (%.0f %s/s)", self.what, self.n, self.unit, dt, self.n / max(dt, 1e-9),
                 self.unit)
        return dt
