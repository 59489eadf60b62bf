"""Every compiled kernel is compiled ahead: a module that defines numba kernels is listed in
``streams.kernels.KERNEL_MODULES`` (``warm()`` imports them in one process before workers start,
so no two processes compile the same kernel at once), and every kernel other code calls is
compiled at import by its explicit signature, none lazily on a first call (a ``_helper`` is
compiled into the kernels that call it)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from numba.core.registry import CPUDispatcher

from streams.kernels import KERNEL_MODULES, warm

ROOT = Path(__file__).resolve().parents[2]


def _defines_kernels(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(d, ast.Call) and ast.unparse(d.func).endswith("njit")
               for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
               for d in node.decorator_list)


def test_every_kernel_is_compiled_ahead() -> None:
    found = {".".join(path.relative_to(ROOT).with_suffix("").parts)
             for package in ("streams", "detectors", "service")
             for path in sorted((ROOT / package).rglob("*.py")) if _defines_kernels(path)}
    assert "streams.textscan" in found  # the scan finds kernels
    assert found == set(KERNEL_MODULES)
    assert warm() == len(KERNEL_MODULES)
    for name in KERNEL_MODULES:
        kernels = {k: v for k, v in vars(importlib.import_module(name)).items()
                   if isinstance(v, CPUDispatcher)}
        assert kernels, name
        lazy = [k for k, v in kernels.items() if not v.signatures and not k.startswith("_")]
        assert not lazy, f"{name}: compiled lazily on a first call: {lazy}"
