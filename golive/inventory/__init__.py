"""Stations and how to reach them: the inventory loaded, the read-only testinfra connection, host and cluster facts."""
