"""Every module we deploy compiles on the interpreter Cloudflare runs (Pyodide 314, Python
3.14). Python 3.13 already refused source that 3.11 accepts: a lone surrogate escape such as
`"\\ud800"` written unescaped in a docstring failed every request of a deployed Worker at
import (then src/http_messages/bounded_json.py, found in real workerd)."""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path("/app/src")


def test_every_module_under_src_compiles_on_this_python() -> None:
    assert sys.version_info[:2] == (3, 14), sys.version
    failures = []
    files = sorted(SRC.rglob("*.py"))
    for path in files:
        try:
            compile(path.read_bytes(), str(path), "exec")
        except (SyntaxError, ValueError, UnicodeError) as exc:
            failures.append(f"{path.relative_to(SRC)}: {type(exc).__name__}: {exc}")
    assert len(files) > 100, f"only {len(files)} modules found under {SRC}"
    assert not failures, "\n".join(failures)
