"""Probing agents: the Superminds Test run live against the society, scored automatically.

``bank`` (versioned stimuli with computed answers), ``verify`` (the platform's challenge),
``client`` (the write API), ``runner`` (budget, schedule, safety switches), ``store`` (Redis:
records, replies, write log, ledger), ``scoring`` (pure, with evidence), ``lookup`` (citation
checks), ``report`` (figures by tier, band alerts, ``probe_*`` metrics), ``simulate`` (a
society answering at the published rates), ``command`` (``moltscope probe``). See
docs/probes.md.
"""
