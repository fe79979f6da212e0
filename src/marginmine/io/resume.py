"""Resumable outputs: a long step keeps its progress on disk, so that a rerun after a kill continues
where it stopped, never mixes pieces made for other inputs or settings, and shows the output under
its own name only when it is complete.

The contract of :class:`Resumable` (one output file written in pieces: scores, embeddings):

* **Partial file.** The pieces go to ``OUTPUT.part`` beside the output (:func:`part_path`;
  ``NAME.part.npy`` when a suffix must stay last); outputs written in step with it (``also``, e.g.
  a noise baseline) each have their own part.
* **State file.** ``OUTPUT.state.json`` (:func:`state_path`, a :class:`StateFile`) holds the
  fingerprint and the writer's own progress fields (lines, bytes, rows done). It is written
  atomically after each piece is on disk, so it never promises a piece a kill lost; a state without
  its part (the output was finished) is ignored.
* **Fingerprint.** What the part is made from (inputs, settings) as a JSON-able value, compared
  after a JSON round trip (:func:`changed`: a tuple equals the list it was saved as). A state with
  another fingerprint restarts the output from scratch, and the log says so
  (``OUT: <what> changed since the interrupted run: <step> from the start``).
* **Torn part.** The writer checks that its part holds what the state promises (``torn``: a reason,
  or None); a torn part restarts from scratch, logged the same way (``OUT: <reason>: <step> from
  the start``).
* **Atomic finish.** :meth:`Resumable.finish` renames the ``also`` parts, then the part, into place
  (``os.replace``, within one directory) and then removes the state: the output appears complete or
  not at all, and a kill before the state is gone leaves only a stale state (no part: ignored).

Steps that keep their progress in a directory (fairseq's checkpoints of the NMT system and of the
LASER encoder) use the same :class:`StateFile` and :func:`changed` for their stages; what a changed
fingerprint does there (redo a stage, or refuse checkpoints of another run) is theirs to say.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from marginmine.errors import InputError
from marginmine.io.safe import read_json, write_text


def part_path(out: str | Path, keep: str = "") -> Path:
    """Where ``out`` is written until complete: ``OUT.part``; with ``keep`` (a suffix of ``out``,
    e.g. ``.npy``), ``NAME.part<keep>`` so that the suffix stays last."""
    p = Path(out)  # a name without ``keep`` gets it appended: x.emb -> x.emb.part.npy
    return p.with_name(p.name.removesuffix(keep) + ".part" + keep) if keep else p.with_name(p.name + ".part")


def state_path(out: str | Path) -> Path:
    """The state file of a resumable ``out``: ``OUT.state.json``."""
    p = Path(out)
    return p.with_name(p.name + ".state.json")


def plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples become lists): what a saved state compares with."""
    return json.loads(json.dumps(value))


def changed(state: Mapping[str, Any], key: str, fingerprint: Any) -> bool:
    """Whether ``state`` records another fingerprint under ``key`` than ``fingerprint`` (or none)."""
    return key not in state or state[key] != plain(fingerprint)


@dataclass(frozen=True)
class StateFile:
    """A step's progress as a small JSON object in ``path``, replaced atomically on every write
    (sorted keys, one-space indent, final newline)."""

    path: Path

    def read(self) -> dict[str, Any]:
        """The saved state; ``{}`` when there is none. A file that is not a JSON object is an
        ``InputError`` naming it (marginmine writes it atomically: something else changed it)."""
        if not self.path.exists():
            return {}
        hint = "delete it and the partial output it describes to start that step over"
        state = read_json(self.path, "a step's state file", hint=hint)
        if not isinstance(state, dict):
            raise InputError(str(self.path), "a step's state file: not a JSON object", hint=hint)
        return state

    def write(self, state: Mapping[str, Any]) -> None:
        write_text(self.path, json.dumps(state, indent=1, sort_keys=True) + "\n")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Resumable:
    """``out`` written in pieces (module docstring): ``fingerprint`` says what from; ``step`` names
    the work in the log (``scoring``, ``embedding``), ``log`` is the writer's logger; ``keep``: the
    suffix the part keeps last (:func:`part_path`); ``also``: outputs written in step with ``out``,
    put in place just before it."""

    out: Path
    fingerprint: Any
    step: str
    log: logging.Logger
    keep: str = ""
    also: tuple[Path, ...] = ()

    @property
    def part(self) -> Path:
        return part_path(self.out, self.keep)

    @property
    def state(self) -> StateFile:
        return StateFile(state_path(self.out))

    def resume(self, what_changed: str, torn: Callable[[dict[str, Any]], str | None] | None = None
               ) -> dict[str, Any] | None:
        """The saved state to continue from, or None to start from scratch: None without a word when
        there is no part or no state; logged (a warning) when the state was saved for another
        fingerprint (``what_changed``: what that means, e.g. ``inputs or settings``) or when
        ``torn(state)`` gives a reason (it is called only for a state of this fingerprint)."""
        if not self.part.exists():
            return None
        state = self.state.read()
        if not state:
            return None
        if changed(state, "fingerprint", self.fingerprint):
            reason: str | None = f"{what_changed} changed since the interrupted run"
        else:
            reason = torn(state) if torn is not None else None
        if reason:
            self.log.warning("%s: %s: %s from the start", self.out, reason, self.step)
            return None
        return state

    def save(self, **progress: Any) -> None:
        """Record the fingerprint and ``progress`` (call it once the pieces it counts are on disk)."""
        self.state.write({"fingerprint": plain(self.fingerprint), **progress})

    def finish(self) -> None:
        """Put every part in place, ``also`` first and ``out`` last, then remove the state."""
        for target, part in [(p, part_path(p)) for p in self.also] + [(self.out, self.part)]:
            os.replace(part, target)
        self.state.remove()
