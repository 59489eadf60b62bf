"""Shared fixtures."""

from pathlib import Path

import pytest

MOLTBOOK_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "moltbook"


@pytest.fixture(scope="session")
def moltbook_data() -> Path:
    """The real Moltbook data next to the checkout (``../shared/data/moltbook``)."""
    return MOLTBOOK_DATA
