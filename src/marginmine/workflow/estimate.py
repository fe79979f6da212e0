"""What a run will cost, estimated while it is planned: CPU- and GPU-hours per stage and in total,
from rates this project measured (printed by ``snakemake -n`` and ``make estimate``), and the
refusal of a job whose estimate exceeds its runtime limit (a cluster would kill it there).

The rates, all measured on a 2-core AMD EPYC with AVX2 and written beside their source; a stage
with no measured rate says so instead of guessing. Other CPUs differ: the 2-CPU Intel Xeon seen
since preprocesses the scale corpus 1.73x slower in wall time (bench/RESULTS.md: 156 s against 90 s
for its first 1M pairs; its two CPUs give 1.31x one), which :data:`RUNTIME_MARGIN` covers.

* split and preprocessing: CPU microseconds per raw pair of the 5M-pair `make scale` run
  (bench/RESULTS.md, "make scale: the cost curve"; tests/test_estimate.py reads them there);
* embedding: sentences per second on 2 cores, per encoder kind (bench/RESULTS.md: the DAN and USE
  in the workflow on the 1M-pair scale corpus, the paper-sized LASER-style BiLSTM in
  bench_encoders.py; LASER2 and LaBSE by their networks' shapes on an Intel Xeon,
  bench_pretrained_shapes.py); on a GPU only LASER's published rate (2,000 sentences/s, docs/scale.md);
* scoring: the kNN cost model of :mod:`marginmine.search.cost`;
* selection: per kept pair, per method and N (the same scale run);
* trained encoders and NMT: their time caps (``max_minutes``), an upper bound, as many cores or
  GPUs as the job asks for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from marginmine.errors import MarginmineError
from marginmine.search.cost import GEMM_MAC_PER_S

#: where the rates were measured
RATES_MACHINE = "a 2-core AMD EPYC (AVX2)"
#: CPU microseconds per raw pair (make scale, 5M pairs: split_corpus 38.86, preprocess 196.94)
SPLIT_US_PER_PAIR = 38.86
PREPROCESS_US_PER_PAIR = 196.94
#: CPU microseconds per kept pair of one selection (make scale, 5M pairs: select/*, at most 9.8)
SELECT_US_PER_PAIR = 9.8
#: sentences per second on 2 CPU cores, by encoder kind (None: not measured)
EMBED_SENTENCES_PER_S = {"dual": 11_485, "use-multilingual": 1_007, "laser": 345, "laser-pretrained": 150,
                         "sentence-transformers": 48}
#: where a kind's CPU rate comes from when not from the rates' machine: LASER2 and LaBSE cannot be
#: downloaded here, so bench/bench_pretrained_shapes.py runs their networks at the published shapes with
#: random weights (the speed does not depend on them) on real sentences
EMBED_RATE_SOURCE = {
    "laser-pretrained": "LASER2's network with random weights on an Intel Xeon (AVX-512), bench_pretrained_shapes.py",
    "sentence-transformers": "LaBSE's network (BERT-base) with random weights on an Intel Xeon (AVX-512), "
                             "bench_pretrained_shapes.py; other models differ"}
#: sentences per second on one GPU: LASER's published figure (H. Schwenk, facebookresearch/LASER#48)
GPU_EMBED_SENTENCES_PER_S = {"laser": 2_000, "laser-pretrained": 2_000}
#: a job's runtime limit from its estimate: this factor over it (the slowest CPU seen preprocesses 1.73x
#: slower than the rates' machine; a loaded node is slower still)
RUNTIME_MARGIN = 2.0
#: exact kNN multiply-adds per second on one GPU: FAISS' published IndexFlat figure on a Maxwell Titan X
#: (benchs/README.md, "Search on SIFT1M"; docs/scale.md), against search.cost's CPU rate per core
GPU_GEMM_MAC_PER_S = 1.75e12


@dataclass(frozen=True)
class Stage:
    """One stage's cost: CPU- or GPU-hours in ``jobs`` jobs (``bound``: a cap, not a rate)."""

    name: str
    hours: float | None
    gpu: bool = False
    jobs: int = 1
    how: str = ""
    bound: bool = False

    def describe(self) -> str:
        if self.hours is None:
            return f"{self.name}: not estimated ({self.how})"
        unit = "GPU-hours" if self.gpu else "CPU-hours"
        at = "at most " if self.bound else ""
        return f"{self.name}: {at}{self.hours:,.3g} {unit} in {self.jobs} job(s) ({self.how})"


def split_stage(raw_pairs: int) -> Stage:
    return Stage("split", raw_pairs * SPLIT_US_PER_PAIR / 3.6e9, how="one process over every raw pair")


def preprocess_stage(raw_pairs: int, shards: int) -> Stage:
    return Stage("preprocess", raw_pairs * PREPROCESS_US_PER_PAIR / 3.6e9, jobs=shards, how="per shard")


def embed_stage(encoder: str, kind: str, kept_pairs: int, shards: int, device: str) -> Stage:
    """Both sides of every kept pair through ``encoder`` (of ``kind``) on ``device``."""
    sentences = 2 * kept_pairs
    name = f"embed {encoder}"
    if device.startswith("cuda"):
        rate = GPU_EMBED_SENTENCES_PER_S.get(kind)
        if rate is None:
            return Stage(name, None, gpu=True, jobs=shards, how=f"no GPU rate measured for kind {kind}")
        return Stage(name, sentences / rate / 3600, gpu=True, jobs=shards,
                     how=f"{rate:,} sentences/s, LASER's published GPU rate")
    rate = EMBED_SENTENCES_PER_S.get(kind)
    if rate is None:
        return Stage(name, None, jobs=shards, how=f"no CPU rate measured for kind {kind}")
    source = f": {EMBED_RATE_SOURCE[kind]}" if kind in EMBED_RATE_SOURCE else ""
    return Stage(name, 2 * sentences / rate / 3600, jobs=shards, how=f"{rate:,} sentences/s on 2 cores{source}")


def score_stage(encoder: str, est, shards: int, device: str, stated: bool) -> Stage:
    """The scoring jobs of one encoder (``est``: :func:`marginmine.search.cost.job_estimate`); on a GPU
    exact search at FAISS' published rate, approximate search not estimated."""
    dim = "" if stated else f", dimension not stated: {est.dim} assumed"
    if device.startswith("cuda"):
        if est.spec.resolved(min(est.batch_size, est.pairs)).kind != "flat":
            return Stage(f"score {encoder}", None, gpu=True, jobs=shards, how="no GPU rate measured for IVF search")
        hours = est.cpu_hours * shards * GEMM_MAC_PER_S / GPU_GEMM_MAC_PER_S
        return Stage(f"score {encoder}", hours, gpu=True, jobs=shards,
                     how=f"exact kNN at FAISS' published GPU rate{dim}")
    return Stage(f"score {encoder}", est.cpu_hours * shards, jobs=shards, how=f"kNN cost model{dim}")


def select_stage(kept_pairs: int, selections: int) -> Stage:
    return Stage("select", kept_pairs * selections * SELECT_US_PER_PAIR / 3.6e9, jobs=selections,
                 how="per method and N")


def capped_stage(name: str, jobs: int, caps: list[float | None], per_job: int, gpu: bool,
                 uncapped: str = "") -> Stage:
    """``jobs`` jobs, each of at most its cap (minutes) on ``per_job`` cores (or GPUs); not estimated
    when a job has no cap (``uncapped``: which key would cap it and the cluster limit without)."""
    if not jobs:
        return Stage(name, 0.0, gpu=gpu, jobs=0, how="none planned")
    if not caps or any(not m for m in caps):
        return Stage(name, None, gpu=gpu, jobs=jobs,
                     how="no max_minutes: the steps or epochs decide" + (f"; {uncapped}" if uncapped else ""))
    each = f"{caps[0]:g} minutes each" if len(set(caps)) == 1 else f"{min(caps):g}-{max(caps):g} minutes"
    return Stage(name, sum(caps) / 60 * per_job, gpu=gpu, jobs=jobs, bound=True, how=f"{each}, the cap")


def report(stages: Iterable[Stage]) -> list[str]:
    """The lines ``snakemake -n`` prints: one per stage, then the totals."""
    stages = list(stages)
    cpu = sum(s.hours for s in stages if s.hours is not None and not s.gpu)
    gpu = sum(s.hours for s in stages if s.hours is not None and s.gpu)
    missing = [s.name for s in stages if s.hours is None]
    lines = [f"cost estimate, {s.describe()}" for s in stages]
    total = f"cost estimate, total: {cpu:,.3g} CPU-hours" + (f" and {gpu:,.3g} GPU-hours" if gpu else "")
    total += f" (rates of {RATES_MACHINE}; caps counted in full)"
    if missing:
        total += f"; not counted: {', '.join(missing)}"
    return [*lines, total]


def check_runtime(key: str, limit_min: float, estimate_h: float, what: str, machine: str = RATES_MACHINE) -> None:
    """Refuse a runtime limit below the estimate, naming its key (the hint: the estimate x
    :data:`RUNTIME_MARGIN`, since a loaded node is slower than the measured one)."""
    if limit_min < estimate_h * 60:
        need = math.ceil(estimate_h * 60 * RUNTIME_MARGIN)
        raise MarginmineError(
            f"{key}: {limit_min:g} minutes, but {what} is estimated at {estimate_h * 60:,.0f} minutes on "
            f"{machine}; a cluster would kill the job at its limit: raise it (to about {need:,}, the "
            f"estimate x {RUNTIME_MARGIN:g}) or make the job smaller")


def split_runtime(raw_pairs: int, floor_min: int) -> int:
    """The split job's runtime limit: its estimate x :data:`RUNTIME_MARGIN` plus 15 minutes, at least
    ``floor_min``."""
    return max(int(floor_min), math.ceil(split_stage(raw_pairs).hours * 60 * RUNTIME_MARGIN) + 15)


class Costs:
    """Part of :class:`marginmine.workflow.Plan` (after every other part): the run's cost estimate
    (target ``all``: the experiment, not the published scorers' suite) and the runtime checks."""

    def _init_costs(self, note) -> None:
        self.split_runtime = split_runtime(self.config["corpus"]["expected_pairs"], self.pre["runtime_min"])
        for line in report(self.cost_stages()):
            note(line)
        self._check_runtimes()

    def _scored_kinds(self) -> dict[str, str]:
        """The kind of each encoder that scores the corpus (a reused one's from its manifest, once built)."""
        import json
        from pathlib import Path

        out = {}
        for name in self.scored_encoders:
            model = self.encoder_model(self.encoder_dirs[name])  # a twin: its encoder's entry
            kind = model["kind"]
            if kind == "trained":
                try:
                    manifest = Path(str(model["params"]["path"])) / "encoder.json"
                    kind = json.loads(manifest.read_text(encoding="utf-8"))["kind"]
                except (OSError, ValueError, KeyError, TypeError):
                    pass
            out[name] = kind
        return out

    def cost_stages(self) -> list[Stage]:
        from marginmine.encoders import TRAINED_ON_DATA

        raw, kept, shards = self.config["corpus"]["expected_pairs"], self.expected_kept, self.n_shards
        stages = [split_stage(raw), preprocess_stage(raw, shards)]
        stages += [embed_stage(name, kind, kept, shards, self.enc["device"])
                   for name, kind in self._scored_kinds().items()]
        for name, (est, stated) in self._score_estimates().items():
            stages.append(score_stage(name, est, shards, self.scoring["device"], stated))
        stages.append(select_stage(kept, len(self.selected) * len(self.sizes)))
        trained = [n for n in self.evaluated_encoders if n in self.enc["models"]  # not the suite's, not twins
                   and self.enc["models"][n]["kind"] in TRAINED_ON_DATA]
        caps = [self.enc["models"][n].get("max_minutes") for n in trained]
        stages.append(capped_stage("train encoders", len(trained), caps, self.job_threads(2),
                                   self.enc["device"].startswith("cuda"),
                                   "a cluster job gets 7 days unless encoder.models.<name>.max_minutes is set"))
        gpu = self.nmt["device"].startswith("cuda")
        systems = len(self.nmt_systems())
        stages.append(capped_stage("train NMT", systems, [self.nmt.get("max_minutes")] * systems,
                                   int(self.nmt.get("gpus") or 1) if gpu else self.job_threads(2), gpu,
                                   "a cluster job gets 3 days unless nmt.max_minutes is set"))
        return stages

    def _score_estimates(self) -> dict:
        from marginmine.search.cost import job_estimate
        from marginmine.workflow.checks import planned_dim

        s, spec = self.scoring, self.index_spec()
        shard_pairs = max(1, round(self.config["corpus"]["expected_pairs"] / self.n_shards * self.pre["expected_keep"]))
        out = {}
        for name in self.scored_encoders:
            dim, stated = planned_dim(self.encoder_model(self.encoder_dirs[name]))
            out[name] = (job_estimate(shard_pairs, s["batch_size"], dim, spec, s["k"]), stated)
        return out

    def _check_runtimes(self) -> None:
        """A shard's preprocessing, embedding and scoring job estimated above its runtime limit."""
        raw, shards = self.config["corpus"]["expected_pairs"], self.n_shards
        per_shard = raw / shards
        workers = self.job_threads(self.pre["workers"])  # as rule preprocess_shard gets them
        check_runtime("preprocess.runtime_min", self.pre["runtime_min"],
                      per_shard * PREPROCESS_US_PER_PAIR / 3.6e9 / workers,
                      f"a shard's preprocessing ({per_shard:,.0f} raw pairs, {workers} workers)")
        sentences = 2 * self.expected_kept / shards
        cuda = self.enc["device"].startswith("cuda")
        for name, kind in self._scored_kinds().items():
            rate = (GPU_EMBED_SENTENCES_PER_S if cuda else EMBED_SENTENCES_PER_S).get(kind)
            if rate:
                check_runtime("encoder.embed_runtime_min", self.enc["embed_runtime_min"], sentences / rate / 3600,
                              f"embedding a shard with {name} ({sentences:,.0f} sentences at {rate:,}/s)",
                              "an Intel Xeon (AVX-512)" if not cuda and kind in EMBED_RATE_SOURCE else RATES_MACHINE)
        device = self.scoring["device"]
        for name, (est, stated) in self._score_estimates().items():
            if not stated:  # an assumed dimension makes the estimate an upper bound only
                continue
            if device.startswith("cuda"):
                stage = score_stage(name, est, 1, device, stated)  # one shard's job
                if stage.hours is not None:
                    check_runtime("scoring.runtime_min", self.scoring["runtime_min"], stage.hours,
                                  f"scoring a shard with {name} on one GPU (exact kNN)")
            else:
                check_runtime("scoring.runtime_min", self.scoring["runtime_min"], est.cpu_hours / 2,
                              f"scoring a shard with {name} on 2 cores")
