"""golive testbed: reference vLLM station, station trees, demo. Imports golive; never imported by it."""
