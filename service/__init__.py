"""Processes and I/O of moltscope: config, CLI, API, sources, webhooks, stores."""
