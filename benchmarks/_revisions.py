"""The repository's code as of an earlier git revision, for the benchmarks' ``--baseline REV``.

``extract(rev, paths, prefix)`` puts ``git archive`` of those paths at that commit into
<tmp>/<prefix>-<sha12> once per commit (a second run reuses it, numba cache included), renamed
into place whole so a half-extracted tree is never used.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

__all__ = ["ROOT", "extract"]

ROOT = Path(__file__).resolve().parent.parent     # the repository the benchmarks live in


def extract(rev: str, paths: list[str], prefix: str) -> Path:
    """Return the directory holding ``paths`` (repository paths; [] for the whole tree) as of
    git revision ``rev`` of ``ROOT``.

    Raises SystemExit naming ``rev`` if git cannot resolve it, or naming the commit if it
    cannot archive those paths (e.g. the revision has no exchange/)."""
    got = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                          f"{rev}^{{commit}}"], capture_output=True, text=True)
    if got.returncode != 0:
        raise SystemExit(f"--baseline: {rev!r} is not a commit of the git repository at {ROOT}")
    sha = got.stdout.strip()
    dest = Path(tempfile.gettempdir()) / f"{prefix}-{sha[:12]}"
    if dest.is_dir():
        return dest
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", sha, *paths],
                         capture_output=True)
    if tar.returncode != 0:
        raise SystemExit(f"--baseline: cannot extract {' '.join(paths) or 'the tree'} of commit "
                         f"{sha[:12]} ({tar.stderr.decode(errors='replace').strip()})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=dest.name + "."))
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as tf:
        tf.extractall(work, filter="data")
    try:
        work.rename(dest)
    except OSError:        # another run extracted it meanwhile: use theirs
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return dest
