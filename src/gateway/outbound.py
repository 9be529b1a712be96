"""The outbound guard against SSRF (docs/gateway.md "Outbound guard"): before any connection,
refuse IP literals outside global space in every spelling URL parsers and `inet_aton` accept
(percent-encoded and full-width too),
local names (`localhost`, `*.internal`...) and, given a resolver (locally; Cloudflare's fetch
cannot reach private networks), names resolving to such addresses, unless
`OUTBOUND_ALLOWED_HOSTS` lists them. DNS rebinding after our lookup is not caught.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from bindings.settings import Settings
from http_messages import ApiError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Resolves a host name to the addresses a connection could use (strings, any family).
Resolver = Callable[[str], Awaitable[Sequence[str]]]

_LOCAL_NAMES = frozenset({"localhost", "metadata", "instance-data"})
_LOCAL_SUFFIXES = (".localhost", ".internal", ".local", ".localdomain", ".home.arpa")
# One part of a WHATWG/inet_aton IPv4 host: decimal, 0x-hex or 0-prefixed octal.
_IPV4_PART_RE = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def parse_ipv4_forms(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a URL parser (WHATWG, `inet_aton`) reads from `host`, or None."""
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
    return ipaddress.IPv4Address(last + sum(n << (8 * (3 - i)) for i, n in enumerate(leading)))


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


@dataclass(frozen=True)
class OutboundPolicy:
    allowed_names: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = field(default_factory=tuple)

    @classmethod
    def from_settings(cls, settings: Settings) -> OutboundPolicy:
        return cls(*settings.outbound_allow_list)

    def _refused(self, address: IPAddress) -> bool:
        """In forbidden space and not in an allowed network."""
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        candidates = [address] if mapped is None else [address, mapped]
        return is_forbidden_address(address) and not any(
            a.version == net.version and a in net
            for a in candidates
            for net in self.allowed_networks
        )

    async def check(self, url: str, resolver: Resolver | None = None) -> None:
        """403 `upstream_forbidden` unless `url`'s host is public or allowed; a name that does
        not resolve passes (connecting fails anyway)."""
        try:
            # The host a WHATWG URL parser (Cloudflare's fetch) connects to: percent-decoded
            # and IDNA-mapped, so `%31%32%37.0.0.1` and full-width digits read as 127.0.0.1.
            host = unquote(urlsplit(url).hostname or "").encode("idna").decode("ascii")
        except UnicodeError:
            raise _forbidden(url[:100], "is not a valid host name") from None
        host = host.rstrip(".")
        if host in self.allowed_names:
            return
        address = parse_ip(host)
        if address is not None:
            if self._refused(address):
                raise _forbidden(host, "is a loopback, private, link-local or reserved address")
            return
        if host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES):
            raise _forbidden(host, "names a local or metadata host")
        try:
            resolved = await resolver(host) if resolver is not None else ()
        except OSError:
            return
        if any(a is not None and self._refused(a) for a in map(parse_ip, resolved)):
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
