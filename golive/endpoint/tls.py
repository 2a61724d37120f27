"""Which certificates golive trusts for a station's endpoint: the site CA named in the inventory (`tls_ca_file`), else
what httpx trusts by default (SSL_CERT_FILE or SSL_CERT_DIR where set, else certifi's bundle). Verification is never
turned off: a certificate that does not chain to the trusted CA fails the health check."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache  # loading a CA bundle takes ~50 ms: one context per file, shared by every client
def trusting(ca_file: str | None) -> ssl.SSLContext:
    if ca_file is None:
        return httpx.create_ssl_context()
    return ssl.create_default_context(cafile=ca_file)  # this CA only, as curl --cacert: the site said which one
