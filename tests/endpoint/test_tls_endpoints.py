"""TLS that fails, on loopback: a self-signed certificate, and https:// to a plain-HTTP server. The health check fails
(the station was reached, but is misconfigured) with one line saying TLS failed and what to do; no traceback."""
import datetime
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


class _Health(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


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
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                       check=True, capture_output=True)
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "golive-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=1)).sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, key


@pytest.fixture
def server(tmp_path):
    servers = []

    def start(tls: bool) -> int:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
        httpd.daemon_threads = True
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*_self_signed(tmp_path))
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
    (tmp_path / "site.yaml").write_text("extends: glm-5.3-flash-gb300\nendpoint:\n  light_timeout_s: 2\n"
                                        "  connect_timeout_s: 2\n")
    (tmp_path / "inventory.yaml").write_text(f"profile: site.yaml\nstations:\n  - name: tls\n    endpoint: {url}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run([sys.executable, "-m", "golive.cli", "run", str(tmp_path / "inventory.yaml"), "-o",
                             str(tmp_path / "out"), "-m", "endpoint", "-p", "no:cacheprovider",
                             "-k", "test_health_endpoint_is_ok or test_auth_matches_profile or test_models_lists"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]  # reached but misconfigured: NO-GO, not INCOMPLETE
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    [failed] = [c for c in results["checks"] if c["outcome"] == "failed"]
    assert failed["nodeid"].split("::")[-1].startswith("test_health_endpoint_is_ok"), failed
    found = failed["finding"]["found"]
    assert "TLS failed" in found and url in found and "\n" not in found, found
    assert "check the certificate, or the scheme (http vs https)" in failed["finding"]["fix"], failed
    others = [c for c in results["checks"] if c is not failed]
    assert others and {c["outcome"] for c in others} <= {"not_checked", "not_applicable"}, others
    for text in (output, json.dumps(results), (tmp_path / "out" / "junit.xml").read_text()):
        assert "Traceback" not in text and "httpx." not in text and "ssl.SSL" not in text
