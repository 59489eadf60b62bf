"""Where webhooks may point: no loopback, private, link-local or otherwise non-public address,
and never one of the service's own ports, unless the operator's allow-list names it.

The check runs twice: when a webhook is registered (``POST /v1/webhooks`` answers 422 with the
reason) and before every delivery attempt, on a fresh resolution of the name, so a name that
later re-resolves to an internal address (DNS rebinding) is refused too; the dispatcher then
connects to the address it checked, not to a third resolution.

Allow-list entries (``MOLTSCOPE_DELIVERY__ALLOW_URLS``, a JSON list) are either ``host:port``
(that exact host and port, own ports included: the operator named them) or a CIDR block
(``127.0.0.1/32``, ``10.0.0.0/8``: any non-public address in it, but not the service's own
ports, which only a ``host:port`` entry opens).

>>> policy = EgressPolicy(allow=("10.1.0.0/16",), own_ports=frozenset({6379}),
...                       resolve=lambda host, port: {"hooks.corp": ["10.1.2.3"]}.get(host, [host]))
>>> policy.check("http://hooks.corp:8080/alerts")
['10.1.2.3']
>>> policy.check("http://127.0.0.1:9000/x")  # doctest: +ELLIPSIS
Traceback (most recent call last):
service.delivery.egress.UrlRefused: 127.0.0.1 is a loopback address: name it in ...
>>> policy.check("http://hooks.corp:6379/")  # doctest: +ELLIPSIS
Traceback (most recent call last):
service.delivery.egress.UrlRefused: port 6379 of 10.1.2.3 is one of this service's own ...
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
SETTING = "MOLTSCOPE_DELIVERY__ALLOW_URLS"


class UrlRefused(ValueError):
    """The URL points somewhere webhooks may not go (a permanent refusal)."""


class UrlUnresolved(OSError):
    """The host name does not resolve right now (a transient failure at delivery)."""


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver, as the HTTP client uses)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UrlUnresolved(f"{host} does not resolve: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _kind(ip: Address) -> str | None:
    """Why ``ip`` is not a public destination, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _kind(ip.ipv4_mapped)
    for name, hit in (("loopback", ip.is_loopback), ("link-local", ip.is_link_local),
                      ("unspecified", ip.is_unspecified), ("multicast", ip.is_multicast),
                      ("private", ip.is_private), ("reserved", ip.is_reserved)):
        if hit:
            return name
    return None if ip.is_global else "non-public"


def _split(entry: str) -> tuple[str, int] | None:
    host, sep, port = entry.strip().rpartition(":")
    if not sep or not port.isdigit() or "/" in entry:
        return None
    return host.strip("[]").lower(), int(port)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_allow(entries: Iterable[str]) -> tuple[set[tuple[str, int]], list[Network]]:
    """The allow-list as (host, port) pairs and CIDR blocks; a bad entry is a ValueError
    naming it (so a wrong setting fails at start-up, not at the first webhook)."""
    named: set[tuple[str, int]] = set()
    networks: list[Network] = []
    for entry in entries:
        hp = _split(entry)
        if hp is not None:
            named.add(hp)
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"{SETTING}: {entry!r} is neither host:port nor a CIDR "
                             "block") from exc
    return named, networks


@dataclass(frozen=True)
class EgressPolicy:
    allow: tuple[str, ...] = ()
    own_ports: frozenset[int] = frozenset()
    resolve: Callable[[str, int], list[str]] = field(default=resolve, compare=False)
    _allowed: set[tuple[str, int]] = field(init=False, repr=False, compare=False)
    _networks: list[Network] = field(init=False, repr=False, compare=False)

    @classmethod
    def for_settings(cls, settings: object) -> EgressPolicy:
        """The policy of a running service: its allow-list, and its own ports (API, Redis,
        Kafka, the embedded servers, the crawler's metrics) closed to webhooks."""
        s = settings  # service.config.Settings, not imported: config imports this package
        ports = {s.api_port, s.embedded.kafka_port, s.embedded.redis_port,  # type: ignore[attr-defined]
                 s.crawler.metrics_port}  # type: ignore[attr-defined]
        for url in (s.redis_url, *s.kafka_bootstrap.split(",")):  # type: ignore[attr-defined]
            port = urlsplit(url if "//" in url else f"//{url}").port
            if port:
                ports.add(port)
        return cls(allow=tuple(s.delivery.allow_urls), own_ports=frozenset(ports))  # type: ignore[attr-defined]

    def __post_init__(self) -> None:
        named, networks = parse_allow(self.allow)
        object.__setattr__(self, "_allowed", named)
        object.__setattr__(self, "_networks", networks)

    def check(self, url: str) -> list[str]:
        """The addresses ``url`` may be delivered to; raises :class:`UrlRefused` (permanent)
        or :class:`UrlUnresolved` (transient)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UrlRefused(f"{url!r} is not an http(s) URL with a host")
        host = parts.hostname
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise UrlRefused(f"{url!r} has a bad port") from exc
        addresses = self.resolve(host, port)
        if not addresses:
            raise UrlUnresolved(f"{host} resolves to no address")
        if (host.lower(), port) in self._allowed:
            return addresses
        for a in addresses:
            ip = ipaddress.ip_address(a.split("%", 1)[0])
            if (a, port) in self._allowed:
                continue
            if port in self.own_ports and (_kind(ip) is not None or ip in _local_addresses()):
                raise UrlRefused(f"port {port} of {a} is one of this service's own ports: name "
                                 f"{host}:{port} in {SETTING} to allow it")
            kind = _kind(ip)
            if kind is not None and not any(ip in n for n in self._networks
                                            if n.version == ip.version):
                what = a if a == host else f"{host} resolves to {a}, which"
                raise UrlRefused(f"{what} is a {kind} address: name it in {SETTING} to allow it")
        return addresses


def _local_addresses() -> set[Address]:
    """This host's own addresses (best effort: what its name resolves to)."""
    try:
        _, _, addrs = socket.gethostbyname_ex(socket.gethostname())
    except OSError:
        return set()
    return {ipaddress.ip_address(a) for a in addrs}
