"""``marginmine.machine``: the CPU a result came from, read from /proc/cpuinfo."""

from __future__ import annotations

from marginmine.machine import machine

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse4_2 avx avx2 fma
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse4_2 avx avx2 fma
"""
XEON = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512bw
"""


def test_the_cpu_model_cores_and_widest_vector_isa() -> None:
    assert machine(EPYC, cores=2) == "AMD EPYC 7B13, 2 cores, avx2"
    assert machine(XEON, cores=1) == "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz, 1 core, avx512f"


def test_this_machine_is_named() -> None:
    text = machine()
    assert text and "core" in text and not text.startswith(",")


def test_an_unknown_cpuinfo_falls_back_to_the_platform() -> None:
    assert machine("", cores=4).endswith(", 4 cores") and not machine("", cores=4).startswith(",")
