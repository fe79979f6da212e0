"""The machine a result came from, as one short string (``AMD EPYC, 2 cores, avx2``).

Floating-point results - trained models and so BLEU, timings - differ between CPU models (the
project runs on AVX2 EPYC and AVX-512 Xeon machines); scores and selections do not. Every trained
NMT system and every BLEU report names its machine, so a table that joins runs of two sessions says
which number came from where. Linux reads ``/proc/cpuinfo``; elsewhere ``platform.processor()``.
The string's form is part of the record (tables group systems by it): keep it stable. A generic
name (this project's EPYC machines say only ``AMD EPYC``) is told apart by the vector ISA.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: the widest vector extension named, the first of these the CPU has
_ISA = ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd")


def _cpu_model(cpuinfo: str) -> tuple[str, set[str]]:
    model, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "processor") and not model and not value.strip().isdigit():
            model = " ".join(value.split())
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


def machine(cpuinfo: str | None = None, cores: int | None = None) -> str:
    """``<CPU model>, <n> cores, <widest vector ISA>`` of this process (its CPU affinity's cores)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    model, flags = _cpu_model(cpuinfo)
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    isa = next((x for x in _ISA if x in flags), None)
    return ", ".join([model, f"{cores} core{'s' if cores != 1 else ''}", *([isa] if isa else [])])


def dist_version(*names: str) -> str | None:
    """An installed distribution's version, without importing it (fairseq takes seconds to import)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None
