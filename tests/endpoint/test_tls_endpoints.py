"""TLS on loopback: a self-signed certificate, and https:// to a plain-HTTP server, fail the health check (the station
was reached, but is misconfigured) with one line saying TLS failed and what to do; no traceback. A certificate signed
by a site CA (made in the test) passes once the inventory names that CA (`tls_ca_file`), in every client golive makes
for the endpoint: httpx, the openai client, the load generator's lanes (golive.endpoint.timed_http)."""

import datetime
import ipaddress
import json
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from golive_run import golive_run

MODEL = "glm-5.3-flash"  # the shipped GB300 profile's served name


class _Health(BaseHTTPRequestHandler):
    """/health, /v1/models and a one-word chat (plain or streamed): enough for the light checks and every client."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        body = (
            json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
            if self.path == "/v1/models"
            else b""
        )
        self._send(body, "application/json")

    def do_POST(self) -> None:
        stream = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}").get("stream")
        choice = {"index": 0, "finish_reason": "stop"}
        head = {"id": "c1", "created": 0, "model": MODEL}
        if stream:
            chunk = {**head, "object": "chat.completion.chunk", "choices": [{**choice, "delta": {"content": "Hi"}}]}
            return self._send(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(), "text/event-stream")
        answer = {
            **head,
            "object": "chat.completion",
            "choices": [{**choice, "message": {"role": "assistant", "content": "Hi"}}],
        }
        self._send(json.dumps(answer).encode(), "application/json")

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if not shutil.which("openssl"):
            pytest.skip("neither the cryptography package nor openssl is here to make a self-signed certificate")
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "golive-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


def _site_ca(
    folder: Path, names: tuple[str, ...] = ("127.0.0.1",), expired: bool = False, ca: str = "golive test site CA"
) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate signed by that CA, its key): a site's own CA, named `ca`. The server
    certificate names `names` (IP addresses or DNS names) and is valid for a day, or ended an hour ago (`expired`)."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def signed(subject, public_key, issuer, issuer_key, is_ca: bool):
        start, end = (
            (now - datetime.timedelta(days=2), now - datetime.timedelta(hours=1))
            if expired and not is_ca
            else (
                now - datetime.timedelta(minutes=1),
                now + datetime.timedelta(days=1),
            )
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        )
        if is_ca:
            builder = builder.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
        else:
            alt = [x509.IPAddress(ipaddress.ip_address(n)) if n[0].isdigit() else x509.DNSName(n) for n in names]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca)])
    ca_cert = signed(ca_name, ca_key.public_key(), ca_name, ca_key, is_ca=True)
    server_cert = signed(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]),
        server_key.public_key(),
        ca_name,
        ca_key,
        is_ca=False,
    )
    paths = folder / "site-ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.fixture
def server(tmp_path):
    servers = []

    def start(tls: bool | str) -> int:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
        httpd.daemon_threads = True
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*(_site_ca(tmp_path)[1:] if tls == "site-ca" else _self_signed(tmp_path)))
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return httpd.server_address[1]

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("case", ["self-signed", "https-to-plain-http"])
def test_tls_failure_is_one_clear_failure(tmp_path, server, case):
    port = server(tls=case == "self-signed")
    url = f"https://127.0.0.1:{port}"
    (tmp_path / "site.yaml").write_text(
        "extends: glm-5.3-flash-gb300\nendpoint:\n  light_timeout_s: 2\n  connect_timeout_s: 2\n"
    )
    (tmp_path / "inventory.yaml").write_text(f"profile: site.yaml\nstations:\n  - name: tls\n    endpoint: {url}\n")
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-p",
        "no:cacheprovider",
        "-k",
        "test_health_endpoint_is_ok or test_auth_matches_profile or test_models_lists",
        cwd=tmp_path,
        timeout=120,
    )
    output, results = run.output, run.results
    assert run.code == 1, output[-3000:]  # reached but misconfigured: NO-GO, not INCOMPLETE
    [failed] = [c for c in results["checks"] if c["outcome"] == "failed"]
    assert failed["nodeid"].split("::")[-1].startswith("test_health_endpoint_is_ok"), failed
    found, fix = failed["finding"]["found"], failed["finding"]["fix"]
    assert "TLS failed" in found and url in found and "\n" not in found, found
    if case == "self-signed":  # the server's choice: no client verifies it unless each pins that very certificate
        assert "self-signed, valid until" in found and "CN=golive-test (no subjectAltName)" in found, found
        assert fix.startswith("the server's side: it presents a self-signed certificate") and "tls_ca_file" in fix
    else:  # the inventory's scheme, or a missing TLS terminator: both named
        assert "answers plain HTTP where the endpoint URL says https" in found, found
        assert "write http:// in the inventory" in fix and "check the scheme, http vs https" in fix, fix
    assert "journalctl" not in fix and "restart the service" not in fix, fix  # no engine fault to restart
    others = [c for c in results["checks"] if c is not failed]
    assert others and {c["outcome"] for c in others} <= {"not_checked", "not_applicable"}, others
    for text in (output, json.dumps(results), (tmp_path / "out" / "junit.xml").read_text()):
        assert "Traceback" not in text and "httpx." not in text and "ssl.SSL" not in text


def _golive(
    tmp_path: Path, url: str, station_extra: str = "", *select: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "site.yaml").write_text(
        "extends: glm-5.3-flash-gb300\nendpoint:\n  light_timeout_s: 2\n  connect_timeout_s: 2\n"
    )
    (tmp_path / "inventory.yaml").write_text(
        f"profile: site.yaml\nstations:\n  - name: tls\n    endpoint: {url}\n{station_extra}"
    )
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-p",
        "no:cacheprovider",
        *select,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    return run.proc, run.results


@pytest.mark.parametrize("trusted", [True, False], ids=["site-ca-named", "site-ca-not-named"])
def test_site_ca_in_the_inventory_lets_the_light_checks_past_tls(tmp_path, server, trusted):
    """A certificate signed by the site's CA: TLS fails until the inventory names the CA, then the checks run."""
    url = f"https://127.0.0.1:{server(tls='site-ca')}"
    extra = "    tls_ca_file: site-ca.pem\n" if trusted else ""  # relative to the inventory (_site_ca wrote it there)
    result, results = _golive(tmp_path, url, extra, "-k", "test_health_endpoint_is_ok or test_models_lists")
    output = result.stdout + result.stderr
    outcomes = {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"]}
    if trusted:
        assert result.returncode == 0, output[-3000:]
        assert {c["outcome"] for c in outcomes.values()} == {"passed"} and len(outcomes) >= 2, outcomes
    else:  # golive's own trust lacks the site CA: the client's side acts, the station is not judged (INCOMPLETE)
        assert result.returncode == 2, output[-3000:]
        health = outcomes["test_health_endpoint_is_ok"]
        assert health["outcome"] == "not_checked" and "TLS failed" in health["message"], outcomes
        assert "golive's side, not the server's" in health["message"], health
        assert "`tls_ca_file:`" in health["message"] and "inventory.yaml:3" in health["message"], health
    assert "Traceback" not in output


def test_every_endpoint_client_trusts_the_site_ca(tmp_path, server):
    """httpx (light calls), the openai client (chat, plain and streamed) and the load generator's lanes all verify
    against the named CA; without it, each fails verification (nothing turns verification off)."""
    import asyncio

    from golive.endpoint.client import EndpointClient
    from golive.endpoint.errors import EndpointError
    from golive.endpoint.load_batch import lanes
    from golive.endpoint.load_request import Workload, request_body, send
    from golive.endpoint.target import EndpointTarget

    url = f"https://127.0.0.1:{server(tls='site-ca')}"
    ca = str(tmp_path / "site-ca.pem")
    client = EndpointClient(
        EndpointTarget(url + "/v1", request_timeout_s=5, connect_timeout_s=2, light_timeout_s=2, ca_file=ca)
    )
    assert [m["id"] for m in client.models()] == [MODEL]
    assert client.chat(MODEL, [{"role": "user", "content": "Hi"}]).content == "Hi"
    assert client.chat(MODEL, [{"role": "user", "content": "Hi"}], stream=True).content == "Hi"

    async def lane_chat(ca_file):
        chat = url + "/v1/chat/completions"
        async with lanes(chat, 1, 5, ca_file)[0] as lane:
            return await send(lane, request_body(Workload(model=MODEL, prompt_tokens=5, output_tokens=1), 1), {})

    answered = asyncio.run(lane_chat(ca))
    assert answered.error is None and answered.response.status == 200, answered
    plain = EndpointClient(EndpointTarget(url + "/v1", request_timeout_s=5, connect_timeout_s=2, light_timeout_s=2))
    for call in (
        plain.models,
        lambda: plain.chat(MODEL, [{"role": "user", "content": "Hi"}]),
        lambda: plain.chat(MODEL, [{"role": "user", "content": "Hi"}], stream=True),
    ):
        with pytest.raises(EndpointError, match="TLS failed"):
            call()
    refused = asyncio.run(lane_chat(None))
    assert refused.response is None and "CERTIFICATE_VERIFY_FAILED" in refused.error, refused


@pytest.mark.parametrize("ca,expected", [("missing.pem", "no such file"), ("garbage.pem", "not a PEM CA certificate")])
def test_unusable_ca_file_is_one_usage_line(tmp_path, ca, expected):
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    result, _ = _golive(tmp_path, "https://127.0.0.1:1", f"    tls_ca_file: {ca}\n")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 4 and len(lines) == 1, result.stdout[-2000:] + result.stderr
    assert f"inventory.yaml:5: station tls: tls_ca_file '{ca}': {expected}" in lines[0], lines


def test_ssl_cert_file_is_honoured_by_every_client(tmp_path, server, monkeypatch):
    """No tls_ca_file, but SSL_CERT_FILE names the CA (the usual way to trust a site CA): every client trusts it."""
    import asyncio

    from golive.endpoint.client import EndpointClient
    from golive.endpoint.load_batch import lanes
    from golive.endpoint.load_request import Workload, request_body, send
    from golive.endpoint.target import EndpointTarget
    from golive.endpoint.tls import trusting

    url = f"https://127.0.0.1:{server(tls='site-ca')}"
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "site-ca.pem"))
    trusting.cache_clear()  # the default context is made once a process: this test changed the environment
    try:
        client = EndpointClient(
            EndpointTarget(url + "/v1", request_timeout_s=5, connect_timeout_s=2, light_timeout_s=2)
        )
        assert [m["id"] for m in client.models()] == [MODEL]
        assert client.chat(MODEL, [{"role": "user", "content": "Hi"}]).content == "Hi"
        assert client.chat(MODEL, [{"role": "user", "content": "Hi"}], stream=True).content == "Hi"

        async def lane_chat():
            chat = url + "/v1/chat/completions"
            async with lanes(chat, 1, 5)[0] as lane:
                return await send(lane, request_body(Workload(model=MODEL, prompt_tokens=5, output_tokens=1), 1), {})

        answered = asyncio.run(lane_chat())
        assert answered.error is None and answered.response.status == 200, answered
    finally:
        monkeypatch.undo()
        trusting.cache_clear()


# (id, the certificate nginx serves, tls_ca_file named?, SSL_CERT_FILE: another CA?, golive's exit code, the health
# check's outcome, what its line must say, what it must not say)
THROUGH_NGINX = [
    (
        "site CA not trusted",
        {},
        False,
        False,
        2,
        "not_checked",
        [
            "certificate verify failed: unable to get local issuer certificate",
            "the server presented a certificate for CN=127.0.0.1 (IP Address:127.0.0.1), issued by CN=golive test "
            "site CA, valid until ",
            "golive's side, not the server's: golive trusted ",
            "Name the CA that issued the certificate (CN=golive test site CA) as `tls_ca_file:`",
            "or put it in the bundle SSL_CERT_FILE names",
        ],
        ["journalctl", "restart", "the server's side"],
    ),
    (
        "SSL_CERT_FILE names another CA",
        {},
        False,
        True,
        2,
        "not_checked",
        [
            "golive trusted SSL_CERT_FILE=",
            "other-ca.pem (no tls_ca_file in the inventory), which does not hold CN=golive test site CA",
            "`tls_ca_file:`",
        ],
        ["journalctl", "restart"],
    ),
    ("site CA named", {}, True, False, 0, "passed", [], []),
    (
        "expired",
        {"expired": True},
        True,
        False,
        1,
        "failed",
        [
            "certificate has expired",
            "issued by CN=golive test site CA",
            "(expired)",
            "the server's side: its certificate expired: renew it where TLS ends",
        ],
        ["tls_ca_file", "golive's side"],
    ),
    (
        "another host's name",
        {"names": ("gw.example",)},
        True,
        False,
        1,
        "failed",
        ["IP address mismatch", "its certificate names DNS:gw.example, not 127.0.0.1", "reissue it with 127.0.0.1"],
        ["tls_ca_file", "golive's side"],
    ),
]


@pytest.mark.parametrize(
    ("name", "certificate", "named", "other_bundle", "code", "outcome", "says", "never"),
    THROUGH_NGINX,
    ids=[row[0] for row in THROUGH_NGINX],
)
def test_tls_advice_through_nginx_names_the_side_that_acts(
    tmp_path, server, name, certificate, named, other_bundle, code, outcome, says, never
):
    """A real nginx terminates TLS in front of the endpoint with a certificate the test made. A certificate golive
    cannot verify because it does not trust its CA is golive's to fix (tls_ca_file, SSL_CERT_FILE): not checked,
    naming what the server presented; an expired one, or one for another host, is the server's: a failure, and the
    Do names the server side. Verification is never turned off."""
    from faults.nginx import Nginx

    upstream = server(tls=False)
    _, cert, key = _site_ca(tmp_path, **certificate)
    env = {}
    if other_bundle:  # a bundle that holds some other CA: what an operator's SSL_CERT_FILE often is
        (tmp_path / "elsewhere").mkdir()
        other = _site_ca(tmp_path / "elsewhere", ca="another CA")[0].rename(tmp_path / "other-ca.pem")
        env["SSL_CERT_FILE"] = str(other)
    with Nginx(tmp_path, upstream, tls=(cert, key)) as proxy:
        extra = "    tls_ca_file: site-ca.pem\n" if named else ""
        result, results = _golive(
            tmp_path, proxy.base_url, extra, "-k", "test_health_endpoint_is_ok or test_models_lists", env=env
        )
    output = result.stdout + result.stderr
    assert result.returncode == code, output[-3000:]
    checks = {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"]}
    health = checks["test_health_endpoint_is_ok"]
    assert health["outcome"] == outcome, health
    said = health["message"] + json.dumps(health.get("finding") or {})
    for fragment in says:
        assert fragment in said, (fragment, said)
    for fragment in never:
        assert fragment not in said, (fragment, said)
    assert "Traceback" not in output
