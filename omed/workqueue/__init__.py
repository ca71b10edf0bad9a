"""Work queues and worker pools for omed's controllers (client-go/controller-runtime semantics).

The layers, each adding one thing to the one below:

* :class:`Queue` (``queue.py``): dedup FIFO with a processing set; a key is held by at
  most one worker, and a key added while held is processed once more after ``done``;
* :class:`DelayingQueue` (``delaying.py``): ``add_after`` on an injected clock;
* :class:`RateLimitingQueue` (``ratelimiting_queue.py``): ``add_rate_limited``, ``forget``,
  ``num_requeues`` over a limiter from ``ratelimit.py``;
* :class:`Controller` (``controller.py``): N workers turning reconcile outcomes into queue
  calls and ``controller_runtime_*`` metrics.

``metrics.py`` exports the ``workqueue_*`` and ``controller_runtime_*`` families on
:data:`omed.metrics.REGISTRY` under controller-runtime's names and labels.
"""

from omed.workqueue.controller import Controller, Reconciler, Result, TerminalError, is_panic
from omed.workqueue.delaying import DelayingQueue
from omed.workqueue.metrics import ControllerMetrics, QueueMetrics
from omed.workqueue.queue import Queue
from omed.workqueue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from omed.workqueue.ratelimiting_queue import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "Controller",
    "ControllerMetrics",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "Queue",
    "QueueMetrics",
    "RateLimiter",
    "RateLimitingQueue",
    "Reconciler",
    "Result",
    "TerminalError",
    "default_controller_rate_limiter",
    "is_panic",
]
