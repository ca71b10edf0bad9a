"""The InferenceReplica controller's pure core: every decision of a pass, and nothing else.

Models in (:mod:`.model`, built from cached JSON by :mod:`.observe`), a decision out
(:mod:`.actions`, :mod:`.decide`). No module here does I/O or reads a clock: the time of a
pass and the per-key memory are inputs, and the memory comes back updated as a value. An
import-linter contract keeps aiohttp, kubernetes_asyncio, omed.kube, omed.informers,
omed.workqueue, omed.events and the shell out of it, and asyncio, logging and time out of its
own modules.

One module per operation kind in :mod:`.ops` (create and delete, update, restart), the steps
they share in :mod:`.steps`: a new kind joins as one more module there.
"""
