"""Cluster-layer self-tests: two test stations in network namespaces (tests/cluster/netns.py)."""

import contextlib

import pytest
from e2e import skip_e2e

from . import netns


@pytest.fixture(scope="session")
def netns_available() -> None:
    reason = netns.available()
    if reason:
        skip_e2e(reason)


@pytest.fixture(scope="session")
def station_pairs(netns_available):
    """station_pairs("mtu-b-1500") → a StationPair, created once per session and variant, removed at the end."""
    with contextlib.ExitStack() as stack:
        pairs: dict[str, netns.StationPair] = {}

        def get(variant: str = "healthy") -> netns.StationPair:
            if variant not in pairs:
                pairs[variant] = stack.enter_context(netns.station_pair(variant))
            return pairs[variant]

        yield get


@pytest.fixture(scope="session")
def healthy_pair(station_pairs) -> netns.StationPair:
    return station_pairs("healthy")
