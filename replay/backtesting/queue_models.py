"""Queue models of an L2 backtest: where a strategy order stands when its level shrinks without a
trade. Small objects behind one interface, like the latency models (``latency``).

A model is a ``QueueModel``: ``name`` (what ``backtest(queue_model=...)`` accepts), ``code``
(what the ``l2queue`` kernels carry in their state) and ``describe()`` (the result's meta).
``ahead_after_decrease`` is the one place a kernel branches on the code. Models:

- ``ConservativeQueue`` ("conservative", the default): the cancelled quantity was behind the
  order, so ``ahead`` does not move (``l2queue`` then caps it at the new level total plus the
  strategy's own orders ahead).
- ``ProportionalQueue`` ("proportional"): cancellations are spread evenly over the queue, so
  ``ahead`` falls by ``decrease x ahead / old total`` (rounded down), then the same cap.

Invariant: ``ahead_after_decrease`` never raises ``ahead`` and depends only on its arguments.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from exsim.exchange.errors import UsageError

__all__ = ["QueueModel", "ConservativeQueue", "ProportionalQueue", "QUEUE_MODELS",
           "as_queue_model", "ahead_after_decrease"]


class QueueModel:
    """What a queue model is to the kernels: its ``code``; ``describe()`` names it."""

    name = ""
    code = -1

    def describe(self) -> dict:
        """Return {"queue_model": name}."""
        return {"queue_model": self.name}


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
