"""What golive may send to a station: read-only commands only, checked before each one leaves (an allow-list).

Every command a station's connection sends passes `allowed` first (golive.station.connection.Connection.send);
anything not on the list is refused before it reaches the station. GOLIVE_COMMAND_LOG=PATH appends every command
sent, one a line, for an operator's audit.
"""

from __future__ import annotations

import re
import shlex

# The first words of each command golive (or testinfra's file/exists modules for it) sends; each only reads.
ALLOWED = (
    ("cat",),
    ("ls",),
    ("find",),
    ("stat",),
    ("df",),
    ("test",),
    ("command", "-v"),
    ("readlink",),
    ("realpath",),
    ("systemctl", "show"),
    ("systemctl", "is-enabled"),
    ("systemctl", "is-active"),
    ("systemctl", "cat"),
    ("docker", "inspect"),
    ("docker", "image", "inspect"),
    ("docker", "ps"),
    ("nvidia-smi", "-q"),
    ("nvidia-smi", "--query-gpu"),
    ("nvidia-smi", "--query-compute-apps"),
    ("uname",),
    ("id",),
    ("lsb_release", "-a"),
    ("numactl", "--hardware"),
    ("ip",),
    ("sysctl", "-n"),
    ("lspci",),
    ("ibv_devinfo",),
    ("ibstat",),
    ("ibdev2netdev",),
    ("rdma", "link", "show"),
    ("ethtool",),
    ("ping",),
    ("ldconfig", "-p"),
    ("nproc",),
    ("hostname",),
    ("getent",),
    ("free",),
    ("lscpu",),
    ("sha256sum",),
    ("echo",),
    ("journalctl",),  # the unit's own lines (why systemd stopped it); the options that write are refused below
)
# testinfra's own probe of the station's encoding (testinfra/backend/base.py get_encoding), sent the first time an
# answer is not ASCII (a journal with vLLM's progress bars, a UTF-8 Description=): it only prints. Exactly these.
ENCODING_PROBES = frozenset(
    f"{python} -c 'import locale;print(locale.getpreferredencoding())'" for python in ("python3", "python")
)
# Shell syntax that could write or hide a command from the list; `2>/dev/null` is the one redirect allowed.
_HIDDEN = re.compile(r"`|\$\(|\n")
_OPERATORS = {"|", "||"}  # fine when every stage is on the list (`cat f || echo -1`); ; && > >> & are not
_IP_WRITES = {
    "set",
    "add",
    "del",
    "delete",
    "change",
    "replace",
    "flush",
    "append",
    "prepend",
    "save",
    "restore",
    "exec",
    "attach",
    "detach",
    "up",
    "down",
}
_ETHTOOL_WRITES = {
    "-s",
    "-K",
    "-G",
    "-A",
    "-C",
    "-L",
    "-E",
    "-f",
    "-p",
    "-r",
    "-X",
    "-N",
    "-U",
    "-W",
    "--flash",
    "--identify",
    "--negotiate",
    "--reset",
}
_FIND_WRITES = {"-delete", "-fprint", "-fprint0", "-fprintf", "-fls", "-ok", "-okdir", "-execdir"}


def allowed(command: str) -> bool:
    """True when every stage of `command` starts with an allowed prefix and nothing in it can write."""
    if command in ENCODING_PROBES:
        return True
    text = command.replace("2>/dev/null", "")
    if _HIDDEN.search(text):
        return False
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return False
    stages: list[list[str]] = []
    stage: list[str] = []
    for token in tokens:
        if token and set(token) <= set("|&;<>()"):
            if token not in _OPERATORS:
                return False
            stages.append(stage)
            stage = []
        else:
            stage.append(token)
    stages.append(stage)
    return all(_stage_allowed(words) for words in stages)


def _stage_allowed(words: list[str]) -> bool:
    if words[:1] == ["timeout"]:  # `timeout [-k N] [-s SIG] DURATION CMD…` bounds CMD: check CMD
        rest = words[1:]
        while rest[:1] and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("-k", "-s", "--kill-after", "--signal") else rest[1:]
        return len(rest) > 1 and rest[0][:1].isdigit() and _stage_allowed(rest[1:])
    keys = [w.split("=", 1)[0] if w.startswith("--") else w for w in words]
    if not keys or not any(tuple(keys[: len(prefix)]) == prefix for prefix in ALLOWED):
        return False
    if keys[0] == "ip":  # `ip` reads unless told to change something
        return not _IP_WRITES & set(keys) and "netns" not in keys
    if keys[0] == "ethtool":  # -i, -k, -S, -m … read; these change the NIC
        return not _ETHTOOL_WRITES & set(keys) and not any(k.startswith(("--set", "--change")) for k in keys)
    if keys[0] == "journalctl":  # reads, unless told to vacuum, rotate, flush, sync, set up keys or the catalog
        return not any(
            k.startswith(("--vacuum", "--rotate", "--flush", "--sync", "--relinquish", "--setup-keys", "--update"))
            for k in keys
        )
    if keys[0] == "find":
        if _FIND_WRITES & set(keys):
            return False
        return all(keys[i + 1 : i + 2] in (["stat"], ["sha256sum"]) for i, key in enumerate(keys) if key == "-exec")
    return True
