"""Steps decide, the clock only guards: what happens when a wall-clock cap (``max_minutes``) ends the
training of a model before its step, update or epoch count does.

A model that a time cap stopped depends on how fast and how loaded the machine was: the same config
trains a different model, and every score, selection and BLEU after it differs. So a cap that binds
is, by default (``on_time_cap: error``), an error: the training state stays in its work directory,
nothing is exported, and rerunning resumes from the last checkpoint with a new budget. A config that
accepts such a model (``on_time_cap: warn``, e.g. a fixed budget on a cluster) gets a loud warning
that is written into the model's manifest (``info.time_cap``) and read from there by every table
and page built on it (:func:`caps_under`).

The trained kinds report a stop by the clock in their manifest's ``info``: the dual encoder as
``stopped_by: max_minutes``, fairseq-trained models (the LASER-style encoder, NMT systems and
translators) as ``stopped_by_time: true``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from marginmine.defaults import ON_TIME_CAP
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")

#: what a cap that ends training early does: ``error`` (default) or ``warn``
POLICIES = ("error", "warn")
#: the manifest field (under ``info``) that carries the warning of an accepted capped model
FIELD = "time_cap"


class TimeCapError(MarginmineError):
    """A wall-clock cap ended training before its steps (``on_time_cap: error``)."""


def check_policy(policy: str | None, where: str = "on_time_cap") -> str:
    """``policy`` as given (None: the default), or an error naming the allowed values."""
    value = ON_TIME_CAP if policy is None else policy
    if value not in POLICIES:
        raise MarginmineError(f"{where}: {value!r} is not one of {', '.join(POLICIES)}")
    return value


def stopped_by_time(info: Mapping[str, Any]) -> bool:
    """Whether a trained model's manifest ``info`` says the clock, not the step count, ended training
    (a time stop on the very update that reached ``max_update`` is not one: fairseq logs both)."""
    if not (info.get("stopped_by") == "max_minutes" or info.get("stopped_by_time")):
        return False
    want = (info.get("params") or {}).get("max_update")
    return not (want and info.get("num_updates") is not None and int(info["num_updates"]) >= int(want))


def describe(info: Mapping[str, Any], what: str) -> str:
    """One sentence: which model, the cap, and how far training got."""
    cap = info.get("max_minutes")
    params = info.get("params") or {}
    if "steps" in info:  # dual encoder
        want = params.get("max_steps")
        steps = int(info["steps"])
        got = f"after {steps:,} of {int(want):,} steps" if want else f"after {steps:,} steps"
    else:  # fairseq: updates and epochs
        want = params.get("max_update")
        upd = info.get("num_updates")
        got = (f"after {int(upd):,} of {int(want):,} updates" if upd is not None and want
               else f"after {upd} updates (epoch {info.get('epoch')} of {params.get('max_epoch')})")
    where = f" ({info['machine']})" if info.get("machine") else ""
    return (f"{what}: training stopped by its time cap max_minutes={cap} {got}{where}; this model, and every "
            "score, selection and BLEU built on it, depends on the machine's speed and load")


#: what a rerun after the error does, for a trainer whose resume gives the uninterrupted run's model
RESUMES = "Rerun to resume from the last checkpoint with a new budget"


def enforce(info: Mapping[str, Any], what: str, policy: str | None, rerun: str = RESUMES) -> str | None:
    """None when training ended by its steps; else raise :class:`TimeCapError` (``error``; ``rerun``
    says what the rerun does) or log and return the warning text to record as ``info.time_cap``
    (``warn``). A model the cap stopped before its first step is an error either way."""
    policy = check_policy(policy)
    if not stopped_by_time(info):
        return None
    text = describe(info, what)
    if info.get("steps") == 0 or info.get("num_updates") == 0:  # nothing trained: no model to keep
        raise TimeCapError(f"{text}. Not one training step was taken: raise max_minutes")
    if policy == "error":
        raise TimeCapError(f"{text}. {rerun}; raise max_minutes, or set on_time_cap: warn to accept a model "
                           "the clock cut short")
    log.warning("TIME CAP: %s (on_time_cap: warn; recorded as info.%s)", text, FIELD)
    return text


def record(manifest_path: str | Path, text: str) -> None:
    """Write ``text`` into ``info.time_cap`` of a JSON manifest (atomically; file hashes unchanged)."""
    from marginmine.io.safe import write_text

    path = Path(manifest_path)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.setdefault("info", {})[FIELD] = text
    write_text(path, json.dumps(manifest, indent=1) + "\n")


#: the files whose ``<section>.time_cap`` a result's tables report: encoder and NMT manifests
#: (``info``) and the BLEU reports of NMT systems and translators (``meta``, copied from the manifest)
CARRIERS = (("encoder.json", "info"), ("nmt.json", "info"), ("bleu.json", "meta"))


def caps_under(roots: Iterable[str | Path]) -> list[str]:
    """Every recorded time-cap warning in the files under ``roots`` (sorted, each once): what a table or
    page built from those results prints beside its numbers. Over-reports rather than misses: a capped
    model under ``roots`` is named even where a table does not use it."""
    found: set[str] = set()
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            continue
        for name, section in CARRIERS:
            for path in base.rglob(name):
                try:
                    part = json.loads(path.read_text(encoding="utf-8")).get(section) or {}
                except (OSError, json.JSONDecodeError, AttributeError):
                    continue
                if not isinstance(part, dict):
                    continue
                if part.get(FIELD):
                    found.add(str(part[FIELD]))
                elif stopped_by_time(part):  # written before on_time_cap, or a trained-kind copy of one
                    found.add(describe(part, f"{path.parent} (no on_time_cap record)"))
    return sorted(found)


def caps_lines(caps: Iterable[str]) -> list[str]:
    """:func:`caps_md` as lines to append to a Markdown page's lines, a blank line first (none: [])."""
    text = caps_md(caps)
    return ["", *text.rstrip("\n").split("\n")] if text else []


def caps_html(caps: Iterable[str]) -> str:
    """The warning paragraph of an HTML page (empty when no cap bound)."""
    import html

    caps = list(caps)
    if not caps:
        return ""
    items = "".join(f"<li>{html.escape(c)}</li>" for c in caps)
    return ('<div class="warning"><p><strong>Warning - a time cap cut training short (on_time_cap: warn); '
            f"these results depend on the machine's speed and load:</strong></p><ul>{items}</ul></div>")


def caps_md(caps: Iterable[str]) -> str:
    """The warning paragraph of a Markdown table or page (empty when no cap bound)."""
    caps = list(caps)
    if not caps:
        return ""
    lines = ["**Warning - a time cap cut training short (on_time_cap: warn); these results depend on the "
             "machine's speed and load:**", ""]
    lines += [f"- {c}" for c in caps]
    return "\n".join(lines) + "\n"
