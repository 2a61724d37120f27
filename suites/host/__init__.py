"""The host layer (marker `host`): the station itself, read-only through testinfra."""
