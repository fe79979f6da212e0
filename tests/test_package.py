"""The package stands alone: importing every module pulls in neither Snakemake (an optional extra,
`pip install marginmine[workflow]`) nor the workflow's files."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import importlib, pkgutil, sys
import marginmine
names = [m.name for m in pkgutil.walk_packages(marginmine.__path__, 'marginmine.')]
for name in names:
    importlib.import_module(name)
print(len(names), sorted(k for k in sys.modules if k.split('.')[0] == 'snakemake'))
"""


def test_every_module_imports_without_snakemake() -> None:
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    n, loaded = r.stdout.split(" ", 1)
    assert int(n) > 40 and loaded.strip() == "[]", r.stdout
