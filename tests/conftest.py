"""Shared test helpers: the steering repo's reference data sits beside the clone as ../shared."""
import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def shared_reference() -> Path:
    path = SHARED / "reference"
    if not path.is_dir():
        pytest.skip("../shared/reference (the paper's published data) is not beside this clone")
    return path

# CI explores the same examples on every run (a failure there is reproducible from the log);
# local runs keep exploring new ones.
if os.environ.get("CI"):
    settings.register_profile("ci", derandomize=True, database=None)
    settings.load_profile("ci")
