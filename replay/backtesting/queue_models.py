"""Fill models of an L2 backtest: where a strategy order stands when its level shrinks without a
trade, and which market moves fill it. Small objects behind one interface, like the latency
models (``latency``).

A model is a ``QueueModel``: ``name`` (what ``backtest(queue_model=...)`` accepts), ``code``
(what the ``l2queue`` kernels carry in their state) and ``describe()`` (the result's meta).
``ahead_after_decrease`` is the one place a kernel branches on the code. Models:

- ``ConservativeQueue`` ("conservative", the default): the cancelled quantity was behind the
  order, so ``ahead`` does not move (``l2queue`` then caps it at the new level total plus the
  strategy's own orders ahead).
- ``ProportionalQueue`` ("proportional"): cancellations are spread evenly over the queue, so
  ``ahead`` falls by ``cancelled x ahead / old total`` (rounded down), then the same cap.

A decrease counts as cancellation only for the part the trades at that price since the level's
last row do not explain (those trades already moved ``ahead``): a trade and the diff that
reports it are counted once, by either model.

Options of both (keyword arguments; the kernels read them as bits of ``fills``):
- ``cross_fills=True``: the other side's book moving onto or through a resting order without a
  trade print (an ask row at or below our bid) fills it by the quantity that row added there, at
  the order's price, as a maker (the trade id is from the strategy's range). Default False: only
  trades fill.
- ``whole_on_trade_through=True``: a trade through the order's price fills all of it
  (hftbacktest's behaviour); default False: ``min(leaves, trade qty)``.

Invariant: ``ahead_after_decrease`` never raises ``ahead`` and depends only on its arguments.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange.errors import UsageError

__all__ = ["QueueModel", "ConservativeQueue", "ProportionalQueue", "QUEUE_MODELS",
           "as_queue_model", "ahead_after_decrease", "CROSS_FILLS", "WHOLE_ON_THROUGH"]

CROSS_FILLS = 1          # bit of ``QueueModel.fills``: the book crossing an order fills it
WHOLE_ON_THROUGH = 2     # bit: a trade through an order's price fills all of it


class QueueModel:
    """What a queue model is to the kernels: its ``code`` and ``fills`` (option bits);
    ``describe()`` names it. Raises UsageError for an option that is not a bool."""

    name = ""
    code = -1

    def __init__(self, *, cross_fills: bool = False, whole_on_trade_through: bool = False):
        for k, v in (("cross_fills", cross_fills),
                     ("whole_on_trade_through", whole_on_trade_through)):
            if not isinstance(v, (bool, np.bool_)):
                raise UsageError(f"{k} must be True or False; got {v!r}")
        self.cross_fills = bool(cross_fills)
        self.whole_on_trade_through = bool(whole_on_trade_through)
        self.fills = (CROSS_FILLS if cross_fills else 0) | \
            (WHOLE_ON_THROUGH if whole_on_trade_through else 0)

    def describe(self) -> dict:
        """Return {"queue_model": name}, plus each option that is on (True)."""
        out = {"queue_model": self.name}
        if self.cross_fills:
            out["cross_fills"] = True
        if self.whole_on_trade_through:
            out["whole_on_trade_through"] = True
        return out

    def __repr__(self) -> str:
        opts = "".join(f"{k}=True, " for k in ("cross_fills", "whole_on_trade_through")
                       if getattr(self, k))
        return f"{type(self).__name__}({opts[:-2]})"


class ConservativeQueue(QueueModel):
    """A level decrease without a trade was behind the strategy's order: ``ahead`` is only capped
    at the new level total plus the strategy's own orders ahead."""

    name = "conservative"
    code = 0


class ProportionalQueue(QueueModel):
    """A level decrease without a trade was spread evenly over the queue: ``ahead`` falls by
    ``decrease x ahead / old total`` (rounded down), then the same cap."""

    name = "proportional"
    code = 1


QUEUE_MODELS = {m.name: m for m in (ConservativeQueue, ProportionalQueue)}
_PROPORTIONAL = ProportionalQueue.code


def as_queue_model(model) -> QueueModel:
    """Return the queue model object for a name in QUEUE_MODELS or a model object (returned as
    is). Raises UsageError for anything else."""
    if isinstance(model, QueueModel) and model.name in QUEUE_MODELS:
        return model
    if isinstance(model, str) and model in QUEUE_MODELS:
        return QUEUE_MODELS[model]()
    raise UsageError(f"queue_model must be one of {sorted(QUEUE_MODELS)}; got {model!r}")


@njit(cache=True)
def ahead_after_decrease(code, ahead, dec, old):
    """Return the ``ahead`` of a strategy order under the model of ``code`` after its level fell
    by ``dec`` from ``old`` without a trade (before ``l2queue`` caps it)."""
    if code == _PROPORTIONAL and old > 0:
        return ahead - np.int64(np.floor(float(dec) * (float(ahead) / float(old))))
    return ahead
