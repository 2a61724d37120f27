"""Endpoint URLs are normalised at inventory load; a URL golive cannot use is one line with file:line."""

import pytest

from golive.site import loader


def _inventory(tmp_path, endpoint: str):
    path = tmp_path / "inventory.yaml"
    path.write_text(f"profile: glm-5.3-flash-gb300\nstations:\n  - name: a\n    endpoint: '{endpoint}'\n")
    return path


@pytest.mark.parametrize(
    "written",
    [
        "http://gb300-a:8888",
        "http://gb300-a:8888/",
        "http://gb300-a:8888/v1",
        "http://gb300-a:8888/v1/",
        " http://gb300-a:8888/v1 ",
    ],
)
def test_endpoint_url_with_or_without_v1_is_one_form(tmp_path, written):
    loaded = loader.load_inventory(_inventory(tmp_path, written))
    assert loaded.inventory.stations[0].endpoint == "http://gb300-a:8888/v1"


def test_endpoint_url_behind_a_path_prefix_keeps_it(tmp_path):
    loaded = loader.load_inventory(_inventory(tmp_path, "https://proxy.example/glm/"))
    assert loaded.inventory.stations[0].endpoint == "https://proxy.example/glm/v1"


@pytest.mark.parametrize(
    "written,fragment",
    [
        ("gb300-a:8888", "needs http:// or https://"),
        ("ftp://gb300-a/v1", "needs http:// or https://"),
        ("http://gb300-a:88x8/v1", "port that is not a number"),
        ("http://gb300-a:8888/v1?key=1", "must not carry a query"),
    ],
)
def test_unusable_endpoint_url_is_one_line_with_file_and_line(tmp_path, written, fragment):
    path = _inventory(tmp_path, written)
    with pytest.raises(loader.ConfigError) as caught:
        loader.load_inventory(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: 'stations.0.endpoint': ") and fragment in message, message
    assert "\n" not in message and "Value error" not in message
