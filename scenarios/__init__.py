"""exsim scenarios: seeded order-flow generators, scenario files, and loaders for real data.

Everything returns numpy structured arrays of ``exchange.schema`` dtypes (ORDER_DTYPE for flows,
L2_DTYPE for Binance depth), with prices in integer ticks and times in integer nanoseconds.

>>> from scenarios import load_scenario
>>> sc = load_scenario("default")
>>> orders = sc.generate()
>>> len(orders), [s.name for s in sc.symbols]
(10000, ['JPM', 'BTCUSD'])
"""

from .quantcup import load_quantcup
from .scenario import GENERATORS, Scenario, SymbolSpec, list_presets, load_scenario
from .uniform import bench_1m, uniform_flow

__all__ = [
    "uniform_flow", "bench_1m",
    "Scenario", "SymbolSpec", "load_scenario", "list_presets", "GENERATORS",
    "load_quantcup",
]
