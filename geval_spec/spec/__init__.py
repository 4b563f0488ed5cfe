"""Specs: REF -> source text -> YAML with positions -> typed spec -> checks -> fingerprints (:class:`.load.ParsedSpec`)."""
