"""Secrets kept out of every output: the one scrubber the terminal, the reports, the watcher and capture all use.

Two kinds of hiding, one module:

* by shape (`hide_password`, and `scrub` on any text): the password of a URL or host spec's userinfo
  (`ssh://user:secret@host` → `ssh://user:***@host`; IPv6 brackets, ports, paths and queries kept as written), the
  value of a secret-looking query key (`?api_key=…`, `&token=…`, `password=`, `secret=` → `***`), an
  `Authorization:` header's value and a bearer token (`Bearer sk-…` → `Bearer ***`);
* by value (`scrub` with the run's `known_forms`): every secret golive knows (API keys from the environment,
  passwords in host specs and endpoint URLs) in every form golive itself sends it in or an output may carry it
  (as written, percent-decoded, percent-encoded, JSON-escaped, HTML-escaped; an endpoint URL's `user:password` also
  as the base64 of HTTP Basic) → `[REDACTED]`, in text and in nested data (`scrub_data`): text a server echoes
  (an error body quoting the request's Authorization header) is scrubbed like golive's own.

`***` keeps a shape readable (a host spec still says which user on which host); `[REDACTED]` replaces a value found
anywhere. Shapes are hidden first, so a password in a spec reads `user:***@host` even when golive knows it too.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, unquote, urlsplit

MASK = "***"  # a URL's password, a secret query value, a header's credentials: the shape stays, the value goes
REDACTED = "[REDACTED]"  # a secret value golive knows, wherever it appears
# a query key or header whose value is a secret when one of its words is one of these (`api_key`, `access-token`,
# `X-Amz-Signature`, `clientSecret`; not `max_tokens`, `tokenizer`, `monkey`)
SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "signature", "auth"}
)
# a served flag whose value is never recorded when its name holds one of these (substrings, as results.json has always
# recorded them: a baseline compares served flags across runs, so the set stays as it was)
SECRET_FLAG_WORDS = ("key", "token", "secret", "password")

# scheme://user:password@ — the password runs to the netloc's LAST `@` (as urllib splits it: a raw `@` in a password
# stays hidden); a netloc ends at `/ ? #`, whitespace or a quote
_USERINFO = re.compile(r"(?<=[A-Za-z0-9+.\-])(?P<head>://[^\s:/?#@'\"<>`\[\]]*:)(?P<password>[^\s/?#'\"<>`]*)@")
_QUERY_PAIR = re.compile(r"(?P<head>[?&;#](?P<key>[^=&#;?\s'\"<>`]*)=)(?P<value>[^&#;\s'\"<>`]*)")
_HEADER = re.compile(
    r"(?P<head>\b(?:(?:proxy-)?authorization|x-api-key|api[-_]key)['\"]?\s*[:=]\s*['\"]?"
    r"(?:(?:bearer|basic|digest|token)\s+)?)(?P<value>[^\s'\",;}&#]+)",
    re.IGNORECASE,
)
# a bearer token: letters only is an English word ("a Bearer token"), not a credential
_BEARER = re.compile(r"(?P<head>\bbearer\s+)(?P<value>(?=[\w\-.~+/]*[\d\-.~+/_])[\w\-.~+/]{6,}=*)", re.IGNORECASE)
# HTTP Basic's base64 token: a digit, `+`, `/` or `=` in it (letters only: "Basic configuration" is English)
_BASIC = re.compile(r"(?P<head>\bbasic\s+)(?P<value>(?=[A-Za-z0-9+/]*[\d+/=])[A-Za-z0-9+/]{6,}={0,2})", re.IGNORECASE)


_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def secret_name(name: str) -> bool:
    """A query key or header that names a secret: `api_key`, `hf-token`, `X-Amz-Signature`, `clientSecret` …"""
    return any(word.lower() in SECRET_WORDS for word in _WORD.findall(name))


def _mask_query(match: re.Match[str]) -> str:
    if not match["value"] or not secret_name(unquote(match["key"])):
        return match[0]
    return f"{match['head']}{MASK}"


def hide_password(spec: str | None) -> str | None:
    """A host spec or URL as it may be shown: the userinfo's password and secret query values become `***`,
    everything else stays as written (`ssh://u:pw@[fe80::1]:2222` → `ssh://u:***@[fe80::1]:2222`,
    `paramiko://root:p%40ss@h:22?timeout=5` → `paramiko://root:***@h:22?timeout=5`, `ssh://u@h` unchanged)."""
    if not spec or "://" not in spec:
        return spec
    scheme, sep, rest = spec.partition("://")
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:{MASK}@{host}"
    return f"{scheme}{sep}{netloc}{_QUERY_PAIR.sub(_mask_query, tail)}"


def secrets_in(spec: str | None) -> list[str]:
    """The secrets written into a host spec or URL: its userinfo password and the values of its secret-looking query
    keys (`ansible://h?ansible_password=…`), each as written and percent-decoded (either may reach a message); []
    when none."""
    if not spec or "://" not in spec:
        return []
    try:
        parts = urlsplit(spec)
        password = parts.password
    except ValueError:
        return []
    found = [password] if password else []
    found += [
        m["value"]
        for m in _QUERY_PAIR.finditer(f"?{parts.query}&{parts.fragment}")
        if m["value"] and secret_name(unquote(m["key"]))
    ]
    return [form for value in found for form in dict.fromkeys((value, unquote(value)))]


def percent_encoded(text: str) -> str:
    """`text` as a URL carries it (every reserved character encoded). An environment variable's bytes that are not
    UTF-8 reach Python as surrogates (surrogateescape): encoded back to those bytes, any other surrogate as it is."""
    try:
        return quote(text, safe="")
    except UnicodeEncodeError:
        try:
            return quote(text, safe="", errors="surrogateescape")
        except UnicodeEncodeError:
            return quote(text, safe="", errors="surrogatepass")


def json_escaped(text: str) -> list[str]:
    """`text` as JSON writers put it inside a string: Python's (with and without ensure_ascii) and those that also
    escape `/` (PHP, some proxies)."""
    forms = {json.dumps(text, ensure_ascii=ascii)[1:-1] for ascii in (True, False)}
    return sorted(forms | {form.replace("/", "\\/") for form in forms})


def known_forms(secrets: Iterable[str | None]) -> list[str]:
    """Every form a known secret may reach an output in (as written, percent-decoded, percent-encoded, JSON- and
    HTML-escaped), longest first (a secret inside a longer one is replaced after it), empty ones dropped."""
    found: set[str] = set()
    for secret in secrets:
        if secret:
            plain = {secret, unquote(secret), percent_encoded(secret)}
            escaped = {form for text in plain for form in (*json_escaped(text), html.escape(text))}
            found.update(form for form in plain | escaped if form)
    return sorted(found, key=lambda s: (-len(s), s))


def basic_forms(url: str | None) -> list[str]:
    """The HTTP Basic token golive sends for an endpoint URL's `user:password` (golive.endpoint.target.basic_token:
    base64 of the percent-decoded userinfo), and of the userinfo as written; [] without a password."""
    if not url or "://" not in url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    if not password:
        return []
    raw = parts.netloc.rpartition("@")[0]
    pairs = {f"{unquote(user or '')}:{unquote(password)}", raw}
    return [base64.b64encode(p.encode("utf-8", errors="surrogateescape")).decode("ascii") for p in sorted(pairs)]


class _Specs(Protocol):
    """What a station shows of where it is (golive.profile.inventory.Station)."""

    @property
    def host(self) -> str | None: ...

    @property
    def endpoint(self) -> str | None: ...


S = TypeVar("S", bound=_Specs)


def station_secrets(stations: Iterable[S], key_of: Callable[[S], str | None]) -> list[str]:
    """The secrets of an inventory's stations in every form they may reach an output in (`known_forms`): each
    station's API key (`key_of`: golive.endpoint.target.api_key_of, which reads it from the station's environment
    variable) and the secrets written into its host spec and endpoint URL (`ssh://user:password@host`,
    `ansible://h?ansible_password=…`)."""
    found: list[str | None] = []
    for station in stations:
        found.append(key_of(station))
        for spec in (station.host, station.endpoint):
            found.extend(secrets_in(spec))
        found.extend(basic_forms(station.endpoint))
    return known_forms(found)


def hide_shapes(text: str) -> str:
    """Secrets found by their shape in any text: URL passwords, secret query values, Authorization headers, bearer
    tokens (see the module's docstring)."""
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)
    if "=" in text:
        text = _QUERY_PAIR.sub(_mask_query, text)
    lowered = text.lower()  # the header and bearer patterns only where their words are: every report passes here
    if "authorization" in lowered or "api-key" in lowered or "api_key" in lowered:
        text = _HEADER.sub(lambda m: f"{m['head']}{MASK}", text)
    if "bearer" in lowered:
        text = _BEARER.sub(lambda m: f"{m['head']}{MASK}", text)
    if "basic" in lowered:
        text = _BASIC.sub(lambda m: f"{m['head']}{MASK}", text)
    return text


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` as any output may show it: secrets hidden by shape, then every known secret (`known_forms`) replaced
    by `[REDACTED]`."""
    text = hide_shapes(text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def scrub_data(value: Any, secrets: Iterable[str] = ()) -> Any:
    """`scrub` on every string in nested lists, tuples and dicts (keys too: a dict may be keyed by a host spec)."""
    secrets = list(secrets)
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_data(v, secrets) for v in value)
    if isinstance(value, Mapping):
        return {scrub_data(k, secrets): scrub_data(v, secrets) for k, v in value.items()}
    return value


def redacted_flags(served: Mapping[str, Any]) -> dict[str, Any]:
    """Served flags with the values of secret-looking ones (--api-key, --hf-token …) replaced by `[REDACTED]`."""
    return {
        flag: REDACTED if any(word in flag.lower() for word in SECRET_FLAG_WORDS) else value
        for flag, value in served.items()
    }
