"""The inventory: a site's stations, listed one by one or one per host of an Ansible group, and the files it names.
Unknown keys are errors; golive.site.loader loads it."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from golive.core.urls import normalise_endpoint
from golive.profile.schema import Layer, Strict, model_name


class StationSettings(Strict):
    """What the inventory says of a station, however it is listed: one by one (`Station`) or one per host of an
    Ansible group (`AnsibleStations`). Declared once, here, for both."""

    role: Literal["a", "b"] = "a"
    endpoint: str | None = None  # in stations_from, `{host}` is each host's name
    api_key_env: str | None = None
    phase: Literal["serving", "pre-start"] = "serving"
    layers: list[Layer] | None = None  # checked here; default: every layer of the profile (others: not applicable)
    profile: str | None = None  # this station's own profile, where it differs from the inventory's
    production: bool = False  # serving users now: the peak-load level runs only with --allow-peak-load
    tls_ca_file: str | None = None  # the CA that signed an https endpoint's certificate (relative to the inventory)
    ssh_config: str | None = None  # this station's ssh_config for ssh:// hosts, else the inventory's (relative to it)
    # `endpoint` is a gateway (LiteLLM, …) in front of vLLM: its name in report lines, its own unauthenticated health
    # probe where golive does not know one (golive.endpoint.gateway.PROBES), and the vLLM server behind it, where
    # golive can reach it: its /health, /metrics, /tokenize and flags (README "Gateways")
    gateway: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    gateway_health: str | None = None
    vllm_endpoint: str | None = None  # in stations_from, `{host}` is each host's name
    # vLLM's own --served-model-name where the gateway renames the model (clients ask for the profile's
    # vllm.served_model_name); unset: the clients' name, or the one model vllm_endpoint's /v1/models lists
    vllm_model: str | None = None

    @field_validator("endpoint", "vllm_endpoint")
    @classmethod
    def _endpoint_url(cls, value: str | None) -> str | None:
        return None if value is None else normalise_endpoint(value)

    _vllm_model = field_validator("vllm_model")(model_name)

    @field_validator("gateway_health")
    @classmethod
    def _probe_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or not value.isprintable() or " " in value):
            raise ValueError(f"gateway_health {value!r} is a path on the gateway, e.g. /health/readiness")
        return value

    @model_validator(mode="after")
    def _behind_a_gateway(self) -> Self:
        if self.vllm_endpoint and not self.endpoint:
            raise ValueError("'vllm_endpoint' names the vLLM behind a gateway: give the gateway as 'endpoint' too")
        return self


class Station(StationSettings):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    host: str | None = None


class AnsibleStations(StationSettings):
    """Stations from an Ansible inventory: one per host of the group, named after the host, reached through
    testinfra's ansible backend; every other key is the stations' (StationSettings)."""

    ansible_inventory: str  # relative to the golive inventory
    group: str


class Inventory(Strict):
    profile: str
    stations: list[Station] = Field(default_factory=list)
    # expanded into stations (golive.site.ansible)
    stations_from: list[AnsibleStations] = Field(default_factory=list)
    output: str | None = None
    waivers: str | None = None  # a waiver file (golive/profile/waivers.py), relative to this inventory
    ssh_config: str | None = None  # an ssh_config for ssh:// hosts (relative to the inventory)
    site_batteries: list[str] = Field(default_factory=list)  # answer batteries (relative to this inventory)

    @model_validator(mode="after")
    def _has_stations(self) -> Self:
        if not self.stations and not self.stations_from:
            raise ValueError("an inventory needs 'stations' or 'stations_from'")
        return self
