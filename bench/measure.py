"""Shared benchmark helpers: run a command and record wall time and the peak RSS of its tree; write a
benchmark's results."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil


def measure_tree(cmd: list[str], interval: float = 0.2,
                 stderr_lines: list[str] | None = None) -> tuple[float, float, int]:
    """Run ``cmd``; return (wall seconds, peak RSS in MiB of the process and its children, exit code).
    ``stderr_lines``, if given, receives the lines the command wrote to stderr."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        p = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                rss = p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
                peak = max(peak, rss)
            except psutil.Error:
                pass
            time.sleep(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, err = proc.communicate()
    stop.set()
    th.join()
    if stderr_lines is not None:
        stderr_lines += err.splitlines()
    if proc.returncode:
        print(err[-3000:], file=sys.stderr)
    return time.perf_counter() - t0, peak / 2**20, proc.returncode


def write_results(name: str, data: object, markdown: str) -> Path:
    """``bench/out/<name>.json`` (the measurements) and ``<name>.md`` (their table), printed too."""
    import json

    out = Path(__file__).resolve().parent / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return out


def best_of(fn, repeats: int = 2) -> float:  # noqa: ANN001
    """The shortest of ``repeats`` wall times of ``fn()``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
