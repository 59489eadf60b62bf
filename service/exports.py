"""Writes a replay report's per-day tables (:mod:`streams.export`) as Parquet and CSV files.

``moltscope replay --report r.json`` calls :func:`write_day_tables` with ``r.days/``: one
``<table>.parquet`` and one ``<table>.csv`` a table (an empty table still gets both files, with
no columns). Columns keep the report's types: integers, floats, strings, booleans; missing
values are nulls (empty CSV fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from streams.export import Row, day_tables


def arrow_table(rows: list[Row]) -> pa.Table:
    """The rows as one Arrow table (columns in the first row's order, then any later ones)."""
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    return pa.table({c: pa.array([r.get(c) for r in rows]) for c in columns})


def days_dir(report_path: Path) -> Path:
    """Where the tables of the report at ``report_path`` go: ``r.json`` -> ``r.days``."""
    return report_path.with_suffix(".days")


def write_day_tables(report: Mapping[str, Any], directory: Path) -> dict[str, int]:
    """Write every table of ``report`` under ``directory`` (created); rows written a table."""
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, rows in day_tables(report).items():
        table = arrow_table(rows)
        pq.write_table(table, directory / f"{name}.parquet")
        pa_csv.write_csv(table, directory / f"{name}.csv")
        written[name] = len(rows)
    return written
