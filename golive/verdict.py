"""Failure messages as operator instructions: what was found, what the recipe says, what to do."""
from __future__ import annotations

import pytest


def require(ok: bool, *, found: str, recipe: str, fix: str) -> None:
    """Fail the check with a three-part message unless `ok`."""
    if not ok:
        pytest.fail(f"Found: {found}\nRecipe: {recipe}\nDo: {fix}", pytrace=False)

