"""Streaming side of moltscope: canonical events, incremental state engines, Faust app."""
