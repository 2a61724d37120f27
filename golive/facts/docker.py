"""Docker: the `docker run` line of a unit, `docker inspect` of a container and of an image."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from golive.facts import FactError
from golive.facts.vllm import served_args_start

# `docker run` options that take no value (docker run --help); every other option takes one.
_RUN_FLAGS = {
    "-d",
    "--detach",
    "-i",
    "--interactive",
    "-t",
    "--tty",
    "--rm",
    "--init",
    "--privileged",
    "--read-only",
    "-P",
    "--publish-all",
    "--no-healthcheck",
    "--oom-kill-disable",
    "--disable-content-trust",
    "-q",
    "--quiet",
    "--sig-proxy",
    "--use-api-socket",
}
_SHORT_FLAG_LETTERS = set("dit")  # combinable: -it, -dit
CLIS = ("docker", "podman", "nerdctl")  # container engines' command-line tools that take docker's verbs


@dataclass
class ImageRef:
    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, ref: str) -> ImageRef:
        name, _, digest = ref.partition("@")
        tag = None
        last = name.rsplit("/", 1)[-1]
        if ":" in last:
            name, tag = name.rsplit(":", 1)
        return cls(repository=name, tag=tag, digest=digest or None)

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


@dataclass
class DockerRun:
    options: list[tuple[str, str | None]]
    image: ImageRef
    args: list[str] = field(default_factory=list)

    def values(self, *names: str) -> list[str | None]:
        return [value for name, value in self.options if name in names]

    @property
    def mounts(self) -> list[tuple[str, str]]:
        """(host path, container path) of each bind mount: `-v SRC:DST[:OPTS]`, `--volume`, `--mount
        type=bind,source=SRC,target=DST` (a named volume's SRC has no `/`: not a host path, left out)."""
        found = []
        for name, value in self.options:
            if value is None:
                continue
            if name in ("-v", "--volume"):
                parts = value.split(":")
                if len(parts) >= 2 and parts[0].startswith("/"):
                    found.append((parts[0], parts[1]))
            elif name == "--mount":
                fields = dict(f.split("=", 1) for f in value.split(",") if "=" in f)
                source = fields.get("source") or fields.get("src") or ""
                target = fields.get("target") or fields.get("destination") or fields.get("dst") or ""
                if fields.get("type", "volume") == "bind" and source.startswith("/") and target:
                    found.append((source, target))
        return found

    @property
    def env(self) -> dict[str, str]:
        """`-e NAME=VALUE` / `--env NAME=VALUE` (a bare NAME passes the caller's: not known here, left out)."""
        found = {}
        for name, value in self.options:
            if name in ("-e", "--env") and value is not None and "=" in value:
                key, _, text = value.partition("=")
                found[key] = text
        return found

    @property
    def removes_on_exit(self) -> bool:
        """`--rm` (the last one given wins; `--rm=false` is off: a boolean flag read with Go's strconv.ParseBool)."""
        given = self.values("--rm")
        return bool(given) and (given[-1] is None or given[-1] in ("1", "t", "T", "true", "TRUE", "True"))


def is_docker_run(argv: list[str] | tuple[str, ...]) -> bool:
    if not argv or argv[0].rsplit("/", 1)[-1] not in CLIS:
        return False
    rest = list(argv[1:])
    return rest[:1] == ["run"] or rest[:2] == ["container", "run"]


def parse_run(argv: list[str] | tuple[str, ...]) -> DockerRun:
    """Split `docker run [OPTIONS] IMAGE [ARGS…]` into options, image and the container's arguments."""
    if not is_docker_run(argv):
        raise FactError(f"not a docker run command: {' '.join(argv)[:120]}")
    rest = list(argv[1:])
    rest = rest[1:] if rest[0] == "run" else rest[2:]
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        if token == "--":
            i += 1
            break
        if not token.startswith("-"):
            break
        if "=" in token and token.startswith("--"):
            name, value = token.split("=", 1)
            options.append((name, value))
        elif token in _RUN_FLAGS:
            options.append((token, None))
        elif re.fullmatch(r"-[a-zA-Z]{2,}", token) and set(token[1:]) <= _SHORT_FLAG_LETTERS:
            options.extend((f"-{letter}", None) for letter in token[1:])
        else:
            if i + 1 >= len(rest):
                raise FactError(f"docker run option {token} has no value")
            options.append((token, rest[i + 1]))
            i += 1
        i += 1
    if i >= len(rest):
        raise FactError("docker run line names no image")
    return DockerRun(options=options, image=ImageRef.parse(rest[i]), args=rest[i + 1 :])


@dataclass
class ContainerFacts:
    id: str
    name: str
    image_id: str
    config_image: str
    args: list[str]  # vLLM's own arguments, as it parses them (the words after its entry in `command`)
    restart_policy: str
    cpuset_mems: str
    running: bool
    status: str
    pid: int
    command: list[str] = field(default_factory=list)  # what the container runs: Path, then Args
    auto_remove: bool = False  # HostConfig.AutoRemove: created with `--rm`, docker deletes it when it exits
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (host Source, container Destination) of binds
    env: dict[str, str] = field(default_factory=dict)  # Config.Env: what the processes in it start with
    started_at: str = ""  # State.StartedAt, RFC 3339 in UTC: when its main process (the engine) started
    hostname: str = ""  # Config.Hostname: the host name its processes see (`--network host`: the station's)

    def host_path(self, path: str) -> str | None:
        """Where a path inside the container is on the station: under the bind mount whose destination holds it
        (the deepest), None where no mount does (the file lives in the container's own layer)."""
        return host_path(path, self.mounts)


def host_path(path: str, mounts: list[tuple[str, str]]) -> str | None:
    """A container path on the host, through the deepest bind mount that holds it; None where none does."""
    best: tuple[str, str] | None = None
    for source, target in mounts:
        target = target.rstrip("/") or "/"
        if (path == target or path.startswith(target.rstrip("/") + "/")) and (
            best is None or len(target) > len(best[1])
        ):
            best = (source, target)
    if best is None:
        return None
    rest = path[len(best[1].rstrip("/")) :]
    return best[0].rstrip("/") + rest if rest else best[0]


def _inspect_objects(text: str, what: str) -> list[dict]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactError(f"`docker {what} inspect` did not print JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise FactError(f"`docker {what} inspect` printed no object")
    return data


def _words(value: object) -> list[str]:
    """A list of words from the Engine API (Args, Config.Cmd); anything else (null, a string) gives none."""
    return [str(w) for w in value] if isinstance(value, list) else []


def parse_container_inspect(text: str) -> ContainerFacts:
    obj = _inspect_objects(text, "container")[0]
    config, state, host = obj.get("Config") or {}, obj.get("State") or {}, obj.get("HostConfig") or {}
    # Path is the entrypoint's first word, Args the rest of it and then what followed the image (Config.Cmd); vLLM's
    # arguments start after its entry (`vllm serve`, `python -m vllm.entrypoints.openai.api_server`, …), else they are
    # what followed the image (an entrypoint that is no vLLM entry, a script that passes them on)
    path = obj.get("Path")
    command = ([path] if isinstance(path, str) and path else []) + _words(obj.get("Args"))
    start = served_args_start(command)
    args = command[start:] if start is not None else _words(config.get("Cmd")) or _words(obj.get("Args"))
    return ContainerFacts(
        id=obj.get("Id", ""),
        name=obj.get("Name", "").lstrip("/"),
        image_id=obj.get("Image", ""),
        config_image=config.get("Image", ""),
        args=args,
        command=command,
        restart_policy=(host.get("RestartPolicy") or {}).get("Name") or "no",
        cpuset_mems=host.get("CpusetMems") or "",
        running=bool(state.get("Running")),
        status=state.get("Status", ""),
        pid=int(state.get("Pid") or 0),
        auto_remove=host.get("AutoRemove") is True,
        mounts=[
            (str(m.get("Source", "")), str(m.get("Destination", "")))
            for m in obj.get("Mounts") or []
            if isinstance(m, dict) and m.get("Type", "bind") == "bind"
        ],
        env=dict(e.split("=", 1) for e in _words(config.get("Env")) if "=" in e),
        started_at=str(state.get("StartedAt") or ""),
        hostname=str(config.get("Hostname") or ""),
    )


@dataclass
class ImageFacts:
    id: str
    repo_digests: list[str]
    repo_tags: list[str]
    architecture: str

    def digests(self) -> set[str]:
        return {digest for d in self.repo_digests if (digest := ImageRef.parse(d).digest)}


def parse_image_inspect(text: str) -> ImageFacts:
    obj = _inspect_objects(text, "image")[0]
    return ImageFacts(
        id=obj.get("Id", ""),
        repo_digests=list(obj.get("RepoDigests") or []),
        repo_tags=list(obj.get("RepoTags") or []),
        architecture=obj.get("Architecture", ""),
    )
