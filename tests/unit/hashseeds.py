"""What a function returns in fresh interpreters under several string hash seeds: an output
that hangs on a set's or a dict of sets' order differs between processes (live workers and the
replay run in different ones)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def under_hash_seeds(module: str, function: str, seeds: int) -> list[Any]:
    """``module.function()`` (returning literals: str, numbers, lists, tuples) run once under
    each string hash seed 0 .. ``seeds - 1``; their distinct results."""
    script = (f"import sys; sys.path.insert(0, sys.argv[1]); from {module} import {function} "
              "as f; print(repr(f()))")
    runs = {subprocess.run([sys.executable, "-c", script, str(ROOT)], check=True, text=True,
                           capture_output=True, env={**os.environ, "PYTHONHASHSEED": str(s)},
                           ).stdout for s in range(seeds)}
    return [ast.literal_eval(r) for r in sorted(runs)]
