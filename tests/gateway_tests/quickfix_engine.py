"""QuickFIX, a standard FIX engine, for the conformance test (test_fix_quickfix.py).

The engine is Debian's QuickFIX 1.15.1 (``libquickfix-dev``: headers and library; .ci/run
installs it like Chromium). Debian does not ship QuickFIX's data dictionaries, so the stock
``FIX44.xml`` comes from the same release's source distribution on PyPI (``pip download
quickfix==1.15.1``: pip reads the package's metadata, the library is not compiled; only that
file is extracted). ``quickfix_client.cpp`` is compiled with g++ while the download runs, and
both are kept in the cache folder ``$XDG_CACHE_HOME/exsim/quickfix-1.15.1`` (``~/.cache`` when
unset; the binary keyed by the source's hash): the first run on a machine takes about a minute
(mostly the download), every later one a few seconds.

``engine()`` returns (client binary, FIX44.xml path) or calls ``pytest.skip`` with the reason
(no package, no compiler, no network for the dictionary): the only cause of a skip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

__all__ = ["engine", "VERSION"]

VERSION = "1.15.1"
HEADER = Path("/usr/include/quickfix/Application.h")
SOURCE = Path(__file__).with_name("quickfix_client.cpp")


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "exsim" / f"quickfix-{VERSION}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fetch(cache: Path, tmp: str):
    """Start fetching QuickFIX VERSION's source distribution into ``tmp`` (pip download: the
    registry's own client; nothing is built); return the process, or None if FIX44.xml is
    already cached."""
    if (cache / "FIX44.xml").exists():
        return None
    return subprocess.Popen([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                             "--no-binary", ":all:", f"quickfix=={VERSION}", "-d", tmp],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _dictionary(cache: Path, fetch, tmp: str) -> Path:
    """Return the stock FIX44.xml of QuickFIX VERSION, extracted once from what ``fetch``
    downloaded into ``tmp``."""
    out = cache / "FIX44.xml"
    if fetch is None:
        return out
    try:
        output, _ = fetch.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        fetch.kill()
        fetch.wait()
        pytest.skip(f"the stock QuickFIX FIX44.xml could not be fetched in 240 s (pip download "
                    f"quickfix=={VERSION})")
    sdists = list(Path(tmp).glob("quickfix-*.tar.gz"))
    if fetch.returncode or not sdists:
        pytest.skip(f"the stock QuickFIX FIX44.xml could not be fetched (pip download "
                    f"quickfix=={VERSION}): {output.decode(errors='replace')[-500:]}")
    with tarfile.open(sdists[0]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/spec/FIX44.xml"))
        data = tar.extractfile(member).read()
    part = out.with_suffix(f".{os.getpid()}.part")
    part.write_bytes(data)
    part.replace(out)
    return out


def _binary(cache: Path) -> Path:
    """Return the compiled quickfix_client (compiled once per source version)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = cache / f"quickfix_client-{digest}"
    if out.exists():
        return out
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed: the QuickFIX test client cannot be compiled")
    part = cache / f".build-{os.getpid()}"
    proc = subprocess.run([gxx, "-std=gnu++14", "-O0", "-w", "-o", str(part), str(SOURCE),
                           "-lquickfix", "-lpthread"], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode:
        raise AssertionError(f"quickfix_client.cpp does not compile:\n{proc.stderr[-3000:]}")
    part.replace(out)
    return out


def engine() -> tuple[Path, Path]:
    """Return (the QuickFIX client binary, the stock FIX44.xml); skip if QuickFIX is absent."""
    if not HEADER.exists():
        pytest.skip("QuickFIX is not installed (Debian package libquickfix-dev; .ci/run "
                    "installs it): the standard-engine conformance test cannot run")
    cache = _cache()
    with tempfile.TemporaryDirectory() as tmp:
        fetch = _fetch(cache, tmp)   # why first: the download runs while g++ compiles
        try:
            binary = _binary(cache)
        except BaseException:   # a skip or a compile error: leave no download behind
            if fetch is not None:
                fetch.kill()
                fetch.wait()
            raise
        return binary, _dictionary(cache, fetch, tmp)
