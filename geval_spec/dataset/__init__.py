"""Data: a spec's data file -> cases (:class:`.cases.Dataset`), and which split each case is in."""
