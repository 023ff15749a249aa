"""Where the shared real-data samples live (LOBSTER, Binance, QuantCup).

The samples are not part of the repository: they sit in ``../shared/data`` beside the checkout.
``shared_data_dir`` looks, in order, at the EXSIM_SHARED_DATA environment variable, ``shared/data``
next to the repository (and next to its parents, for clones in a subfolder), then /work/shared/data.
``find_sample`` turns a bare sample name that is not a path (``lobster_AMZN_2012-06-21_level1``,
``quantcup_score_feed.csv``) into its path in that directory; an existing path always wins.
"""

from __future__ import annotations

import os
from pathlib import Path

from exsim.exchange.errors import InputError

__all__ = ["shared_data_dir", "shared_file", "QUANTCUP_FEED", "LOBSTER_AMZN", "LOBSTER_AAPL",
           "BINANCE_BTCUSDT", "find_sample"]

QUANTCUP_FEED = "quantcup_score_feed/quantcup_score_feed.csv"
LOBSTER_AMZN = "lobster_AMZN_2012-06-21_level1"
LOBSTER_AAPL = "lobster_AAPL_2012-06-21_level10_head"
BINANCE_BTCUSDT = "binance_spot_btcusdt_20240808_hftbacktest/btcusdt_20240808.gz"


def shared_data_dir() -> Path | None:
    """Return the shared data directory, or None if it cannot be found."""
    env = os.environ.get("EXSIM_SHARED_DATA")
    candidates = [Path(env)] if env else []
    repo = Path(__file__).resolve().parents[1]
    candidates += [p / "shared" / "data" for p in repo.parents][:3]
    candidates.append(Path("/work/shared/data"))
    for c in candidates:
        if (c / "README.md").is_file():
            return c
    return None


def shared_file(relative: str) -> Path:
    """Return the path of a file or folder in the shared data directory.

    Raises InputError naming where it looked if the shared data directory is missing.
    """
    base = shared_data_dir()
    if base is None:
        raise InputError("shared data directory not found: set EXSIM_SHARED_DATA to the folder "
                         "holding the LOBSTER, Binance and QuantCup samples")
    return base / relative


def find_sample(name: str) -> str:
    """Return ``name`` itself if it exists or is absolute; else its path in the shared data
    directory (``DIR/name``, or ``DIR/*/name`` for a bare file name found in exactly one sample
    folder) when there is one; else ``name`` unchanged. Never raises."""
    if os.path.isabs(name) or os.path.exists(name):
        return name
    base = shared_data_dir()
    if base is None:
        return name
    if (base / name).exists():
        return str(base / name)
    if os.sep not in name and "/" not in name:
        found = [p for p in base.glob(f"*/{name}") if p.exists()] if name not in ("", ".", "..") else []
        if len(found) == 1:
            return str(found[0])
    return name
