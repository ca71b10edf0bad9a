"""The serving controller's shell: its informers and workqueue (:mod:`.controller`), one
pass from the caches to the core and back (:mod:`.reconciler`), and the writes
(:mod:`.executor`). Nothing here decides what a component's Services are.
"""
