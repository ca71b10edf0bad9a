"""The InferenceReplica controller's imperative shell: I/O around the pure core.

It reads the informer caches, hands the core one value per pass, and carries out the
decision it gets back: API writes in the one safe order (:mod:`.executor`), expectations of
writes the caches haven't shown (:mod:`.expectations`), fresh reads before destructive steps
(:mod:`.ownership`), and the events, log lines and metrics that tell what the core decided.
Nothing here decides what to do with an InferenceReplica.
"""
