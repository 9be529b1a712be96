"""The outbound guard: which hosts a tool may call (server-side request forgery).

A tool config names its upstream url, and the gateway attaches the tenant's credential to
the request. Without a guard, a config pointing at `http://169.254.169.254/...`,
`http://localhost:8080/admin` or `http://10.0.0.5/` turns the gateway into a proxy into
the network it runs in. `OutboundPolicy.check` refuses, before any connection is opened:

* hosts that are IP literals in loopback, private, link-local (cloud metadata lives at
  169.254.169.254 and fd00:ec2::254), CGNAT (100.64.0.0/10), unspecified, multicast or
  otherwise non-global space, in every spelling a URL parser or `inet_aton` accepts:
  dotted, decimal (`2130706433`), hex (`0x7f.1`), octal (`0177.0.0.1`), short (`127.1`),
  and IPv4-mapped IPv6 (`::ffff:127.0.0.1`);
* names that are local by definition: `localhost` and `*.localhost`, `*.internal`
  (`metadata.google.internal`), `*.local`, and the bare metadata names;
* names that resolve to such an address, where a resolver is available (the local runtime
  resolves with the system resolver; on Cloudflare, `fetch` resolves at the edge and cannot
  reach private networks, so only the literal and name checks run there).

An operator allow-list (`OUTBOUND_ALLOWED_HOSTS`, comma separated host names, IPs or CIDR
networks) lifts the refusal for what it names; the local dev runtime sets it to loopback
explicitly so tools can call upstreams on the laptop.

Limit: the local check resolves the name, then httpx resolves it again to connect; a DNS
answer that changes in between (rebinding) is not caught locally.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bindings.settings import Settings
from http_messages.errors import ApiError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Resolves a host name to the addresses a connection could use (strings, any family).
Resolver = Callable[[str], Awaitable[Sequence[str]]]

_LOCAL_NAMES = frozenset({"localhost", "metadata", "instance-data"})
_LOCAL_SUFFIXES = (".localhost", ".internal", ".local", ".localdomain", ".home.arpa")
# One part of a WHATWG/inet_aton IPv4 host: decimal, 0x-hex or 0-prefixed octal.
_IPV4_PART_RE = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def parse_ipv4_forms(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a URL parser would read from `host` (dotted, decimal, hex, octal or
    short forms, as in the WHATWG URL standard and `inet_aton`), or None if it is a name."""
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # "127.0.0.1." is the same host
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART_RE.fullmatch(p) for p in parts):
        return None
    numbers = []
    for part in parts:
        if part[:2].lower() == "0x":
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def parse_ip(host: str) -> IPAddress | None:
    """`host` (as `urlsplit(...).hostname` gives it: no brackets) as an IP address, or None."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return parse_ipv4_forms(host)


def is_forbidden_address(address: IPAddress) -> bool:
    """Loopback, private, link-local, CGNAT, unspecified, multicast or any non-global space."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None and is_forbidden_address(embedded):
            return True
    # `is_global` is False for RFC 1918, loopback, link-local, 100.64.0.0/10, ULA (fc00::/7,
    # home of fd00:ec2::254), documentation and reserved ranges; multicast can be global.
    return not address.is_global or address.is_multicast


def is_local_name(name: str) -> bool:
    return name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES)


@dataclass(frozen=True)
class OutboundPolicy:
    """What the gateway may call beyond the public internet: the operator's allow-list."""

    allowed_names: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = field(default_factory=tuple)

    @classmethod
    def from_settings(cls, settings: Settings) -> OutboundPolicy:
        """The policy `OUTBOUND_ALLOWED_HOSTS` describes (validated when Settings loaded)."""
        names, networks = settings.outbound_allow_list
        return cls(names, networks)

    def _address_allowed(self, address: IPAddress) -> bool:
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        return any(
            a.version == net.version and a in net
            for a in candidates
            for net in self.allowed_networks
        )

    async def check(self, url: str, resolver: Resolver | None = None) -> None:
        """Refuse `url` unless its host is public or allowed; no connection is made.

        Raises `ApiError(403, "upstream_forbidden")`. With a `resolver`, a name is also
        refused when any address it resolves to is forbidden; a name that does not resolve
        passes (the connection will fail on its own).
        """
        host = (urlsplit(url).hostname or "").rstrip(".")
        if host in self.allowed_names:
            return
        address = parse_ip(host)
        if address is not None:
            if is_forbidden_address(address) and not self._address_allowed(address):
                raise _forbidden(host, "is a loopback, private, link-local or reserved address")
            return
        if is_local_name(host):
            raise _forbidden(host, "names a local or metadata host")
        if resolver is None:
            return
        try:
            resolved = await resolver(host)
        except OSError:
            return
        for text in resolved:
            found = parse_ip(text)
            if (
                found is not None
                and is_forbidden_address(found)
                and not self._address_allowed(found)
            ):
                raise _forbidden(
                    host, "resolves to a loopback, private, link-local or reserved address"
                )


def _forbidden(host: str, why: str) -> ApiError:
    return ApiError(
        403,
        "upstream_forbidden",
        f"the tool's upstream host {host!r} {why}; the gateway does not call it unless the "
        "operator lists it in OUTBOUND_ALLOWED_HOSTS",
    )
