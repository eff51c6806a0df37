"""Shared test helpers: the steering repo's reference data sits beside the clone as ../shared."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def shared_reference() -> Path:
    path = SHARED / "reference"
    if not path.is_dir():
        pytest.skip("../shared/reference (the paper's published data) is not beside this clone")
    return path
