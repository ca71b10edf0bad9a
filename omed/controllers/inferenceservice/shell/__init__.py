"""The InferenceService controller's I/O: cache reads into models, the writes the core
decided, and the reports of them. Nothing here decides (:mod:`..core` does)."""
