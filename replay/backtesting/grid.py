"""``sweep``: one backtest per point of a strategy-parameter grid (times seeds), serial or on Dask.

A grid is ``{name: [values]}`` (every combination, in key order then value order) or an explicit
list of ``{name: value}`` points. Each point builds a fresh strategy from a ``module:Class`` spec
(``replay.backtesting.loading.load_strategy``: the same rules as ``exsim backtest --param``) or from a picklable
callable, runs ``replay.backtesting.driver.backtest`` and keeps its ``summary``. Rows come back in grid order:
``{**params, ["seed": s,] **summary}``.

Where it runs (``scheduler``):
- None (the default) or ``"serial"``: in this process, one point after the other, no Dask.
- ``"local"``: a ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes,
  started for the sweep and closed after it. Its workers start by importing the caller's script
  again (Python's "spawn"), so a script must call ``sweep`` under ``if __name__ == "__main__":``;
  a script without that guard is refused with a UsageError saying so, where Dask would fail
  with "An attempt has been made to start a new process before the current process has finished
  its bootstrapping phase" or have each worker re-run the whole script.
- an address (``"tcp://host:8786"``) or a ``distributed.Client``: an existing cluster. Its workers
  must be able to import exsim and the strategy's module.

The flow is loaded once, in the caller (a scenario is generated once per seed), and sent to the
workers once (``scatter``, broadcast); every task gets the same array.

Seeds: ``seeds=[...]`` runs every grid point once per seed, the seed replacing the scenario's seed
(so the flow must be a scenario: a preset name, a scenario file or a ``Scenario``).

Invariant: a backtest is a pure function of (flow, strategy, options), so rows depend only on the
inputs, never on where or in which order tasks ran: two runs of a grid give identical rows, and a
Dask run equals the serial run (tested on a LocalCluster of 2 workers). Why serial by default:
a small grid finishes in this process before a LocalCluster's workers have imported exsim, and
nothing starts processes behind a script's back.

Limits: a task failing on a worker re-raises its exception here and the sweep stops (rows already
done are lost); a grid of days is not a grid parameter yet (run one sweep per day).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os

from exsim.exchange.errors import UsageError

__all__ = ["sweep", "grid_points", "SERIAL", "LOCAL"]

SERIAL = "serial"
LOCAL = "local"   # a LocalCluster, started for the sweep
DIST_HINT = "pip install 'exsim[dist]' (dask.distributed), or use scheduler='serial'"
GUARD_HINT = ("put the code that calls sweep under `if __name__ == \"__main__\":` (the workers of "
              "scheduler='local' start by importing your script again, which must not start "
              "another sweep), or leave scheduler at its default to run in this process")


def grid_points(grid) -> list[dict]:
    """Return the grid's points as a list of ``{name: value}`` dicts, in a fixed order.

    ``grid``: ``{name: [values]}`` (cartesian product; keys in the dict's order, the last key
    varying fastest) or a list of dicts (taken as is). Raises UsageError for an empty or
    malformed grid.
    """
    if isinstance(grid, dict):
        if not grid:
            return [{}]
        names = list(grid)
        values = []
        for name in names:
            v = grid[name]
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                raise UsageError(f"grid[{name!r}] must be a list of values; got {v!r}")
            v = list(v)
            if not v:
                raise UsageError(f"grid[{name!r}] has no values")
            values.append(v)
        return [dict(zip(names, combo)) for combo in itertools.product(*values)]
    if isinstance(grid, (list, tuple)) and grid and all(isinstance(p, dict) for p in grid):
        return [dict(p) for p in grid]
    raise UsageError("grid must be {name: [values]} or a non-empty list of {name: value} dicts")


def _flows(flow, seeds, symbol):
    """Return ([(seed or None, orders)], symbol id or the given symbol, the flow's symbol specs
    or None) loaded in the caller (the specs carry a scenario's symbol options to every run)."""
    from exsim.scenarios import Scenario, load_scenario

    from exsim.replay.backtesting.driver import _load_flow

    if seeds is None:
        bases = [(None, flow)]
    else:
        sc = flow
        if isinstance(sc, (str, os.PathLike)) and not os.path.isdir(os.fspath(sc)):
            sc = load_scenario(os.fspath(sc))
        if not isinstance(sc, Scenario):
            raise UsageError("seeds= needs a scenario flow (preset name, scenario file or Scenario)")
        seeds = list(seeds)
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise UsageError(f"seeds must be a non-empty list of ints; got {seeds!r}")
        bases = [(s, dataclasses.replace(sc, seed=s)) for s in seeds]
    out, names, specs = [], None, None
    for seed, f in bases:
        orders, names, _, _, specs = _load_flow(f)
        out.append((seed, orders))
    if isinstance(symbol, str) and names is not None:
        if symbol not in names:
            raise UsageError(f"symbol {symbol!r} is not in the flow; symbols: {names}")
        symbol = names.index(symbol)
    return out, symbol, specs


def _make_strategy(spec, params: dict):
    """Build the strategy of one grid point (``module:Class`` spec or callable)."""
    if isinstance(spec, str):
        from exsim.replay.backtesting.loading import load_strategy

        return load_strategy(spec, [f"{k}={json.dumps(v)}" for k, v in params.items()])
    return spec(**params)


def _run_point(orders, spec, params: dict, kwargs: dict) -> dict:
    """One task: build the strategy, backtest it, return its summary (plain ints and floats),
    with "currency" when the money is in one (``BacktestResult.unit``)."""
    from exsim.replay.backtesting.driver import backtest

    res = backtest(orders, _make_strategy(spec, params), **kwargs)
    currency = res.meta["money"]["currency"]
    return {**res.summary, "currency": currency} if currency else res.summary


def sweep(flow, strategy_factory_spec, grid, *, seeds=None, scheduler=None, n_workers: int = 2,
          progress=None, **backtest_kwargs) -> list[dict]:
    """Backtest every grid point (times every seed); return one row dict per run, in grid order.

    ``flow``: anything ``backtest`` accepts (loaded once here). ``strategy_factory_spec``:
    ``"module:Class"`` (parameters as in ``exsim backtest --param``) or a picklable callable
    ``f(**params) -> Strategy``. ``grid``: ``{name: [values]}`` or a list of ``{name: value}``.
    ``seeds``: ints replacing the scenario's seed; each point runs once per seed (seed-major
    order: all points of the first seed, then the next). ``scheduler``: None or ``"serial"``
    (in this process), ``"local"`` (a LocalCluster of ``n_workers`` processes; module
    docstring: the caller's script needs the ``__main__`` guard) or a Dask scheduler address or
    ``Client``.
    ``backtest_kwargs``: passed to every ``backtest`` (latency, fees_bps, symbol, trader,
    engine_options, fast, symbols; not store_dir); the flow's symbols (a scenario's with its
    options: money, grid ...) go to every run unless ``symbols`` is given. ``progress``: None
    or a callable ``progress(done, total)`` told how many of the ``total`` runs have finished.

    Returns ``[{**params, "seed": s (only with seeds), **summary}]``; when the traded symbol
    has a currency, each row also has ``"currency"`` (its money values are in it; else in ticks
    x lots).
    Raises UsageError for a bad grid, spec, seeds or scheduler, when dask.distributed is needed
    but not installed, for ``"local"`` called from a script without the ``__main__`` guard, or when a parameter name collides with a summary field; a backtest's own
    UsageError (e.g. a bad strategy parameter) propagates.
    """
    if "store_dir" in backtest_kwargs:
        raise UsageError("sweep does not journal runs (store_dir); backtest one point to store it")
    if scheduler == LOCAL:
        _check_main_guard()   # why first: before the flow is loaded again in every worker
    if not (isinstance(strategy_factory_spec, str) or callable(strategy_factory_spec)):
        raise UsageError("strategy_factory_spec must be 'module:Class' or a callable")
    points = grid_points(grid)
    flows, symbol, specs = _flows(flow, seeds, backtest_kwargs.get("symbol"))
    if "symbol" in backtest_kwargs:
        backtest_kwargs["symbol"] = symbol
    if specs is not None and backtest_kwargs.get("symbols") is None:
        backtest_kwargs["symbols"] = specs
    if isinstance(strategy_factory_spec, str):
        # fail fast, here, on a bad spec or parameter names, before starting any cluster
        for p in points[:1]:
            _make_strategy(strategy_factory_spec, p)
    jobs = [(seed, orders, p) for seed, orders in flows for p in points]
    tell = progress or (lambda done, total: None)
    if scheduler is None or scheduler == SERIAL:
        summaries = []
        for _, orders, p in jobs:
            summaries.append(_run_point(orders, strategy_factory_spec, p, backtest_kwargs))
            tell(len(summaries), len(jobs))
    else:
        summaries = _run_dask(flows, jobs, strategy_factory_spec, backtest_kwargs, scheduler,
                              n_workers, tell)
    rows = []
    for (seed, _, p), summary in zip(jobs, summaries):
        head = dict(p) if seed is None else {**p, "seed": seed}
        clash = sorted(set(head) & set(summary))
        if clash:
            raise UsageError(f"grid parameter names collide with summary fields: {clash}")
        rows.append({**head, **summary})
    return rows


def _check_main_guard() -> None:
    """Raise UsageError (``GUARD_HINT``) when a LocalCluster would re-run the caller's script:
    when this process is itself a worker importing it (``__mp_main__``), or when the script
    being run (``__main__``'s file) has no ``if __name__ == "__main__":`` guard. Returns None.

    why look at the source: once the workers start, the failure is Dask's ("Nanny failed to
    start", a bootstrapping RuntimeError) and names nothing the caller wrote."""
    import re
    import sys

    main = sys.modules.get("__main__")
    if getattr(main, "__name__", "") == "__mp_main__":
        raise UsageError(f"sweep(scheduler='local') ran while a worker process imported the "
                         f"script: {GUARD_HINT}")
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    if spec_name.endswith(".__main__"):
        return   # why: multiprocessing does not import a package's __main__ again (python -m pkg)
    path = getattr(main, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return   # why: a REPL, a notebook or python -c: nothing is imported again
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError:
        return
    if not re.search(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", source, re.M):
        raise UsageError(f"sweep(scheduler='local') from {path}, which has no "
                         f"`if __name__ == \"__main__\":` guard: {GUARD_HINT}")


def _run_dask(flows, jobs, spec, kwargs, scheduler, n_workers, tell=None) -> list[dict]:
    """Run the jobs on Dask; return their summaries in job order, calling ``tell(done, total)``
    as each finishes."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as e:
        raise UsageError(f"sweep on Dask needs dask.distributed ({e}); {DIST_HINT}") from None
    cluster = None
    own_client = True
    if scheduler == LOCAL:
        if int(n_workers) < 1:
            raise UsageError(f"n_workers must be >= 1; got {n_workers}")
        cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
    elif isinstance(scheduler, Client):
        client, own_client = scheduler, False
    elif isinstance(scheduler, str):
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise UsageError(f"cannot connect to Dask scheduler {scheduler!r}: {e}") from None
    else:
        raise UsageError(f"scheduler must be None or 'serial' (this process), 'local' (a "
                         f"LocalCluster), an address or a Client; got {scheduler!r}")
    try:
        remote = {}
        for seed, orders in flows:
            remote[seed] = client.scatter(orders, broadcast=True, hash=False)
        futures = [client.submit(_run_point, remote[seed], spec, p, kwargs, pure=False)
                   for seed, _, p in jobs]
        if tell is not None:
            from distributed import as_completed
            for done, _ in enumerate(as_completed(futures), 1):
                tell(done, len(futures))
        return client.gather(futures)
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()
