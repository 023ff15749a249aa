"""Hawkes (self-exciting) order flow: arrival times from a Hawkes process, messages from the uniform law.

Arrivals form a univariate Hawkes process with an exponential kernel:

    lambda(t) = baseline + sum over past events t_i of  jump * exp(-decay * (t - t_i))

``baseline`` (mu, events/s) is the background rate; each event raises the intensity by ``jump``
(alpha, events/s), and the excess decays at rate ``decay`` (beta, 1/s). One event triggers on
average alpha/beta direct children: the *branching ratio*, which must be < 1 for a stationary
flow. Then the mean rate is mu / (1 - alpha/beta), and the fraction of events that are
"endogenous" (triggered) is alpha/beta.

Simulation is exact, by Ogata's thinning: between events the intensity only decays, so the
intensity just after the current time bounds it until the next event; propose a gap from
Exp(bound), decay the excess over it, accept with probability lambda(t)/bound. A numba kernel runs
the loop on uniforms drawn in blocks from one seeded numpy Generator, so a seed fixes the bytes.

What arrives at each time is drawn exactly as in ``uniform_flow`` (mix of passive limits, cancels
of live orders and crossing limits, sizes, traders, random-walk mid; same keyword arguments): the
marks are independent of the clock. Several symbols share the one clock (a message's symbol is
uniform), so activity bursts hit all symbols together, like a market-wide news burst.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange.errors import UsageError

from exsim.scenarios.generators.uniform import uniform_flow

__all__ = ["hawkes_flow", "hawkes_times"]

_NS = 1_000_000_000


@njit(cache=True)
def _thinning(expo, unif, out, k, t, excess, baseline, jump, decay):
    """Fill ``out[k:]`` with accepted times; returns (k, t, excess, draws used)."""
    j = 0
    m = expo.shape[0]
    while k < out.shape[0] and j < m:
        bound = baseline + excess
        w = expo[j] / bound
        excess *= np.exp(-decay * w)
        t += w
        if unif[j] * bound <= baseline + excess:
            out[k] = t
            k += 1
            excess += jump
        j += 1
    return k, t, excess, j


def hawkes_times(n: int, seed: int, baseline: float, jump: float, decay: float) -> np.ndarray:
    """Return the first ``n`` event times (float seconds, ascending, from 0) of the Hawkes process.

    Raises UsageError unless baseline > 0, jump >= 0, decay > 0 and jump / decay < 1.
    """
    if baseline <= 0 or jump < 0 or decay <= 0 or jump / decay >= 1:
        raise UsageError(f"need baseline > 0, jump >= 0, decay > 0 and branching ratio jump/decay < 1; "
                         f"got {baseline}, {jump}, {decay}")
    rng = np.random.default_rng(seed)
    out = np.zeros(n)
    k, t, excess = 0, 0.0, 0.0
    while k < n:
        block = max(2 * (n - k), 1024)
        k, t, excess, _ = _thinning(rng.exponential(1.0, block), rng.random(block), out, k, t, excess,
                                    baseline, jump, decay)
    return out


def hawkes_flow(n: int, seed: int, n_symbols: int = 1, *, baseline: float = 1_000.0, jump: float = 600.0,
                decay: float = 1_000.0, start_ts: int = 0, **uniform_params) -> np.ndarray:
    """Return ``n`` ORDER_DTYPE messages whose arrival times follow the Hawkes process above and whose
    content follows ``uniform_flow(**uniform_params)``.

    Raises UsageError for invalid Hawkes parameters (see hawkes_times) or uniform parameters.
    """
    if "mean_gap_ns" in uniform_params:
        raise UsageError("hawkes_flow sets the arrival times itself: do not pass mean_gap_ns")
    flow = uniform_flow(n, seed, n_symbols, **uniform_params)
    # An independent stream for the clock, derived from the same seed.
    clock_seed = np.random.SeedSequence(seed).spawn(1)[0]
    times = hawkes_times(n, clock_seed.generate_state(1)[0], baseline, jump, decay)
    flow["ts"] = start_ts + np.rint(times * _NS).astype(np.int64)
    return flow


hawkes_flow.forwards_to = uniform_flow   # scenario files may pass uniform_flow's parameters
