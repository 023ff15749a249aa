"""Progress bars for long library calls (simulate, export): tqdm on stderr, never on stdout.

Invariant: a bar is shown only when asked (``quiet`` False) and stderr is a terminal, so piped
output, CI logs and tests that compare stderr see nothing of it.
"""

from __future__ import annotations

import sys

__all__ = ["progress"]


def progress(iterable=None, *, total=None, desc: str = "", unit: str = "it", quiet: bool = False):
    """Return a tqdm progress bar on stderr, disabled when ``quiet`` or stderr is not a terminal.

    why disable off a TTY: bars in CI logs and pipes are noise, and tests compare stderr.
    """
    from tqdm import tqdm

    disable = quiet or not sys.stderr.isatty()
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, disable=disable,
                leave=False, dynamic_ncols=True)
