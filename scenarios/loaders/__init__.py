"""Loaders of real market data: LOBSTER (L3), Binance (L2 + trades), QuantCup (L3).

Each reads a file once, converts prices to integer ticks and times to integer nanoseconds at
load time, and raises ``exchange.errors.InputError`` naming the file, line and expectation;
``_parse`` holds the shared column parsers, ``l2book`` the top-of-book rebuild used by checks.
"""
