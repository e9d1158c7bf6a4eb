"""Which requests the local server answers: its own host names, and no other web page's writes.

The local server has no token: whoever reaches it is tenant ``local``. A browser reaches it too, from
any page the user visits, so three checks run before a request reaches the handler:

- **Host** (DNS rebinding): a page on ``attacker.example`` whose name later resolves to 127.0.0.1
  sends ``Host: attacker.example:3000``. Only the names the server was started for are answered
  (``localhost``, ``127.0.0.1``, ``[::1]`` and the ``--host`` address, with the port it listens on,
  plus ``--allowed-hosts`` / ``THREADLOOM_ALLOWED_HOSTS``); others get 421.
- **Origin** and **Sec-Fetch-Site** (cross-site requests): a page on another origin may send a form
  post, a ``no-cors`` fetch or a WebSocket handshake without any preflight. Browsers say where such a
  request comes from; a request from an origin other than the server's own (or one listed in
  ``THREADLOOM_CORS_ORIGINS``) gets 403. A link followed from elsewhere (a GET navigation) still opens.
- **Content-Type**: a body must be declared (415 without one), so nothing a form can send is taken
  as JSON; the handler then refuses every media type but JSON, as deployed.

curl, scripts and SDKs send no ``Origin`` or ``Sec-Fetch-*`` headers, so they are unaffected.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

ALLOWED_HOSTS_VARIABLE = "THREADLOOM_ALLOWED_HOSTS"
CORS_ORIGINS_VARIABLE = "THREADLOOM_CORS_ORIGINS"  # as threadloom.api.edge reads it
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})
SAFE_METHODS = frozenset({"GET", "HEAD"})
OWN_SITES = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request the page of this server (or the user, typing a URL) made."""
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not answered: an HTTP status, an error code and a sentence."""

    status: int
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class AccessRules:
    """The host names (each with its port) and origins the local server answers.

    Parameters
    ----------
    hosts:
        ``(name, port)`` pairs, names lowercased, IPv6 addresses in brackets.
    origins:
        Extra origins (``THREADLOOM_CORS_ORIGINS``), exactly as a browser spells them.
    any_origin:
        ``THREADLOOM_CORS_ORIGINS=*``: every page may call the server (the user asked for it).
    """

    hosts: frozenset[tuple[str, int]]
    origins: frozenset[str] = frozenset()
    any_origin: bool = False

    @classmethod
    def for_server(
        cls, bind_host: str, port: int, extra_hosts: Iterable[str] = (), environ: Mapping[str, str] | None = None
    ) -> AccessRules:
        """The default names, the bound address and ``extra_hosts`` (``name`` or ``name:port``) on ``port``."""
        env = os.environ if environ is None else environ
        names = [*DEFAULT_HOSTS]
        if bind_host not in WILDCARD_ADDRESSES:
            names.append(bind_host)
        names += [name for name in extra_hosts if name.strip()]
        names += [name for name in env.get(ALLOWED_HOSTS_VARIABLE, "").split(",") if name.strip()]
        hosts = {_split_host(name.strip(), port) for name in names}
        origins = {origin.strip() for origin in env.get(CORS_ORIGINS_VARIABLE, "").split(",") if origin.strip()}
        return cls(hosts=frozenset(hosts), origins=frozenset(origins - {"*"}), any_origin="*" in origins)

    def host_allowed(self, host: str | None, default_port: int = 80) -> bool:
        """Whether a ``Host`` header value (``name[:port]``) is one this server was started for."""
        if not host:
            return False
        try:
            return _split_host(host, default_port) in self.hosts
        except ValueError:
            return False

    def origin_allowed(self, origin: str) -> bool:
        """An ``Origin`` of this server's own pages, or one the user listed."""
        if self.any_origin or origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.path or parts.query or parts.fragment:
            return False
        return self.host_allowed(parts.netloc, DEFAULT_PORTS[parts.scheme])

    def check(self, method: str, headers: Mapping[str, str], *, has_body: bool) -> Refusal | None:
        """The refusal for a request (its headers lowercased), or None when it may reach the handler."""
        host = headers.get("host")
        if not self.host_allowed(host):
            return Refusal(
                421,
                "misdirected_request",
                f"This server answers only for {self.describe_hosts()}, not for the host {host or '(none)'!r}; "
                f"start it with --allowed-hosts (or {ALLOWED_HOSTS_VARIABLE}) to add a name",
            )
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin):
            return Refusal(
                403,
                "forbidden",
                f"Requests from the web page at {origin!r} are refused: the local server answers its own pages "
                f"and non-browser clients (list an origin in {CORS_ORIGINS_VARIABLE} to allow it)",
            )
        site = headers.get("sec-fetch-site")
        if origin is None and site is not None and site not in OWN_SITES:
            navigation = method in SAFE_METHODS and headers.get("sec-fetch-mode") == "navigate"
            if not navigation:
                return Refusal(403, "forbidden", f"A {site} request from another web page is refused")
        if has_body and not headers.get("content-type"):
            return Refusal(
                415,
                "unsupported_media_type",
                "The request body has no Content-Type: send it as JSON with Content-Type: application/json",
            )
        return None

    def describe_hosts(self) -> str:
        return ", ".join(sorted(f"{name}:{port}" for name, port in self.hosts))


def _split_host(host: str, default_port: int) -> tuple[str, int]:
    """``(name, port)`` of ``name``, ``name:port``, ``[v6]`` or ``[v6]:port``; a bare IPv6 address gets brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        name += "]"
        port_text = rest.removeprefix(":") if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"not a host: {host!r}")
    elif host.count(":") > 1:  # a bare IPv6 address, as --host ::1 gives it
        ipaddress.IPv6Address(host)
        name, port_text = f"[{host}]", ""
    else:
        name, _, port_text = host.partition(":")
    if not name or (port_text and not port_text.isdigit()):
        raise ValueError(f"not a host: {host!r}")
    return name, int(port_text) if port_text else default_port


__all__ = ["ALLOWED_HOSTS_VARIABLE", "DEFAULT_HOSTS", "AccessRules", "Refusal"]
