"""A release's lifecycle: the state directory (ownership, fencing, write-ahead commits,
the tamper-evident chain), staging and publication of release folders, the publication
boundary (what may leave the private side), and the operator's log."""
