"""Unpacking downloaded sources: members of .tgz/.tar archives, and sacreBLEU test sets."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from marginmine.errors import InputError, MarginmineError


def extract_member(archive: str | Path, member: str, dest: str | Path) -> Path:
    """Copy one member of a tar archive (any compression) to ``dest``, streaming; atomic rename.

    ``member`` may be a full member path or just its file name (Europarl's archives nest them).
    """
    archive, dest = Path(archive), Path(dest)
    try:
        tar = tarfile.open(archive, "r:*")
    except (OSError, tarfile.TarError) as exc:
        raise InputError(str(archive), f"not a readable tar archive: {exc}") from exc
    with tar:
        for info in tar:
            if info.isfile() and (info.name == member or Path(info.name).name == member):
                src = tar.extractfile(info)
                assert src is not None
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = dest.with_name(dest.name + ".part")
                with src, open(tmp, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                tmp.replace(dest)
                return dest
    raise InputError(str(archive), f"has no member {member!r}", hint="check 'members' in the config")


def fetch_sacrebleu(test_set: str, langpair: str, src_out: str | Path, ref_out: str | Path) -> None:
    """Write a sacreBLEU test set's source and (first) reference, one sentence per line."""
    import os

    from sacrebleu.utils import SACREBLEU_DIR, get_reference_files, get_source_file

    try:
        src = get_source_file(test_set, langpair)
        refs = get_reference_files(test_set, langpair)
    except (Exception, SystemExit) as exc:  # bare Exceptions; sys.exit(1) on an MD5 mismatch or SSL error
        why = f"exit status {exc.code}, see its log above" if isinstance(exc, SystemExit) else str(exc)
        cache = os.path.join(SACREBLEU_DIR, test_set)
        raise MarginmineError(f"sacreBLEU could not provide {test_set} {langpair}: {why} (needs internet "
                              "once, or stage the files and use a 'local' source; a failed or interrupted "
                              f"download stays in sacreBLEU's cache: remove {cache} before retrying)") from exc
    from marginmine.io.safe import atomic_path

    for path, out in ((src, src_out), (refs[0], ref_out)):
        with atomic_path(out) as tmp:
            shutil.copyfile(path, tmp)
