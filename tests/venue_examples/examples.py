"""Published worked examples of venues and venue-like systems, as data (issue 39).

Each entry is one published example: its citation, the orders in the order they were entered
(with times and phases), and the published outputs. ``test_venue_examples.py`` runs every entry
that today's engine can express and skips the others with the rule they need. Nothing here
imports exsim: the file is a catalogue a venue profile can later be checked against.

Conventions of the data
- Prices are integer ticks: a cent-priced example is scaled by 100 (10.05 -> 1005), a
  euro-priced example with whole prices is kept as is. Quantities are the published ones.
- Order ids are the publication's where it has them, else numbers in the order of entry; each
  order's trader is its id (no self-trade prevention applies to these examples).
- ``t`` is the published time of entry ("HH:MM" or "HH:MM:SS"); steps without one follow the
  step before. Orders are GTC unless the example says otherwise (none depends on a session end).
- ``expect`` holds only what the source publishes:
  ``trades``   every fill of the example in order: (price, qty) or (price, qty, buy id, sell id);
               None in a field: not published;
  ``auction``  the uncross: (price, volume) or (price, volume, surplus), surplus = buy - sell;
  ``indicative`` the indicative uncross published at the end of the steps (a call), same shape;
  ``book``     the whole remaining book: {"bids": [...], "asks": [...]}, best first and in time
               priority, each (id, price, open qty) or (id, price, open qty, shown qty);
  ``orders``   some orders' state: {id: (price, open qty) or (price, open qty, shown qty)};
  ``phase``    the symbol's phase at the end (a Phase name in lower case);
  ``done``     ids no longer live (filled or cancelled); ``stops`` the pending stops' ids in
               release order; ``rejected`` {id: reason name}.
- ``needs`` names the rules of RULES the example needs and exsim lacks. ``differs`` (only when
  every need is a convention and exsim can enter every order) names the ``expect`` keys today's
  engine gets wrong: the harness checks that they, and only they, differ.
"""

from __future__ import annotations

# ---- the rules issue 39 asks for, by key ---------------------------------------------------------
# kind "convention": exsim has the orders, it applies another rule; "order": exsim cannot enter
# the order (or the order feature) at all.
RULES = {
    "stop_elect_on_entry": (
        "convention", "a stop whose stop price the last trade already reached is elected at once "
        "(exsim: rejected STOP_PRICE_REACHED, as CME Globex does)"),
    "auction_nearest_limit": (
        "convention", "rule 4 of the uncross takes the limit nearest the reference price, the "
        "higher at the exact middle (exsim: the reference price itself when it lies inside the "
        "candidate range)"),
    "auction_market_pressure_band": (
        "convention", "with surpluses of one sign the price is taken against a band around the "
        "reference price (BNB: reference +/- 5 %; exsim: the highest / lowest candidate)"),
    "auction_reference_when_no_limit": (
        "convention", "the reference price is the auction price even where no order rests, "
        "outside the range of the limits (exsim: clamped into the candidate range)"),
    "auction_markets_carry_over": (
        "convention", "market orders left after an auction stay in the book for continuous "
        "trading (exsim: cancelled NO_LIQUIDITY at the uncross)"),
    "auction_market_at_best_limit": (
        "convention", "in the uncross a market order takes its side's best limit price and its "
        "own time (exsim: market orders first, ahead of every limit)"),
    "iceberg_entry_peak": (
        "convention", "an incoming iceberg executes its peak first and rests what is left of "
        "that peak (exsim: the whole quantity executes, a fresh peak is shown)"),
    "iceberg_one_trade": (
        "convention", "an iceberg's hidden volume taken by one aggressor is reported as one "
        "trade (exsim: one fill per slice)"),
    "iceberg_increase_keeps_priority": (
        "convention", "raising an iceberg's quantity adds to its reserve and keeps its place "
        "(exsim: a quantity increase loses time priority)"),
    "iceberg_min_peak": (
        "order", "iceberg peak refresh rules: a minimum peak, the shown part refreshed once it "
        "falls below it (exsim: refilled only when the shown part is used up)"),
    "hidden_orders": (
        "order", "fully hidden limit orders, behind displayed orders at their price"),
    "min_execution_size": (
        "order", "a minimum execution size per fill (MES)"),
    "market_to_limit": (
        "order", "market-to-limit orders (the unfilled rest becomes a limit at the first "
        "execution price)"),
    "market_rests_continuous": (
        "order", "market orders resting in continuous trading, executed at the reference price "
        "against other market orders"),
    "market_with_protection": (
        "order", "market orders with protection (a limit at the best opposite price +/- "
        "protection points; the rest rests there)"),
    "stop_with_protection": (
        "order", "stop orders with protection (elected as a limit at the trigger +/- "
        "protection points)"),
}

# the venue profiles issue 39 names; "exsim" is today's behaviour
PROFILES = ("exsim", "xetra", "xetra-r14", "cme", "euronext", "jse", "tsx", "bnb", "liquibook",
            "vega")


# ---- step builders --------------------------------------------------------------------------------

def L(oid, side, price, qty, t=None, **kw):
    """A limit order (GTC)."""
    return dict(op="new", id=oid, side=side, type="limit", price=price, qty=qty, t=t, **kw)


def M(oid, side, qty, t=None, **kw):
    """A market order."""
    return dict(op="new", id=oid, side=side, type="market", price=0, qty=qty, t=t, **kw)


def ICE(oid, side, price, qty, peak, t=None, **kw):
    """An iceberg limit order showing `peak`."""
    return L(oid, side, price, qty, t, display=peak, **kw)


def STOP(oid, side, qty, stop, t=None, **kw):
    """A stop (market when elected)."""
    return dict(op="new", id=oid, side=side, type="stop", price=0, qty=qty, stop=stop, t=t, **kw)


def HIDDEN(oid, side, price, qty, t=None, mes=0):
    """A fully hidden limit order (not enterable in exsim today)."""
    return L(oid, side, price, qty, t, hidden=True, mes=mes)


def MTL(oid, side, qty, t=None):
    """A market-to-limit order (not enterable in exsim today)."""
    return dict(op="new", id=oid, side=side, type="mtl", price=0, qty=qty, t=t)


def MOD(oid, price, qty, t=None):
    return dict(op="modify", id=oid, price=price, qty=qty, t=t)


def CXL(oid, t=None):
    return dict(op="cancel", id=oid, t=t)


def OPEN(t=None):
    """End the pre-open call: uncross and go continuous."""
    return dict(op="phase", phase="opening_auction", t=t)


def ex(id, venue, source, steps, expect, *, start=None, reference=0, needs=(),
       differs=(), note="", options=None):
    """One example. `start`: the symbol's first phase (default: "pre_open" when a step ends a
    call, else "continuous"); `options`: further ``add_symbol`` options (bands ...)."""
    if start is None:
        start = "pre_open" if any(s["op"] == "phase" for s in steps) else "continuous"
    return dict(id=id, venue=venue, source=source, steps=steps, expect=expect, start=start,
                reference=reference, needs=tuple(needs), differs=tuple(differs), note=note,
                options=dict(options or {}))


def call(book, reference=0):
    """Steps entering `book` (tuples (side, price or None, qty)) in a call, then the opening."""
    steps = []
    for k, (side, price, qty) in enumerate(book, start=1):
        steps.append(M(k, side, qty) if price is None else L(k, side, price, qty))
    return steps + [OPEN()]


B, S = "buy", "sell"

# ---- sources ---------------------------------------------------------------------------------------
XETRA_R14 = dict(
    document="Deutsche Boerse AG, Xetra Release 14.0 Market Model Equities",
    version="Release 14.0, title page dated 30.09.2013",
    read_at="the copy in github.com/ratzlow/tinyEXCH docs/marktmodell_aktien.pdf "
            "(commit 555ddb59f33df3df77187438e94c63905136e19d); its tests restate the examples "
            "(src/test/java/net/tinyexch/ob/match/*, src/test/groovy/...)",
)
XETRA_R71 = dict(
    document="Deutsche Boerse AG, Xetra Release 7.1 Market Model Equities",
    version="Release 7.1, 10.09.2004",
    url="https://zanotowane.pl/1185/2943",
    read_at="restated in github.com/hroptatyr/clob test/mmod_auction_xetra_0N.c "
            "(commit 812137a3edca4e00f05ac8b3ff2212c5deb545a5); the stored copy of the document "
            "could be read only in part",
)
COINTOSSX = dict(
    document="CoinTossX (JSE-style matching engine, D. Sing, University of Cape Town) test "
             "fixtures",
    url="https://github.com/dharmeshsing/CoinTossX",
    version="commit 89090edcd15a06f4ed821890adfc8f377ed7d7c7",
)
LIQUIBOOK = dict(
    document="LiquiBook unit tests, test/unit/ut_stop_orders.cpp",
    url="https://github.com/enewhuis/liquibook",
    version="commit 2427613b32f1667abae68a01df6af9ba8270f8e7",
)
VEGA = dict(
    document="Vega protocol integration tests, core/integration/features/orders/"
             "iceberg-orders.feature",
    url="https://github.com/vegaprotocol/vega",
    version="commit 0389533ec1784ac87c48ff21bec879dc1c84a9a3 (as stored)",
)
BNB = dict(
    document="BNB Beacon Chain DEX, 'Match Steps and Examples' (docs/beaconchain/match-examples.md)",
    url="https://github.com/bnb-chain/bnb-chain.github.io/blob/main/docs/beaconchain/match-examples.md",
    version="commit 355db8991eb33232be1de87f2cf10040ba020d9a",
)
EURONEXT_CLONE = dict(
    document="Euronext examples (the Pure Market Order and Market-to-Limit example PDFs, the "
             "trading manual's uncrossing rules) as transcribed by the EuronextClone acceptance "
             "tests; the PDFs themselves were not found in the stored copies",
    url="https://github.com/mattdavey/EuronextClone",
    version="src/test/resources/com/euronextclone/*.feature (as stored: commits 07e10621, "
            "114c3d18, 08143c48, a423ce9c)",
)
TSX = dict(
    document="TMX, Order Types and Functionality Guide (TSX, TSXV, TSX Alpha)",
    url="https://tsx.com/ebooks/en/order-types-guide/33",
    version="ebook page 33, section 'Example: Iceberg Orders'",
)
CME = dict(
    document="CME Globex Reference Guide (CME Group client systems wiki), Order Types",
    url="https://www.cmegroup.com/confluence/pages/diffpagesbyversion.action?pageId=78466661"
        "&selectedPageVersions=34&selectedPageVersions=35",
    version="wiki page 'Order Types', versions 34/35 as stored",
)
CME_ILINK = dict(
    document="CME Globex client site, 'Order Types' behaviour page (iLink order handling "
             "examples)",
    url="https://cmegroupclientsite.atlassian.net/wiki/pages/diffpagesbyversion.action?"
        "pageId=46498256&selectedPageVersions=1&selectedPageVersions=2",
    version="page 46498256, versions 1/2 as stored (the same examples with the quantity 15)",
)


def src(base, section, **more):
    return dict(base, section=section, **more)


EXAMPLES = []

# ---- Xetra Release 14.0, section 13.1.2: auction price determination ----------------------------
R14_AUCTION = "13.1.2 Matching Examples (auctions), pp. 45-49"
EXAMPLES += [
    ex("xetra-r14-auction-1", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 1"),
       call([(B, 202, 200), (B, 201, 200), (B, 200, 300),
             (S, 200, 100), (S, 198, 200), (S, 197, 400)]),
       dict(auction=(200, 700, 0))),
    ex("xetra-r14-auction-2", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 2"),
       call([(B, 202, 400), (B, 201, 200), (S, 199, 300), (S, 198, 200)]),
       dict(auction=(201, 500, 100))),
    ex("xetra-r14-auction-3", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 3"),
       call([(B, 202, 300), (B, 201, 200), (S, 199, 400), (S, 198, 200)]),
       dict(auction=(199, 500, -100))),
    ex("xetra-r14-auction-4a", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 4 a)"),
       call([(B, None, 100), (B, 199, 100), (S, None, 100), (S, 202, 100)]),
       dict(auction=(199, 100)), reference=199),
    ex("xetra-r14-auction-4b", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 4 b)"),
       call([(B, None, 100), (B, 199, 100), (S, None, 100), (S, 202, 100)]),
       dict(auction=(199, 100)), reference=200,
       needs=["auction_nearest_limit"], differs=["auction"],
       note="exsim takes the reference 200 itself (inside [199, 202])"),
    ex("xetra-r14-auction-5a", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 5 a)"),
       call([(B, 202, 300), (B, 201, 200), (S, 198, 200), (S, 199, 300)]),
       dict(auction=(201, 500)), reference=200,
       needs=["auction_nearest_limit"], differs=["auction"],
       note="200 is equidistant from 199 and 201: the higher; exsim takes 200 itself"),
    ex("xetra-r14-auction-5b", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 5 b)"),
       call([(B, 202, 300), (B, 201, 200), (S, 198, 200), (S, 199, 300)]),
       dict(auction=(201, 500)), reference=202),
    ex("xetra-r14-auction-5c", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 5 c)"),
       call([(B, 202, 300), (B, 201, 200), (S, 198, 200), (S, 199, 300)]),
       dict(auction=(199, 500)), reference=198),
    ex("xetra-r14-auction-6", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 6"),
       call([(B, None, 900), (S, None, 800)]),
       dict(auction=(200, 800, 100)), reference=200,
       note="the example publishes 'the reference price'; 200 chosen as that price"),
    ex("xetra-r14-auction-7", "xetra", src(XETRA_R14, R14_AUCTION, example="Example 7"),
       [L(1, S, 201, 80), HIDDEN(2, B, 200, 80), L(3, B, 199, 80), OPEN()],
       dict(auction=(0, 0)), needs=["hidden_orders"],
       note="no auction price; the visible 199 / 201 are published"),
    ex("xetra-r14-auction-partial", "xetra",
       src(XETRA_R14, R14_AUCTION, example="Additional example: partial execution"),
       [L(1, B, 200, 300, "9:00"), L(2, B, 200, 300, "9:01"), L(3, S, 200, 400), OPEN()],
       dict(auction=(200, 400, 200), trades=[(200, 300, 1, 3), (200, 100, 2, 3)],
            book=dict(bids=[(2, 200, 200)], asks=[]))),
]

# ---- Xetra Release 14.0, section 13.2.2: continuous trading --------------------------------------
R14_CONT = "13.2.2.1 Matching Examples for Basic Matching Rules, pp. 54-66"
R14_FURTHER = "13.2.2.2 Further Examples, pp. 67-75"
EXAMPLES += [
    ex("xetra-r14-cont-1", "xetra", src(XETRA_R14, R14_CONT, example="Example 1"),
       [M(1, B, 6000, "9:01"), M(2, S, 6000)],
       dict(trades=[(200, 6000, 1, 2)], book=dict(bids=[], asks=[])), reference=200,
       needs=["market_rests_continuous"]),
    ex("xetra-r14-cont-2", "xetra", src(XETRA_R14, R14_CONT, example="Example 2"),
       [L(1, B, 201, 6000, "9:01"), M(2, S, 6000)],
       dict(trades=[(201, 6000, 1, 2)], book=dict(bids=[], asks=[])), reference=200),
    ex("xetra-r14-cont-3", "xetra", src(XETRA_R14, R14_CONT, example="Example 3"),
       [L(1, S, 199, 6000, "9:01"), M(2, B, 6000)],
       dict(trades=[(199, 6000, 2, 1)], book=dict(bids=[], asks=[])), reference=200),
    ex("xetra-r14-cont-5", "xetra", src(XETRA_R14, R14_CONT, example="Example 5"),
       [M(1, B, 6000, "9:01"), L(2, B, 202, 6000, "9:02"), M(3, S, 6000)],
       dict(trades=[(202, 6000, 1, 3)], book=dict(bids=[(2, 202, 6000)], asks=[])),
       reference=200, needs=["market_rests_continuous"]),
    ex("xetra-r14-cont-8", "xetra", src(XETRA_R14, R14_CONT, example="Example 8"),
       [M(1, B, 6000)],
       dict(trades=[], book=dict(bids=[(1, None, 6000)], asks=[])), reference=200,
       needs=["market_rests_continuous"]),
    ex("xetra-r14-cont-10", "xetra", src(XETRA_R14, R14_CONT, example="Example 10"),
       [L(1, B, 200, 6000), MTL(2, S, 6000)],
       dict(trades=[(200, 6000, 1, 2)], book=dict(bids=[], asks=[])), reference=200,
       needs=["market_to_limit"]),
    ex("xetra-r14-cont-13", "xetra", src(XETRA_R14, R14_CONT, example="Example 13"),
       [MTL(1, S, 6000)],
       dict(trades=[], rejected={1: None}, book=dict(bids=[], asks=[])), reference=200,
       needs=["market_to_limit"]),
    ex("xetra-r14-cont-14", "xetra", src(XETRA_R14, R14_CONT, example="Example 14"),
       [M(1, B, 6000, "9:01"), L(2, S, 195, 6000)],
       dict(trades=[(200, 6000, 1, 2)]), reference=200, needs=["market_rests_continuous"]),
    ex("xetra-r14-cont-18", "xetra", src(XETRA_R14, R14_CONT, example="Example 18"),
       [L(1, B, 199, 6000, "9:33"), L(2, S, 198, 6000)],
       dict(trades=[(199, 6000, 1, 2)], book=dict(bids=[], asks=[])), reference=200),
    ex("xetra-r14-cont-19", "xetra", src(XETRA_R14, R14_CONT, example="Example 19"),
       [L(1, S, 199, 6000, "9:33"), L(2, B, 200, 6000)],
       dict(trades=[(199, 6000, 2, 1)], book=dict(bids=[], asks=[])), reference=200),
    ex("xetra-r14-cont-20", "xetra", src(XETRA_R14, R14_CONT, example="Example 20"),
       [L(1, B, 199, 6000, "9:33"), L(2, S, 200, 6000)],
       dict(trades=[], book=dict(bids=[(1, 199, 6000)], asks=[(2, 200, 6000)])),
       reference=200),
    ex("xetra-r14-cont-22", "xetra", src(XETRA_R14, R14_CONT, example="Example 22"),
       [M(1, B, 6000, "9:01"), L(2, B, 202, 1000, "9:02"), L(3, S, 199, 6000)],
       dict(trades=[(202, 6000, 1, 3)], book=dict(bids=[(2, 202, 1000)], asks=[])),
       reference=200, needs=["market_rests_continuous"]),
    ex("xetra-r14-cont-27", "xetra", src(XETRA_R14, R14_CONT, example="Example 27"),
       [L(1, B, 200, 6000)],
       dict(trades=[], book=dict(bids=[(1, 200, 6000)], asks=[])), reference=200),
    ex("xetra-r14-mtl-partial", "xetra",
       src(XETRA_R14, R14_FURTHER, example="Partial execution of a market-to-limit order"),
       [L(1, B, 203, 1000, "9:01"), L(2, B, 202, 1000, "9:02"), MTL(3, S, 3000, "9:05")],
       dict(trades=[(203, 1000, 1, 3)], book=dict(bids=[(2, 202, 1000)],
                                                  asks=[(3, 203, 2000)])),
       needs=["market_to_limit"]),
    ex("xetra-r14-iceberg", "xetra",
       src(XETRA_R14, R14_FURTHER, example="Examples showing the functionality of iceberg "
                                           "orders (six stages, 8:55:00 to 9:15:00)"),
       [L(1, S, 203, 500, "8:55:00"), L(2, B, 202, 6000, "9:01:00"),
        L(3, B, 201, 2000, "9:02:00"), ICE(4, S, 201, 50000, 10000, "9:05:00"),
        M(5, B, 5000, "9:07:00"), ICE(6, S, 201, 30000, 5000, "9:08:01"),
        M(7, B, 14000, "9:10:40"), L(8, S, 201, 2000, "9:13:13"), M(9, B, 23000, "9:15:00")],
       dict(trades=[(202, 6000, 2, 4), (201, 2000, 3, 4), (201, 2000, 5, 4), (201, 3000, 5, 4),
                    (201, 7000, 7, 4), (201, 5000, 7, 6), (201, 2000, 7, 4), (201, 8000, 9, 4),
                    (201, 5000, 9, 6), (201, 2000, 9, 8), (201, 8000, 9, 4)],
            book=dict(bids=[], asks=[(4, 201, 12000, 2000), (6, 201, 20000, 5000),
                                     (1, 203, 500)])),
       needs=["iceberg_entry_peak"], differs=["trades", "book"],
       note="stage 1: the peak executes 6000 at 202 and 2000 at 201 and its rest (2000) is "
            "shown with 40000 behind; exsim shows a fresh peak of 10000, so the 9:07 market "
            "order takes one fill of 5000 where Xetra prints 2000 and 3000"),
    ex("xetra-r14-hidden-same-limit", "xetra",
       src(XETRA_R14, R14_FURTHER, example="hidden orders: hidden and visible at the same limit"),
       [HIDDEN(1, B, 200, 6000, "9:01"), L(2, B, 200, 4000, "9:02"), M(3, S, 4000)],
       dict(trades=[(200, 4000, 2, 3)], book=dict(bids=[(1, 200, 6000)], asks=[])),
       needs=["hidden_orders"]),
    ex("xetra-r14-hidden-other-limit", "xetra",
       src(XETRA_R14, R14_FURTHER, example="hidden orders: hidden and visible at other limits"),
       [HIDDEN(1, B, 200, 6000, "9:01"), L(2, B, 199, 1000, "9:02"), M(3, S, 6000)],
       dict(trades=[(200, 6000, 1, 3)], book=dict(bids=[(2, 199, 1000)], asks=[])),
       needs=["hidden_orders"]),
]

# ---- Xetra Release 7.1 (2004): where its reference-price step differs from R14/T7 -----------------
R71_AUCTION = "auction price determination examples"
EXAMPLES += [
    ex("xetra-r71-auction-1", "xetra-r14", src(XETRA_R71, R71_AUCTION, example="Example 1"),
       call([(S, 200, 100), (S, 198, 300), (S, 197, 400), (B, 200, 300), (B, 196, 100),
             (B, 198, 300), (B, 199, 200)]),
       dict(auction=(198, 700, 100))),
    ex("xetra-r71-auction-2", "xetra-r14", src(XETRA_R71, R71_AUCTION, example="Example 2"),
       call([(S, 201, 400), (S, 199, 100), (S, 198, 100), (S, 197, 300), (B, 200, 600),
             (B, 197, 200)]),
       dict(auction=(200, 500, 100))),
    ex("xetra-r71-auction-3", "xetra-r14", src(XETRA_R71, R71_AUCTION, example="Example 3"),
       call([(S, 201, 200), (S, 198, 600), (B, 197, 400), (B, 199, 100), (B, 201, 100),
             (B, 202, 300)]),
       dict(auction=(198, 500, -100))),
    ex("xetra-r71-auction-4", "xetra-r14", src(XETRA_R71, R71_AUCTION, example="Example 4"),
       call([(S, 203, 100), (S, 199, 300), (S, 198, 200), (B, 197, 100), (B, 201, 200),
             (B, 202, 300)]),
       dict(auction=(200, 500, 0)), reference=200,
       note="the reference 200 is no limit and is the price: Release 7.1 takes the reference "
            "itself (exsim's rule 4); R14 and T7 take the nearest limit"),
    ex("xetra-r71-auction-5", "xetra-r14", src(XETRA_R71, R71_AUCTION, example="Example 5"),
       call([(S, 202, 300), (S, 201, 200), (B, 200, 100), (B, 199, 400)]),
       dict(auction=(0, 0))),
]

# ---- CoinTossX (JSE-style) fixtures -----------------------------------------------------------------
CTX_STOP = "MatchingEngine/src/test/resources/crossing/uncross/stopOrder (StopOrderMaster.csv)"
CTX_HIDDEN = "MatchingEngine/src/test/resources/crossing/uncross/hiddenOrder (HiddenOrderMaster.csv)"
CTX_AUCTION = "MatchingEngine/src/test/resources/crossing/auction (AuctionMaster.csv)"
CTX_MARKET = "MatchingEngine/src/test/resources/crossing/uncross/marketOrder (MarketOrderMaster.csv)"
ASKS3 = lambda: [L(12, S, 9000, 1000, "10:00"), L(13, S, 9200, 2000, "11:00"),  # noqa: E731
                 L(14, S, 9400, 1000, "12:00")]
BIDS3 = lambda: [L(12, B, 9000, 1000, "10:00"), L(13, B, 9200, 2000, "11:00"),  # noqa: E731
                 L(14, B, 9400, 1000, "12:00")]
def HIDDEN_345(bid5_qty):
    """The book of CoinTossX hidden-order tests 3-5 (order 5's size differs)."""
    return [L(1, S, 10000, 700, "10:00"), L(2, S, 8000, 300, "11:00"),
            HIDDEN(6, B, 5000, 1400, "11:05", mes=700), L(3, B, 4500, 500, "11:10"),
            L(4, B, 2000, 200, "12:00"), L(5, B, 6000, bid5_qty, "13:00")]


HIDDEN_45_AFTER = dict(trades=[(6000, 500), (4500, 100)],
                       book=dict(bids=[(6, 5000, 1400), (3, 4500, 400), (4, 2000, 200)],
                                 asks=[(2, 8000, 300), (1, 10000, 700)]))

EXAMPLES += [
    ex("cointossx-stop-1", "jse", src(COINTOSSX, CTX_STOP, example="Test 1"),
       [STOP(1, B, 1000, 9000, "12:00")], dict(trades=[], stops=[1])),
    ex("cointossx-stop-2", "jse", src(COINTOSSX, CTX_STOP, example="Test 2"),
       [STOP(1, S, 1000, 9000, "12:00")], dict(trades=[], stops=[1])),
    ex("cointossx-stop-3", "jse", src(COINTOSSX, CTX_STOP, example="Test 3"),
       ASKS3() + [STOP(10, B, 1000, 9000, "13:00")],
       dict(trades=[], stops=[10], book=dict(bids=[], asks=[(12, 9000, 1000), (13, 9200, 2000),
                                                            (14, 9400, 1000)]))),
    ex("cointossx-stop-4", "jse", src(COINTOSSX, CTX_STOP, example="Test 4"),
       BIDS3() + [STOP(10, S, 1000, 9000, "13:00")],
       dict(trades=[], stops=[10], book=dict(bids=[(14, 9400, 1000), (13, 9200, 2000),
                                                   (12, 9000, 1000)], asks=[]))),
    ex("cointossx-stop-5", "jse", src(COINTOSSX, CTX_STOP, example="Test 5"),
       ASKS3() + [STOP(10, B, 1000, 9000, "13:00"), L(11, B, 9300, 2000, "14:00")],
       dict(trades=[(9000, 1000), (9200, 1000), (9200, 1000)], stops=[],
            book=dict(bids=[], asks=[(14, 9400, 1000)])),
       note="the fixture's expected state lists order 14 with side B; it is the ask entered "
            "as O"),
    ex("cointossx-stop-6", "jse", src(COINTOSSX, CTX_STOP, example="Test 6"),
       BIDS3() + [STOP(10, S, 1000, 9400, "13:00"), L(11, S, 9100, 2000, "14:00")],
       dict(trades=[(9400, 1000), (9200, 1000), (9200, 1000)], stops=[],
            book=dict(bids=[(12, 9000, 1000)], asks=[]))),
    ex("cointossx-stop-7", "jse", src(COINTOSSX, CTX_STOP, example="Test 7"),
       ASKS3() + [L(15, B, 9000, 1000, "13:00"), STOP(16, B, 2000, 8000, "14:00")],
       dict(trades=[(9000, 1000), (9200, 2000)], stops=[],
            book=dict(bids=[], asks=[(14, 9400, 1000)])),
       needs=["stop_elect_on_entry"], differs=["trades", "book"]),
    ex("cointossx-stop-8", "jse", src(COINTOSSX, CTX_STOP, example="Test 8"),
       BIDS3() + [L(15, S, 9400, 1000, "13:00"), STOP(16, S, 2000, 9500, "14:00")],
       dict(trades=[(9400, 1000), (9200, 2000)], stops=[],
            book=dict(bids=[(12, 9000, 1000)], asks=[])),
       needs=["stop_elect_on_entry"], differs=["trades", "book"]),
    ex("cointossx-stop-9", "jse", src(COINTOSSX, CTX_STOP, example="Test 9"),
       ASKS3() + [STOP(15, B, 1000, 8000, "14:00"), STOP(16, B, 500, 7000, "14:10"),
                  L(17, B, 9000, 1000, "15:00")],
       dict(trades=[(9000, 1000), (9200, 500), (9200, 1000)], stops=[],
            book=dict(bids=[], asks=[(13, 9200, 500), (14, 9400, 1000)]))),
    ex("cointossx-stop-10", "jse", src(COINTOSSX, CTX_STOP, example="Test 10"),
       BIDS3() + [STOP(15, S, 1000, 9500, "14:00"), STOP(16, S, 500, 10000, "14:10"),
                  L(17, S, 9400, 1000, "15:00")],
       dict(trades=[(9400, 1000), (9200, 500), (9200, 1000)], stops=[],
            book=dict(bids=[(13, 9200, 500), (12, 9000, 1000)], asks=[])),
       note="the fixture's incoming order reuses id 15 while stop 15 is pending; it is 17 here"),
    ex("cointossx-stop-11", "jse", src(COINTOSSX, CTX_STOP, example="Test 11"),
       ASKS3() + [STOP(15, B, 1000, 8000, "14:00"), STOP(16, B, 500, 8000, "14:10"),
                  L(17, B, 9000, 1000, "15:00")],
       dict(trades=[(9000, 1000), (9200, 1000), (9200, 500)], stops=[],
            book=dict(bids=[], asks=[(13, 9200, 500), (14, 9400, 1000)]))),
    ex("cointossx-stop-12", "jse", src(COINTOSSX, CTX_STOP, example="Test 12"),
       BIDS3() + [STOP(15, S, 1000, 9500, "14:00"), STOP(16, S, 500, 9500, "14:10"),
                  L(17, S, 9400, 1000, "15:00")],
       dict(trades=[(9400, 1000), (9200, 1000), (9200, 500)], stops=[],
            book=dict(bids=[(13, 9200, 500), (12, 9000, 1000)], asks=[])),
       note="the fixture's incoming order reuses id 15 while stop 15 is pending; it is 17 here"),
    ex("cointossx-market-1", "jse", src(COINTOSSX, CTX_MARKET, example="Test 1"),
       [M(1, B, 1000, "10:00")], dict(trades=[], book=dict(bids=[], asks=[]))),
    ex("cointossx-market-2", "jse", src(COINTOSSX, CTX_MARKET, example="Test 2"),
       [M(1, S, 1000, "10:00")], dict(trades=[], book=dict(bids=[], asks=[]))),
    ex("cointossx-market-3", "jse", src(COINTOSSX, CTX_MARKET, example="Test 3"),
       [L(1, S, 10000, 1000, "10:00"), L(2, S, 8000, 500, "11:00"), L(3, S, 5000, 200, "11:10"),
        M(4, B, 1000, "12:00")],
       dict(trades=[(5000, 200), (8000, 500), (10000, 300)],
            book=dict(bids=[], asks=[(1, 10000, 700)]))),
    ex("cointossx-market-4", "jse", src(COINTOSSX, CTX_MARKET, example="Test 4"),
       [L(1, B, 10000, 1000, "10:00"), L(2, B, 8000, 500, "11:00"), L(3, B, 5000, 200, "11:10"),
        M(4, S, 1000, "12:00")],
       dict(trades=[(10000, 1000)], book=dict(bids=[(2, 8000, 500), (3, 5000, 200)], asks=[]))),
    ex("cointossx-market-5", "jse", src(COINTOSSX, CTX_MARKET, example="Test 5"),
       [L(1, S, 10000, 500, "10:00"), L(2, S, 8000, 500, "11:00"),
        HIDDEN(3, S, 11000, 2000, "11:10", mes=1000), M(4, B, 1200, "12:00")],
       dict(trades=[(8000, 500), (10000, 500)], book=dict(bids=[], asks=[(3, 11000, 2000)])),
       needs=["hidden_orders", "min_execution_size"]),
    ex("cointossx-hidden-1", "jse", src(COINTOSSX, CTX_HIDDEN, example="Test 1 (MRS 700)"),
       [L(1, S, 10000, 700, "10:00"), L(2, S, 8000, 300, "11:00"), L(6, B, 5000, 800, "11:05"),
        HIDDEN(3, B, 5000, 500, "11:10", mes=500), L(4, B, 2000, 200, "12:00"),
        L(5, B, 6000, 200, "13:00"), L(7, S, 4000, 1000, "13:01")],
       dict(trades=[(6000, 200), (5000, 800)],
            book=dict(bids=[(3, 5000, 500), (4, 2000, 200)], asks=[(2, 8000, 300),
                                                                  (1, 10000, 700)])),
       needs=["hidden_orders", "min_execution_size"],
       note="entered in the order of the fixture's time stamps; the incoming order's time is "
            "given as 12:00, it is entered last"),
    ex("cointossx-hidden-2", "jse", src(COINTOSSX, CTX_HIDDEN, example="Test 2 (MRS 700)"),
       [L(1, B, 4000, 700, "10:00"), L(2, B, 2000, 300, "11:00"), L(6, S, 8000, 800, "11:05"),
        HIDDEN(3, S, 8000, 500, "11:10", mes=500), L(4, S, 5000, 200, "12:00"),
        L(5, S, 10000, 200, "13:00"), L(7, B, 9000, 1000, "14:00")],
       dict(trades=[(5000, 200), (8000, 800)],
            book=dict(bids=[(1, 4000, 700), (2, 2000, 300)], asks=[(3, 8000, 500),
                                                                  (5, 10000, 200)])),
       needs=["hidden_orders", "min_execution_size"]),
    ex("cointossx-hidden-3", "jse", src(COINTOSSX, CTX_HIDDEN, example="Test 3 (MRS 700)"),
       HIDDEN_345(200) + [L(7, S, 4000, 1000, "13:01")],
       dict(trades=[(6000, 200), (5000, 800)],
            book=dict(bids=[(3, 4500, 500), (4, 2000, 200)], asks=[(2, 8000, 300),
                                                                  (1, 10000, 700)])),
       needs=["hidden_orders", "min_execution_size"],
       note="published: the hidden order (1400, MES 700) executes 800 and leaves the book"),
    ex("cointossx-hidden-4", "jse", src(COINTOSSX, CTX_HIDDEN, example="Test 4 (MRS 700)"),
       HIDDEN_345(500) + [L(7, S, 4000, 600, "13:01")], HIDDEN_45_AFTER,
       needs=["hidden_orders", "min_execution_size"],
       note="the hidden order is stepped over: 100 left is below its MES of 700"),
    ex("cointossx-hidden-5", "jse", src(COINTOSSX, CTX_HIDDEN, example="Test 5 (MRS 700)"),
       HIDDEN_345(500) + [HIDDEN(7, S, 4000, 600, "13:01", mes=100)], HIDDEN_45_AFTER,
       needs=["hidden_orders", "min_execution_size"]),
    ex("cointossx-hidden-14", "jse", src(COINTOSSX, CTX_HIDDEN, example="Test 14"),
       [HIDDEN(1, B, 10600, 15000, "10:00", mes=15000), L(2, B, 10000, 1000, "11:00"),
        L(3, S, 10700, 1000, "12:00"), L(4, S, 10000, 1000, "13:00")],
       dict(trades=[(10000, 1000)],
            book=dict(bids=[(1, 10600, 15000)], asks=[(3, 10700, 1000)])),
       needs=["hidden_orders", "min_execution_size"]),
]
for n, (bid2, ask5) in ((1, (10450, 10450)), (2, (10450, 10400)), (3, (10500, 10400))):
    bid3_qty = 1000 if n == 3 else 200
    EXAMPLES.append(ex(
        f"cointossx-auction-{n}", "jse", src(COINTOSSX, CTX_AUCTION, example=f"Test {n}"),
        [L(1, B, 10550, 10000, "08:00"), L(2, B, bid2, 5600, "08:30"),
         L(3, B, 10400, bid3_qty, "09:00"), L(4, S, 10300, 6900, "09:30"),
         L(5, S, ask5, 1000, "10:00"), L(6, S, 10600, 200, "10:30"), M(7, S, 2500, "11:00"),
         OPEN()],
        dict(auction=(bid2, 10400),
             trades=[(bid2, 6900), (bid2, 2500), (bid2, 600), (bid2, 400)],
             book=dict(bids=[(2, bid2, 5200), (3, 10400, bid3_qty)], asks=[(6, 10600, 200)])),
        start="pre_open", needs=["auction_market_at_best_limit"], differs=["trades"],
        note="the market sell (11:00) executes after the 10300 limit (9:30); exsim's uncross "
             "takes market orders first, so its fills are 2500, 6900, 600, 400"))

# ---- LiquiBook stop order unit tests ---------------------------------------------------------------
LB = "test/unit/ut_stop_orders.cpp"
EXAMPLES += [
    ex("liquibook-stop-off-market", "liquibook",
       src(LIQUIBOOK, LB, example="TestStopOrdersOffMarketNoTrade"),
       [L(1, B, 55, 100), M(2, S, 100), STOP(3, B, 100, 56), STOP(4, S, 100, 54)],
       dict(trades=[(55, 100, 1, 2)], stops=[3, 4])),
    ex("liquibook-stop-on-market", "liquibook",
       src(LIQUIBOOK, LB, example="TestStopMarketOrdersOnMarketTradeImmediately"),
       [L(1, B, 55, 100), M(2, S, 100), STOP(3, B, 100, 55), STOP(4, S, 100, 55)],
       dict(trades=[(55, 100, 1, 2), (None, 100, 3, 4)], stops=[], done=[3, 4]),
       needs=["stop_elect_on_entry", "market_rests_continuous"],
       note="stop 3 is elected on entry and rests as a market order (no match); stop 4 is "
            "elected and fills against it completely (its price is not published)"),
    ex("liquibook-stop-reached", "liquibook",
       src(LIQUIBOOK, LB, example="TestStopMarketOrdersTradeWhenStopPriceReached"),
       [L(1, B, 53, 100), L(2, S, 57, 100), STOP(3, B, 100, 56), STOP(4, S, 100, 54),
        L(5, B, 56, 1000), L(6, S, 56, 1000), L(7, B, 54, 1000), L(8, S, 54, 1000)],
       dict(trades=[(56, 1000, 5, 6), (57, 100, 3, 2), (54, 1000, 7, 8), (53, 100, 1, 4)],
            stops=[]),
       note="orders 5-8 are all-or-none in the test; each fills completely against one order "
            "so plain limits give the same trades; the test's set_market_price(55) leaves both "
            "stops unreached, as exsim's 'no trade yet' does"),
    ex("liquibook-stop-cancel", "liquibook",
       src(LIQUIBOOK, LB, example="TestStopOrdersCancelBeforeTrigger"),
       [STOP(1, B, 100, 56), STOP(2, S, 100, 54), CXL(1), CXL(2)],
       dict(trades=[], stops=[], done=[1, 2])),
]

# ---- Vega iceberg integration features --------------------------------------------------------------
VEGA_AUX = [L(1, B, 1, 1), L(2, S, 10001, 1), L(3, B, 2, 1), L(4, S, 2, 1), OPEN()]
EXAMPLES += [
    ex("vega-iceberg-size-increase", "vega",
       src(VEGA, "Scenario: Iceberg increase size success and not losing position in order book"),
       VEGA_AUX + [ICE(10, S, 2, 5, 2), ICE(11, S, 2, 5, 2), MOD(10, 2, 10), L(12, B, 2, 2)],
       dict(trades=[(2, 1, 3, 4), (2, 2, 12, 10)]), start="pre_open",
       needs=["iceberg_increase_keeps_priority"], differs=["trades"],
       note="minimum peak 1 (refresh at 0, as exsim); the opening uncross trades the auxiliary "
            "orders 3 and 4 at 2"),
    ex("vega-iceberg-basic-refresh", "vega", src(VEGA, "Scenario: iceberg basic refresh"),
       VEGA_AUX + [ICE(10, B, 10, 100, 10, min_peak=5), L(11, S, 10, 6)],
       dict(orders={10: (10, 94, 10)}), start="pre_open", needs=["iceberg_min_peak"],
       note="shown 4 < minimum peak 5: refreshed to 10 with 84 behind"),
    ex("vega-iceberg-refresh-leaving-auction", "vega",
       src(VEGA, "Scenario: iceberg refrehes leaving auction"),
       [ICE(10, B, 2, 100, 10, min_peak=10)] + VEGA_AUX,
       dict(orders={10: (2, 99, 10)}), start="pre_open", needs=["iceberg_min_peak"]),
    ex("vega-iceberg-amend-price-aggressive", "vega",
       src(VEGA, "Scenario: Iceberg amend price reenters aggressively"),
       VEGA_AUX + [ICE(10, S, 5, 16, 5), ICE(11, B, 2, 10, 2), MOD(11, 5, 10)],
       dict(orders={10: (5, 6, 5)}, done=[11]), start="pre_open",
       note="minimum peaks 1 (refresh at 0, as exsim)"),
]

# ---- BNB Beacon Chain DEX match examples -----------------------------------------------------------


def bnb(rows, reference):
    """rows: (price, sell qty, buy qty) of the published table."""
    book = []
    for price, sell, buy in rows:
        if buy:
            book.append((B, price, buy))
        if sell:
            book.append((S, price, sell))
    return call(book), reference


BNB_ROWS = {
    "1": ([(100, 0, 150), (98, 250, 150), (97, 50, 0)], 0, (98, 300, 0), ()),
    "2": ([(100, 0, 150), (99, 0, 50), (97, 200, 300), (96, 100, 0)], 0, (97, 300, 200), ()),
    "3": ([(102, 0, 300), (100, 0, 100), (99, 0, 200), (98, 250, 300), (97, 250, 0),
           (96, 1000, 0)], 0, (96, 900, -100), ()),
    "4": ([(102, 0, 30), (101, 0, 10), (99, 0, 50), (98, 10, 0), (97, 50, 0), (96, 0, 15),
           (95, 50, 0)], 0, (97, 90, -10), ()),
    "5.1": ([(102, 0, 10), (97, 0, 10), (95, 50, 0)], 80, (95, 20, -30), ()),
    "5.2": ([(99, 0, 10), (94, 0, 10), (92, 50, 0)], 100, (94, 20, -30),
            ("auction_market_pressure_band",)),
    "5.3": ([(99, 0, 100), (92, 50, 0)], 90, (95, 50, 50), ("auction_market_pressure_band",)),
    "5.4": ([(101, 0, 10), (96, 0, 10), (94, 50, 0)], 100, (95, 20, -30),
            ("auction_market_pressure_band",)),
    "6.1": ([(100, 0, 25), (98, 25, 0), (97, 0, 25), (95, 25, 0)], 99, (99, 25, -25), ()),
    "6.2": ([(100, 0, 25), (98, 25, 0), (97, 0, 25), (95, 25, 0)], 97, (97, 25, 25), ()),
}
for name, (rows, reference, auction, needs) in BNB_ROWS.items():
    steps, _ = bnb(rows, reference)
    EXAMPLES.append(ex(
        f"bnb-match-{name}", "bnb", src(BNB, "Examples", example=f"Example {name}"), steps,
        dict(auction=auction), start="pre_open", reference=reference, needs=needs,
        differs=("auction",) if needs else (),
        note="the reference price is the example's reference or last trade price"
        + ("; 5 % band: BNB picks by the band, exsim the lowest/highest limit" if needs else "")))

# ---- Euronext: the Pure Market Order and Market-to-Limit example PDFs (EuronextClone transcripts) ----
EC_PMO = "'Euronext - pure market order.feature' (examples from the Euronext Pure Market Order PDF)"
EC_MTL = ("'Euronext - market-to-limit-orders.feature' (examples from the Euronext "
          "Market-to-Limit PDF)")
EC_IMP = "indicative-market-price.feature"


def mtl_call(sell_qty):
    """The Market-to-Limit PDF's call book: buys A MTL 10, B market 10, C MTL 10; D sells at 10."""
    return [MTL(1, B, 10), M(2, B, 10), MTL(3, B, 10), L(4, S, 1000, sell_qty), OPEN()]


EC_AMO = "auction-market-order.feature"
EXAMPLES += [
    ex("euronext-imp-market-buy", "euronext", src(EURONEXT_CLONE, EC_IMP,
       example="market buy 80 against sells 40 @ 10.02 and 40 @ 10.04"),
       call([(B, None, 80), (S, 1002, 40), (S, 1004, 40)]),
       dict(auction=(1004, 80, 0)), reference=1000),
    ex("euronext-imp-market-sell", "euronext", src(EURONEXT_CLONE, EC_IMP,
       example="market sell 80 against buys 40 @ 9.98 and 40 @ 9.96"),
       call([(B, 998, 40), (B, 996, 40), (S, None, 80)]),
       dict(auction=(996, 80, 0)), reference=1000),
    ex("euronext-auction-full", "euronext", src(EURONEXT_CLONE, EC_AMO,
       example="Simplest full match on offsetting limit orders"),
       [L(1, B, 10, 50), L(2, S, 10, 50), OPEN()],
       dict(trades=[(10, 50, 1, 2)], book=dict(bids=[], asks=[]))),
    ex("euronext-auction-partial", "euronext", src(EURONEXT_CLONE, EC_AMO,
       example="Simplest partial match on offsetting limit orders"),
       [L(1, B, 10, 30), L(2, S, 10, 50), OPEN()],
       dict(trades=[(10, 30, 1, 2)], book=dict(bids=[], asks=[(2, 10, 20)]))),
    ex("euronext-pmo-call-1", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Call Phase - Example 1 - the Market order is totally filled"),
       [MTL(1, B, 50), L(2, B, 1010, 90), L(3, B, 990, 10), MTL(4, S, 40),
        L(5, S, 1008, 100), L(6, S, 1015, 60), M(7, B, 20), OPEN()],
       dict(trades=[(1010, 40, 1, 4), (1010, 10, 1, 5), (1010, 20, 7, 5), (1010, 70, 2, 5)],
            book=dict(bids=[(2, 1010, 20), (3, 990, 10)], asks=[(6, 1015, 60)])),
       reference=1000, needs=["market_to_limit"],
       note="brokers A-G are ids 1-7; the indicative is 10.08 before G's order and 10.10 after "
            "(published, not checked here); also in auction-market-order.feature"),
    ex("euronext-pmo-call-2", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Call Phase - Example 2 - the market order is partially filled"),
       [MTL(1, B, 40), M(2, S, 45), M(3, B, 20), OPEN()],
       dict(trades=[(1000, 40, 1, 2), (1000, 5, 3, 2)], book=dict(bids=[(3, None, 15)],
                                                                 asks=[])),
       reference=1000, needs=["market_to_limit", "auction_markets_carry_over"],
       note="G's market order keeps its 15 lots after the auction"),
    ex("euronext-pmo-call-3", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Call Phase - Example 3 - the IMP is higher than the best limit and equal to the "
               "reference price"),
       [M(1, B, 40), L(2, S, 998, 40)],
       dict(indicative=(1000, 40)), start="pre_open", reference=1000,
       needs=["auction_reference_when_no_limit"], differs=["indicative"],
       note="exsim clamps the reference into the candidate range: 9.98 (an earlier version of "
            "indicative-market-price.feature has the same example)"),
    ex("euronext-pmo-call-4", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Call Phase - Example 4 - the IMP equals the best limit, below the reference"),
       [M(1, B, 40), L(2, S, 998, 41)],
       dict(indicative=(998, 40)), start="pre_open", reference=1000),
    ex("euronext-pmo-call-5", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Call Phase - Example 5 - the IMP equals the best limit, above the reference"),
       [M(1, B, 40), L(2, S, 1002, 40)],
       dict(indicative=(1002, 40), book=dict(bids=[(1, None, 40)], asks=[(2, 1002, 40)])),
       start="pre_open", reference=1000),
    ex("euronext-pmo-trading-1", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Trading session Phase - Example 1 - the Market order is totally executed"),
       [L(1, S, 1020, 100), L(2, S, 1030, 60), M(3, B, 110)],
       dict(trades=[(1020, 100, 3, 1), (1030, 10, 3, 2)],
            book=dict(bids=[], asks=[(2, 1030, 50)])), reference=1000),
    ex("euronext-pmo-trading-2", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Trading session Phase - Example 2 - the Market order is partially executed"),
       [L(1, S, 1020, 100), L(2, S, 1030, 60), M(3, B, 200)],
       dict(trades=[(1020, 100, 3, 1), (1030, 60, 3, 2)],
            book=dict(bids=[(3, None, 40)], asks=[])), reference=1000,
       needs=["market_rests_continuous"]),
    ex("euronext-pmo-trading-3", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Trading session Phase - Example 3 - only market orders: the last traded price"),
       [M(1, B, 90), M(2, B, 10), M(3, S, 170)],
       dict(trades=[(1000, 90, 1, 3), (1000, 10, 2, 3)],
            book=dict(bids=[], asks=[(3, None, 70)])), reference=1000,
       needs=["market_rests_continuous"]),
    ex("euronext-pmo-trading-4", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Trading session Phase - Example 4 - the best limit is higher than the last "
               "traded price"),
       [M(1, B, 90), L(2, B, 1010, 10), L(3, B, 1008, 20), L(4, S, 1000, 120)],
       dict(trades=[(1010, 90, 1, 4), (1010, 10, 2, 4), (1008, 20, 3, 4)],
            book=dict(bids=[], asks=[])), reference=1000, needs=["market_rests_continuous"]),
    ex("euronext-pmo-trading-5", "euronext", src(EURONEXT_CLONE, EC_PMO,
       example="Trading session Phase - Example 5 - the best limit is lower than the last "
               "traded price"),
       [M(1, B, 90), L(2, B, 1010, 10), L(3, B, 1008, 20), L(4, S, 1000, 120)],
       dict(trades=[(None, 90, 1, 4), (1010, 10, 2, 4), (1008, 20, 3, 4)],
            book=dict(bids=[], asks=[])), reference=1030, needs=["market_rests_continuous"],
       note="the transcript's prose gives the market order's 90 at 10.30 (the reference), its "
            "table at 10.10: the price is left unpublished here"),
    ex("euronext-mtl-auction-1", "euronext", src(EURONEXT_CLONE, EC_MTL,
       example="Securities traded by auction - Example 1 (only MTL orders); the continuous "
               "class's call phase Example 1 is the same"),
       [MTL(1, B, 50), MTL(2, S, 40), OPEN()],
       dict(trades=[(1000, 40, 1, 2)], book=dict(bids=[(1, 1000, 10)], asks=[])),
       reference=1000, needs=["market_to_limit"],
       note="A's 10 left become a limit at the auction price"),
    ex("euronext-mtl-auction-2", "euronext", src(EURONEXT_CLONE, EC_MTL,
       example="Securities traded by auction - Example 2"),
       mtl_call(10),
       dict(trades=[(1000, 10, 1, 4)], book=dict(bids=[(2, None, 10), (3, None, 10)],
                                                 asks=[])),
       reference=1000, needs=["market_to_limit", "auction_markets_carry_over"],
       note="a class traded by auction keeps B's market and C's MTL as they are"),
    ex("euronext-mtl-continuous-call-2", "euronext", src(EURONEXT_CLONE, EC_MTL,
       example="continuous mode, Call phase - Example 2"),
       mtl_call(10),
       dict(trades=[(1000, 10, 1, 4)], book=dict(bids=[(2, None, 10), (3, 1000, 10)],
                                                 asks=[])),
       reference=1000, needs=["market_to_limit", "auction_markets_carry_over"],
       note="the unexecuted MTL becomes a limit at the auction price; the market order stays"),
    ex("euronext-mtl-continuous-call-3", "euronext", src(EURONEXT_CLONE, EC_MTL,
       example="continuous mode, Call phase - Example 3"),
       mtl_call(5),
       dict(trades=[(1000, 5, 1, 4)], book=dict(bids=[(2, None, 10), (1, 1000, 5),
                                                      (3, 1000, 10)], asks=[])),
       reference=1000, needs=["market_to_limit", "auction_markets_carry_over"]),
    ex("euronext-mtl-continuous-1", "euronext", src(EURONEXT_CLONE, EC_MTL,
       example="continuous mode, Continuous phase - Example 1"),
       [L(1, B, 15, 10), L(2, B, 12, 10), L(3, B, 10, 10), MTL(4, S, 25)],
       dict(trades=[(15, 10, 1, 4)], book=dict(bids=[(2, 12, 10), (3, 10, 10)],
                                               asks=[(4, 15, 15)])),
       reference=15, needs=["market_to_limit"],
       note="also market-to-limit-orders.feature (depths only)"),
    ex("euronext-mtl-continuous-2", "euronext", src(EURONEXT_CLONE, EC_MTL,
       example="continuous mode, Continuous phase - Example 2"),
       [M(1, B, 10), L(2, B, 12, 10), L(3, B, 9, 10), MTL(4, S, 25)],
       dict(book=dict(bids=[(3, 9, 10)], asks=[(4, 12, 5)])),
       reference=12, needs=["market_to_limit", "market_rests_continuous"],
       note="the trades are not published, only the book after them"),
]

# ---- TSX iceberg: hidden volume reported as one trade -------------------------------------------------
EXAMPLES.append(ex(
    "tsx-iceberg-one-trade", "tsx", src(TSX, "4.7 Iceberg Orders, 'Example: Iceberg Orders'"),
    [L(1, B, 1000, 100), L(2, S, 1020, 400), L(3, B, 990, 500), ICE(4, B, 990, 10000, 100),
     L(5, B, 990, 200), L(6, S, 990, 1500)],
    dict(trades=[(1000, 100, 1, 6), (990, 500, 3, 6), (990, 100, 4, 6), (990, 200, 5, 6),
                 (990, 600, 4, 6)],
         book=dict(bids=[(4, 990, 9300, 100)], asks=[(2, 1020, 400)])),
    needs=["iceberg_one_trade"], differs=["trades"],
    note="prices in cents; the last sale price 10.05 before the example does not matter; exsim "
         "prints the 600 as six fills of 100"))

# ---- CME Globex: protection ---------------------------------------------------------------------------
EXAMPLES += [
    ex("cme-market-protection-bid", "cme",
       src(CME_ILINK, "Market Order with Protection (bid)",
           also="the same example without its quantity: " + CME["url"]),
       [L(1, S, 90025, 2), L(2, S, 90300, 3), L(3, S, 90550, 3), L(4, S, 90675, 5),
        dict(M(5, B, 15), protection=600)],
       dict(trades=[(90025, 2, 5, 1), (90300, 3, 5, 2), (90550, 3, 5, 3)],
            orders={5: (90625, 7)}),
       needs=["market_with_protection"],
       note="the size resting at 90675 is not published (5 here)"),
    ex("cme-market-limit-bid", "cme", src(CME_ILINK, "Market-Limit Order (Bid) with Market"),
       [L(1, S, 90025, 2), L(2, S, 90300, 3), MTL(3, B, 15)],
       dict(trades=[(90025, 2, 3, 1)], orders={3: (90025, 13)}),
       needs=["market_to_limit"],
       note="CME's market-limit is a market-to-limit order; the size beyond the best offer is "
            "not published (3 at 90300 here)"),
    ex("cme-market-limit-no-market", "cme",
       src(CME_ILINK, "Market-Limit Order (Bid) with No Market"),
       [MTL(1, B, 15)], dict(trades=[], rejected={1: None}),
       needs=["market_to_limit"], note="rejected: no opposing offer is working"),
    ex("cme-market-protection-offer", "cme",
       src(CME, "Market Order with Protection, Example: Offer"),
       [L(1, B, 90000, 2), L(2, B, 89900, 3), L(3, B, 89650, 3), L(4, B, 89300, 5),
        dict(M(5, S, 10), protection=600)],
       dict(trades=[(90000, 2, 1, 5), (89900, 3, 2, 5), (89650, 3, 3, 5)],
            orders={5: (89400, 2)}),
       needs=["market_with_protection"],
       note="quantities not published here: 10 for the order and 5 at 89300"),
    ex("cme-stop-protection-bid", "cme", src(CME, "Stop Order with Protection, Example: Bid"),
       [L(1, S, 133000, 1), L(2, S, 133025, 2), L(3, S, 133200, 3), L(4, S, 133225, 2),
        L(5, S, 133375, 5), dict(STOP(6, B, 10, 133000), protection=300), L(7, B, 133000, 1)],
       dict(trades=[(133000, 1, 7, 1), (133025, 2, 6, 2), (133200, 3, 6, 3),
                    (133225, 2, 6, 4)], orders={6: (133300, 3)}),
       needs=["stop_with_protection"],
       note="'a trade occurs at the trigger price of 133000': orders 1 and 7 make it; the "
            "resting sizes at 133000 and 133375 are not published (1 and 5 here)"),
]

# ---- Xetra Release 14.0, 13.2.2: the other continuous examples (market orders resting) ------------
# (number, resting orders, incoming order, reference price, published trade, remaining book)
R14_MARKET_BOOK = [
    (4, [M(1, B, 6000, "9:01"), L(2, B, 195, 1000, "9:02")], M(3, S, 6000), 200,
     (200, 6000, 1, 3), dict(bids=[(2, 195, 1000)], asks=[])),
    (6, [M(1, S, 6000, "9:01"), L(2, S, 202, 1000, "9:02")], M(3, B, 6000), 200,
     (200, 6000, 3, 1), dict(bids=[], asks=[(2, 202, 1000)])),
    (7, [M(1, S, 6000, "9:01"), L(2, S, 202, 1000, "9:02")], M(3, B, 6000), 203,
     (202, 6000, 3, 1), dict(bids=[], asks=[(2, 202, 1000)])),
    (15, [M(1, B, 6000, "9:01")], L(2, S, 203, 6000), 200, (203, 6000, 1, 2),
     dict(bids=[], asks=[])),
    (16, [M(1, S, 6000, "9:01")], L(2, B, 203, 6000), 200, (200, 6000, 2, 1),
     dict(bids=[], asks=[])),
    (17, [M(1, S, 6000, "9:01")], L(2, B, 199, 6000), 200, (199, 6000, 2, 1),
     dict(bids=[], asks=[])),
    (21, [M(1, B, 6000, "9:01"), L(2, B, 196, 1000, "9:02")], L(3, S, 195, 6000), 200,
     (200, 6000, 1, 3), dict(bids=[(2, 196, 1000)], asks=[])),
    (23, [M(1, B, 6000, "9:01"), L(2, B, 202, 1000, "9:02")], L(3, S, 203, 6000), 200,
     (203, 6000, 1, 3), dict(bids=[(2, 202, 1000)], asks=[])),
    (24, [M(1, S, 6000, "9:01"), L(2, S, 202, 1000, "9:02")], L(3, B, 203, 6000), 200,
     (200, 6000, 3, 1), dict(bids=[], asks=[(2, 202, 1000)])),
    (25, [M(1, S, 6000, "9:01"), L(2, S, 202, 1000, "9:02")], L(3, B, 200, 6000), 201,
     (200, 6000, 3, 1), dict(bids=[], asks=[(2, 202, 1000)])),
    (26, [M(1, S, 6000, "9:01"), L(2, S, 199, 1000, "9:02")], L(3, B, 203, 6000), 200,
     (199, 6000, 3, 1), dict(bids=[], asks=[(2, 199, 1000)])),
]
for n, resting, incoming, reference, trade, after in R14_MARKET_BOOK:
    EXAMPLES.append(ex(
        f"xetra-r14-cont-{n}", "xetra", src(XETRA_R14, R14_CONT, example=f"Example {n}"),
        resting + [incoming], dict(trades=[trade], book=after), reference=reference,
        needs=["market_rests_continuous"],
        note="Example 25 as printed: reference 201, incoming bid limit 200 (a restatement in "
             "tinyEXCH uses 199 and 200)" if n == 25 else ""))
EXAMPLES += [
    ex("xetra-r14-cont-9", "xetra", src(XETRA_R14, R14_CONT, example="Example 9"),
       [M(1, B, 6000, "9:01"), MTL(2, S, 6000)],
       dict(trades=[], rejected={2: None}, book=dict(bids=[(1, None, 6000)], asks=[])),
       reference=200, needs=["market_to_limit", "market_rests_continuous"]),
    ex("xetra-r14-cont-11", "xetra", src(XETRA_R14, R14_CONT, example="Example 11"),
       [L(1, S, 200, 6000, "9:01"), MTL(2, B, 6000)],
       dict(trades=[(200, 6000, 2, 1)], book=dict(bids=[], asks=[])), reference=200,
       needs=["market_to_limit"]),
    ex("xetra-r14-cont-12", "xetra", src(XETRA_R14, R14_CONT, example="Example 12"),
       [L(2, B, 199, 5000, "8:55"), M(1, B, 6000, "9:01"), MTL(3, S, 6000)],
       dict(trades=[], rejected={3: None}), reference=200,
       needs=["market_to_limit", "market_rests_continuous"]),
    ex("xetra-r14-market-partial", "xetra",
       src(XETRA_R14, R14_FURTHER, example="Partial execution of a market order"),
       [M(1, B, 6000, "9:01"), L(2, B, 202, 1000, "9:02"), L(3, S, 203, 1000)],
       dict(trades=[(203, 1000, 1, 3)], book=dict(bids=[(1, None, 5000), (2, 202, 1000)],
                                                  asks=[])),
       reference=200, needs=["market_rests_continuous"]),
    ex("xetra-r14-volatility-interruption", "xetra",
       src(XETRA_R14, R14_FURTHER, example="Initiation of a volatility interruption"),
       [M(1, B, 6000, "9:01"), L(2, B, 202, 1000, "9:02"), L(3, S, 220, 1000, "10:01")],
       dict(trades=[], phase="reopening_auction"),
       reference=200, needs=["market_rests_continuous"], options=dict(dynamic_band_bps=200),
       note="price range +/- 2 % of the last price (exsim: dynamic_band_bps=200); the "
            "execution would be at 220 against the bid market order, outside the range, so the "
            "ask rests and continuous trading is interrupted by an auction"),
]

# ---- CoinTossX stop-limit and replace fixtures ---------------------------------------------------------
CTX_STOP_LIMIT = ("MatchingEngine/src/test/resources/crossing/uncross/stopLimitOrder "
                  "(StopLimitOrderMaster.csv)")
CTX_REPLACE = "MatchingEngine/src/test/resources/crossing/replaceOrder (ReplaceOrderMaster.csv)"


def SL(oid, side, qty, price, stop, t=None):
    """A stop-limit order."""
    return dict(STOP(oid, side, qty, stop, t), type="stop_limit", price=price)


EXAMPLES += [
    ex("cointossx-stop-limit-1", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 1"),
       [SL(1, B, 12000, 10600, 10500, "12:00")], dict(trades=[], stops=[1])),
    ex("cointossx-stop-limit-2", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 2"),
       [SL(1, S, 12000, 10600, 10500, "12:00")], dict(trades=[], stops=[1])),
    ex("cointossx-stop-limit-3", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 3"),
       [L(1, B, 10400, 1000, "10:00"), L(2, S, 10700, 1000, "11:00"),
        SL(3, B, 12000, 10700, 10700, "12:00")],
       dict(trades=[], stops=[3], book=dict(bids=[(1, 10400, 1000)], asks=[(2, 10700, 1000)]))),
    ex("cointossx-stop-limit-4", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 4"),
       [L(1, B, 10400, 1000, "10:00"), L(2, S, 10700, 1000, "11:00"),
        SL(3, S, 12000, 10400, 10400, "12:00")],
       dict(trades=[], stops=[3], book=dict(bids=[(1, 10400, 1000)], asks=[(2, 10700, 1000)]))),
    ex("cointossx-stop-limit-5", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 5"),
       [L(1, B, 10500, 1000, "10:00"), L(2, S, 10900, 1000, "11:00"),
        L(3, B, 10600, 15000, "12:00"), SL(4, S, 15000, 10600, 10900, "13:00"),
        M(6, B, 1000, "14:00")],
       dict(trades=[(10900, 1000), (10600, 15000)], stops=[],
            book=dict(bids=[(1, 10500, 1000)], asks=[]))),
    ex("cointossx-stop-limit-6", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 6"),
       [L(1, B, 10700, 1000, "10:00"), L(2, S, 10900, 1000, "11:00"),
        L(3, S, 10800, 15000, "12:00"), SL(4, B, 15000, 11000, 10500, "13:00"),
        M(6, S, 1000, "14:00")],
       dict(trades=[(10700, 1000), (10800, 15000)], stops=[],
            book=dict(bids=[], asks=[(2, 10900, 1000)]))),
    ex("cointossx-stop-limit-7", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 7"),
       [L(1, B, 10700, 1000, "10:00"), L(2, S, 10900, 1000, "11:00"),
        L(3, B, 10800, 15000, "12:00"), M(4, B, 1000, "14:00"),
        SL(5, S, 15000, 10800, 10900, "14:01")],
       dict(trades=[(10900, 1000), (10800, 15000)], stops=[],
            book=dict(bids=[(1, 10700, 1000)], asks=[])),
       needs=["stop_elect_on_entry"], differs=["trades", "book"],
       note="the fixture stamps the stop-limit 13:00 though it arrives after the 14:00 market "
            "order of the initial state; it is entered last here"),
    ex("cointossx-stop-limit-8", "jse", src(COINTOSSX, CTX_STOP_LIMIT, example="Test 8"),
       [L(1, B, 10700, 1000, "10:00"), L(2, S, 10900, 1000, "11:00"),
        L(3, S, 10800, 15000, "12:00"), M(4, S, 1000, "14:00"),
        SL(5, B, 15000, 11000, 10500, "14:01")],
       dict(trades=[(10700, 1000), (10800, 15000)], stops=[],
            book=dict(bids=[], asks=[(2, 10900, 1000)])),
       needs=["stop_elect_on_entry"], differs=["trades", "book"],
       note="entered last, as in Test 7"),
    ex("cointossx-replace-3", "jse", src(COINTOSSX, CTX_REPLACE, example="Test 3"),
       [L(1, B, 10000, 1000, "10:00"), L(2, B, 10500, 2000, "11:00"),
        L(3, B, 10700, 3000, "12:00"), MOD(2, 10500, 1500)],
       dict(trades=[], book=dict(bids=[(3, 10700, 3000), (2, 10500, 1500), (1, 10000, 1000)],
                                 asks=[]))),
    ex("cointossx-replace-9", "jse", src(COINTOSSX, CTX_REPLACE, example="Test 9"),
       [L(1, B, 10000, 1000, "10:00"), L(2, B, 10500, 2000, "11:00"),
        L(3, B, 10700, 1000, "12:00"), HIDDEN(4, S, 10500, 2500, "13:00", mes=2500),
        MOD(2, 10500, 2500)],
       dict(trades=[(10500, 2500)],
            book=dict(bids=[(3, 10700, 1000), (1, 10000, 1000)], asks=[])),
       needs=["hidden_orders", "min_execution_size"],
       note="the hidden ask (MES 2500) rests beside the better bids it may not fill in part; "
            "the bid raised to 2500 re-aggresses and fills it whole"),
    ex("cointossx-replace-11", "jse", src(COINTOSSX, CTX_REPLACE, example="Test 11"),
       [L(1, B, 10000, 1000, "10:00"), L(2, B, 10500, 2000, "11:00"),
        L(3, B, 10700, 1000, "12:00"), L(4, S, 10800, 2000, "13:00"), MOD(2, 10800, 2000)],
       dict(trades=[(10800, 2000)], book=dict(bids=[(3, 10700, 1000), (1, 10000, 1000)],
                                              asks=[]))),
    ex("cointossx-replace-12", "jse", src(COINTOSSX, CTX_REPLACE, example="Test 12"),
       [L(1, S, 10000, 1000, "10:00"), L(2, S, 10500, 2000, "11:00"),
        L(3, S, 10700, 1000, "12:00"), L(4, B, 9000, 2000, "13:00"), MOD(2, 9000, 2000)],
       dict(trades=[(9000, 2000)], book=dict(bids=[], asks=[(1, 10000, 1000),
                                                           (3, 10700, 1000)]))),
]
