"""What the controllers' wiring classes share: a workqueue :class:`~omed.workqueue.Controller`
fed by event handlers on shared informers, run, shut down and detached the same way.

Invariant: :meth:`WiredController.close` removes exactly the handlers the controller added
through :meth:`WiredController.watch`; the informers are shared, so another controller's
handlers on them stay.
"""

from __future__ import annotations

from collections.abc import Callable

from omed.clock import Clock
from omed.controllers.pacing import BUSY_WINDOW
from omed.informers import HandlerRegistration, Handlers, SharedInformer
from omed.informers.transform import Obj
from omed.workqueue import Controller, Reconciler
from omed.workqueue.ratelimit import RateLimiter


def each_event(handle: Callable[[Obj], None]) -> Handlers:
    """``handle`` called with the object of every add, update (the new one) and delete."""
    return Handlers(on_add=handle, on_update=lambda _old, new: handle(new), on_delete=handle)


def worker_pool(
    name: str,
    reconciler: Reconciler,
    *,
    workers: int,
    clock: Clock,
    rate_limiter: RateLimiter | None = None,
) -> Controller:
    """``workers`` running ``reconciler``, busy (:meth:`Controller.busy`) over the status
    pacing's :data:`~omed.controllers.pacing.BUSY_WINDOW`, so what the reconciler's pacing
    calls busy is what the queue saw; ``rate_limiter`` paces a key's retries (the queue's
    default when None)."""
    return Controller(
        name=name,
        reconciler=reconciler,
        workers=workers,
        clock=clock,
        rate_limiter=rate_limiter,
        busy_window=BUSY_WINDOW,
    )


class WiredController:
    """Base of a controller's wiring: it builds ``controller`` and then adds its handlers
    with :meth:`watch`; the manager drives it by :meth:`run`, :meth:`shutdown` and
    :meth:`close` (:class:`~omed.manager.controllers.ManagedController`)."""

    controller: Controller

    def __init__(self) -> None:
        self._registrations: list[tuple[SharedInformer, HandlerRegistration]] = []

    def watch(self, informer: SharedInformer, handlers: Handlers) -> None:
        """Add ``handlers`` to ``informer`` until :meth:`close`."""
        self._registrations.append((informer, informer.add_event_handler(handlers)))

    async def run(self) -> None:
        """Run the workers until :meth:`shutdown` (the manager has started the informers and
        waited for their caches)."""
        await self.controller.run()

    async def shutdown(self, *, drain: bool = True) -> None:
        await self.controller.shutdown(drain=drain)

    def close(self) -> None:
        """Detach the event handlers from the (shared) informers."""
        for informer, registration in self._registrations:
            informer.remove_event_handler(registration)
