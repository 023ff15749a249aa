"""Times as people write them: parsing ``10:00:00`` or ISO timestamps into a run's ns, and a
time-of-day axis for plots.

A run's timestamps are integer ns, either since midnight (LOBSTER, the scenarios: a day that
starts at 0) or since the Unix epoch (Binance, Databento). Both are read as UTC: a time of day
``HH:MM[:SS[.fraction]]`` is that time on the run's first day (midnight of its first
timestamp's day: 0 for a day-relative run), an ISO date or date-time
(``2024-08-08T10:00:00.250Z``, ``2024-08-08 10:00``, an offset such as ``+02:00``, none: UTC)
is that instant since the epoch, and a plain integer is ns as stored. Fractions keep all nine
digits (no float rounding).

A run that records its trading date and time zone (``RunClock``: a LOBSTER day, whose ts count
from midnight in New York) reads and writes times in that zone instead: a time of day, or an
ISO date-time without an offset, is local time on the trading date, an ISO date-time with an
offset is that instant, and every time it prints names its zone.

Invariants: parsing is exact integer arithmetic; a text that is none of these forms raises
UsageError naming the option and the forms it takes.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

from exsim.exchange.errors import UsageError
from exsim.scenarios.loaders._parse import check_zone

__all__ = ["DAY_NS", "parse_time", "parse_time_range", "day_start", "clock_text",
           "time_of_day_axis", "TIME_FORMS", "RunClock", "check_zone"]

DAY_NS = 86_400 * 10**9
TIME_FORMS = ("ns, HH:MM[:SS[.fff]] (on the run's first day, in its time zone) or an ISO "
              "date-time")

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
                  r"\s*(Z|[+-]\d{2}:?\d{2})?$", re.I)
_INT = re.compile(r"^[+-]?\d[\d_]*$")


def day_start(ts: int) -> int:
    """Return midnight UTC (ns) of the day holding ``ts`` (0 for a ts within the first day)."""
    return (int(ts) // DAY_NS) * DAY_NS


def _fraction_ns(text: str | None) -> int:
    return int((text or "").ljust(9, "0")) if text else 0


def parse_time(text: str, what: str = "--ts", base=0) -> int:
    """Return the ns timestamp ``text`` names: an integer (ns as stored), a time of day
    ``HH:MM[:SS[.fraction]]`` (UTC, added to ``base``: midnight of the run's first day, see
    ``day_start``; a callable returning it is called only for this form) or an ISO date / date-time (ns since the Unix epoch; UTC unless it carries
    an offset).

    Raises UsageError naming ``what`` and the accepted forms when ``text`` is none of them or
    names an impossible time (25:00, 2024-02-30)."""
    s = str(text).strip()
    if _INT.match(s):
        return int(s.replace("_", ""))
    m = _CLOCK.match(s)
    if m:
        h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
        if h > 23 or mi > 59 or sec > 59:
            raise UsageError(f"{what} {text!r}: not a time of day (HH 0-23, MM and SS 0-59)")
        base = base() if callable(base) else base
        return int(base) + ((h * 60 + mi) * 60 + sec) * 10**9 + _fraction_ns(m.group(4))
    m = _ISO.match(s)
    if m:
        y, mo, d, h, mi, sec, frac, zone = m.groups()
        try:
            when = _dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0),
                                tzinfo=_zone(zone))
        except ValueError as e:
            raise UsageError(f"{what} {text!r}: {e}") from None
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        delta = when - epoch
        seconds = delta.days * 86_400 + delta.seconds
        return seconds * 10**9 + _fraction_ns(frac)
    raise UsageError(f"{what} {text!r}: expected a time as {TIME_FORMS} (e.g. 36000000000000, "
                     "10:00:00, 2024-08-08T10:00:00Z)")


def _zone(zone: str | None) -> _dt.timezone:
    if not zone or zone.upper() == "Z":
        return _dt.timezone.utc
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        raise UsageError(f"time zone offset {zone!r} is not +HH:MM")
    return _dt.timezone(sign * _dt.timedelta(hours=hours, minutes=minutes))


def parse_time_range(text: str, what: str = "--ts", base=0) -> tuple[int, int]:
    """Parse an inclusive ts range: ``LO..HI`` with either bound any ``parse_time`` form (or
    empty: open), or the older ``LO:HI`` of integers (``N`` alone: ``N:N``).

    Returns (lo, hi) with open ends as 0 and 2**62. Raises UsageError naming ``what`` for a
    bound that is not a time or lo > hi."""
    s = str(text).strip()
    if ".." in s:
        lo_s, _, hi_s = s.partition("..")
    elif re.match(r"^[\d_]*:[\d_]*$", s):
        lo_s, _, hi_s = s.partition(":")
    else:
        lo_s = hi_s = s   # one time alone
        if not s:
            raise UsageError(f"{what}: expected LO..HI, each {TIME_FORMS}")
    lo = parse_time(lo_s, what, base) if lo_s.strip() else 0
    hi = parse_time(hi_s, what, base) if hi_s.strip() else 1 << 62
    if lo > hi:
        raise UsageError(f"{what} {text!r}: the low bound is above the high bound")
    return lo, hi


def clock_text(ns: int, base: int = 0, digits: int = 0) -> str:
    """Return ``ns`` as a time of day ``HH:MM:SS`` (with ``digits`` decimals, 0..9) after midnight
    ``base``; a day past the first is written ``+Nd HH:MM:SS``."""
    rel = int(ns) - int(base)
    days, rest = divmod(rel, DAY_NS)
    sec, frac = divmod(rest, 10**9)
    text = f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
    if digits:
        text += "." + f"{frac:09d}"[:digits]
    return text if days == 0 else f"{days:+d}d {text}"


def time_of_day_axis(ax, base: int, span_ns: int, epoch: bool, zone: str | None = None) -> None:
    """Label ``ax``'s x axis, whose values are seconds after midnight ``base``, as times of
    day (``HH:MM:SS``, with decimals for spans under a minute); returns None.

    ``epoch``: whether the run's ts count from the Unix epoch (the label then names the date).
    ``zone``: the zone (and date) the times are in, as ``RunClock.zone_text`` gives it; the
    label then names it instead."""
    from matplotlib.ticker import FuncFormatter

    digits = 3 if span_ns < 60 * 10**9 else 0
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _pos: clock_text(round(x * 1e9), 0, digits)))
    day = _dt.datetime.fromtimestamp(base / 1e9, _dt.timezone.utc).date() if epoch else None
    if zone is not None:
        ax.set_xlabel(f"time of day ({zone})")
        return
    ax.set_xlabel(f"time of day (UTC, {day.isoformat()})" if day else
                  "time of day (ns after midnight, as the run's ts)")


def _epoch_ns(when: _dt.datetime) -> int:
    """ns since the Unix epoch of the aware datetime ``when`` (whole seconds, exact)."""
    delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 10**9


@dataclass(frozen=True)
class RunClock:
    """How a run's int64 ns timestamps map to wall-clock times.

    ``epoch``: the ts count from the Unix epoch (Binance, Databento); else from midnight of
    ``date`` (ISO ``YYYY-MM-DD``; None: an unnamed day, such as a generated scenario's) in ``tz``.
    ``tz``: the IANA zone times are read and printed in. ``first``/``last``: the ts of the run's
    first and last messages (None: no message). A run recorded before runs kept their date and
    zone reads as UTC, which is what exsim assumed then."""

    tz: str = "UTC"
    date: str | None = None
    epoch: bool = False
    first: int | None = None
    last: int | None = None

    def _zone(self):
        from zoneinfo import ZoneInfo
        return ZoneInfo(self.tz)

    def origin(self) -> int:
        """Return the epoch ns of the run's ts 0 (local midnight of ``date``; 0 for an epoch run
        or one without a date)."""
        if self.epoch or self.date is None:
            return 0
        y, m, d = (int(x) for x in self.date.split("-"))
        return _epoch_ns(_dt.datetime(y, m, d, tzinfo=self._zone()))

    def day0(self) -> int:
        """Return the ts of local midnight of the run's first day: what a time of day is added
        to (0 for a day-relative run)."""
        if not self.epoch:
            return 0
        first = self.first or 0
        local = self._instant(first).date()
        return _epoch_ns(_dt.datetime(local.year, local.month, local.day, tzinfo=self._zone()))

    def _instant(self, ts: int) -> _dt.datetime:
        sec = (int(ts) + self.origin()) // 10**9
        return _dt.datetime.fromtimestamp(sec, self._zone())

    def parse(self, text: str, what: str = "--ts") -> int:
        """Return the ts ``text`` names in this run: ns as stored, a time of day (local, on the
        run's first day) or an ISO date-time (local without an offset, else that instant).

        Raises UsageError naming ``what`` as ``parse_time``."""
        s = str(text).strip()
        if _INT.match(s) or _CLOCK.match(s):
            return parse_time(s, what, self.day0)
        m = _ISO.match(s)
        if m and not m.group(8) and self.tz != "UTC" and (self.epoch or self.date):
            s += _offset_text(self._zone(), *(int(g or 0) for g in m.groups()[:6]))
        return parse_time(s, what, 0) - self.origin()

    def parse_range(self, text: str, what: str = "--ts") -> tuple[int, int]:
        """Return the inclusive (lo, hi) ts of ``text`` (``parse_time_range``'s forms, each
        bound read by ``parse``); open ends are 0 and 2**62."""
        s = str(text).strip()
        if ".." not in s and re.match(r"^[\d_]*:[\d_]*$", s):
            return parse_time_range(s, what)
        lo_s, _, hi_s = s.partition("..") if ".." in s else (s, "", s)
        if not s:
            raise UsageError(f"{what}: expected LO..HI, each {TIME_FORMS}")
        lo = self.parse(lo_s, what) if lo_s.strip() else 0
        hi = self.parse(hi_s, what) if hi_s.strip() else 1 << 62
        if lo > hi:
            raise UsageError(f"{what} {text!r}: the low bound is above the high bound")
        return lo, hi

    def text(self, ts: int, digits: int | None = None) -> str:
        """Return ``ts`` as a wall-clock time that names its zone: ``2012-06-21 10:00:00
        America/New_York`` for a run with a date, ``00:00:01.5 UTC`` (time of day, ``+Nd`` past
        the first day) for one without. ``digits``: decimals (None: 9 when ``ts`` has a fraction
        of a second, else 0)."""
        ts = int(ts)
        if digits is None:
            digits = 0 if (ts + self.origin()) % 10**9 == 0 else 9
        frac = f"{(ts + self.origin()) % 10**9:09d}"[:digits]
        if not self.epoch and self.date is None:
            return f"{clock_text(ts, 0, digits)} {self.tz}"
        when = self._instant(ts)
        return f"{when:%Y-%m-%d %H:%M:%S}{'.' + frac if digits else ''} {self.tz}"

    def time_of_day(self, ts: int, digits: int = 6) -> str:
        """Return the local time of day of ``ts`` as ``HH:MM:SS.ffffff`` (``digits`` decimals),
        without date or zone (a table's column names those once)."""
        ts = int(ts)
        if not self.epoch and self.date is None:
            return clock_text(ts, 0, digits)
        frac = f"{(ts + self.origin()) % 10**9:09d}"[:digits]
        return f"{self._instant(ts):%H:%M:%S}" + (f".{frac}" if digits else "")

    def zone_text(self) -> str:
        """Return the zone and, when known, the date of the run's times (``America/New_York,
        2012-06-21``): what a column of ``time_of_day`` values is in."""
        if self.date:
            return f"{self.tz}, {self.date}"
        if self.epoch and self.first is not None:
            return f"{self.tz}, {self._instant(self.first).date().isoformat()}"
        return self.tz

    def span_text(self) -> str:
        """Return the run's first and last message times (``text``, with their ts), or a
        sentence saying it has none."""
        if self.first is None:
            return "it has no messages"
        return (f"its messages run from {self.text(self.first)} to {self.text(self.last)} "
                f"(ts {self.first:,}..{self.last:,})")

    def check(self, lo: int, hi: int, text: str, where: str, what: str = "--ts") -> None:
        """Raise UsageError naming ``what``, ``text``, the run ``where`` and its first and last
        times when [lo, hi] holds none of the run's messages; return None otherwise (a run
        without messages takes any time)."""
        if self.first is None or (lo <= self.last and hi >= self.first):
            return
        side = "before" if hi < self.first else "after"
        shown = self.text(lo) if lo == hi else f"{self.text(lo) if lo else '(open)'} .. " \
            f"{self.text(hi) if hi < 1 << 62 else '(open)'}"
        raise UsageError(f"{what} {text}: {shown} is {side} the run {where}: {self.span_text()}")


def _offset_text(zone, y, mo, d, h, mi, sec) -> str:
    """The UTC offset (``+HH:MM``) of local time y-mo-d h:mi:sec in ``zone`` (the first of
    two at a fall-back hour)."""
    try:
        off = _dt.datetime(y, mo, d, h, mi, sec, tzinfo=zone).utcoffset()
    except ValueError:
        return ""   # why: an impossible date; parse_time names it
    minutes = int(off.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
