"""The two model names (issue 41): which name vLLM's own server is asked by (golive.endpoint.target.VllmName), how the
inventory says it (`vllm_model`, checked at load with file:line), and what a 404 about a model says (never "check the
URL"). The real renaming gateway: tests/endpoint/test_gateway.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from golive.endpoint.errors import from_response
from golive.endpoint.target import EndpointTarget, VllmName
from golive.site.loader import load_inventory

WHERE = "http://vllm:8000/v1/models"

# (name, the clients' name, the inventory's vllm_model, what vLLM's own /v1/models lists, vLLM's name or the problem)
CASES = [
    ("vLLM serves the clients' name", "glm-5.3", None, ["glm-5.3"], "glm-5.3"),
    ("a renaming gateway, learned", "glm-5.3", None, ["glm-5.3-flash"], "glm-5.3-flash"),
    ("a renaming gateway, declared", "glm-5.3", "glm-5.3-flash", ["glm-5.3-flash", "other"], "glm-5.3-flash"),
    ("the clients' name among several", "glm-5.3", None, ["other", "glm-5.3"], "glm-5.3"),
    ("several, none the clients'", "glm-5.3", None, ["a", "b"], "lists `a`, `b`: none is `glm-5.3`"),
    ("declared, not served", "glm-5.3", "glm-5.3-fp8", ["glm-5.3-flash"], "lists `glm-5.3-flash`, not `glm-5.3-fp8`"),
    ("nothing served", "glm-5.3", None, [], "lists no model"),
]


@pytest.mark.parametrize(("name", "clients", "declared", "served", "expected"), CASES, ids=[c[0] for c in CASES])
def test_vllms_name(name, clients, declared, served, expected):
    found = VllmName.among(clients, declared, served, WHERE)
    if expected in served:
        assert found.name == expected and found.problem is None, found
        assert found.renamed is (expected != clients)
    else:
        assert found.name is None and found.problem is not None and expected in found.problem, found
        assert found.problem.startswith(f"vLLM's own {WHERE} lists"), found.problem


def test_the_target_asks_vllm_by_its_own_name():
    assert EndpointTarget("http://gw:4000/v1").vllm_name("glm-5.3") == "glm-5.3"
    assert EndpointTarget("http://gw:4000/v1", vllm_model="glm-5.3-flash").vllm_name("glm-5.3") == "glm-5.3-flash"


def _response(status: int, body: bytes, kind: str = "application/json") -> httpx.Response:
    request = httpx.Request("POST", "http://vllm:8000/tokenize")
    return httpx.Response(status, content=body, headers={"content-type": kind}, request=request)


def test_a_404_about_the_model_names_the_name_not_the_url():
    vllm = b'{"error":{"message":"The model `glm-5.3` does not exist. Valid aliases: golive-reference.",'
    vllm += b'"type":"NotFoundError","param":"model","code":404}}'
    error = from_response(_response(404, vllm), "POST /tokenize did not count tokens")
    assert "serves no model by the name golive sent" in error.hint and "`vllm_model`" in error.hint, error.hint
    assert "check the endpoint URL" not in error.hint
    assert "Valid aliases: golive-reference" in error.found, error.found  # the names that exist, in its answer
    path = from_response(_response(404, b'{"detail":"Not Found"}'), "POST /tokenize did not count tokens")
    assert "nothing is served at this path" in path.hint, path.hint


def _inventory(tmp_path: Path, model: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "profile: reference-cpu\nstations:\n  - name: gw\n    endpoint: http://gw:4000/v1\n"
        f"    vllm_endpoint: http://gb300-a:8000/v1\n    vllm_model: {model!r}\n"
    )
    return path


def test_vllm_model_is_read_with_its_line(tmp_path):
    loaded = load_inventory(_inventory(tmp_path, "glm-5.3-flash"))
    [station] = loaded.inventory.stations
    assert station.vllm_model == "glm-5.3-flash"
    assert loaded.written_at(station, "vllm_model") == f"{tmp_path / 'inventory.yaml'}:6"
    assert loaded.written_at(station, "tls_ca_file") == f"{tmp_path / 'inventory.yaml'}:3"  # not written: the station


def test_a_model_name_no_request_can_carry_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "golive.cli", "run", str(_inventory(tmp_path, "glm-5.3 ")), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 4 and len(lines) == 1, result.stdout[-2000:] + result.stderr
    assert "inventory.yaml:6" in lines[0] and "'glm-5.3 ' has a space at an end" in lines[0], lines
