"""Venues' published worked examples (tests/venue_examples/examples.py) on today's engine.

- ``test_published_example``: every example whose orders and rules exsim has runs on a fresh
  Engine and must give exactly the published outputs; an example that needs a rule or an order
  exsim lacks is skipped, the reason naming the venue profile and the rule (issue 39).
- ``test_convention_example_differs_today``: an example skipped only for a convention (exsim
  can enter every order) runs too, and must differ from the publication in exactly the outputs
  its entry names, no more, no fewer: a skip that no longer differs, or differs elsewhere, fails
  here, so no skip hides a pass or an unexpected change.
- ``test_a_changed_publication_is_caught``: one published number changed is reported in its
  own key, so no comparison passes vacuously.
- ``test_catalogue_is_well_formed``: citations, rule names, ids.
- ``test_docs_table_matches_the_catalogue``: docs/venue-examples.md's generated table is current
  (run this file as a script with ``--write-docs`` to rewrite it).

Only the Engine's public API is used; the kernels are the engine's own (nothing is compiled
beyond them).
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

from exsim.exchange import Engine
from exsim.exchange.schema import Event, Reason

_spec = importlib.util.spec_from_file_location("venue_example_data",
                                               Path(__file__).with_name("examples.py"))
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)

EXAMPLES = {e["id"]: e for e in data.EXAMPLES}
DAY_NS = 86_400 * 10**9
ORDER_KINDS = {"limit", "market", "stop", "stop_limit"}   # what today's engine can enter


def clock(t: str) -> int:
    """ns of 'HH:MM' or 'HH:MM:SS' on the example's day (day 1, so no ts is 0)."""
    parts = [int(x) for x in t.split(":")] + [0]
    h, m, s = parts[:3]
    return DAY_NS + ((h * 60 + m) * 60 + s) * 10**9


def expressible(example) -> bool:
    """Whether today's engine can enter every step of `example`."""
    for step in example["steps"]:
        if step["op"] == "new" and (step["type"] not in ORDER_KINDS or step.get("hidden")
                                    or step.get("mes") or step.get("min_peak")
                                    or step.get("protection")):
            return False
    return True


def run(example) -> dict:
    """Run `example`'s steps on a fresh Engine; return its outputs in the shapes of
    ``expect``: trades, auction, indicative, book, orders, phase, done, stops, rejected."""
    eng = Engine()
    eng.add_symbol("X", reference_price=example["reference"], phase=example["start"],
                   **example["options"])
    fills, events, ts = [], [], DAY_NS
    for step in example["steps"]:
        ts = clock(step["t"]) if step.get("t") else ts + 1
        op = step["op"]
        if op == "new":
            res = eng.submit("X", step["side"], qty=step["qty"], price=step["price"],
                             order_type=step["type"], trader=step["id"], order_id=step["id"],
                             ts=ts, stop_price=step.get("stop", 0),
                             display_qty=step.get("display", 0))
        elif op == "modify":
            res = eng.modify("X", step["id"], price=step["price"], qty=step["qty"],
                             trader=step["id"], ts=ts)
        elif op == "cancel":
            res = eng.cancel("X", step["id"], trader=step["id"], ts=ts)
        else:
            res = eng.set_phase("X", step["phase"], ts=ts)
        fills += [(int(f["price"]), int(f["qty"]), int(f["buy_order_id"]),
                   int(f["sell_order_id"])) for f in res.fills]
        events += list(res.events)
    live = eng.orders("X")
    book = {"bids": [], "asks": []}
    orders = {}
    for o in live:
        shown, open_qty = int(o["qty"]), int(o["qty"]) + int(o["hidden"])
        side = "bids" if int(o["side"]) == 0 else "asks"
        book[side].append((int(o["order_id"]), int(o["price"]), open_qty, shown))
        orders[int(o["order_id"])] = (int(o["price"]), open_qty, shown)
    uncross = [(int(e["price"]), int(e["filled_qty"]), int(e["leaves_qty"]))
               for e in events if e["event"] == Event.UNCROSS]
    stops = [int(o["order_id"]) for o in eng.stops("X")]
    live_ids = set(orders) | set(stops)
    entered = {s["id"] for s in example["steps"] if s["op"] == "new"}
    return dict(trades=fills, auction=uncross[0] if uncross else None, book=book, orders=orders,
                phase=eng.phase("X").name.lower(),
                indicative=tuple(int(x) for x in eng.indicative("X")),
                done=sorted(entered - live_ids), stops=stops,
                rejected={int(e["order_id"]): Reason(int(e["reason"])).name
                          for e in events if e["event"] == Event.REJECTED})


def _same(want, got) -> bool:
    """`want` (a published tuple, None fields unpublished) against `got` (a longer tuple)."""
    return len(want) <= len(got) and all(w is None or w == g for w, g in zip(want, got))


def mismatches(example, out) -> dict:
    """{expect key: (published, got)} for each published output today's engine differs in."""
    bad = {}
    for key, want in example["expect"].items():
        got = out[key]
        if key == "trades":
            ok = len(want) == len(got) and all(_same(w, g) for w, g in zip(want, got))
        elif key in ("auction", "indicative"):
            ok = got is not None and _same(want, got)
        elif key == "book":
            ok = all(len(want[s]) == len(got[s]) and all(_same(w, g) for w, g in
                                                         zip(want[s], got[s]))
                     for s in ("bids", "asks"))
        elif key == "orders":
            ok = all(k in got and _same(w, got[k]) for k, w in want.items())
        elif key == "done":
            ok = set(want) <= set(got)
        elif key == "rejected":
            ok = all(k in got and (w is None or w == got[k]) for k, w in want.items())
        else:
            ok = want == got
        if not ok:
            bad[key] = (want, got)
    return bad


def skip_reason(example) -> str:
    """'needs venue profile P: rule (what it is); ...' for an example exsim cannot reproduce."""
    return "; ".join(f"needs venue profile {example['venue']}: {rule} ({data.RULES[rule][1]})"
                     for rule in example["needs"])


@pytest.mark.parametrize("example_id", list(EXAMPLES))
def test_published_example(example_id):
    example = EXAMPLES[example_id]
    if example["needs"]:
        pytest.skip(skip_reason(example))
    bad = mismatches(example, run(example))
    assert not bad, f"{example_id} ({example['source']}): published vs exsim {bad}"


CONVENTION_ONLY = [i for i, e in EXAMPLES.items() if e["differs"]]


@pytest.mark.parametrize("example_id", CONVENTION_ONLY)
def test_convention_example_differs_today(example_id):
    example = EXAMPLES[example_id]
    assert expressible(example)
    bad = mismatches(example, run(example))
    assert set(bad) == set(example["differs"]), (
        f"{example_id} is skipped for {example['needs']} and should differ today in exactly "
        f"{example['differs']}; it differs in {sorted(bad)}: {bad}")


@pytest.mark.parametrize("example_id, key", [("xetra-r14-auction-partial", "trades"),
                                             ("xetra-r14-auction-partial", "auction"),
                                             ("xetra-r14-auction-partial", "book"),
                                             ("cointossx-stop-9", "stops"),
                                             ("vega-iceberg-amend-price-aggressive", "orders")])
def test_a_changed_publication_is_caught(example_id, key):
    """The comparison is not vacuous: one published number changed is reported, in its key."""
    example = copy.deepcopy(EXAMPLES[example_id])
    want = example["expect"][key]
    if key == "trades":
        want[0] = (want[0][0] + 1,) + tuple(want[0][1:])
    elif key == "auction":
        example["expect"][key] = (want[0], want[1] + 1) + tuple(want[2:])
    elif key == "book":
        side = "bids" if want["bids"] else "asks"
        want[side][0] = want[side][0][:2] + (want[side][0][2] + 1,)
    elif key == "stops":
        want.append(999)
    else:
        oid = next(iter(want))
        want[oid] = (want[oid][0], want[oid][1] + 1) + tuple(want[oid][2:])
    assert not mismatches(EXAMPLES[example_id], run(EXAMPLES[example_id]))
    assert set(mismatches(example, run(example))) == {key}


def test_catalogue_is_well_formed():
    ids = [e["id"] for e in data.EXAMPLES]
    assert len(ids) == len(set(ids))
    for e in data.EXAMPLES:
        assert e["venue"] in data.PROFILES, e["id"]
        assert e["source"].get("document") and e["source"].get("section"), e["id"]
        assert e["expect"], e["id"]
        assert all(rule in data.RULES for rule in e["needs"]), e["id"]
        # an entry that names differences must need conventions only and be enterable
        if e["differs"]:
            assert e["needs"] and all(data.RULES[r][0] == "convention" for r in e["needs"]), \
                e["id"]
            assert set(e["differs"]) <= set(e["expect"]), e["id"]
        # an example exsim cannot enter must say which rule it needs
        if not expressible(e):
            assert any(data.RULES[r][0] == "order" for r in e["needs"]), e["id"]
        ids_entered = [s["id"] for s in e["steps"] if s["op"] == "new"]
        assert len(ids_entered) == len(set(ids_entered)), e["id"]


# ---- docs/venue-examples.md: the catalogue as a table, kept current by a test ---------------------
DOCS = Path(__file__).resolve().parents[2] / "docs" / "venue-examples.md"
BEGIN, END = "<!-- venue-examples:begin -->", "<!-- venue-examples:end -->"


def render_table() -> str:
    """The generated part of docs/venue-examples.md: counts, the rules, one row per example."""
    runs = [e for e in data.EXAMPLES if not e["needs"]]
    conv = [e for e in data.EXAMPLES if e["differs"]]
    lines = [f"{len(data.EXAMPLES)} examples: {len(runs)} pass on today's engine, "
             f"{len(conv)} are skipped for a convention only (and checked to differ today), "
             f"{len(data.EXAMPLES) - len(runs) - len(conv)} are skipped for an order type or "
             "feature exsim lacks.", "",
             "| rule | kind | what it is | examples |", "|---|---|---|---|"]
    for rule, (kind, what) in data.RULES.items():
        n = sum(rule in e["needs"] for e in data.EXAMPLES)
        lines.append(f"| `{rule}` | {kind} | {what} | {n} |")
    lines += ["", "| example | venue | source | today |", "|---|---|---|---|"]
    for e in data.EXAMPLES:
        src = e["source"]
        where = f"{src['document']} ({src['version']}), {src['section']}"
        if src.get("example"):
            where += f": {src['example']}"
        if not e["needs"]:
            today = "passes"
        else:
            today = "skipped, needs " + ", ".join(f"`{r}`" for r in e["needs"])
            if e["differs"]:
                today += f"; differs today in {', '.join(e['differs'])}"
        lines.append(f"| `{e['id']}` | {e['venue']} | {where.replace('|', '/')} | {today} |")
    return "\n".join(lines)


def test_docs_table_matches_the_catalogue():
    text = DOCS.read_text()
    assert BEGIN in text and END in text, f"{DOCS} lacks its generated section"
    body = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
    assert body == render_table(), (
        f"{DOCS.name} is stale: rewrite it with this file run as a script, --write-docs")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--write-docs"]:
        sys.exit("usage: test_venue_examples.py --write-docs  (rewrites docs/venue-examples.md's "
                 "generated section)")
    head, rest = DOCS.read_text().split(BEGIN, 1)
    DOCS.write_text(head + BEGIN + "\n" + render_table() + "\n" + END + rest.split(END, 1)[1])
