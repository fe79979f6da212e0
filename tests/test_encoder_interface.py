"""The encoder interface: foreign or modified checkpoints are refused before anything is unpickled,
GPU requests fail loudly without a GPU, and exported copies load the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from marginmine.encoders.base import EncoderError, export_encoder, load_encoder, read_manifest, write_manifest


class Boom:
    """Unpickling this would raise: proves the loader never unpickles a refused file."""

    def __reduce__(self):  # noqa: D105
        return (exec, ("raise RuntimeError('unpickled!')",))


def test_directory_without_manifest_is_refused(tmp_path: Path) -> None:
    torch.save({"x": Boom()}, tmp_path / "model.pt")
    with pytest.raises(EncoderError, match="no encoder.json; refusing"):
        load_encoder(tmp_path)


def test_foreign_manifest_and_modified_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "model.pt").write_bytes(b"original")
    write_manifest(tmp_path, "dual", 4, ["en"], {"model": "model.pt"})
    (tmp_path / "model.pt").write_bytes(b"tampered")
    with pytest.raises(EncoderError, match="SHA-256 differs"):
        read_manifest(tmp_path)
    (tmp_path / "encoder.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(EncoderError, match="not a marginmine encoder manifest"):
        load_encoder(tmp_path)


def test_unknown_kind_and_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"w")
    write_manifest(tmp_path, "labse", 768, ["en"], {"weights": "w.bin"})
    with pytest.raises(EncoderError, match="unknown encoder kind 'labse'"):
        load_encoder(tmp_path)
    with pytest.raises(EncoderError, match="encoder directory not found"):
        load_encoder(tmp_path / "nope")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_request_without_gpu_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(EncoderError, match="no CUDA GPU is visible"):
        load_encoder(tmp_path, device="cuda")


def test_export_copies_verified_files(tmp_path: Path) -> None:
    src = tmp_path / "a"
    src.mkdir()
    (src / "m.bin").write_bytes(b"weights")
    write_manifest(src, "dual", 4, ["de", "en"], {"model": "m.bin"})
    dest = export_encoder(src, tmp_path / "b")
    assert read_manifest(dest) == read_manifest(src)
