"""The encoder stage's plan (rules/encoder.smk): which encoders are trained, embedded and evaluated,
their directories, params, budgets and training data."""

from __future__ import annotations

import json
import shlex
from typing import Any

from marginmine.encoders import INPUT_PATHS, TRAINED_ON_DATA, TWINLESS
from marginmine.workflow.checks import check_pretrained, check_suite_encoders


class Encoders:
    """Part of :class:`marginmine.workflow.Plan` (reads the base part's attributes)."""

    def _init_encoders(self) -> None:
        config = self.config
        enc = self.enc = config["encoder"]
        self.quick = config["quick"]
        self.default_encoder = enc["default"]
        extra = [] if self.quick else list(enc["extra"])
        unknown = [n for n in [self.default_encoder, *enc["extra"]] if n not in enc["models"]]
        if unknown:
            raise ValueError(f"encoder.default / encoder.extra: {unknown} not keys of encoder.models "
                             f"({', '.join(enc['models'])})")
        dirs = {self.default_encoder: f"{self.results}/encoder"}
        dirs.update({n: f"{self.results}/encoders/{n}" for n in extra})
        if enc["eval_random_init"] and not self.quick:  # twins of the trained kinds (a pre-trained import has none)
            dirs.update({f"{n}-random": f"{self.work}/encoders-random/{n}" for n in [self.default_encoder, *extra]
                         if enc["models"][n]["kind"] not in TWINLESS})
        self.evaluated_encoders = list(dirs)
        # the published scorers' suite (`published:`, target `published`): its own encoders, scorers and
        # NMT methods, written beside the experiment's, never into its files
        self.papers = config.get("published") or {}
        self.paper_encoders = list(self.papers.get("encoders", []))
        check_suite_encoders(self.paper_encoders, enc["models"])
        for name in self.paper_encoders:
            dirs.setdefault(name, f"{self.results}/encoders/{name}")
        #: encoder name -> its directory (encoder.json and the model's files)
        self.encoder_dirs = dirs
        self._name_of_dir = {d: n for n, d in dirs.items()}
        self.model_downloads = self._model_downloads()
        self.url_sources.update(self.model_downloads)
        self._check_pretrained()

    def _check_pretrained(self) -> None:
        """Each pre-trained encoder the run builds, checked now as its import job would check it
        (marginmine.workflow.checks.check_pretrained); the languages of the corpus wanted of those
        that score it (of a trained kind: in encoder.train). A model with files given by url is left to
        its download's check."""
        default = self.default_encoder
        scorers = [*self.config["scorers"].values(), *self.papers.get("scorers", {}).values()]
        scoring = {default, *(s.get("encoder", default) for s in scorers)}
        downloading = {item["model"] for item in self.model_downloads.values()}
        for name in self.encoder_dirs:
            model = self.enc["models"].get(name)
            if model is None or name in downloading:  # a random-init twin; files still to download
                continue
            needed = [self.src, self.tgt] if name in scoring else []
            if model["kind"] in TRAINED_ON_DATA:  # a language it never trains on is embedded at random
                langs = {x for item in self.enc["train"] for x in (item["src_lang"], item["tgt_lang"])}
                missing = [x for x in needed if x not in langs]
                if missing:
                    raise ValueError(f"encoder.train: no training data in {', '.join(missing)} (the corpus' "
                                     f"src_lang/tgt_lang), which encoder.models.{name} (kind {model['kind']}) is "
                                     f"trained on to score it (languages of encoder.train: "
                                     f"{', '.join(sorted(langs)) or 'none'}); add data in it or use a pre-trained kind")
                continue
            params = self.encoder_params(self.encoder_dirs[name])[0]
            check_pretrained(name, model["kind"], params, needed)

    def _input_paths(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the files the user supplies (:data:`marginmine.encoders.INPUT_PATHS`) read
        under data_dir when relative, as every input a config names."""
        keys = INPUT_PATHS.get(kind, ())
        out = {k: (self.data_path(v) if k in keys and isinstance(v, str) and v else v) for k, v in params.items()}
        if isinstance(out.get("lang_models"), dict):
            out["lang_models"] = {lang: self._input_paths(kind, spec) if isinstance(spec, dict) else spec
                                  for lang, spec in out["lang_models"].items()}
        return out

    def encoder_name(self, encdir: str) -> str:
        return self._name_of_dir[encdir]

    def is_twin(self, encdir: str) -> bool:
        """A random-init twin: the same network and subwords as its encoder, built untrained by the
        encoder's own trainer (train-encoder --untrained)."""
        name = self.encoder_name(encdir)
        return name.endswith("-random") and name not in self.enc["models"]

    def encoder_model(self, encdir: str) -> dict[str, Any]:
        """The models: entry of an encoder directory (a twin's is its encoder's)."""
        name = self.encoder_name(encdir)
        return self.enc["models"][name.removesuffix("-random") if self.is_twin(encdir) else name]

    def encoder_json(self, name: str) -> str:
        return f"{self.encoder_dirs[name]}/encoder.json"

    def encoder_jsons(self, names: list[str]) -> list[str]:
        return [self.encoder_json(n) for n in names]

    def encoder_args(self, names: list[str]) -> list[str]:
        """NAME=DIR of the named encoders, as the evaluation commands take them (--encoder)."""
        return [f"{name}={self.encoder_dirs[name]}" for name in names]

    def _model_downloads(self) -> dict[str, dict[str, str]]:
        """Encoder params given as {url, sha256} (e.g. a released LASER2 checkpoint): fetched by the
        download rule into data/downloads/, the param replaced by the file and its digest pinned."""
        out = {}
        for name, model in self.enc["models"].items():
            for key, value in (model.get("params") or {}).items():
                if isinstance(value, dict) and "url" in value:
                    if not value.get("sha256"):
                        raise ValueError(f"encoder.models.{name}.params.{key}: a url needs its sha256 (pre-trained "
                                         "files are loaded only when the config pins their digest)")
                    out[f"encoder-{name}-{key}"] = {"url": value["url"], "sha256": value["sha256"], "model": name,
                                                    "key": key}
        return out

    def _encoder_refs(self, value: Any, where: str) -> tuple[Any, list[str]]:
        """{encoder: NAME} anywhere in an encoder's params (e.g. the model that mines its hard
        negatives): replaced by that encoder's directory, which the training then waits for."""
        if isinstance(value, dict) and set(value) == {"encoder"}:
            name = value["encoder"]
            if name not in self.encoder_dirs:
                raise ValueError(f"{where}: unknown encoder {name!r} (encoders: {', '.join(self.encoder_dirs)})")
            return self.encoder_dirs[name], [self.encoder_json(name)]
        if isinstance(value, dict):
            out, deps = {}, []
            for k, v in value.items():
                out[k], d = self._encoder_refs(v, f"{where}.{k}")
                deps += d
            return out, deps
        return value, []

    def encoder_params(self, encdir: str) -> tuple[dict[str, Any], list[str]]:
        """An encoder's params as its training reads them, and the files that training needs besides
        its data: other encoders named by {encoder: NAME} become their directories (their
        encoder.json a dependency), files given by {url, sha256} their downloads (digest pinned)."""
        model = self.encoder_model(encdir)
        params, deps = self._encoder_refs(model.get("params", {}), f"encoder.models.{self.encoder_name(encdir)}.params")
        params = self._input_paths(model["kind"], params)
        for source, item in self.model_downloads.items():
            if self.enc["models"][item["model"]] is model:
                params[item["key"]] = self.download_path(source)
                params.setdefault("sha256", {})[item["key"]] = item["sha256"]
                deps.append(self.download_path(source))
        if model["kind"] == "trained" and params.get("path"):  # reused from another experiment: its manifest
            deps.append(f"{params['path']}/encoder.json")
        return params, deps

    def encoder_params_json(self, encdir: str) -> str:
        return json.dumps(self.encoder_params(encdir)[0], sort_keys=True)

    def encoder_downloads(self, encdir: str) -> list[str]:
        return self.encoder_params(encdir)[1]

    def encoder_seed(self, encdir: str) -> int:
        return self.encoder_model(encdir).get("seed", self.config["seed"])

    def encoder_workdir(self, encdir: str) -> str:
        return f"{self.work}/encoders/{self.encoder_name(encdir)}"

    def encoder_budget_arg(self, encdir: str) -> str:
        """--max-minutes of a trained encoder; a twin is built untrained, without a budget."""
        if self.is_twin(encdir):
            return "--untrained"
        model = self.encoder_model(encdir)
        minutes = model.get("max_minutes")
        return f"--max-minutes {minutes} --on-time-cap {model['on_time_cap']}" if minutes else ""

    def encoder_runtime(self, encdir: str) -> int:
        minutes = None if self.is_twin(encdir) else self.encoder_model(encdir).get("max_minutes")
        return int(minutes * 1.5 + 15) if minutes else 7 * 24 * 60

    def encoder_train_files(self) -> list[str]:
        files = []
        for item in self.enc["train"]:
            files += self.source_files(f"encoder-{item['name']}", item["source"])
        return files

    def encoder_sources_json(self) -> str:
        items = [{"name": item["name"], "src_lang": item["src_lang"], "tgt_lang": item["tgt_lang"],
                  "files": self.source_files(f"encoder-{item['name']}", item["source"]),
                  "columns": item["source"]["columns"], "detokenize": item.get("detokenize")}
                 for item in self.enc["train"]]
        return json.dumps(items)

    def intrinsic_files(self) -> list[str]:
        files = []
        for item in self.config.get("intrinsic", []):
            files += self.source_files(f"intrinsic-{item['name']}", item["source"])
        return files

    def intrinsic_set_args(self, pair_only: bool = False) -> str:
        """--set of the intrinsic sets; ``pair_only``: those in the experiment's language pair (either
        orientation)."""
        args = []
        for item in self.config.get("intrinsic", []):
            if pair_only and {item["src_lang"], item["tgt_lang"]} != {self.src, self.tgt}:
                continue
            a, b = self.source_files(f"intrinsic-{item['name']}", item["source"])
            spec = f"{item['name']},{item['kind']},{item['src_lang']},{item['tgt_lang']},{a},{b}"
            args.append(f"--set {shlex.quote(spec)}")
        return " ".join(args)

    def encoder_protect_files(self) -> list[str]:
        """Dev/test sets and the intrinsic-evaluation sets never enter encoder training."""
        return sorted(set(self.protect_files() + self.intrinsic_files()))

    def encoder_excluded_corpus(self) -> list[str]:
        return self.corpus_files() if self.enc["exclude_corpus"] else []
