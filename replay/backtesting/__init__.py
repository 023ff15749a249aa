"""Backtesting: a strategy's orders and the market's flow through one engine, with latency.

Modules (a reader starts at ``driver``):

- ``driver``        ``backtest()``: loads the flow, merges it with the strategy's messages in
                    arrival order and runs them through one ``exchange.Engine``
- ``kernels``       the numba side of the driver loop (market slices, njit quote strategies)
- ``strategy``      the strategy API: ``Strategy``, ``QuoteStrategy``, ``Context``
- ``latency``       feed and order-entry latency models behind one interface
- ``l2queue``       L2-only flows (Binance aggregates): queue-position models for the strategy
- ``result``        ``BacktestResult``: arrays, summary, digest; ``plot`` draws it
- ``counterfactual`` ``whatif()``: the same history with and without the strategy
- ``grid``          ``sweep()``: a parameter grid, serially or on Dask
- ``strategies/``   example strategies (a market maker, a momentum taker)

The public names are exported by ``replay`` (``from replay import backtest, Strategy``).
"""
