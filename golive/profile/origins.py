"""Where each value of a profile came from, so that a Recipe line says whose number a station is held to.

A shipped profile transcribes a recipe: its values cite the recipe tags of their own line's comment
(`start_limit_burst: 3   # at most 3 starts per hour … [000]`), else of the nearest section above that has one
(`service:   # systemd owns restarts … [000]`), else the profile's `sources`. A site profile (any profile file golive
does not ship; it usually `extends:` a shipped one) is its own source: file, line and key. The loader
(golive/inventory/loader.py) records this for every profile it loads; `origin` reads it:

    origin(profile, "service.start_limit_burst")  # "[000]": a finding shows "[single-station recipe]"
    origin(profile, "service.restart_sec_s")      # "[site profile /etc/golive/site.yaml:12 service.restart_sec_s]"
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from golive.profile.yamlfile import Located, Path_, model_in

_TAG = re.compile(r"\[(\d{3})\]")  # a recipe tag, as golive.core.verdict cites it


def cite_sources(sources: list[str], name: str) -> str:
    """A profile's `sources` as citations: "[000] single-station recipe" → "[000]"; a source that is not a tag is
    cited whole; no source: "[profile NAME]"."""
    tags = [s[1:].split("]", 1)[0] if s.startswith("[") and "]" in s else s for s in sources]
    return "".join(f"[{tag}]" for tag in tags) or f"[profile {name}]"


@dataclass(frozen=True)
class ValueOrigins:
    """Where the values of one loaded profile were written, `extends:` resolved."""

    where: Mapping[Path_, tuple[str, int]]  # each key's file and line: the file that set it last
    # each key of a shipped file (keyed by that file): the recipe tags it cites; a key of a site file has none
    cites: Mapping[tuple[str, Path_], str] = field(default_factory=dict)


def shipped_cites(located: Located, file: str) -> dict[tuple[str, Path_], str]:
    """The citation of every key of one shipped profile file: the tags of its line's comment, else of the nearest
    section above it with tags, else the file's own `sources`."""
    data = located.data if isinstance(located.data, dict) else {}
    sources = data.get("sources")
    sources = [s for s in sources if isinstance(s, str)] if isinstance(sources, list) else []
    fallback = cite_sources(sources, str(data.get("name") or file))
    cites = {}
    for at in located.where:
        cites[(file, at)] = next(
            (tags for cut in range(len(at), 0, -1) if (tags := _tags(located.comments.get(at[:cut], "")))), fallback
        )
    return cites


class Profile(Protocol):
    """What `origin` reads of a profile (golive.profile.schema.Profile): where its values were written, and its
    sources as cited. A protocol, not the schema's class: the schema imports this module (ValueOrigins)."""

    @property
    def origins(self) -> ValueOrigins | None: ...

    @property
    def cited(self) -> str: ...


def _tags(comment: str) -> str:
    return "".join(f"[{tag}]" for tag in dict.fromkeys(_TAG.findall(comment)))


def origin(profile: Profile, path: str) -> str:
    """Where `profile`'s value at `path` ("service.restart_sec_s") came from, as a Recipe line cites it:

    - "[000]" where a shipped profile sets it: the recipe tags its line cites (a finding shows
      "[single-station recipe]"), else that profile's sources;
    - "[site profile FILE:LINE service.restart_sec_s]" where a site profile sets it (in the file itself or one it
      `extends:` that golive does not ship);
    - "[golive's default: service.restart_sec_s is set in no profile file]" where no file of the chain sets it;
    - the profile's own sources where it was not loaded from files (a profile built in code).

    A path the schema does not have is a KeyError: a check that cites a field by a wrong name fails at once.
    """
    at = tuple(path.split("."))
    _check_field(type(profile), at, path)
    origins = profile.origins
    if origins is None:
        return profile.cited
    if at not in origins.where:
        return f"[golive's default: {path} is set in no profile file]"
    file, line = origins.where[at]
    return origins.cites.get((file, at)) or f"[site profile {file}:{line} {path}]"


def sourced(profile: Profile, parts: Mapping[str, str], join: Callable[[list[str]], str] = ", ".join) -> str:
    """Values of a Recipe line with where each came from: {"service.restart": "Restart=on-failure",
    "service.restart_sec_s": "RestartSec=60 s"} → "Restart=on-failure, RestartSec=60 s [000]" when every value has
    one origin, else each value followed by its own ("Restart=on-failure [000], RestartSec=10 s [site profile …]")."""
    origins = {path: origin(profile, path) for path in parts}
    if len(set(origins.values())) == 1:
        return f"{join(list(parts.values()))} {next(iter(origins.values()))}"
    return join([f"{text} {origins[path]}" for path, text in parts.items()])


def _check_field(model: type[Any], at: Path_, path: str) -> None:
    current = model_in(model)
    for part in at:
        if current is None:  # inside a mapping or a list value (cluster.env, load.prefill.floors_tok_s): any key
            return
        info = current.model_fields.get(part)
        if info is None:
            raise KeyError(f"profile has no field {path!r}")
        current = model_in(info.annotation)
