"""The manager process: start-up checks, then ordered start and stop of every part.

The composition layer: it imports the controllers and the webhooks, and nothing imports it
but the entry point (``omed/__main__.py``) and the tools. Read in this order:

* :mod:`omed.manager.startup`: the start-up checks, in order, and the exact lines they log;
* :mod:`omed.manager.lifecycle`: the runnable groups (servers, election, leader's work) and
  the order they start and stop in;
* :mod:`omed.manager.leader`: what only the leader runs (informers, controllers, events);
* :mod:`omed.manager.controllers`: the list of controller factories;
* :mod:`omed.manager.http`: health probes and metrics; :mod:`omed.manager.webhooks`;
* :mod:`omed.manager.process`: the composition root, :func:`run`.

docs/manager.md describes the whole sequence.

The package itself imports nothing: the webhook server's own process
(:mod:`omed.manager.webhookchild`) imports only the modules it serves with, so a child
started again comes up in a fraction of the manager's import time.
"""
