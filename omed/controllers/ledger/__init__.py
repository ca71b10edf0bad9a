"""The audit ledger ``<isvc>-ome-migration-audit``: one ConfigMap per InferenceService whose
``history.json`` lists what OMENative did to Instances that a user may need to account for
later (migrations, automatic relocations, force deletes).

:mod:`.document` is the pure part (the document, its rows, the retention rule, the
ConfigMap body); :mod:`.writer` is the I/O (a read, then a create or a compare-and-swap
update). Importing this package imports neither.
"""
