"""Choosing a column's encoding: the smallest after compression, searched on a sample, remembered.

``choose`` encodes a column with every candidate encoding in every stream layout (bit-packed,
byte-aligned, byte-shuffled; see store/codecs/) and keeps the smallest after the codec that
follows; a long column is ranked on a sample (SEARCH_RUNS evenly spaced runs of consecutive rows,
SEARCH_ROWS in all) and only the winner encodes the whole column. ``Chooser`` remembers the choice
per key (table, column, codec) and re-searches only every ``research_every`` uses or when the
bytes per row grow by a quarter, so steady-state sealing encodes each column once; a short
column (a segment's last block) never replaces or tests a choice made on a long one.

Invariants: a choice only changes how a block is encoded, never what it decodes to; the block
records its encoding and layouts, so readers need no knowledge of the choice.
"""

from __future__ import annotations

import numpy as np

from exsim.store.codecs import ALIGNED, DICT, ENCODINGS, PACKED, PLAIN, SHUFFLED, encode_u64, encode_view
from exsim.store.codecs.columns import _as_u64

__all__ = ["choose", "choose_u64", "Chooser", "SEARCH_ROWS", "SEARCH_RUNS", "REMEMBER_ROWS"]

SEARCH_ROWS = 8_192    # rows a full encoding search looks at
SEARCH_RUNS = 4        # ... taken as this many evenly spaced runs of consecutive rows
# a column shorter than this (a segment's last block) never replaces or tests a choice made on
# a longer one: its bytes per row are mostly block and stream headers (a 2-row block stored
# PLAIN costs ~8.5 bytes per row), so a choice made on it, and its rate, say nothing about the
# next full block; remembered, such a choice held PLAIN or FOR over the next 16 full blocks of
# every column (2-3x the bytes, and slower reads)
REMEMBER_ROWS = 1_024


def choose(col: np.ndarray, candidates=ENCODINGS, compress=None) -> tuple[int, int, bytes]:
    """Encode ``col`` with every candidate and return (encoding, aligned, bytes) of the smallest.

    With ``compress`` (a bytes -> bytes function: the codec that will follow) candidates are
    ranked by their compressed size, and byte-aligned variants are tried too: bit-packing can
    hide from lz4/zstd the structure they would find in whole bytes. Ties go to the earlier
    candidate (PLAIN first: cheapest to decode). Columns longer than SEARCH_ROWS are ranked on
    a sample of SEARCH_ROWS rows (a few evenly spaced runs of consecutive rows).
    """
    return choose_u64(_as_u64(col), col.dtype, candidates, compress)


def _sample(u: np.ndarray) -> np.ndarray:
    # why runs, not single rows: delta and run-length encodings only show on consecutive rows;
    # several runs spread over the column see more of it than one prefix
    if u.size <= SEARCH_ROWS:
        return u
    k = SEARCH_RUNS
    run = SEARCH_ROWS // k
    starts = np.linspace(0, u.size - run, k).astype(np.int64)
    return np.concatenate([u[a:a + run] for a in starts])


def choose_u64(u: np.ndarray, dtype, candidates=ENCODINGS, compress=None) -> tuple[int, int, bytes]:
    """``choose`` for a column given as uint64 bit patterns or as another integer column (a
    ``split_u64`` column; see ``codecs.encode_view``)."""
    if u.size > SEARCH_ROWS:
        # why: ranking on a sample costs a fraction of the search and picks the same winner
        # for the steady flows we store; only the winner encodes the whole column
        enc, aligned, _ = choose_u64(_sample(u), dtype, candidates, compress)
        return enc, aligned, encode_u64(u, dtype, enc, aligned)
    # why uint64 bit patterns: the ~15 trial encodes below then run one compiled variant
    # whatever the column's type (a short column: the copy is cheap)
    u = _as_u64(u)
    best = None
    for enc in candidates:
        if enc == DICT and u.size > 4096 and _sample_distinct(u) > 1024:
            continue  # why: a high-cardinality dictionary costs time and cannot win
        seen = []
        for aligned in ((PACKED, ALIGNED, SHUFFLED) if compress is not None and enc != PLAIN else (PACKED,)):
            b = encode_u64(u, dtype, enc, aligned)
            if b in seen:
                continue  # why: narrow or byte-wide streams are the same bytes in several layouts
            seen.append(b)
            size = len(b) if compress is None else min(len(b), len(compress(b)))
            if best is None or size < best[0]:
                best = (size, enc, aligned, b)
    return best[1], best[2], best[3]


def _sample_distinct(col: np.ndarray) -> int:
    """Distinct values in an evenly spaced sample of about 4096 rows."""
    s = np.sort(col[::max(1, col.size // 4096)])
    # why not np.unique: its hashing took ~0.7 ms per 4096 rows here, a sort ~0.1 ms
    return int(s.size > 0) + int(np.count_nonzero(s[1:] != s[:-1]))


class Chooser:
    """Remembers the encoding chosen per key (e.g. (table, column)) and reuses it.

    A full search happens on first use, every ``research_every`` uses, and whenever the reused
    encoding costs more than ``worse_ratio`` times the bytes per row it cost when chosen.
    A short column (fewer than REMEMBER_ROWS rows) never replaces or tests a choice made on a
    long one: it takes that choice as it is, uncounted. A choice made on a short column (no
    long one seen yet: a run of small symbols) serves short columns as any choice does, and
    the first long column searches afresh.
    """

    def __init__(self, research_every: int = 16, worse_ratio: float = 1.25):
        self.research_every = research_every
        self.worse_ratio = worse_ratio
        # key -> (encoding, layout, bytes per row when chosen, uses since, chosen on a short
        # column)
        self._memo: dict = {}
        self.searches = 0

    def state(self) -> dict:
        """The remembered choices as a JSON-able dict (to carry them across sessions)."""
        return {"|".join(map(str, k)): [e, a, r] for k, (e, a, r, _, short) in self._memo.items()
                if not short}

    def load(self, state) -> None:
        """Adopt choices from ``state()``; they are re-checked like any remembered choice.
        Returns None and never raises: ``state`` comes from the catalog, and an entry that is
        not ``"table|column|codec": [encoding, layout, bytes per row]`` with a known encoding
        and layout and a finite rate >= 0 is skipped (a choice is only a hint: a skipped key
        is searched afresh on first use)."""
        if not isinstance(state, dict):
            return
        for k, v in state.items():
            try:
                t, col, codec = k.split("|")
                e, a, r = v
                key, memo = (t, col, int(codec)), (int(e), int(a), float(r), 0, False)
            except (AttributeError, TypeError, ValueError, OverflowError):
                continue
            if memo[0] in ENCODINGS and memo[1] in (PACKED, ALIGNED, SHUFFLED) \
                    and 0 <= memo[2] < float("inf"):
                self._memo[key] = memo

    def encode(self, key, col: np.ndarray, compress=None) -> tuple[int, bytes, bytes]:
        """Return (encoding, block bytes, compressed block bytes) for ``col``, reusing the
        remembered choice if it still holds. ``compress`` is the codec that follows (see
        ``choose``; None: no compression, the last two items are the same bytes). Both are
        the caller's own bytes (``encode_u64`` may return views of a reused buffer).
        """
        enc, b, c = self.encode_u64(key, _as_u64(col), col.dtype, compress)
        block = bytes(b)
        return enc, block, (block if c is b else bytes(c))

    def encode_u64(self, key, u: np.ndarray, dtype, compress=None) -> tuple[int, bytes, bytes]:
        """``encode`` for a column given as uint64 bit patterns (see ``encode_u64``). With a
        remembered choice the block bytes are a view of the encoder's reused buffer (see
        ``codecs.encode_view``): valid until the next encode on this thread."""
        comp = compress or (lambda b: b)
        memo = self._memo.get(key)
        n = max(u.size, 1)
        short = u.size < REMEMBER_ROWS
        if memo is not None and short and not memo[4]:
            b = encode_view(u, dtype, memo[0], memo[1])
            return memo[0], b, comp(b)
        if memo is not None and memo[3] < self.research_every and (short or not memo[4]):
            enc, aligned, per_row, uses, was_short = memo
            b = encode_view(u, dtype, enc, aligned)   # why a view: the block is copied once, compressed
            c = comp(b)
            if min(len(b), len(c)) / n <= per_row * self.worse_ratio + 0.01:
                self._memo[key] = (enc, aligned, per_row, uses + 1, was_short)
                return enc, b, c
        self.searches += 1
        enc, aligned, b = choose_u64(u, dtype, compress=compress)
        c = comp(b)
        self._memo[key] = (enc, aligned, min(len(b), len(c)) / n, 0, short)
        return enc, b, c
