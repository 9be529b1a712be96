"""Static assets for `agent-memory dev`: what Workers Static Assets serves on Cloudflare.

wrangler.toml's `[assets] directory = "./public"` answers a GET or HEAD whose path names a
file there before the Worker runs, `/admin/ui/` with `admin/ui/index.html` and `/admin/ui` with
a redirect (`html_handling = "auto-trailing-slash"`); `serve_asset` does the same, or returns
None (the Worker answers, also for paths no file could have). It adds the headers
`public/_headers` gives the path and never serves `_headers` or `_redirects` themselves.
"""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from http_messages import Headers, HttpRequest, HttpResponse

ASSETS_DIR = Path(__file__).resolve().parent.parent / "public"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


# Cloudflare reads these as configuration and does not serve them.
_CONFIG_FILES = frozenset({"_headers", "_redirects"})


def header_rules() -> list[tuple[re.Pattern[str], list[tuple[str, str]]]]:
    """The rules of the assets' `_headers` in file order: a path pattern, then its indented
    `Name: value` lines (docs: workers/static-assets/headers/)."""
    file = ASSETS_DIR / "_headers"
    rules: list[tuple[re.Pattern[str], list[tuple[str, str]]]] = []
    if not file.is_file():
        return rules
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            pattern = re.escape(line.strip()).replace(r"\*", ".*")
            pattern = re.sub(r":[A-Za-z]\w*", "[^/]+", pattern)
            rules.append((re.compile(f"^{pattern}$"), []))
        elif rules:
            name, _, value = line.strip().partition(":")
            rules[-1][1].append((name.strip(), value.strip()))
    return rules


def _with_rules(path: str, response: HttpResponse) -> HttpResponse:
    for pattern, headers in header_rules():
        if pattern.match(path):
            for name, value in headers:
                response.headers.set(name, value)
    return response


# NAME_MAX on Linux and macOS: a longer path segment names no file (stat raises
# ENAMETOOLONG), so it is no asset.
_NAME_MAX_BYTES = 255


def _asset_path(path: str) -> Path | None:
    """`path` in the assets folder, or None when no file in the assets folder could have it."""
    if "\x00" in path or "\\" in path:
        return None
    parts = [p for p in path.split("/") if p]
    if any(
        p in (".", "..") or len(p.encode("utf-8", "surrogatepass")) > _NAME_MAX_BYTES for p in parts
    ) or (parts and parts[-1] in _CONFIG_FILES):
        return None
    return ASSETS_DIR.joinpath(*parts)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # any other name the file system refuses: not an asset either
        return False


def _asset_file(path: str) -> Path | None:
    candidate = _asset_path(path)
    if candidate is None:
        return None
    if _is_dir(candidate):
        candidate = candidate / "index.html"
    try:
        candidate.resolve().relative_to(ASSETS_DIR.resolve())
        return candidate if candidate.is_file() else None
    except (ValueError, OSError):
        return None


def serve_asset(request: HttpRequest) -> HttpResponse | None:
    """The asset response for `request`, or None when the Worker should answer it."""
    if request.method not in ("GET", "HEAD"):
        return None
    path = request.path
    folder = _asset_path(path)
    if folder is None:
        return None
    if not path.endswith("/") and _is_dir(folder):
        if _asset_file(path + "/") is not None:
            redirect = HttpResponse(307, b"", Headers({"location": path + "/"}))
            return _with_rules(path, redirect)
        return None
    found = _asset_file(path)
    if found is None:
        return None
    content_type = _TYPES.get(found.suffix) or (
        mimetypes.guess_type(found.name)[0] or "application/octet-stream"
    )
    body = found.read_bytes()
    headers = Headers({"content-type": content_type, "cache-control": "no-cache"})
    return _with_rules(path, HttpResponse(200, b"" if request.method == "HEAD" else body, headers))
