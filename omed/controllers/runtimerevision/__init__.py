"""The runtime revision controller: one ControllerRevision per version of each runtime's spec,
in the manager's namespace, and their garbage collection.

``core`` decides (pure, the clock an input); ``shell`` reads the caches and writes. Importing
this package imports neither.
"""
