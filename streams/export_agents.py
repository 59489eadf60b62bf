"""The replay report's per-agent table: one row an agent, the content plane's figures (drift,
Net Progress, impact) and the action plane's (targeting, reciprocity, votes received,
cadence) side by side, columns named ``<engine>_<figure>``.

Scalars stay as they are (None: the figure is not defined for the agent); lists and mappings
(e.g. the action plane's top targets) become JSON text, so the table is flat for Parquet and
CSV. ``moltscope replay --report r.json`` writes it as ``r.agents.parquet`` and
``r.agents.csv`` (:func:`agent_rows` from :meth:`streams.replay.ReplayResult.agent_profiles`).

>>> rows = agent_rows({"ann": {"drift": {"drift": 0.25, "posts": 12},
...                            "action": {"gap_cv": None, "top_targets": [["bob", 2]]}}})
>>> list(rows[0])
['agent', 'drift_drift', 'drift_posts', 'action_gap_cv', 'action_top_targets']
>>> rows[0]["drift_drift"], rows[0]["action_top_targets"]
(0.25, '[["bob", 2]]')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from streams.agent_stage import PLANES

Row = dict[str, Any]


def agent_rows(profiles: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """One flat row an agent (by name), content-plane engines first, then the action plane."""
    def plane_order(engine: str) -> tuple[int, str]:
        return (PLANES.get(engine) == "action", engine)

    rows = []
    for agent in sorted(profiles):
        row: Row = {"agent": agent}
        for engine in sorted(profiles[agent], key=plane_order):
            for figure, value in profiles[agent][engine].items():
                flat = value if value is None or isinstance(value, bool | int | float | str) \
                    else json.dumps(value, default=str)
                row[f"{engine}_{figure}"] = flat
        rows.append(row)
    return rows
