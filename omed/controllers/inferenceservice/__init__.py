"""The InferenceService controller: projects one InferenceReplica per OMENative component
and aggregates their status into the InferenceService's."""
