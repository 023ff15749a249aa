"""Trading phases in scenarios and loaders without the engine: [[schedule]] entries become PHASE
messages merged into the flow, band options reach add_symbol, bad schedules are errors naming the
entry, the trading_day generator lays out a day, LOBSTER type 7 messages become PHASE messages."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange.errors import InputError, UsageError
from exsim.exchange.schema import ORDER_DTYPE, Kind, OrderType, Phase, Side, Tif
from exsim.scenarios import load_scenario
from exsim.scenarios.generators.trading_day import DEFAULT_DAY, trading_day_flow
from exsim.scenarios.loaders.lobster import load_lobster
from exsim.scenarios.scenario import Scenario
from exsim.scenarios.schedule import merge_phases, parse_time

H = 3_600 * 10**9


def _data(schedule, **sym):
    return {"generator": "uniform", "seed": 1,
            "params": {"n": 200, "mean_gap_ns": 1_000_000, "start_ts": 9 * H},
            "symbols": [{"name": "AAA", "tick_size": 0.01, **sym}, {"name": "BBB"}],
            "schedule": schedule}


def test_schedule_entries_become_phase_messages_before_flow_messages_of_their_ts():
    sched = [{"at": "09:00:00.05", "phase": "pre_open", "symbol": "AAA", "reference_price": 99_000},
             {"at": 9 * H + 100_000_000, "phase": "opening_auction"},
             {"at": "09:00:00.15", "phase": "reopening_auction", "symbol": "BBB",
              "end": "09:00:00.16"}]
    sc = Scenario.from_dict(_data(sched), source="day.toml")
    plain = Scenario.from_dict({k: v for k, v in _data(sched).items() if k != "schedule"}, "p.toml")
    orders, base = sc.generate(), plain.generate()
    ph = orders[orders["kind"] == Kind.PHASE]
    assert ph["ts"].tolist() == [9 * H + 50_000_000, 9 * H + 100_000_000, 9 * H + 100_000_000,
                                 9 * H + 150_000_000]
    assert ph["symbol"].tolist() == [0, 0, 1, 1]      # no symbol: every symbol, in id order
    assert ph["phase"].tolist() == [Phase.PRE_OPEN, Phase.OPENING_AUCTION,
                                    Phase.OPENING_AUCTION, Phase.REOPENING_AUCTION]
    assert ph["price"].tolist() == [99_000, 0, 0, 0]
    assert ph["expire_ts"].tolist() == [0, 0, 0, 9 * H + 160_000_000]
    assert all(not any(r) for r in ph[["order_id", "qty", "side", "order_type", "tif", "trader"]].tolist())
    # the flow itself is unchanged and in order; each PHASE message precedes its ts's messages
    assert orders[orders["kind"] != Kind.PHASE].tobytes() == base.tobytes()
    assert np.all(np.diff(orders["ts"]) >= 0)
    for k in np.flatnonzero(orders["kind"] == Kind.PHASE):
        assert k == 0 or orders["ts"][k - 1] < orders["ts"][k] or orders["kind"][k - 1] == Kind.PHASE


def test_merge_puts_a_phase_before_flow_messages_with_equal_ts():
    flow = np.zeros(3, ORDER_DTYPE)
    flow["ts"], flow["order_id"] = [5, 7, 7], [1, 2, 3]
    ph = np.zeros(1, flow.dtype)
    ph["ts"], ph["kind"] = 7, Kind.PHASE
    out = merge_phases(flow, ph)
    assert out["order_id"].tolist() == [1, 0, 2, 3]


def test_the_schedule_is_described_and_digested_and_reads_back():
    sched = [{"at": "08:00:00", "phase": "PRE_OPEN"}, {"at": "09:00:00", "phase": "opening_auction"}]
    sc = Scenario.from_dict(_data(sched), source="s.toml")
    d = sc.describe()
    assert d["schedule"] == [{"at": 8 * H, "phase": "pre_open"}, {"at": 9 * H, "phase": "opening_auction"}]
    again = Scenario.from_dict(d, source="s.toml")
    assert again.describe()["sha256"] == d["sha256"]
    other = Scenario.from_dict(_data(sched[:1]), source="s.toml")
    assert other.describe()["sha256"] != d["sha256"]


@pytest.mark.parametrize("entry, message", [
    ({"at": "09:00:00", "phase": "lunch"}, "schedule[1]: 'phase' should be one of"),
    ({"at": "25:00:00", "phase": "pre_open"}, "schedule[1]: 'at': expected a time"),
    ({"at": "9h", "phase": "pre_open"}, "schedule[1]: 'at': expected a time"),
    ({"at": -5, "phase": "pre_open"}, "schedule[1]: 'at': a time in ns"),
    ({"at": "07:00:00", "phase": "pre_open"}, "schedule[1]: 'at' '07:00:00' is before the previous"),
    ({"at": "09:00:00", "phase": "halted", "symbol": "ZZZ"}, "schedule[1]: unknown symbol 'ZZZ'"),
    ({"at": "09:00:00", "phase": "halted", "end": "09:01:00"},
     "schedule[1]: 'end' applies to phase reopening_auction only"),
    ({"at": "09:00:00", "phase": "reopening_auction", "end": "08:59:00"},
     "schedule[1]: 'end' ('08:59:00') should be after 'at'"),
    ({"at": "09:00:00", "phase": "halted", "reference_price": -1},
     "schedule[1]: 'reference_price' should be"),
    ({"at": "09:00:00", "phase": "halted", "when": 1}, "schedule[1]: unknown key(s) ['when']"),
    ({"phase": "halted"}, "schedule[1]: missing key 'at'"),
])
def test_bad_schedule_entries_are_errors_naming_the_entry(entry, message):
    sched = [{"at": "08:00:00", "phase": "pre_open"}, entry]
    with pytest.raises(InputError) as e:
        Scenario.from_dict(_data(sched), source="bad.toml")
    assert str(e.value).startswith("bad.toml: ") and message in str(e.value)


def test_a_toml_schedule_loads_from_a_file(tmp_path):
    p = tmp_path / "day.toml"
    p.write_text('generator = "uniform"\nseed = 2\n[params]\nn = 50\n[[symbols]]\nname = "A"\n'
                 'phase = "closed"\n[[schedule]]\nat = "00:00:00.000001"\nphase = "continuous"\n')
    sc = load_scenario(p)
    orders = sc.generate()
    assert orders["kind"].tolist().count(Kind.PHASE) == 1
    assert dict(sc.symbols[0].options) == {"phase": "closed"}


BANDS = {"reference_price": 10_000, "static_band_bps": 500, "dynamic_band_bps": 50,
         "interruption_ns": 60_000_000_000, "phase": "PRE_OPEN"}


def test_band_options_pass_to_add_symbol():
    sc = Scenario.from_dict(_data([], **BANDS), source="s.toml")
    opts = sc.symbols[0].engine_options()
    assert opts == {"name": "AAA", "tick_size": 0.01, **BANDS, "phase": "pre_open"}
    assert sc.symbols[1].engine_options() == {"name": "BBB", "tick_size": 1}


@pytest.mark.parametrize("key, value", [
    ("reference_price", -1), ("static_band_bps", 10_001), ("dynamic_band_bps", 1.5),
    ("interruption_ns", 0), ("phase", "opening_auction"), ("phase", "lunch"), ("static_band_bps", True),
])
def test_bad_band_options_are_errors_naming_symbol_and_key(key, value):
    with pytest.raises(InputError) as e:
        Scenario.from_dict(_data([], **{key: value}), source="s.toml")
    assert "s.toml: symbols[0]" in str(e.value) and key.split("_")[0] in str(e.value)


def test_parse_time_reads_fractions_to_the_nanosecond():
    assert parse_time("09:30:00.000000001", "x") == (9 * 60 + 30) * 60 * 10**9 + 1
    assert parse_time("17:35:00.5", "x") == (17 * 60 + 35) * 60 * 10**9 + 500_000_000


# -- the trading_day generator -----------------------------------------------------------------

def test_trading_day_is_deterministic_and_lays_out_the_default_day():
    a = trading_day_flow(2_000, seed=4, call_messages=100)
    b = trading_day_flow(2_000, seed=4, call_messages=100)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != trading_day_flow(2_000, seed=5, call_messages=100).tobytes()
    assert np.all(np.diff(a["ts"]) >= 0)
    ph = a[a["kind"] == Kind.PHASE]
    assert [(int(t), int(p)) for t, p in zip(ph["ts"], ph["phase"])] == [(t, int(p)) for t, p in DEFAULT_DAY]
    assert ph["price"][0] == 10_000                  # the pre-open sets the reference price
    orders = a[a["kind"] == Kind.NEW]
    assert np.all(orders["ts"] > DEFAULT_DAY[0][0]) and np.all(orders["ts"] < DEFAULT_DAY[-1][0])
    assert orders["order_id"].tolist() == list(range(1, len(orders) + 1))
    pre = orders[orders["ts"] < DEFAULT_DAY[1][0]]
    assert len(pre) == 100
    assert np.any(pre["order_type"] == OrderType.MARKET)
    lim = pre[pre["order_type"] == OrderType.LIMIT]
    # the call book crosses: some buy is priced above some sell
    assert lim["price"][lim["side"] == Side.BUY].max() > lim["price"][lim["side"] == Side.SELL].min()
    closing = orders[orders["ts"] > DEFAULT_DAY[2][0]]
    assert len(closing) == 100


def test_trading_day_burst_breaches_a_band_of_burst_bps():
    a = trading_day_flow(2_000, seed=1, call_messages=50, burst_at="12:00:00", burst_bps=100)
    t = 12 * H
    burst = a[(a["ts"] >= t) & (a["ts"] <= t + 3) & (a["kind"] == Kind.NEW)]
    far, sweep, buy, sell = burst
    mid = int(buy["price"]) - 1
    w = mid * 100 // 10_000
    assert far["side"] == Side.SELL and far["price"] == mid + 3 * w // 2
    assert sweep["side"] == Side.BUY and sweep["tif"] == Tif.IOC and sweep["price"] == mid + 2 * w
    before = a[(a["ts"] < t) & (a["kind"] == Kind.NEW) & (a["side"] == Side.SELL)]
    assert sweep["qty"] > before["qty"].sum()        # enough to reach the far quote
    assert buy["price"] > sell["price"]              # a crossing pair for the re-opening call
    quiet = trading_day_flow(2_000, seed=1, call_messages=50, burst_at="20:00:00")
    assert not np.any((quiet["ts"] >= t) & (quiet["ts"] <= t + 3) & (quiet["tif"] == Tif.IOC)
                      & (quiet["qty"] > 1_000))


def test_trading_day_follows_a_scenario_schedule():
    sc = load_scenario("trading_day")
    orders = sc.generate()
    ph = orders[orders["kind"] == Kind.PHASE]
    assert ph["ts"].tolist() == [e.at for e in sc.schedule]
    assert (orders["kind"] == Kind.PHASE).sum() == 4     # merged once, by the generator
    assert sc.generate().tobytes() == orders.tobytes()
    opts = sc.symbols[0].engine_options()
    assert opts["phase"] == "closed" and opts["dynamic_band_bps"] == 100


@pytest.mark.parametrize("kw", [{"n": -1}, {"span": 0}, {"market_share": 2}, {"burst_at": "noon"},
                                {"schedule": np.zeros(2, np.int64)}, {"size_min": 0}])
def test_trading_day_bad_arguments_are_usage_errors(kw):
    with pytest.raises(UsageError):
        trading_day_flow(**{"n": 10, "seed": 1, **kw})


# -- LOBSTER type 7 ----------------------------------------------------------------------------

def _pair(tmp_path, messages: str, book: str):
    m, b = tmp_path / "m.csv", tmp_path / "b.csv"
    m.write_text(messages)
    b.write_text(book)
    return m, b


HALT_M = ("34200.1,1,11,10,1000000,1\n"
          "34200.2,7,0,0,-1,-1\n"          # halt
          "34200.3,7,0,0,0,-1\n"           # quoting
          "34200.4,1,12,5,1010000,-1\n"
          "34200.5,7,0,0,1,-1\n"           # resume
          "34200.6,3,11,10,1000000,1\n")
HALT_B = ("1010000,5,1000000,10\n" * 2 + "1010000,5,1000000,10\n"
          + "1010000,10,1000000,10\n" * 2 + "1010000,10,-9999999999,0\n")


def test_lobster_halt_quote_resume_become_phase_messages(tmp_path):
    flow = load_lobster(*_pair(tmp_path, HALT_M, HALT_B))
    assert flow.halts.tolist() == [1, 2, 4]
    own = flow.orders[flow.msg_index >= 0]
    assert own["kind"].tolist() == [Kind.NEW, Kind.PHASE, Kind.PHASE, Kind.NEW, Kind.PHASE,
                                    Kind.CANCEL]
    ph = own[own["kind"] == Kind.PHASE]
    assert ph["phase"].tolist() == [Phase.HALTED, Phase.REOPENING_AUCTION, Phase.CONTINUOUS]
    assert ph["ts"].tolist() == [34200_200_000_000, 34200_300_000_000, 34200_500_000_000]
    cols = ["order_id", "price", "qty", "side", "order_type", "tif", "expire_ts"]
    assert all(not any(r) for r in ph[cols].tolist())     # the contract: other fields 0
    assert np.all(flow.orders["phase"][flow.orders["kind"] != Kind.PHASE] == 0)
    assert flow.seq_after.tolist()[1:3] == [flow.seq_after[0] + 1, flow.seq_after[0] + 2]
    assert flow.counts["type_7"] == 3


def test_lobster_type_7_with_another_price_is_an_error_naming_the_line(tmp_path):
    m, b = _pair(tmp_path, "34200.1,1,11,10,1000000,1\n34200.2,7,0,0,2,-1\n",
                 "1010000,5,1000000,10\n1010000,5,1000000,10\n")
    with pytest.raises(InputError, match=r"m.csv, line 2: a type 7 .* Price -1 \(halt\), 0 "
                                         r"\(quoting\) or 1 \(resume\), got 2"):
        load_lobster(m, b)
