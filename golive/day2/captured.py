"""What a capture holds: the values read from a station, each compared with the chosen recipe as it is added.

A value equal to the recipe's is counted, not written; a value that differs is written and goes on the review list
the operator reads before using the profile; a station fact that breaks a rule no profile can keep (golive.profile
.recipe) goes on the cannot-keep list. The readers (golive.day2.host_values, endpoint_values, cluster_values) add
values through a `Collector`; golive.day2.profile_yaml writes the `Capture` out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from golive.core.verdict import EXIT_INCOMPLETE
from golive.profile.schema import Profile


class CaptureError(Exception):
    """The station cannot be captured; str() is the one line the operator sees, `code` the exit status (bad usage,
    or a station that cannot be read: INCOMPLETE)."""

    def __init__(self, message: str, code: int = EXIT_INCOMPLETE):
        super().__init__(message)
        self.code = code


@dataclass
class Value:
    """One captured profile value: where it goes, what the station has, where it was read."""

    section: str
    key: str
    value: object
    source: str
    said: str = ""  # how the review list says it: "serves --tool-call-parser hermes"

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.key}"


@dataclass
class Capture:
    station: str
    recipe: str
    why: str
    values: list[Value] = field(default_factory=list)  # only what differs from the recipe or what it leaves to sites
    review: list[str] = field(default_factory=list)  # values that differ from the recipe, to keep or fix
    cannot_keep: list[str] = field(default_factory=list)  # station facts breaking recipe rules no profile can keep
    matched: int = 0  # captured values equal to the recipe's (not written)
    read_from: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list, repr=False)  # the inventory's: scrubbed from comments and lines


@dataclass
class Observed:
    """What the station showed, before any recipe is compared: flags, endpoint answers, host facts."""

    flags: dict[str, str | bool] = field(default_factory=dict)
    flags_source: str = ""
    models: list[dict] = field(default_factory=list)
    cache_info: dict = field(default_factory=dict)
    endpoint: str | None = None
    gpu_names: list[str] = field(default_factory=list)
    pair: bool = False  # the inventory has two stations, roles a and b


def shown(value: object, key: str = "") -> str:
    """A value as the review list says it: on/off, 0.94, 1,048,576; a port as a port (46381)."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}" if value >= 10000 and not key.endswith("port") else str(value)
    return str(value)


def _equal(want: object, got: object) -> bool:
    if isinstance(want, list):
        want = [w.model_dump(mode="json") if hasattr(w, "model_dump") else w for w in want]
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return float(want) == float(got)
    return want == got


class Collector:
    """Adds captured values to a `Capture`, comparing each with the recipe; the first source read wins."""

    def __init__(self, recipe: Profile, capture: Capture):
        self.recipe, self.capture = recipe, capture
        self.seen: set[str] = set()

    def _first(self, section: str, key: str, value: object) -> bool:
        if value is None or f"{section}.{key}" in self.seen:
            return False  # the first source read wins (the host's flags before the endpoint's answer)
        self.seen.add(f"{section}.{key}")
        return True

    def add(self, section: str, key: str, value: object, source: str, said: str = "") -> None:
        """A value the recipe may pin: written and reviewed where it differs, counted where it is the recipe's."""
        if not self._first(section, key, value):
            return
        model = getattr(self.recipe, section, None)
        want = getattr(model, key, None) if model is not None else None
        self._keep(section, key, value, source, said, want, differs=want is None or not _equal(want, value))

    def ruled(
        self, section: str, key: str, value: object, source: str, said: str, *, differs: bool, does: list[str]
    ) -> None:
        """A value a recipe rule (golive.profile.recipe) judged, as the check judges it: `differs` is the rule's
        answer, `does` what the station's value does where it is not the recipe's."""
        if not self._first(section, key, value):
            return
        model = getattr(self.recipe, section, None)
        self._keep(section, key, value, source, said, getattr(model, key, None), differs=differs, does=does)

    def _keep(
        self,
        section: str,
        key: str,
        value: object,
        source: str,
        said: str,
        want: object,
        *,
        differs: bool,
        does: list[str] | None = None,
    ) -> None:
        if not differs:
            self.capture.matched += 1
            return
        self.capture.values.append(Value(section, key, value, source, said))
        if want is not None:
            how = said or f"has {section}.{key} {shown(value, key)}"
            self.capture.review.append(
                f"this station {how}; the recipe says {shown(want, key)} — keep? ({section}.{key}, read from {source})"
                + "".join(f"; {d}" for d in does or [])
            )
