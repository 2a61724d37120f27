"""Where each value of a profile came from, so that a Recipe line says whose number a station is held to.

A shipped profile transcribes a recipe: its values cite the recipe tags of their own line's comment
(`start_limit_burst: 3   # at most 3 starts per hour … [000]`), else of the nearest section above that has one
(`service:   # systemd owns restarts … [000]`), else the profile's `sources`. A site profile (any profile file golive
does not ship; it usually `extends:` a shipped one) is its own source: file, line and key. The loader
(golive/site/loader.py) records this for every profile it loads; `origin` reads it:

    origin(profile, lambda p: p.service.start_limit_burst)  # "[000]": a finding shows "[single-station recipe]"
    origin(profile, lambda p: p.service.restart_sec_s)  # "[site profile site.yaml:12 service.restart_sec_s]"

A field is named by the attribute access that reads it, not by a string: the lambda's parameter is the profile's own
type (golive.profile.schema.Profile), so mypy checks the path, and a misspelt field is a type error where it is
written (tests/unit/test_types.py). `origin` runs the lambda once against a recorder that notes each attribute and key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

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


P = TypeVar("P", bound=Profile)
S = TypeVar("S")
Field = Callable[[P], object]  # a profile field as the access that reads it: `lambda p: p.service.restart_sec_s`


class _Recorder:
    """Stands in for a profile while a field's lambda runs: each attribute and key read is one part of the path."""

    def __init__(self) -> None:
        self.parts: list[str | int] = []

    def __getattr__(self, name: str) -> _Recorder:
        self.parts.append(name)
        return self

    def __getitem__(self, key: str | int) -> _Recorder:  # inside a mapping value: `p.cluster.env["NCCL_IB_HCA"]`
        self.parts.append(key)
        return self


def section(value: S | None) -> S:
    """A section the profile may leave out (`service`, `numa`), in a field's lambda: `lambda p:
    section(p.service).restart_sec_s`. The lambda runs on a recorder, never on a profile, so the section is there."""
    return cast(S, value)


def field_path(field: Field[Any]) -> Path_:
    """The path a field's lambda reads: `lambda p: p.service.restart_sec_s` → ("service", "restart_sec_s")."""
    recorder = _Recorder()
    if field(recorder) is not recorder or not recorder.parts:
        raise TypeError("a profile field is one access from the profile: `lambda p: p.service.restart_sec_s`")
    return tuple(recorder.parts)


def _tags(comment: str) -> str:
    return "".join(f"[{tag}]" for tag in dict.fromkeys(_TAG.findall(comment)))


def origin(profile: P, field: Field[P]) -> str:
    """Where `profile`'s value at `field` (`lambda p: p.service.restart_sec_s`) came from, as a Recipe line cites it:

    - "[000]" where a shipped profile sets it: the recipe tags its line cites (a finding shows
      "[single-station recipe]"), else that profile's sources;
    - "[site profile FILE:LINE service.restart_sec_s]" where a site profile sets it (in the file itself or one it
      `extends:` that golive does not ship);
    - "[golive's default: service.restart_sec_s is set in no profile file]" where no file of the chain sets it;
    - the profile's own sources where it was not loaded from files (a profile built in code).

    A path the schema does not have is a KeyError (mypy says so first: the lambda reads the schema's type).
    """
    at = field_path(field)
    path = ".".join(map(str, at))
    _check_field(type(profile), at, path)
    origins = profile.origins
    if origins is None:
        return profile.cited
    if at not in origins.where:
        return f"[golive's default: {path} is set in no profile file]"
    file, line = origins.where[at]
    return origins.cites.get((file, at)) or f"[site profile {file}:{line} {path}]"


def sourced(profile: P, *parts: tuple[Field[P], str], join: Callable[[list[str]], str] = ", ".join) -> str:
    """Values of a Recipe line with where each came from, each a field and its text:
    `(lambda p: p.service.restart, "Restart=on-failure"), (lambda p: p.service.restart_sec_s, "RestartSec=60 s")` →
    "Restart=on-failure, RestartSec=60 s [000]" when every value has one origin, else each value followed by its own
    ("Restart=on-failure [000], RestartSec=10 s [site profile …]")."""
    cited = [(text, origin(profile, field)) for field, text in parts]
    if len({where for _, where in cited}) == 1:
        return f"{join([text for text, _ in cited])} {cited[0][1]}"
    return join([f"{text} {where}" for text, where in cited])


def _check_field(model: type[Any], at: Path_, path: str) -> None:
    current = model_in(model)
    for part in at:
        if current is None:  # inside a mapping or a list value (cluster.env, load.prefill.floors_tok_s): any key
            return
        info = current.model_fields.get(part)
        if info is None:
            raise KeyError(f"profile has no field {path!r}")
        current = model_in(info.annotation)
