"""Averaging the last fairseq checkpoints into the model that is decoded (``checkpoint_avg.pt``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
from marginmine.nmt.params import NmtError

# checkpoint averaging


def average_state_dicts(states: Iterable[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of model state dicts (streamed: one extra copy in memory).

    Floating-point tensors are summed in float64 and cast back to their dtype; other tensors
    (integer buffers) are taken from the last state. Keys and shapes must agree.
    """
    import torch

    total: dict[str, torch.Tensor] = {}
    last: Mapping[str, torch.Tensor] = {}
    n = 0
    for state in states:
        n += 1
        if n == 1:
            total = {k: v.detach().to(torch.float64, copy=True) if v.is_floating_point() else v
                     for k, v in state.items()}
        else:
            if set(state) != set(total):
                diff = sorted(set(state) ^ set(total))
                raise ValueError(f"state dict {n} has different keys: {diff[:5]}")
            for k, v in state.items():
                if tuple(v.shape) != tuple(total[k].shape):
                    raise ValueError(f"state dict {n}: {k} has shape {tuple(v.shape)}, "
                                     f"the first has {tuple(total[k].shape)}")
                if v.is_floating_point():
                    total[k].add_(v.detach().to(torch.float64))
        last = state
    if n == 0:
        raise ValueError("no state dicts to average")
    return {k: (total[k].div_(n).to(v.dtype) if v.is_floating_point() else v) for k, v in last.items()}


def load_own_checkpoint(path: Path) -> dict[str, Any]:
    """``torch.load`` of a checkpoint our own training wrote (it pickles omegaconf configs)."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def average_checkpoints(paths: Sequence[Path], out: Path) -> None:
    """Average fairseq checkpoints' ``model`` into ``out`` (the last one's config; no optimizer state)."""
    import torch

    if not paths:
        raise NmtError("no checkpoints to average")
    meta: dict[str, Any] = {}

    def models() -> Iterable[Mapping[str, torch.Tensor]]:
        for p in paths:
            ckpt = load_own_checkpoint(p)
            if not isinstance(ckpt, dict) or "model" not in ckpt:
                raise NmtError(f"{p}: not a fairseq checkpoint")
            model = ckpt.pop("model")
            meta.clear()
            meta.update(ckpt)
            yield model

    averaged = average_state_dicts(models())
    meta["model"] = averaged
    meta["last_optimizer_state"] = None  # 2/3 of the file; decoding never reads it
    meta["averaged_from"] = [p.name for p in paths]
    tmp = out.with_name(out.name + ".part")  # a fixed name: torch.save names the archive after it
    torch.save(meta, tmp)
    tmp.replace(out)


EPOCH_CKPT_RE = re.compile(r"^checkpoint(\d+)\.pt$")


def last_epoch_checkpoints(ckpt_dir: Path, n: int) -> list[Path]:
    """The ``n`` highest-numbered ``checkpoint<E>.pt`` files, oldest first."""
    found = sorted((int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := EPOCH_CKPT_RE.match(p.name)))
    return [p for _, p in found[-n:]]


def averaging_window(ckpt_dir: Path, n: int, partial_epoch: bool) -> list[Path]:
    """The checkpoints to average: the last ``n`` epoch checkpoints, where ``checkpoint_last.pt``
    counts as the newest when training stopped inside an epoch (a wall-clock budget) - its updates
    must not be thrown away. Only ``checkpoint_last.pt`` when there is no epoch checkpoint."""
    last = ckpt_dir / "checkpoint_last.pt"
    if partial_epoch:
        return [*last_epoch_checkpoints(ckpt_dir, n - 1), last] if n > 1 else [last]
    return last_epoch_checkpoints(ckpt_dir, n) or [last]
