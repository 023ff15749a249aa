"""Matching batches: ``process``, the single-message fast path and the growth of outputs.

``Processing`` is a part of ``exchange.single.SingleEngine`` (it works on the state attributes
``SingleEngine.__init__`` makes and grows them through ``StateGrowth.grow``): it runs
``plain.process_plain`` over a batch, growing the engine's state and the output arrays
whenever the kernel returns a ``NEED_*`` status, then calls it again from the same message.
When the plain kernel meets a message a venue rule may apply to (``NEED_FULL``), the rest of
the batch goes to ``kernels.process_batch``, which is compiled (or loaded from numba's cache)
only then: a flow that never needs it never pays its ~350 s cold compile. Both kernels write
the same bytes for the messages the plain one takes (``exchange.plain``).
Message *content* never raises: bad messages come back as REJECTED events.

Invariants:
- ``process`` on a batch and the same messages one at a time (or through the per-order calls,
  which build a one-row batch here: ``_message``) produce byte-identical outputs, with or
  without ``out=``, prefetching on or off (``exchange.prefetch_tuning``).
- Output arrays are zero-initialised, so padding bytes are zero and outputs compare byte for
  byte; a row is never written twice, so a Result is never overwritten by a later call made
  without ``out=`` (the rolling buffers, ``_process_small``).
- The compiled entry points ``_PLAIN`` and ``_PROCESS`` are only ever called with arguments of exactly the numba
  types it was compiled for (``_caller`` checks them, else numba's dispatcher is called), and a
  cached argument tuple never holds a replaced state array (``SingleEngine.__setattr__``).
"""

from __future__ import annotations

import struct
import weakref

import numpy as np

from . import kernels, plain
from . import prefetch_tuning as _tuning
from .arguments import I64, is_bool
from .book import M_NEED_EVENTS, M_NEED_FILLS, M_NEED_L2
from .errors import UsageError
from .protocol import OutputBuffers, Result
from .schema import EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, ORDER_DTYPE
from .state import grow_output as _grow_output

__all__ = ["Processing", "compiled_entry", "message_fields"]

# The single-message path (issue 20, "one message cheap"). What a one-row call used to pay, ~6 us
# on the development VM: numba's type dispatch over process_batch's 19 arguments (~2.5 us: the
# record dtypes' types are not in its fast fingerprint table), a fresh OutputBuffers (three
# np.zeros of 1024+ rows), the counter array and the state tuple. Now: the compiled entry point
# is called directly (``compiled_entry``) with arguments whose types are checked to be the ones
# it was compiled for, the argument tuple is cached (``SingleEngine.__setattr__`` drops it
# whenever a state array is replaced), small out=None calls write into the engine's rolling
# output buffers, and the per-order calls pack their row with one struct call into a reused
# one-row array.
_SMALL = 64            # messages: a batch up to this with out=None writes the rolling buffers
_ROLL_MESSAGES = 2048  # the rolling buffers are OutputBuffers(_ROLL_MESSAGES) when they roll


def compiled_entry(dispatcher, args):
    """Return the compiled function ``dispatcher`` runs for ``args`` (numba compiles it, or loads
    it from the on-disk cache, if it has not yet). Raises what numba's compile raises for
    argument types it cannot compile.

    Why: calling it skips numba's per-call type dispatch, ~2.5 us over process_batch's record
    arrays. Its caller must pass arguments of exactly the numba types ``args`` have (it unboxes
    without checking): the engine does so only for arrays it made itself or checked."""
    return dispatcher.compile(tuple(dispatcher.typeof_pyval(a) for a in args))


# the message row submit, cancel, modify and set_phase pack in one struct call (ORDER_DTYPE's
# layout, checked at import: if the dtype ever differs, _message falls back to field writes)
_ROW_LAYOUT = (("ts", "q"), ("order_id", "Q"), ("price", "q"), ("qty", "q"), ("symbol", "I"),
               ("trader", "I"), ("kind", "B"), ("order_type", "B"), ("tif", "B"),
               ("flags", "B"), ("side", "B"), ("stop_price", "q"), ("display_qty", "q"),
               ("min_qty", "q"), ("expire_ts", "q"), ("phase", "B"))
_ROW = struct.Struct("<" + "".join(f for _, f in _ROW_LAYOUT))
if ORDER_DTYPE != np.dtype([(n, "<" + {"q": "i8", "Q": "u8", "I": "u4", "B": "u1"}[f])
                            for n, f in _ROW_LAYOUT]) or ORDER_DTYPE.itemsize != _ROW.size:
    _ROW = None

_PROCESS = None          # process_batch's entry point for the engine's own argument types
_PLAIN = None            # process_plain's, for the same types
_NEED_FULL = plain.NEED_FULL
_I64_MIN, _I64_MAX = I64
_new_tuple = tuple.__new__   # Result(...) without the namedtuple's Python-level __new__
_ndarray, _ascontiguous = np.ndarray, np.ascontiguousarray   # one lookup less per call


def _plain(a, dtype) -> bool:
    """Whether ``a`` is a writeable, C-contiguous, one-dimensional ndarray of ``dtype``: an
    output array of the type ``_PROCESS`` was compiled for."""
    if type(a) is not np.ndarray or a.dtype != dtype or a.ndim != 1:
        return False
    f = a.flags
    return f.c_contiguous and f.writeable


def message_fields(kind, sid, order_id, price, qty, ts, **fields) -> np.ndarray:
    """Return a fresh one-row ORDER_DTYPE message of these fields (the others zero).

    Its caller has checked every value against its field's range (``exchange.arguments``), so
    the assignments cannot fail; a value out of range raises what numpy raises for it."""
    m = np.zeros(1, ORDER_DTYPE)
    m["kind"] = kind
    m["symbol"] = sid
    m["order_id"] = order_id
    m["price"] = price
    m["qty"] = qty
    m["ts"] = ts
    for k, v in fields.items():
        m[k] = v
    return m


class Processing:
    """Batch matching of ``SingleEngine`` (see the module)."""

    def process(self, orders: np.ndarray, *, out: OutputBuffers | None = None) -> Result:
        """Match a batch of ORDER_DTYPE messages; return their fills, L2 updates and events.

        Message i of the batch gets seq ``self.seq + 1 + i``. Without ``out`` the Result holds
        fresh arrays. With ``out`` (an OutputBuffers) it holds views into those buffers, valid
        until they are written again (growing them when the batch needs more room): a caller
        that consumes each Result before the next batch pays no allocation or page faults per
        batch, and one alternating two sets can read one batch's outputs on another thread
        while the engine writes the next. The bytes are the same either way.
        Raises UsageError if ``orders`` is not a one-dimensional ORDER_DTYPE array or ``out`` is
        not None or an OutputBuffers; never raises on message content.
        """
        if not isinstance(orders, _ndarray) or orders.dtype != ORDER_DTYPE or orders.ndim != 1:
            got = getattr(orders, "dtype", type(orders).__name__)
            raise UsageError(f"process() takes a 1-d numpy array of ORDER_DTYPE; got {got}")
        orders = _ascontiguous(orders)
        if out is None:
            if len(orders) <= _SMALL:
                return self._process_small(orders)
            out = OutputBuffers(len(orders))
        elif not isinstance(out, OutputBuffers):
            raise UsageError(f"process(out=...) takes an OutputBuffers; got {type(out).__name__}")
        cnt = self._cnt
        cnt.fill(0)
        ahead = self.prefetch_distance
        tuner = self._prefetch_tuner
        if tuner is not None and len(orders) >= _tuning.MIN_BATCH and type(ahead) is int \
                and ahead > 0:
            # a long batch span by span, each tried and decided as a batch of its own
            # (prefetch_tuning, "Why spans")
            for s in range(0, len(orders), _tuning.SPAN):
                self._tuned(orders[s: s + _tuning.SPAN], out, cnt, ahead, tuner)
        else:
            self._match(orders, out, cnt, ahead)
        b0, b1, b2 = cnt.tolist()
        return _new_tuple(Result, (out.fills[:b0], out.l2[:b1], out.events[:b2]))

    def _tuned(self, orders: np.ndarray, out: OutputBuffers, cnt: np.ndarray, ahead: int,
               tuner) -> None:
        """Match ``orders`` (at most one span) after ``tuner``'s trial when it plans one: four
        slices with and without prefetching (distance ``ahead``), timed; the rest the way the
        tuner then chooses."""
        cut = tuner.plan(len(orders))
        if cut:
            took = [0, 0]     # kernel ns of the slices with prefetching, without
            for k, on in enumerate(tuner.trial_order()):
                took[not on] += self._match(orders[k * cut: (k + 1) * cut], out, cnt,
                                            ahead if on else 0, tuner.clock)
            tuner.result(*took)
            orders = orders[4 * cut:]
        self._match(orders, out, cnt, ahead if tuner.prefetching else 0)

    def _match(self, orders: np.ndarray, out: OutputBuffers, cnt: np.ndarray, ahead,
               clock=None) -> int:
        """Run ``process_batch`` over ``orders`` with prefetch distance ``ahead``, writing
        ``out``'s arrays from the rows ``cnt`` counts (growing the engine's state and ``out``'s
        arrays as the kernel asks); return the ns ``clock`` saw spent in the kernel (growth not
        counted; 0 without a clock)."""
        fills, l2, events = out.fills, out.l2, out.events
        call = self._caller(orders, fills, l2, events)
        t0 = clock() if clock else 0
        status, start = call(orders, 0, *(self._state_args or self._cache_state()), fills, l2,
                             events, cnt, ahead)
        took = clock() - t0 if clock else 0
        if status != kernels.OK:
            full = False    # the plain kernel met a message it does not take: the rest goes full
            while status != kernels.OK:
                if status == _NEED_FULL:
                    full = True
                    call = self._caller(orders, fills, l2, events, full)
                elif status == kernels.NEED_OUTPUT:
                    used = cnt.tolist()
                    fills = _grow_output(fills, used[0], int(self._meta[M_NEED_FILLS]))
                    l2 = _grow_output(l2, used[1], int(self._meta[M_NEED_L2]))
                    events = _grow_output(events, used[2], int(self._meta[M_NEED_EVENTS]))
                    call = self._caller(orders, fills, l2, events, full)
                else:
                    self.grow(status)
                t0 = clock() if clock else 0
                status, start = call(orders, start, *(self._state_args or self._cache_state()),
                                     fills, l2, events, cnt, ahead)
                took += clock() - t0 if clock else 0
            out.fills, out.l2, out.events = fills, l2, events
        return took

    def _process_small(self, orders: np.ndarray) -> Result:
        """``process(orders)`` of a small batch, without ``out``: the outputs go to the engine's
        rolling buffers, each call's rows after the previous call's, and the Result views them.

        Why it is safe: no row is written twice. When the buffers lack room the kernel says so
        before writing a message's rows (NEED_OUTPUT), and fresh zeroed buffers take over
        (``_roll_over``); the old ones live as long as Results view them. So a Result is never
        overwritten by a later call, and its bytes are those of fresh zeroed outputs.

        The fast case is one call of the kernel's entry point with the cached argument tail
        (``_tail``: state arrays, rolling buffers, counters, prefetch distance), valid while
        none of them is replaced; anything else goes through ``_process_rolling``."""
        tail = self._tail
        if tail is None:
            return self._process_rolling(orders, -1, 0)
        roll = self._roll
        fills, l2, events, cnt, (a0, a1, a2) = roll
        status, start = _PLAIN(orders, 0, *tail)
        if status == _NEED_FULL and _PROCESS is not None:
            # a venue message: the full kernel from there, as _process_rolling would (either
            # kernel may take any plain message after it: they write the same bytes)
            status, start = _PROCESS(orders, start, *tail)
        if status != 0:     # kernels.OK
            return self._process_rolling(orders, status, start)
        b0, b1, b2 = roll[4] = cnt.tolist()
        return _new_tuple(Result, (fills[a0: b0], l2[a1: b1], events[a2: b2]))

    def _process_rolling(self, orders: np.ndarray, status: int, start: int) -> Result:
        """``_process_small`` from ``start`` with the kernel's last ``status`` (-1: not started):
        grows state or rolls the buffers over as the kernel asks, then caches ``_tail``."""
        fills, l2, events, cnt, a = self._roll or self._new_roll()
        full = False    # the plain kernel met a message it does not take: the rest goes full
        try:
            while status != kernels.OK:
                if status == _NEED_FULL:
                    full = True
                elif status == kernels.NEED_OUTPUT:
                    a = self._roll_over(a)
                    fills, l2, events, cnt, _ = self._roll
                elif status != -1:
                    self.grow(status)
                status, start = self._caller(orders, fills, l2, events, full)(
                    orders, start, *(self._state_args or self._cache_state()), fills, l2,
                    events, cnt, self.prefetch_distance)
        finally:     # even if growing fails: the next call's rows start after this one's
            b = self._roll[4] = self._roll[3].tolist()
        ahead = self.prefetch_distance
        if _PLAIN is not None and type(ahead) is int and _I64_MIN <= ahead <= _I64_MAX:
            self._tail = (*(self._state_args or self._cache_state()), fills, l2, events, cnt,
                          ahead)
        return Result(fills[a[0]: b[0]], l2[a[1]: b[1]], events[a[2]: b[2]])

    def _new_roll(self, fills_rows: int = 0, l2_rows: int = 0, events_rows: int = 0) -> list:
        """Make fresh rolling buffers with room for _ROLL_MESSAGES messages (at least the rows
        given), their counters at 0; return them as [fills, l2, events, cnt, cnt as a list]."""
        b = OutputBuffers(_ROLL_MESSAGES)
        fills, l2, events = b.fills, b.l2, b.events
        if fills_rows > len(fills):
            fills = np.zeros(fills_rows, FILL_DTYPE)
        if l2_rows > len(l2):
            l2 = np.zeros(l2_rows, L2_DTYPE)
        if events_rows > len(events):
            events = np.zeros(events_rows, EVENT_DTYPE)
        self._roll = [fills, l2, events, np.zeros(3, np.int64), [0, 0, 0]]
        self._tail = None
        return self._roll

    def _roll_over(self, a: list) -> list:
        """On NEED_OUTPUT in the rolling buffers: move this call's rows so far (from ``a``, the
        counters when it began) to fresh buffers with room for what the kernel asks (the
        ``M_NEED_*`` totals, less ``a``), set their counters after those rows; return the new
        start, [0, 0, 0]."""
        fills, l2, events, cnt, _ = self._roll
        b = cnt.tolist()
        need = [int(self._meta[k]) - lo
                for k, lo in zip((M_NEED_FILLS, M_NEED_L2, M_NEED_EVENTS), a)]
        roll = self._new_roll(*need)
        for old, new, lo, hi in zip((fills, l2, events), roll, a, b):
            new[: hi - lo] = old[lo: hi]
        roll[3][:] = [hi - lo for lo, hi in zip(a, b)]
        return [0, 0, 0]

    def _caller(self, orders, fills, l2, events, full: bool = False):
        """Return what to call ``plain.process_plain`` (``full``: ``kernels.process_batch``)
        through for these arguments: its compiled entry point (``compiled_entry``) when every argument has the types it was
        compiled for (engine state, a C-contiguous ORDER_DTYPE array, plain C arrays of the
        output dtypes, an int prefetch distance), else the numba dispatcher itself (which types
        them and compiles a new specialisation if need be).

        A read-only batch is passed to the entry point compiled for writeable ones: the kernel
        never writes the batch (numba compiles it for read-only arrays too, which it refuses
        for code that writes them), so the code is the same; this also spares a caller with a
        read-only batch (``np.frombuffer``) a second compile of the kernel. The output arrays
        checked last are remembered (weakly) and not checked again: changing an array's flags
        or shape in place (``a.flags.writeable = False``) is not supported; replace it."""
        global _PROCESS, _PLAIN
        kernel = kernels.process_batch if full else plain.process_plain
        ahead = self.prefetch_distance
        if not (type(ahead) is int and _I64_MIN <= ahead <= _I64_MAX):
            return kernel
        seen = self._checked      # the output arrays checked last, weakly held
        if seen is None or seen[0]() is not fills or seen[1]() is not l2 \
                or seen[2]() is not events:
            if not (_plain(fills, FILL_DTYPE) and _plain(l2, L2_DTYPE)
                    and _plain(events, EVENT_DTYPE)):
                return kernel
            self._checked = (weakref.ref(fills), weakref.ref(l2), weakref.ref(events))
        entry = _PROCESS if full else _PLAIN
        if entry is None:
            if not orders.flags.writeable:
                orders = orders.copy()     # the types of the entry point: writeable arrays
            args = self._state_args or self._cache_state()
            # the full kernel is compiled (or loaded) only when a batch first needs it
            entry = compiled_entry(kernel, (orders, 0, *args, fills, l2, events,
                                            np.zeros(3, np.int64), ahead))
            if full:
                _PROCESS = entry
            else:
                _PLAIN = entry
        return entry

    def _cache_state(self) -> tuple:
        """Return the state arrays as a tuple, cached until one is replaced (``__setattr__``)."""
        args = tuple(self.state)
        self._state_args = args
        return args

    @property
    def prefetch_tuning(self) -> bool:
        """Whether batches of at least ``prefetch_tuning.MIN_BATCH`` messages time prefetching
        on and off now and then and keep the faster (``exchange.prefetch_tuning``; default
        True). False: every batch prefetches ``prefetch_distance`` messages ahead. Either way
        the outputs are the same bytes."""
        return self._prefetch_tuner is not None

    @prefetch_tuning.setter
    def prefetch_tuning(self, on: bool) -> None:
        if not is_bool(on):
            raise UsageError(f"prefetch_tuning must be a bool; got {on!r}")
        if bool(on) != (self._prefetch_tuner is not None):
            self._prefetch_tuner = _tuning.PrefetchTuner() if on else None

    def _message(self, kind, sid, order_id, price, qty, ts, trader=0, side=0, order_type=0,
                 tif=0, flags=0, stop_price=0, display_qty=0, min_qty=0, expire_ts=0,
                 phase=0) -> np.ndarray:
        """Return the one-row ORDER_DTYPE message of these fields (every value checked against
        its field's range, so nothing can fail): the engine's reused row, packed in one struct
        call (the caller processes it at once; nothing keeps it). ``self._row`` is set only
        when ``_ROW`` is (submit packs into it directly once it is)."""
        row = self._row
        if _ROW is None:
            return self._message_fields(kind, sid, order_id, price, qty, ts, trader=trader,
                                        side=side, order_type=order_type, tif=tif, flags=flags,
                                        stop_price=stop_price, display_qty=display_qty,
                                        min_qty=min_qty, expire_ts=expire_ts, phase=phase)
        if row is None:
            m = np.zeros(1, ORDER_DTYPE)
            row = self._row = (m, m.view(np.uint8))
        _ROW.pack_into(row[1], 0, ts, order_id, price, qty, sid, trader, kind, order_type, tif,
                       flags, side, stop_price, display_qty, min_qty, expire_ts, phase)
        return row[0]

    # a fresh row, as ``_message`` falls back to; a staticmethod so callers building messages
    # without an engine at hand (the sharded engine) reach it as ``Engine._message_fields``
    _message_fields = staticmethod(message_fields)
