"""The package stands alone: importing every module pulls in neither Snakemake (an optional extra,
`pip install marginmine[workflow]`) nor the workflow's files."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import importlib, pkgutil, sys
import marginmine
names = [m.name for m in pkgutil.walk_packages(marginmine.__path__, 'marginmine.') if not m.name.endswith('__main__')]
for name in names:
    importlib.import_module(name)
print(len(names), sorted(k for k in sys.modules if k.split('.')[0] == 'snakemake'))
"""


def test_every_module_imports_without_snakemake() -> None:
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    n, loaded = r.stdout.split(" ", 1)
    assert int(n) > 40 and loaded.strip() == "[]", r.stdout


SRC = __import__("pathlib").Path(__file__).resolve().parents[1] / "src"


def _module_imports() -> dict[str, set[str]]:
    """Module -> the marginmine modules it imports at module level (imports inside functions are
    deliberate: heavy libraries and late binding)."""
    import ast

    mods: dict[str, set[str]] = {}
    for f in (SRC / "marginmine").rglob("*.py"):
        name = ".".join(f.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        deps = set()
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("marginmine"):
                deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names}
        mods[name] = deps
    return {n: {d for d in deps if d in mods and d != n} for n, deps in mods.items()}


def test_no_import_cycle_and_no_module_over_420_lines() -> None:
    graph = _module_imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    # a package's __init__ importing its own submodules is not a cycle of logic
    cycles = [c for c in cycles if not all(x.startswith(c[0]) or c[0].startswith(x) for x in c)]
    assert not cycles, cycles
    long = {str(f.relative_to(SRC)): n for f in (SRC / "marginmine").rglob("*.py")
            if (n := len(f.read_text().splitlines())) > 420}
    assert not long, long


HEAVY = ("numpy", "torch", "faiss", "sacremoses", "scipy", "sentencepiece", "fasttext", "matplotlib", "ctranslate2")


def test_the_command_line_starts_without_heavy_libraries() -> None:
    """``marginmine --help`` builds the parser with every subcommand, and imports none of the heavy
    libraries the stages use (nor the stage modules that load them): the CLI starts in a fraction of a
    second. Their defaults and choices come from marginmine.defaults."""
    code = ("import contextlib, io, sys\n"
            "from marginmine.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
            f"print(sorted({{k.split('.')[0] for k in sys.modules}} & set({HEAVY!r})))\n"
            "print(sorted(k for k in sys.modules if k.startswith('marginmine.') "
            "and not k.startswith('marginmine.cli')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    heavy, stages = r.stdout.splitlines()
    assert heavy == "[]", heavy
    assert stages == "['marginmine.defaults', 'marginmine.errors', 'marginmine.timecap']", stages


#: which stage packages a package may import at module level (imports inside functions included:
#: a late import is still a dependency of the design)
ALLOWED = {
    "io": {"defaults", "errors", "io"},
    "search": {"defaults", "errors", "io", "search"},
    "encoders": {"defaults", "errors", "io", "search", "encoders", "fairseq_process", "preprocess", "timecap",
                 "machine"},
    # scoring sits below its evaluations: it never imports evaluate, nmt, report or the CLI
    "scoring": {"defaults", "errors", "io", "search", "encoders", "preprocess", "scoring", "machine", "timecap",
                "fairseq_process"},
    "evaluate": {"defaults", "errors", "io", "search", "encoders", "preprocess", "scoring", "evaluate", "machine",
                 "stats"},
    "preprocess": {"defaults", "errors", "io", "preprocess"},
    "data": {"defaults", "errors", "io", "preprocess", "data"},
    # NMT trains on selections (files), never on the scoring stage's code; it reads the encoders' data
    "nmt": {"defaults", "errors", "io", "preprocess", "data", "encoders", "nmt", "fairseq_process", "machine",
            "timecap", "stats"},
    # the report renders every stage's files: it may read any stage below it, never the CLI
    "report": {"defaults", "errors", "io", "search", "preprocess", "data", "encoders", "scoring", "nmt", "evaluate",
               "report", "machine", "timecap", "stats"},
}


def _all_imports(package: str) -> dict[str, set[str]]:
    """Module of ``package`` -> the marginmine top-level packages it imports anywhere in it."""
    import ast

    out: dict[str, set[str]] = {}
    for f in (SRC / "marginmine" / package).rglob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("marginmine."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("marginmine.")}
        out[str(f.relative_to(SRC))] = deps
    return out


def test_the_search_floor_is_imported_one_way() -> None:
    """Each package imports only the floors below it (docs/architecture.md): kNN search and the
    margin maths sit below both stages (search imports no stage), encoders never import scoring
    (the scorers may import the encoders' interface), NMT never the scoring stage, the report never
    the CLI."""
    bad = {f"{mod}: {sorted(deps - ALLOWED[pkg])}" for pkg in ALLOWED
           for mod, deps in _all_imports(pkg).items() if deps - ALLOWED[pkg]}
    assert not bad, sorted(bad)
    assert "search" in set().union(*_all_imports("scoring").values())


def test_only_the_workflow_imports_the_workflow_plan() -> None:
    """marginmine.workflow (the plan the rules call) sits above every stage: it may import any of them,
    none imports it (the CLI included), and it never imports Snakemake (the first test)."""
    packages = {p.name for p in (SRC / "marginmine").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    bad = {mod for pkg in packages - {"workflow"} for mod, deps in _all_imports(pkg).items() if "workflow" in deps}
    bad |= {str(f.relative_to(SRC)) for f in (SRC / "marginmine").glob("*.py")
            if "marginmine.workflow" in f.read_text()}
    assert not bad, sorted(bad)
    assert {"scoring", "encoders", "nmt"} <= set().union(*_all_imports("workflow").values())
