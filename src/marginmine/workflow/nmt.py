"""The NMT stage's plan (rules/nmt.smk): settings, training seeds per method, the systems to train,
the extra test sets each decodes and the comparison's inputs."""

from __future__ import annotations

import json

from marginmine.workflow.config import quoted


class Nmt:
    """Part of :class:`marginmine.workflow.Plan` (after the scoring part)."""

    def _init_nmt(self) -> None:
        self.nmt = self.config["nmt"]
        #: the headline method (the first of selection.methods)
        self.default_method = self.methods[0]
        self.extra_eval = list(self.config["eval"].get("extra", {}))
        #: training seeds per selection method
        self.seeds = self._method_seeds()
        self._check_params("nmt.params", self.nmt_params())

    @staticmethod
    def _check_params(key: str, params: dict) -> None:
        """The params train-nmt would refuse, refused at plan time with their key named."""
        from marginmine.nmt.params import NmtError, resolve_params

        try:
            resolve_params(params)
        except NmtError as exc:
            raise ValueError(f"{key}: {exc}") from None

    def _method_seeds(self) -> dict[str, list[int]]:
        """Training seeds per selection method (nmt.seeds, nmt.method_seeds overriding), validated."""
        from marginmine.nmt.significance import validate_seeds

        default = validate_seeds(self.nmt["seeds"], "nmt.seeds")
        overrides = self.nmt.get("method_seeds", {})
        known = [*self.all_scorers, "random", "unfiltered"]  # an entry for a method not trained now is harmless
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ValueError(f"nmt.method_seeds: {unknown} are neither scorers nor random/unfiltered "
                             f"({', '.join(known)})")
        return {m: validate_seeds(overrides[m], f"nmt.method_seeds.{m}") if m in overrides else default
                for m in dict.fromkeys(self.methods + self.paper_baselines + self.paper_methods)}

    def nmt_systems(self, methods: list[str] | None = None) -> list[tuple[str, str, int]]:
        """(method, N, seed) of every NMT system to train (default: the experiment's methods)."""
        return [(m, n, s) for m in (methods or self.methods) for n in self.sizes for s in self.seeds[m]]

    def nmt_runs(self, template: str, methods: list[str] | None = None) -> list[str]:
        """``template`` (a path with {method}, {N}, {seed}) for every NMT system of :meth:`nmt_systems`."""
        return [template.format(method=m, N=n, seed=s) for m, n, s in self.nmt_systems(methods)]

    def suite_runs(self, template: str) -> list[str]:
        """``template`` for every system of the published suite: its methods and baselines at the
        sizes, and published.small's methods at its N."""
        runs = self.nmt_runs(template, self.suites["published"]["methods"])
        if self.paper_small:
            n, methods = self.paper_small
            runs += [template.format(method=m, N=n, seed=s) for m in methods for s in self.seeds[m]]
        return runs

    def headline_runs(self, template: str, n: str) -> list[str]:
        """``template`` for the headline method's systems at size ``n``, one per training seed."""
        return [template.format(method=self.default_method, N=n, seed=s) for s in self.seeds[self.default_method]]

    def nmt_params(self) -> dict:
        """The params every NMT system trains with (train-nmt --params)."""
        return {"arch": self.nmt["arch"], **self.nmt.get("params", {})}

    def nmt_params_json(self) -> str:
        return json.dumps(self.nmt_params(), sort_keys=True)

    def nmt_budget_arg(self) -> str:
        minutes = self.nmt.get("max_minutes")
        return f"--max-minutes {minutes} --on-time-cap {self.nmt['on_time_cap']}" if minutes else ""

    def nmt_runtime(self) -> int:
        minutes = self.nmt.get("max_minutes")
        return int(minutes * 1.5 + 15) if minutes else 3 * 24 * 60

    def extra_eval_sets(self, method: str) -> list[str]:
        """The extra test sets this method's system decodes (an extra set's `methods`, default every
        system: the experiment's, the suite's baselines and methods)."""
        every = self.methods + self.paper_baselines + self.paper_methods
        return [n for n in self.extra_eval if method in self.eval_sets[n].get("methods", every)]

    def extra_eval_files(self, method: str) -> list[str]:
        return [f for name in self.extra_eval_sets(method) for f in self.eval_files(name)]

    def extra_eval_args(self, method: str) -> str:
        args = [f"{name},{','.join(self.eval_files(name))}" for name in self.extra_eval_sets(method)]
        return f"--extra {quoted(args)}" if args else ""

    def subset_labels(self) -> dict[str, str]:
        """Test sets held out from the labelled corpus, with their labels (BLEU per clean origin; dev
        is not a test set)."""
        return {name: f"{self.clean_mix_prefix}.{src['split']}.labels.tsv" for name, src in self.eval_sets.items()
                if name != "dev" and src["kind"] == "heldout"}

    def subset_args(self) -> str:
        args = [f"{name}={path}" for name, path in self.subset_labels().items()]
        return f"--subsets {quoted(args)}" if args else ""

    def bleu_targets(self) -> list[str]:
        """The headline BLEU files, one per N (rule headline_bleu)."""
        return [self.paths.bleu.format(N=n) for n in self.sizes]
