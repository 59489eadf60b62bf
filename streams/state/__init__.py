"""Incremental state engines: plain typed classes, no I/O, no Faust.

Each engine has small verbs: ``update(...)`` to absorb an event, ``expire(now)`` to drop
what has left its window, ``snapshot()`` to report. The Faust agents, the offline replay
and the benchmarks all drive these same classes.
"""
