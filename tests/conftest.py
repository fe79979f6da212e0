"""Shared fixtures: the real data directory (``MARGINMINE_DATA_DIR``, default ``../shared/data``).

Missing data fails the run before any test starts (one line, exit status 4): a suite that skips
what it cannot check would stay green while checking nothing. The only skips left are for what a
machine cannot have (a GPU, root for the SLURM test); they are listed in one summary line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: every folder of the data directory some test reads
REQUIRED = ("wmt-newstest-ende", "multi30k", "opennmt-toy-ende", "laser-tatoeba-v1", "paracrawl-human-eval-en-de",
            "tatoeba-manythings-deu-eng-2018", "tatoeba-manythings-fra-eng-2017",
            "wmt-newstest2008-2011-multiparallel", "news-commentary-5k-fr-en", "mlqe-pe-en-de",
            "wmt18-pcf-testsets-deen", "tatoeba-opus-eng-fra-spa", "tatoeba-opus-deu-eng", "mono-de-news",
            "mono-en-wiki-web")


def data_dir() -> Path:
    """The one place every test takes the data directory from (the Makefile's default is the same)."""
    return Path(os.environ.get("MARGINMINE_DATA_DIR") or REPO.parent / "shared" / "data")


def missing_data() -> str | None:
    d = data_dir()
    if not d.is_dir():
        return f"data directory {d} not found"
    gone = [name for name in REQUIRED if not (d / name).is_dir()]
    return f"data directory {d} lacks {', '.join(gone)}" if gone else None


def pytest_configure(config: pytest.Config) -> None:
    # -n N workers share the cores: each one's OpenMP (torch, FAISS, BLAS) gets its share, not every
    # core. Oversubscribed, OpenMP threads spin for each other's core: tests/test_mlp.py's fixture
    # beside one busy process took 45 s wall and 51 CPU-s with torch's 2 threads, 28 s and 26 CPU-s
    # with 1 (2-core Xeon). Set here, before the workers start, so their imports and every process
    # they run inherit it; a job given --threads still sets its own (cli/options.py torch_threads).
    workers = getattr(config.option, "numprocesses", None)
    if workers and not os.environ.get("PYTEST_XDIST_WORKER"):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        share = str(max(1, cores // int(workers)))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, share)
    problem = missing_data()
    if problem and not config.option.collectonly:
        raise pytest.UsageError(f"{problem}: the tests run on the real data (set MARGINMINE_DATA_DIR to "
                                "the folder holding ../shared/data's sets)")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        reasons = sorted({str(r.longrepr[2]).removeprefix("Skipped: ") if isinstance(r.longrepr, tuple)
                          else str(r.longrepr) for r in skipped})
        terminalreporter.write_line(f"skipped {len(skipped)} (only what this machine cannot have): "
                                    + "; ".join(reasons))


@pytest.fixture(scope="session")
def real_data() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def smoke(tmp_path_factory: pytest.TempPathFactory, real_data: Path, worker_id: str) -> Path:
    """The smoke experiment, run once per test run and shared by the pytest workers (the first to
    need it runs it under a file lock, the other waits and reads it; its tests only read it or copy
    it): tests/test_smoke.py checks it, tests/test_smoke_kill.py compares a killed rerun with it and
    tests/test_smoke_published.py runs the published scorers' suite on a copy. A failed run is not
    started again by the other worker: its tests fail with the first one's error.
    ``MARGINMINE_SMOKE_DIR`` names a finished run to check instead, e.g. after changing a stage by
    hand to see which tests catch it. (``-n 2`` needs ``--dist loadfile``, as make test gives it:
    xdist's default ``load`` would split tests/test_smoke_published.py and build the suite twice.)"""
    from filelock import FileLock

    from smokerun import smoke_run

    done = os.environ.get("MARGINMINE_SMOKE_DIR")  # a finished smoke run to check again (development)
    if done:
        return Path(done)
    if worker_id == "master":  # one process (no -n): nothing to share
        return smoke_run(tmp_path_factory.mktemp("smoke"), real_data)
    shared = tmp_path_factory.getbasetemp().parent  # this run's folder, above each worker's own
    d, failed = shared / "smoke", shared / "smoke.failed"
    with FileLock(str(shared / "smoke.lock")):
        if failed.exists():
            pytest.fail(f"the smoke run failed on the other worker: {failed.read_text()}", pytrace=False)
        if not (shared / "smoke.done").exists():
            try:
                shutil.rmtree(d, ignore_errors=True)  # a worker that died while building left it half made
                d.mkdir()
                smoke_run(d, real_data)
            except BaseException as exc:
                failed.write_text(f"{type(exc).__name__}: {exc}"[-4000:])
                raise
            (shared / "smoke.done").write_text("")
    return d


@pytest.fixture(scope="session")
def paracrawl_tsv(real_data: Path) -> Path:
    return real_data / "paracrawl-human-eval-en-de" / "paracrawl-v3-validation-data.sorted.en-de.tsv"


#: the longest test files first, so the two workers (make test: --dist loadfile
#: --no-loadscope-reorder) start them early and share the many short files at the end. One worker
#: runs the smoke experiment (test_smoke.py, ~3 min on every core) while the other runs own corpus
#: (~2 min) and then waits for the smoke run to start the suite on it (~4-5 min, every core); the
#: first worker goes on with SLURM (~2 min, mostly waiting for the cluster's jobs, while the suite
#: keeps both cores busy) and the kill test (~2.5 min on its share). SLURM before the suite left a core
#: idle while the kill test ran on one (measured: the suite started 84 s after the smoke run ended)
FIRST = ("test_smoke.py", "test_own_corpus.py", "test_smoke_published.py", "test_slurm.py", "test_smoke_kill.py",
         "test_nmt_run.py", "test_workflow_edge_cases.py", "test_laser_encoder.py", "test_scorers.py", "test_kill.py",
         "test_workflow.py", "test_paper_path.py", "test_scale.py", "test_use_multilingual.py", "test_binarize.py",
         "test_mlp.py")  # the files of a minute or more come early: none of them is left for the end


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """``--dist loadfile`` that gives a worker its next file only when it has at most one test left
    (xdist's own threshold is two). With two, the worker running tests/test_smoke.py took the next
    file as its kill test started and ran that file after the kill and plugin tests while the other
    worker, done, waited (measured: tests/test_scorers.py's ~60 s on the critical path, 00:28 run
    of 2026-11-24); with one, that file goes to the worker that is free."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OneAhead(LoadFileScheduling):
        def _reschedule(self, node) -> None:  # noqa: ANN001
            if not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) > 1:
                return
            super()._reschedule(node)

    return OneAhead(config, log)
