"""golive.core.secrets, the one scrubber every output uses: URL and host-spec passwords (IPv6 brackets and ports
kept), secret query values, Authorization headers and bearer tokens hidden by shape; every secret golive knows
replaced in text and nested data. Random specs: tests/unit/test_fuzz.py."""

from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from golive.core.secrets import (
    MASK,
    REDACTED,
    hide_password,
    known_forms,
    redacted_flags,
    scrub,
    scrub_data,
    secret_name,
    secrets_in,
    station_secrets,
)
from golive.endpoint.target import api_key_of


@pytest.mark.parametrize(
    "spec, shown",
    [
        # the case: IPv6 brackets and the port stay (the old capture scrubber printed ssh://u@fe80::1:2222)
        ("ssh://u:pw@[fe80::1]:2222", "ssh://u:***@[fe80::1]:2222"),
        ("ssh://u:pw@[2001:db8::7]", "ssh://u:***@[2001:db8::7]"),
        ("ssh://u@[fe80::1]:2222", "ssh://u@[fe80::1]:2222"),  # a user without a password: unchanged
        ("ssh://admin:hunter2@127.0.0.1:1", "ssh://admin:***@127.0.0.1:1"),  # results.json's form
        ("ssh://ops:pw@host", "ssh://ops:***@host"),
        ("ssh://ops@host", "ssh://ops@host"),
        ("ssh://host", "ssh://host"),
        ("ssh://:pw@host", "ssh://:***@host"),  # no user
        ("ssh://u:@host", "ssh://u:***@host"),  # an empty password is still a password field
        ("ssh://u:p@ss@host:22", "ssh://u:***@host:22"),  # a raw @ in the password: up to the last @, as urllib splits
        (
            "paramiko://root:p%40ss@10.0.0.1:22?timeout=5",
            "paramiko://root:***@10.0.0.1:22?timeout=5",
        ),  # percent-encoded
        (
            "ansible://web1?ansible_inventory=/etc/hosts.ini&ansible_password=x",
            "ansible://web1?ansible_inventory=/etc/hosts.ini&ansible_password=***",
        ),
        ("http://u:pw@gb300-a:8888/v1", "http://u:***@gb300-a:8888/v1"),
        ("https://gb300-a/v1?api_key=sk-1&model=m", "https://gb300-a/v1?api_key=***&model=m"),
        (
            "https://h/v1?token=t&secret=s&password=p&max_tokens=8",
            "https://h/v1?token=***&secret=***&password=***&max_tokens=8",
        ),
        ("https://h/x?X-Amz-Signature=abc#access_token=t", "https://h/x?X-Amz-Signature=***#access_token=***"),
        ("http://h:8888/v1?k=sk-very-secret", "http://h:8888/v1?k=sk-very-secret"),  # k: no secret name (known: scrub)
        ("chroot:///t", "chroot:///t"),
        ("local://", "local://"),
        ("docker://vllm", "docker://vllm"),
        ("gb300-a", "gb300-a"),
        ("", ""),
        (None, None),
    ],
)
def test_hide_password(spec, shown):
    assert hide_password(spec) == shown


@pytest.mark.parametrize(
    "spec", ["ssh://u:pw@[fe80::1]:2222", "paramiko://root:p%40ss@10.0.0.1:22?timeout=5", "http://u:pw@gb300-a:8888/v1"]
)
def test_a_hidden_spec_still_parses_to_its_host_port_and_user(spec):
    before, after = urlsplit(spec), urlsplit(hide_password(spec) or "")
    assert (after.hostname, after.port, after.username, after.password) == (
        before.hostname,
        before.port,
        before.username,
        MASK,
    )


@pytest.mark.parametrize(
    "text, shown",
    [
        ("cannot reach ssh://admin:hunter2@[::1]:22: timed out", "cannot reach ssh://admin:***@[::1]:22: timed out"),
        ("'ssh://u:pw@h' and 'ssh://v@h'", "'ssh://u:***@h' and 'ssh://v@h'"),
        ("GET http://h:1/v1/models?api_key=sk-abc&n=1 failed", "GET http://h:1/v1/models?api_key=***&n=1 failed"),
        ("headers {'Authorization': 'Bearer sk-123456'}", "headers {'Authorization': 'Bearer ***'}"),
        ("Authorization: Basic dXNlcjpwdw==", "Authorization: Basic ***"),
        ("x-api-key: abc123", "x-api-key: ***"),
        ("sent Bearer sk-xyz-12345 to /v1", "sent Bearer *** to /v1"),
        # not secrets: left as they are
        ("the endpoint wants a Bearer token", "the endpoint wants a Bearer token"),
        ("http://host:8000/v1 and ops@host", "http://host:8000/v1 and ops@host"),
        ("--api-key is set; its value is not captured", "--api-key is set; its value is not captured"),
        ("?max_tokens=8&tokenizer=x", "?max_tokens=8&tokenizer=x"),
    ],
)
def test_scrub_hides_secrets_by_their_shape(text, shown):
    assert scrub(text) == shown


def test_scrub_replaces_every_known_secret_after_the_shapes():
    secrets = known_forms(["sk-very-secret", "p@ss word"])
    text = "ssh://u:p%40ss%20word@h key sk-very-secret, decoded p@ss word, in a URL ?k=sk-very-secret"
    assert scrub(text, secrets) == f"ssh://u:***@h key {REDACTED}, decoded {REDACTED}, in a URL ?k={REDACTED}"


def test_known_forms_as_written_decoded_and_encoded_longest_first():
    assert known_forms(["p%40ss", None, "", "sk-1"]) == ["p%2540ss", "p%40ss", "p@ss", "sk-1"]


def test_scrub_data_reaches_every_string_keys_included():
    data = {"ssh://u:pw@h": [("found", "key sk-1"), {"n": 3, "m": None}], "x": ("Bearer sk-123456",)}
    assert scrub_data(data, ["sk-1"]) == {
        "ssh://u:***@h": [("found", f"key {REDACTED}"), {"n": 3, "m": None}],
        "x": ("Bearer ***",),
    }


def test_secrets_in_a_spec():
    assert secrets_in("ssh://u:p%40ss@h:22") == ["p%40ss", "p@ss"]
    assert secrets_in("ansible://h?ansible_password=a%21b&x=1") == ["a%21b", "a!b"]
    assert secrets_in("ssh://u@h") == [] and secrets_in("chroot:///t") == [] and secrets_in(None) == []
    assert secrets_in("ssh://h:notaport") == []


def test_station_secrets_are_keys_from_the_environment_and_passwords_in_specs(monkeypatch):
    monkeypatch.setenv("GOLIVE_TEST_KEY", "sk-from-env")
    stations = [
        SimpleNamespace(host="ssh://u:hunter2@h", endpoint="http://e:1/v1", api_key_env="GOLIVE_TEST_KEY"),
        SimpleNamespace(host=None, endpoint="http://a:b%2Fc@e:1/v1", api_key_env="GOLIVE_UNSET_KEY"),
    ]
    monkeypatch.delenv("GOLIVE_UNSET_KEY", raising=False)
    found = station_secrets(stations, api_key_of)  # type: ignore[arg-type]
    assert {"sk-from-env", "b%252Fc", "hunter2", "b%2Fc", "b/c"} <= set(found)
    # the HTTP Basic token golive sends for `a:b/c` (RFC 7617: base64 of the decoded userinfo), also JSON-escaped
    assert {"YTpiL2M=", "YTpiJTJGYw==", "b\\/c"} <= set(found), found
    assert found == sorted(found, key=lambda s: (-len(s), s))  # longest first: a secret inside another goes after


@pytest.mark.parametrize(
    "name, secret",
    [
        ("api_key", True),
        ("hf-token", True),
        ("X-Amz-Signature", True),
        ("clientSecret", True),
        ("ansible_password", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("monkey", False),
        ("k", False),
        ("timeout", False),
    ],
)
def test_secret_names(name, secret):
    assert secret_name(name) is secret


def test_redacted_flags_keep_the_names_results_json_has_always_hidden():
    """A baseline compares served flags across runs: the flags hidden stay the ones hidden before."""
    served = {"api-key": "sk-1", "hf-token": "hf_x", "max-num-batched-tokens": "8192", "port": "8888"}
    assert redacted_flags(served) == {
        "api-key": REDACTED,
        "hf-token": REDACTED,
        "max-num-batched-tokens": REDACTED,
        "port": "8888",
    }


def test_a_capture_that_cannot_read_the_station_says_so_without_its_secrets(tmp_path, capsys):
    """`golive profile capture`'s error line quotes the endpoint's error: its password (as the URL has it, and
    decoded) is hidden there too."""
    from golive.cli import main

    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        "profile: glm-5.3-flash-gb300\nstations:\n  - {name: a, host: 'ssh://ops:hun%40ter2@127.0.0.1:1'"
        ", endpoint: 'http://u:pw2secret@127.0.0.1:1/v1'}\n"
    )
    assert main(["profile", "capture", str(inventory), "-o", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err
    # the URL's userinfo is taken out of every URL golive requests (golive.endpoint.target.without_userinfo)
    assert err.count("\n") == 1 and "the endpoint did not answer (http://127.0.0.1:1/v1/models" in err, err
    assert "pw2secret" not in err and "hun@ter2" not in err and "hun%40ter2" not in err


def test_redact_scrubs_a_report_by_shape_and_by_value():
    """golive.run.outcomes.redact, before any report sees a check's result: the failure text, a skip's reason, the
    captured sections and the user properties, with or without secrets the run knows."""
    import pytest as pt

    from golive.run.outcomes import redact

    failed = pt.TestReport(
        "t::x",
        ("t.py", 1, "x"),
        {},
        "failed",
        "E  ssh://u:pw@[::1]:22 said sk-live-1",
        "call",
        sections=[("Captured stdout call", "Authorization: Bearer sk-live-1")],
        user_properties=[("golive_finding", {"found": "GET /v1?api_key=abc refused"})],
    )
    redact(failed, ["sk-live-1"])
    assert failed.longrepr == f"E  ssh://u:***@[::1]:22 said {REDACTED}"
    assert failed.sections == [("Captured stdout call", "Authorization: Bearer ***")]
    assert failed.user_properties == [("golive_finding", {"found": "GET /v1?api_key=*** refused"})]
    skipped = pt.TestReport("t::y", ("t.py", 2, "y"), {}, "skipped", ("t.py", 2, "not checked: ssh://u:pw@h"), "setup")
    redact(skipped, [])
    assert skipped.longrepr == ("t.py", 2, "not checked: ssh://u:***@h")  # still a skip's tuple for the terminal
