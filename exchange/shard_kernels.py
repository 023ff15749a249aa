"""The compiled half of ``exchange.shards``: a shard's walk over a batch and the merge of shards.

A shard is an ``Engine`` holding every symbol but matching only the messages of the symbols it
owns. ``split`` copies its messages out of a batch (``own``, with their batch positions
``ownpos``); ``drive`` then walks the WHOLE batch: before every message, its own or not, it runs
the shard's due deadlines (DAY/GTD expiries, re-opening auction ends) one at a time and logs
each (``log`` rows, below); runs of its own messages go to ``kernels.process_batch``. ``merge``
interleaves the shards' rows into exactly the single engine's order.

Seq inside a batch: a shard numbers only its own messages (``meta[M_SEQ]`` starts the batch at
0), so message j of ``own`` writes rows with seq j + 1 and the deadlines run before it carry
j + 1 too; ``merge`` writes the batch seq (from ``ownpos`` and the log) and the engine-wide
trade ids. Why local seqs: ``process_batch`` numbers messages consecutively, and a run of a
shard's messages is consecutive in ``own`` only.

Why deadlines are logged item by item: several shards may expire orders (or end auctions) before
the same message (DAY orders of many symbols at one session close). The single engine does all
due expiries in (expire_ts, symbol, order_id) order, then all due auction ends in (end, symbol)
order. Each shard does its own in that order; its log row names the item's key and the row
ranges it wrote, so ``merge`` interleaves the shards' items by (phase, key, symbol), the owning
message's rows last. Two shards never share a symbol, so the keys of two shards' items never
tie, and no thread waits for another while matching.

Why a run never has a deadline inside it: ``drive`` cuts a run before any message (its own or
another shard's) at or after the shard's next deadline, and right after any message that may
set a new one (a DAY/GTD NEW, a PHASE message, any message on a symbol with a dynamic band), so
``process_batch`` never expires or uncrosses anything itself and every deadline is logged.

Log row columns: batch position of the message the deadline runs before, phase (0 expiry,
1 auction end), key (expire_ts or end), symbol, then the fills/L2/events counts before and after.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._cache_guard import guard
from .book import M_EXPIRY_N, M_NEXT_END, M_NSYM, M_SEQ
from .expiry import day_expiry
from .kernels import _expire_upto
from .phase_changes import _auction_ends_upto
from .schema import Kind, Tif
from .status import NEED_OUTPUT, OK

guard(__name__, __file__, deps=("exsim.exchange.book", "exsim.exchange.expiry",
                                "exsim.exchange.kernels", "exsim.exchange.phase_changes",
                                "exsim.exchange.schema", "exsim.exchange.status"))

NEED_LOG = 10          # the deadline log is full (grow ``log``; numbered past the engine's)
LOG_COLS = 10
L_POS, L_PHASE, L_KEY, L_SYM, L_BEFORE, L_AFTER = 0, 1, 2, 3, 4, 7

_I64_MAX = (1 << 63) - 1
_DAY = int(Tif.DAY)
_GTD = int(Tif.GTD)
_NEW = int(Kind.NEW)
_PHASE = int(Kind.PHASE)


@njit(cache=True, _nrt=False, nogil=True)
def split(msgs, owner, shard, own, ownpos, owners, banded):
    """Copy the messages of ``msgs`` that ``shard`` owns into ``own``, their positions into
    ``ownpos``, and mark them ``shard`` in ``owners`` (one entry per message; each shard writes
    its own entries). ``owner[s]`` is symbol s's shard; a message naming no
    known symbol goes to shard 0 (which rejects it). ``banded[s]``: symbol s has a dynamic
    band. Returns (how many, the batch's latest ts, whether any of them may set a deadline:
    a DAY/GTD NEW, a PHASE message or a message on a banded symbol, what ``_bound_after``
    looks for)."""
    k = 0
    nsym = len(owner)
    last = np.int64(-_I64_MAX - 1)
    settable = False
    for i in range(len(msgs)):
        m = msgs[i]
        if m.ts > last:
            last = m.ts
        s = m.symbol
        o = owner[s] if s < nsym else 0
        if o == shard:
            own[k] = m
            ownpos[k] = i
            owners[i] = shard
            k += 1
            if (m.kind == _NEW and (m.tif == _DAY or m.tif == _GTD)) or m.kind == _PHASE \
                    or (s < nsym and banded[s] != 0):
                settable = True
    return k, last, settable


@njit(cache=True, _nrt=False, inline="always")
def _next_deadline(meta, expiry):
    """The earliest ts at which a deadline is due (the int64 maximum if none)."""
    d = np.int64(_I64_MAX)
    if meta[M_EXPIRY_N] > 0:
        d = expiry[0].expire_ts
    e = meta[M_NEXT_END]
    if e != 0 and e < d:
        d = e
    return d


@njit(cache=True, _nrt=False, inline="always")
def _bound_after(m, d, symbols, nsym):
    """``d`` lowered to the earliest deadline processing ``m`` may add: a DAY/GTD order's
    expiry (``kernels._entry_expiry``), a PHASE message's re-opening end, and on a symbol with
    a dynamic band the end of the auction a breach at ``m.ts`` would start."""
    if m.kind == _NEW:
        if m.tif == _GTD:
            d = min(d, m.expire_ts)
        elif m.tif == _DAY and m.symbol < nsym:
            d = min(d, day_expiry(m.ts, symbols[m.symbol].session_close))
    elif m.kind == _PHASE and m.expire_ts != 0:
        d = min(d, m.expire_ts)
    if m.symbol < nsym and symbols[m.symbol].dynamic_band_bps != 0:
        w = symbols[m.symbol].interruption_ns
        d = min(d, m.ts + w if w <= 0 or m.ts <= _I64_MAX - w else np.int64(_I64_MAX))
    return d


@njit(cache=True, _nrt=False, inline="always")
def _log_item(log, k, pos, phase, key, sym, c0, c1, c2, cnt):
    row = log[k]
    row[L_POS] = pos
    row[L_PHASE] = phase
    row[L_KEY] = key
    row[L_SYM] = sym
    row[L_BEFORE] = c0
    row[L_BEFORE + 1] = c1
    row[L_BEFORE + 2] = c2
    row[L_AFTER] = cnt[0]
    row[L_AFTER + 1] = cnt[1]
    row[L_AFTER + 2] = cnt[2]


@njit(cache=True, _nrt=False)
def _deadlines(ts, pos, arena, arena_ext, levels, index, books, ladder_keys, ladder_levels, meta,
               symbols, stops, expiry, fills, l2, events, cnt, log, ctl):
    """Run the shard's deadlines due at ``ts`` (before batch message ``pos``) one at a time, as
    ``process_batch`` would, logging each at ``log[ctl[2]]``. Returns OK, or the status of what
    must grow (NEED_LOG: the log), every item so far done and logged."""
    seq = meta[M_SEQ] + 1
    while meta[M_EXPIRY_N] > 0 and expiry[0].expire_ts <= ts:
        k = ctl[2]
        if k >= len(log):
            return NEED_LOG
        key = expiry[0].expire_ts
        sym = np.int64(expiry[0].symbol)
        c0, c1, c2 = cnt[0], cnt[1], cnt[2]
        status = _expire_upto(ts, seq, arena, arena_ext, levels, index, books, ladder_keys,
                              ladder_levels, meta, symbols, stops, expiry, fills, l2, events,
                              cnt, 1)
        if status != OK:
            return status
        _log_item(log, k, pos, 0, key, sym, c0, c1, c2, cnt)
        ctl[2] = k + 1
    while meta[M_NEXT_END] != 0 and meta[M_NEXT_END] <= ts:
        # the auction _auction_ends_upto takes next: the least (end, symbol) due
        sym = np.int64(-1)
        for s in range(meta[M_NSYM]):
            e = symbols[s].auction_end
            if e > 0 and e <= ts and (sym < 0 or e < symbols[sym].auction_end):
                sym = s
        k = ctl[2]
        if sym >= 0 and k >= len(log):
            return NEED_LOG
        key = symbols[sym].auction_end if sym >= 0 else 0
        c0, c1, c2 = cnt[0], cnt[1], cnt[2]
        status = _auction_ends_upto(ts, seq, arena, arena_ext, levels, index, books,
                                    ladder_keys, ladder_levels, meta, symbols, stops, expiry,
                                    fills, l2, events, cnt, 1)
        if status != OK:
            return status
        if sym >= 0:
            _log_item(log, k, pos, 1, key, sym, c0, c1, c2, cnt)
            ctl[2] = k + 1
    return OK


@njit(cache=True, _nrt=False, nogil=True)
def walk(msgs, latest, own, ownpos, n_own, ctl, arena, arena_ext, levels, index, books, ladder_keys,
         ladder_levels, meta, symbols, ticks, stops, expiry, fills, l2, events, cnt, log):
    """Walk ``msgs`` as the shard from position ``ctl[0]`` (own message ``ctl[1]``, ``ctl[2]``
    log rows written), running its deadlines before every message, up to its next run of own
    messages that no deadline can interrupt. ``latest``: the batch's latest ts (no deadline
    after it can be due in this batch, so then no message need be looked at).

    Returns (status, end): OK and end > ctl[1]: match ``own[ctl[1]:end]`` with
    ``process_batch``, set ``ctl[1] = end`` and call again (``ctl[0]`` is already past the run);
    OK and end == ctl[1]: the batch is done; else the status of what must grow (the engine's
    NEED_* or NEED_LOG), ``ctl`` at the message not done: grow and call again."""
    n = len(msgs)
    nsym = meta[M_NSYM]
    i = ctl[0]
    j = ctl[1]
    while i < n:
        d = _next_deadline(meta, expiry)
        if msgs[i].ts >= d:
            status = _deadlines(msgs[i].ts, i, arena, arena_ext, levels, index, books,
                                ladder_keys, ladder_levels, meta, symbols, stops, expiry, fills,
                                l2, events, cnt, log, ctl)
            if status != OK:
                ctl[0] = i
                return status, j
            d = _next_deadline(meta, expiry)
        if j >= n_own or ownpos[j] != i:
            if d > latest:      # nothing is due before the shard's next message
                i = ownpos[j] if j < n_own else n
            else:
                i += 1
            continue
        # the run ends before the first message at or after a deadline that is or may be set
        e = j
        last = i
        while True:
            d = _bound_after(own[e], d, symbols, nsym)
            if e + 1 >= n_own:
                break
            nxt = ownpos[e + 1]
            due = False
            if d <= latest:
                for q in range(last + 1, nxt + 1):
                    if msgs[q].ts >= d:
                        due = True
                        break
            if due:
                break
            e += 1
            last = nxt
        ctl[0] = last + 1
        return OK, e + 1
    ctl[0] = i
    return OK, j


@njit(cache=True, _nrt=False, inline="always")
def _first_seq_at_least(rows, n, seq):
    """The first index in rows[:n] (seq non-decreasing) whose seq is >= ``seq``."""
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if rows[mid].seq < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, _nrt=False, inline="always")
def _first_at_least(a, n, v):
    """The first index in a[:n] (non-decreasing) whose value is >= ``v``."""
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, _nrt=False, inline="always")
def _before(a, b):
    """Whether log row ``a`` comes before log row ``b`` (two shards' items, one message)."""
    if a[L_PHASE] != b[L_PHASE]:
        return a[L_PHASE] < b[L_PHASE]
    if a[L_KEY] != b[L_KEY]:
        return a[L_KEY] < b[L_KEY]
    return a[L_SYM] < b[L_SYM]


@njit(cache=True, _nrt=False, inline="always")
def _copy(src, lo, hi, dst, at, seq, trade0):
    """Copy src[lo:hi] to dst[at:] with seq ``seq`` (and trade ids from ``trade0`` if > 0);
    return the next dst row."""
    for r in range(lo, hi):
        dst[at] = src[r]
        dst[at].seq = seq
        if trade0 > 0:
            dst[at].trade_id = trade0 + at
        at += 1
    return at


@njit(cache=True, _nrt=False, inline="always")
def _copy_run(src, lo, n, seq, local, dst, at, trade0):
    """Copy src[lo:] while its rows carry seq ``local`` to dst[at:], with seq ``seq`` (and
    trade ids from ``trade0`` if ``trade0`` > 0: fills); return (next src row, next dst row)."""
    while lo < n and src[lo].seq == local:
        dst[at] = src[lo]
        dst[at].seq = seq
        if trade0 > 0:
            dst[at].trade_id = trade0 + at
        lo += 1
        at += 1
    return lo, at


@njit(cache=True, _nrt=False, inline="always")
def _next_item(logs, nlogs, cur, ns):
    """The batch position of the earliest deadline not yet merged (the int64 maximum: none)."""
    p = np.int64(_I64_MAX)
    for s in range(ns):
        q = cur[s, 1]
        if q < nlogs[s] and logs[s][q, L_POS] < p:
            p = logs[s][q, L_POS]
    return p


@njit(cache=True, _nrt=False, nogil=True)
def merge(g0, g1, base_seq, base_trade, owners, ownposes, nowns, logs, nlogs, sfills, sl2,
          sevents, scnt, fills, l2, events, cur):
    """Write the rows the shards made before and for batch messages g0 .. g1-1 into ``fills``,
    ``l2``, ``events`` (the batch's outputs, from their row 0) in the single engine's order,
    with the batch seq (``base_seq`` + position + 1) and trade ids (``base_trade`` + row + 1).

    ``owners``: each message's shard; per shard (tuples, one entry each): ``ownposes`` its
    messages' positions, ``logs`` its deadline log, ``sfills``/``sl2``/``sevents`` its rows;
    ``nowns``, ``nlogs`` and ``scnt`` (N x 3) their counts. ``cur`` (N x 5 int64) is scratch.
    Calls over disjoint position ranges may run at once. Returns the row counts before g0."""
    ns = len(ownposes)
    at_f = 0
    at_l = 0
    at_e = 0
    for s in range(ns):
        j = _first_at_least(ownposes[s], nowns[s], g0)
        q = _first_at_least(logs[s][:, L_POS], nlogs[s], g0)
        rf = _first_seq_at_least(sfills[s], scnt[s, 0], j + 1)
        rl = _first_seq_at_least(sl2[s], scnt[s, 1], j + 1)
        re = _first_seq_at_least(sevents[s], scnt[s, 2], j + 1)
        if q > 0:    # rows of deadlines before g0 with seq j + 1 are not this range's
            prev = logs[s][q - 1]
            rf = max(rf, prev[L_AFTER])
            rl = max(rl, prev[L_AFTER + 1])
            re = max(re, prev[L_AFTER + 2])
        cur[s, 0] = j
        cur[s, 1] = q
        cur[s, 2] = rf
        cur[s, 3] = rl
        cur[s, 4] = re
        at_f += rf
        at_l += rl
        at_e += re
    starts = (at_f, at_l, at_e)
    trade0 = base_trade + 1
    pending = _next_item(logs, nlogs, cur, ns)
    for g in range(g0, g1):
        seq = base_seq + g + 1
        if pending == g:
            while True:     # the deadlines before message g, all shards, in the engine's order
                best = -1
                for s in range(ns):
                    q = cur[s, 1]
                    if q < nlogs[s] and logs[s][q, L_POS] == g:
                        if best < 0 or _before(logs[s][q], logs[best][cur[best, 1]]):
                            best = s
                if best < 0:
                    break
                it = logs[best][cur[best, 1]]
                at_f = _copy(sfills[best], it[L_BEFORE], it[L_AFTER], fills, at_f, seq, trade0)
                at_l = _copy(sl2[best], it[L_BEFORE + 1], it[L_AFTER + 1], l2, at_l, seq, 0)
                at_e = _copy(sevents[best], it[L_BEFORE + 2], it[L_AFTER + 2], events, at_e,
                             seq, 0)
                cur[best, 2] = it[L_AFTER]
                cur[best, 3] = it[L_AFTER + 1]
                cur[best, 4] = it[L_AFTER + 2]
                cur[best, 1] += 1
            pending = _next_item(logs, nlogs, cur, ns)
        s = owners[g]     # then message g's own rows, from the shard that owns it
        local = cur[s, 0] + 1
        cur[s, 0] = local
        cur[s, 2], at_f = _copy_run(sfills[s], cur[s, 2], scnt[s, 0], seq, local, fills, at_f,
                                    trade0)
        cur[s, 3], at_l = _copy_run(sl2[s], cur[s, 3], scnt[s, 1], seq, local, l2, at_l, 0)
        cur[s, 4], at_e = _copy_run(sevents[s], cur[s, 4], scnt[s, 2], seq, local, events,
                                    at_e, 0)
    return starts
