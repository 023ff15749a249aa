"""Backtesting: a strategy's orders and the market's flow through one engine, with latency.

Modules (a reader starts at ``driver``):

- ``driver``        ``backtest()``: loads the flow, merges it with the strategy's messages in
                    arrival order and runs them through one ``exchange.Engine``
- ``kernels``       the numba loops (market slices, njit quote strategies), ``first_due`` (the
                    order of work of every loop), ``ID_BASE``
- ``quoting``       a ``QuoteStrategy``'s rules, ``@njit``, called by both strategy paths
- ``strategy``      the strategy API: ``Strategy``, ``QuoteStrategy``, ``Context``, ``MarketView``
- ``latency``       feed and order-entry latency models behind one interface
- ``l2queue``       L2-only flows (Binance aggregates): the replayed book and the strategy's queue
                    positions, the prepared (merged, ranked) event stream
- ``several``       several L2 flows (one symbol each) from one account (``backtest([a, b])``)
- ``quoteloops``    the njit quote loops built per quote function, so numba's cache keeps
                    them across processes (numba#6264)
- ``l2loop``        the compiled L2 loops (Python strategies between wake-ups, njit quote
                    strategies whole); compiled only when an L2 backtest runs
- ``queue_models``  fill models behind one interface (``ConservativeQueue``, ``ProportionalQueue``
                    and their ``cross_fills`` / ``whole_on_trade_through`` options)
- ``result``        ``BacktestResult``: arrays, summary, digest; ``plot`` draws it
- ``counterfactual`` ``whatif()``: the same history with and without the strategy
- ``grid``          ``sweep()``: a parameter grid, serially or on Dask
- ``strategies/``   example strategies (a market maker, a momentum taker)

The public names are exported by ``replay`` (``from exsim.replay import backtest, Strategy``).
"""
