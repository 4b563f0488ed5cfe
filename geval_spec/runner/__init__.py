"""Runs: validate, run, import, generated steps and dry-run estimates; judgments go into the store."""
