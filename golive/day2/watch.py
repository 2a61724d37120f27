"""`golive watch`: after go-live, the light checks, a liveness canary and one small timed probe per station on a
schedule, served as Prometheus metrics; `--rules` prints the alert rules of the profile in force (docs/day-2.md).

The jobs, one module each: which checks a round runs and what their results say (golive.day2.light_checks), what is
read of a station itself (golive.day2.station_readings), the round, its state and the metrics
(golive.day2.watcher), the alert rules (golive.day2.alert_rules); this module is the command.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from golive.core.secrets import scrub
from golive.core.verdict import EXIT_USAGE, counted, printable
from golive.day2.alert_rules import rules_text
from golive.day2.watcher import Watcher
from golive.site import loader

if TYPE_CHECKING:
    import argparse


def parse_listen(text: str) -> tuple[str, int]:
    """`:9109` → all addresses; `127.0.0.1:9109`, `[::1]:9109` (IPv6 in brackets, as in a URL)."""
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen takes [HOST]:PORT, not {text!r}")
    if ":" in host and not text.startswith("["):
        raise ValueError(f"--listen takes [HOST]:PORT, not {text!r}: an IPv6 host goes in brackets, [::1]:9109")
    return host or "0.0.0.0", int(port)


def cmd_watch(ns: argparse.Namespace) -> int:
    if not 0 < ns.every < float("inf"):
        print(f"golive: --every takes seconds above 0, not {ns.every}", file=sys.stderr)
        return EXIT_USAGE
    try:
        address, port = parse_listen(ns.listen)
        loaded = loader.load_inventory(Path(ns.inventory))
    except (ValueError, loader.ConfigError) as exc:
        print(f"golive: {printable(scrub(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    if ns.rules:
        print(rules_text(loaded, ns.every, ns.inventory), end="")
        return 0
    from prometheus_client import CollectorRegistry, generate_latest, start_http_server

    watcher = Watcher(Path(ns.inventory), ns.every)
    registry = CollectorRegistry()
    registry.register(watcher)  # a collector: it has collect()
    if ns.once:
        watcher.one_round()
        watcher.report()
        print(generate_latest(registry).decode(), end="")
        return 0
    where = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        print(f"golive: cannot listen on {where}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"golive watch: serving metrics on http://{where}/metrics, a round every {ns.every:g} s "
        f"({counted(len(loaded.inventory.stations), 'station')})",
        flush=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a service manager's stop: finish the round, exit 0
    try:
        watcher.loop(stop)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0
