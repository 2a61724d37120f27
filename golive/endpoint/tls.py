"""Which certificates golive trusts for a station's endpoint: the site CA named in the inventory (`tls_ca_file`), else
what httpx trusts by default (SSL_CERT_FILE or SSL_CERT_DIR where set, else certifi's bundle). Verification is never
turned off: a certificate that does not chain to the trusted CA fails the health check.

Where TLS fails, `failure` says why as an operator reads it: what the server presented (subject, names, issuer,
expiry: read without verification, only to describe it) and which side must act. A certificate golive cannot verify
because it does not trust the CA that issued it is golive's own configuration to fix (`tls_ca_file`, SSL_CERT_FILE):
the station was not checked. An expired certificate, one that does not name the host, a self-signed one, or an https
URL answered in plain HTTP are the server's (or its URL's) to fix: the station fails.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import ssl
import tempfile
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx


@functools.cache  # loading a CA bundle takes ~50 ms: one context per file, shared by every client
def trusting(ca_file: str | None) -> ssl.SSLContext:
    if ca_file is None:
        return httpx.create_ssl_context()
    return ssl.create_default_context(cafile=ca_file)  # this CA only, as curl --cacert: the site said which one


# OpenSSL's verify reasons (X509_verify_cert_error_string) for a chain that ends at a CA the client does not trust
UNTRUSTED = (
    "unable to get local issuer certificate",
    "unable to get issuer certificate",
    "self-signed certificate in certificate chain",
    "self signed certificate in certificate chain",  # OpenSSL 1.1 spells it without the hyphen
)
# a CA the client trusts has the issuer's name but not its key: the site renewed its CA, or another shares the name
SIGNATURE = "certificate signature failure"
SELF_SIGNED = ("self-signed certificate", "self signed certificate")  # the server's own certificate signs itself
EXPIRED, NOT_YET = "certificate has expired", "certificate is not yet valid"
MISMATCH = ("Hostname mismatch", "IP address mismatch")
PLAIN_HTTP = "WRONG_VERSION_NUMBER"  # a TLS hello answered by a plain-HTTP server


@dataclass(frozen=True)
class Presented:
    """What a server's certificate says, as `ssl` decodes it (getpeercert's dict)."""

    subject: str
    issuer: str
    names: tuple[str, ...]  # subjectAltName, as "DNS:gw.example" / "IP:10.0.0.5"
    not_after: str  # as OpenSSL prints it: "Dec  6 13:50:02 2026 GMT"

    @property
    def self_signed(self) -> bool:
        return self.subject == self.issuer

    def names_host(self, host: str) -> bool:
        """Whether a subjectAltName names `host` (a `*.` name covers one label), as TLS clients match it."""
        for entry in self.names:
            name = entry.split(":", 1)[-1].lower()
            if name == host.lower() or (name.startswith("*.") and host.lower().partition(".")[2] == name[2:]):
                return True
        return False

    def expired(self) -> bool:
        ends = self.expires()
        return ends is not None and ends < dt.datetime.now(dt.UTC)

    def expires(self) -> dt.datetime | None:
        try:
            return dt.datetime.fromtimestamp(ssl.cert_time_to_seconds(self.not_after), dt.UTC)
        except ValueError:
            return None

    def said(self) -> str:
        """`a certificate for CN=gw (DNS:gw), issued by CN=Site CA, valid until 2026-12-06 13:50 UTC`"""
        names = f" ({', '.join(self.names)})" if self.names else " (no subjectAltName)"
        expires = self.expires()
        until = expires.strftime("%Y-%m-%d %H:%M UTC") if expires else self.not_after
        ended = " (expired)" if self.expired() else ""
        issued = "self-signed" if self.self_signed else f"issued by {self.issuer}"
        return f"a certificate for {self.subject or 'no subject'}{names}, {issued}, valid until {until}{ended}"


def _name(parts: tuple) -> str:
    """A decoded X.509 name ((("commonName", "gw"),), …) as `CN=gw, O=Site`."""
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C"}
    return ", ".join(f"{short.get(key, key)}={value}" for rdn in parts for key, value in rdn)


def _decoded(pem: str) -> Presented | None:
    """A PEM certificate as `ssl` decodes it. CPython's own decoder (the one getpeercert() uses): the ssl module has
    no public way to read a certificate it did not verify, and golive ships no X.509 library."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as file:
        file.write(pem)
    try:
        info = decode(file.name)
    except (ssl.SSLError, OSError, ValueError):
        return None
    finally:
        os.unlink(file.name)
    return Presented(
        subject=_name(info.get("subject", ())),
        issuer=_name(info.get("issuer", ())),
        names=tuple(f"{kind}:{value}" for kind, value in info.get("subjectAltName", ())),
        not_after=str(info.get("notAfter", "?")),
    )


def presented(url: str, timeout_s: float = 5) -> Presented | None:
    """The certificate the server at `url` presents, fetched WITHOUT verification only to describe it in a finding;
    None where it cannot be fetched or read. Nothing golive checks goes over this connection."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return None
    try:
        pem = ssl.get_server_certificate((parts.hostname, parts.port or 443), timeout=timeout_s)
    except (OSError, ssl.SSLError, ValueError):
        return None
    return _decoded(pem)


def ca_said(ca_file: str) -> str:
    """The inventory's CA file as a finding names it: its path and the CA it holds (the first certificate)."""
    try:
        with open(ca_file) as file:
            text = file.read(1_000_000)
    except OSError:
        return ca_file
    begin = text.find("-----BEGIN CERTIFICATE-----")
    end = text.find("-----END CERTIFICATE-----", begin)
    cert = _decoded(text[begin : end + 25]) if begin >= 0 and end > 0 else None
    return f"{ca_file} ({cert.subject})" if cert else ca_file


def trusted_said(ca_file: str | None) -> str:
    """What golive trusted for this endpoint, as a finding says it."""
    if ca_file:
        return f"the inventory's tls_ca_file {ca_said(ca_file)}"
    for variable in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if os.environ.get(variable):
            return f"{variable}={os.environ[variable]} (no tls_ca_file in the inventory)"
    return "the public CAs of certifi's bundle (no tls_ca_file in the inventory, no SSL_CERT_FILE)"


def _also(cert: Presented | None, host: str) -> str:
    """What the server must fix as well, where golive's trust failed first (OpenSSL reports one reason)."""
    faults = []
    if cert is not None and cert.expired():
        faults.append("the certificate expired: renew it")
    if cert is not None and cert.names and not cert.names_host(host):
        faults.append(f"it does not name {host}: reissue it with {host} in its subjectAltName")
    return f". The server's side as well: {'; '.join(faults)}" if faults else ""


@dataclass(frozen=True)
class TlsFailure:
    """TLS failed: what happened (one line), what to do, and whether golive's own trust must change (the client's
    side: the station was not checked) rather than the server."""

    what: str
    hint: str
    client_side: bool


def failure(url: str, error: str, ca_file: str | None = None, timeout_s: float = 5) -> TlsFailure:
    """Why the TLS handshake with `url` failed (`error`: the ssl error's text, "[SSL: CERTIFICATE_VERIFY_FAILED]
    certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)") and which side acts."""
    host = urlsplit(url).hostname or url
    reason = error.split("] ", 1)[-1].split(" (_ssl.c")[0]
    if PLAIN_HTTP in error:
        return TlsFailure(
            f"TLS failed: the server answers plain HTTP where the endpoint URL says https ({reason})",
            f"the endpoint URL says https:// but {host} answers plain HTTP on that port: if clients reach it over "
            f"http://, write http:// in the inventory; if they should get TLS, the TLS terminator in front of vLLM "
            f"is missing on the server side (check the scheme, http vs https, and the port)",
            client_side=False,
        )
    cert = presented(url, timeout_s)
    shown = f"; the server presented {cert.said()}" if cert else ""
    what = f"TLS failed: the certificate could not be verified ({reason}){shown}"
    issuer = cert.issuer if cert else "the CA that issued it"
    if any(text in reason for text in UNTRUSTED):
        return TlsFailure(
            what,
            f"golive's side, not the server's: golive trusted {trusted_said(ca_file)}, which does not hold "
            f"{issuer}. Name the CA that issued the certificate ({issuer}) as `tls_ca_file:` for this station in "
            f"the inventory (a PEM file, relative to the inventory), or put it in the bundle SSL_CERT_FILE names; "
            f"then re-run. Only if {issuer} is an intermediate of a public CA must the server act: serve the full "
            f"chain (the certificate and its intermediates)" + _also(cert, host),
            client_side=True,
        )
    if SIGNATURE in reason:
        return TlsFailure(
            what,
            f"golive's side, not the server's: golive trusted {trusted_said(ca_file)}, which holds a CA named "
            f"{issuer} whose key did not sign this certificate (the site renewed its CA, or another CA has its "
            f"name). Name the CA that issued it as `tls_ca_file:` for this station in the inventory; then re-run"
            + _also(cert, host),
            client_side=True,
        )
    if any(text in reason for text in SELF_SIGNED) and "in certificate chain" not in reason:
        return TlsFailure(
            what,
            "the server's side: it presents a self-signed certificate, which no client verifies unless each "
            "trusts that very certificate. Serve one issued by the site's CA (and name that CA as `tls_ca_file:` "
            "in the inventory); if the site pins this certificate in every client, name it as `tls_ca_file:` too",
            client_side=False,
        )
    if EXPIRED in reason or NOT_YET in reason:
        when = "expired" if EXPIRED in reason else "is not valid yet"
        return TlsFailure(
            what,
            f"the server's side: its certificate {when}: renew it where TLS ends (vLLM's --ssl-certfile, or the "
            f"proxy in front of it) and reload that service"
            + ("; if it was issued just now, check the clocks of the server and of this machine" * (NOT_YET in reason)),
            client_side=False,
        )
    if any(text in reason for text in MISMATCH):
        names = ", ".join(cert.names) if cert and cert.names else "other names"
        return TlsFailure(
            what,
            f"the server's side: its certificate names {names}, not {host}, the host clients reach: reissue it with "
            f"{host} in its subjectAltName; or, if clients use one of its names, write that name in the endpoint "
            f"URL in the inventory",
            client_side=False,
        )
    return TlsFailure(
        f"TLS failed ({reason}){shown}",
        "check the certificate where TLS ends (vLLM's --ssl-certfile, or the proxy in front of it), or the scheme "
        "(http vs https) in the endpoint URL",
        client_side=False,
    )
