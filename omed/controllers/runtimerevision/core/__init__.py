"""What the runtime revision controller decides, as pure functions of what it observed and
the time it was given: which snapshots to write, which revisions to mark, unmark and delete,
and when to look again."""
