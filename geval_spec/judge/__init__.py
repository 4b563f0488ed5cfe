"""The judge: prompts, requests, clients, and scoring completions into judgments (value types in :mod:`.types`)."""
