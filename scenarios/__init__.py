"""exsim scenarios: seeded order-flow generators, scenario files, and loaders for real data.

``open_flow`` opens any of them (a preset, a scenario file, a LOBSTER, Binance or QuantCup file or
folder, a data directory, an array) as one ``Flow``.

Everything returns numpy structured arrays of ``exchange.schema`` dtypes (ORDER_DTYPE for flows,
L2_DTYPE for Binance depth), with prices in integer ticks and times in integer nanoseconds.
Generators are deterministic for a seed; loaders raise ``exchange.errors.InputError`` naming the
file, the line and what was expected. docs/scenarios.md describes each law and format.

>>> from exsim.scenarios import load_scenario
>>> sc = load_scenario("default")
>>> orders = sc.generate()
>>> len(orders), [s.name for s in sc.symbols]
(10000, ['JPM', 'BTCUSD'])
"""

from exsim.scenarios.loaders.binance import BinanceData, load_binance
from exsim.scenarios.loaders.dbn import DbnData, DbnSymbol, dbn_symbols, iter_dbn, load_dbn
from exsim.scenarios.loaders.generic import GenericFlow, load_generic, write_generic
from exsim.scenarios.flows import Flow, open_flow, symbol_from_file
from exsim.scenarios.generators.hawkes import hawkes_flow, hawkes_times
from exsim.scenarios.loaders.l2book import top_of_book
from exsim.scenarios.loaders.lobster import LobsterFlow, load_lobster
from exsim.scenarios.loaders.lobster_check import check_lobster
from exsim.scenarios.loaders.quantcup import load_quantcup
from exsim.scenarios.scenario import GENERATORS, Scenario, SymbolSpec, list_presets, load_scenario
from exsim.scenarios.generators.uniform import bench_1m, uniform_flow
from exsim.scenarios.generators.venue_mix import venue_mix
from exsim.scenarios.generators.zero_intelligence import zi_flow

__all__ = [
    "uniform_flow", "bench_1m", "venue_mix", "zi_flow", "hawkes_flow", "hawkes_times",
    "Scenario", "SymbolSpec", "load_scenario", "list_presets", "GENERATORS",
    "load_quantcup", "load_lobster", "LobsterFlow", "check_lobster",
    "load_binance", "BinanceData", "top_of_book", "Flow", "open_flow", "symbol_from_file",
    "load_dbn", "iter_dbn", "dbn_symbols", "DbnData", "DbnSymbol", "load_generic", "write_generic", "GenericFlow",
]
