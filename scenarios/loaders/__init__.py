"""Loaders of market data: LOBSTER (L3), Binance (L2 + trades), QuantCup (L3), Databento DBN
(``dbn``: MBO, MBP, trades, definitions, through the official databento-dbn decoder) and the
generic order-flow CSV/Parquet format (``generic``; docs/data-formats.md).

Each reads a file once, converts prices to integer ticks and times to integer nanoseconds at
load time, and raises ``exchange.errors.InputError`` naming the file, line and expectation;
``_parse`` holds the shared column parsers, ``l2book`` the top-of-book rebuild used by checks.
"""
