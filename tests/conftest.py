"""Shared fixtures.

Tests that read the published data in ``../shared/data`` skip with a clear reason when the
folder is absent (a user's machine). CI sets ``JUDGEKIT_REQUIRE_SHARED_DATA=1``, which turns
that skip into a failure so such tests can never be skipped silently there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# litellm would fetch its price map over the network at import otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("JUDGEKIT_SHARED_DATA", ROOT.parent / "shared" / "data"))


def require_shared(relative: str) -> Path:
    """Path to ``../shared/data/<relative>``; skip (or fail under CI's variable) when absent."""
    path = SHARED_DATA / relative
    if not path.exists():
        reason = f"shared data not found at {path} (set JUDGEKIT_SHARED_DATA to its folder)"
        if os.environ.get("JUDGEKIT_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(reason + "; JUDGEKIT_REQUIRE_SHARED_DATA=1 forbids skipping", pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture
def shared_data():
    """Call with a relative path: ``shared_data("tau-bench-airline")``."""
    return require_shared
