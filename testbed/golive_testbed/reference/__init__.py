"""The reference station: real vLLM on CPU serving a tiny GLM-dialect model whose answers an oracle scripts."""

from golive_testbed.reference.launcher import (
    VARIANTS,
    ReferenceStation,
    ReferenceStationError,
    Variant,
    down,
    up,
)
from golive_testbed.reference.model import SERVED_NAME, build_model_dir

__all__ = [
    "SERVED_NAME",
    "VARIANTS",
    "ReferenceStation",
    "ReferenceStationError",
    "Variant",
    "build_model_dir",
    "down",
    "up",
]
