"""Reaching a station and reading its facts, read-only: the testinfra connection and its allow-list, a station that
stopped answering, the facts of one host and of a cluster's pair."""
