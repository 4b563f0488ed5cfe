"""The results store: DuckDB (only :mod:`.db` imports it), the run journal and the store's value types."""
