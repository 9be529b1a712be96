"""`agent-memory gateway ...`: operate the tool gateway (tenants, API keys, credentials, tools).

Commands act on the local runtime's KV (`--state DIR`). With `--wrangler`, write commands
print the `wrangler kv key put --remote` commands that make the same change on a deployed
Worker instead of touching local state (docs/gateway.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bindings.ports.clock import SystemClock
from bindings.ports.crypto import parse_key_encryption_keys
from bindings.ports.kv import KVNamespace
from gateway import admin_ops
from gateway.credentials import ALL_SCOPES, CredentialSealer, credential_sealer
from local_runtime.commands.common import command

Action = Callable[[KVNamespace, argparse.Namespace], Coroutine[Any, Any, Any]]


def _kv(args: argparse.Namespace) -> KVNamespace:
    from local_runtime.adapters.kv import SqliteKV
    from local_runtime.state import StateDir

    return SqliteKV(StateDir.create(args.state).kv)


def _print(value: Any) -> None:
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json") if hasattr(v, "model_dump") else v for v in value]
    print(json.dumps(value, indent=2))


def _run(action: Action) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        try:
            result: Any = asyncio.run(action(_kv(args), args))
        except admin_ops.AdminError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if result is not None:
            _print(result)
        return 0

    return command


def _read_secret(args: argparse.Namespace) -> str:
    # Never from argv: it would land in shell history and process listings.
    secret = Path(args.from_file).read_text() if args.from_file else sys.stdin.read()
    return secret.strip()


def _load_json(path: str) -> Any:
    return json.loads(Path(path).read_text())


# --- actions ---------------------------------------------------------------------------------


async def _tenant_create(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return await admin_ops.create_tenant(
        kv, SystemClock(), a.tenant, display_name=a.name, memory_enabled=a.memory
    )


async def _tenant_memory(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return await admin_ops.set_tenant_memory(kv, a.tenant, a.state_value == "on")


async def _tenant_list(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return await admin_ops.list_tenants(kv)


async def _key_issue(kv: KVNamespace, a: argparse.Namespace) -> Any:
    issued = await admin_ops.issue_api_key(
        kv, SystemClock(), a.tenant, scopes=a.scope or ALL_SCOPES, label=a.label
    )
    print(
        f"key_id: {issued.key_id}  (the key below is shown once; only its hash is stored)",
        file=sys.stderr,
    )
    print(issued.api_key)
    return None


async def _key_revoke(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return await admin_ops.revoke_api_key(kv, SystemClock(), a.tenant, a.key_id)


async def _key_list(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return await admin_ops.list_api_keys(kv, a.tenant)


def _sealer(args: argparse.Namespace) -> CredentialSealer | None:
    """Seals with the state folder's dev key-encryption key, as the local Worker opens."""
    from local_runtime.adapters.cipher import CryptographyCipher
    from local_runtime.dev_keks import dev_pii_keks
    from local_runtime.state import StateDir

    keks = parse_key_encryption_keys(dev_pii_keks(StateDir.create(args.state)))
    return credential_sealer(CryptographyCipher(), keks)


async def _cred_set(kv: KVNamespace, a: argparse.Namespace) -> Any:
    secret = _read_secret(a)
    await admin_ops.set_credential(kv, SystemClock(), a.tenant, a.provider, secret, _sealer(a))
    return {"tenant": a.tenant, "provider": a.provider, "stored": True}


async def _cred_delete(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return {"deleted": await admin_ops.delete_credential(kv, a.tenant, a.provider)}


async def _tool_register(kv: KVNamespace, a: argparse.Namespace) -> Any:
    tool = await admin_ops.register_tool(kv, a.tenant, _load_json(a.file))
    return tool.model_dump(mode="json", exclude_none=True)


async def _tool_remove(kv: KVNamespace, a: argparse.Namespace) -> Any:
    return {"removed": await admin_ops.remove_tool(kv, a.tenant, a.name)}


async def _tool_list(kv: KVNamespace, a: argparse.Namespace) -> Any:
    tools = await admin_ops.list_tools(kv, a.tenant)
    return [t.model_dump(mode="json", exclude_none=True) for t in tools]


# --- `--wrangler` variants (no local state touched) ------------------------------------------


Plan = Callable[[argparse.Namespace], list[admin_ops.KVWrite]]


def _plan_tenant_create(args: argparse.Namespace) -> list[admin_ops.KVWrite]:
    return admin_ops.plan_create_tenant(
        args.tenant, now=SystemClock().now(), display_name=args.name, memory_enabled=args.memory
    )[1]


def _plan_key_issue(args: argparse.Namespace) -> list[admin_ops.KVWrite]:
    issued, writes = admin_ops.plan_issue_api_key(
        args.tenant, now=SystemClock().now(), scopes=args.scope or ALL_SCOPES, label=args.label
    )
    print(f"# API key (shown once): {issued.api_key}  key_id: {issued.key_id}")
    return writes


def _plan_credential_set(args: argparse.Namespace) -> list[admin_ops.KVWrite]:
    return admin_ops.plan_set_credential(
        args.tenant, args.provider, _read_secret(args), now=SystemClock().now()
    )


def _plan_tool_register(args: argparse.Namespace) -> list[admin_ops.KVWrite]:
    return admin_ops.plan_register_tool(args.tenant, _load_json(args.file))


def _write_command(action: Action, plan: Plan) -> Callable[[argparse.Namespace], int]:
    """Apply `action` to local state, or with `--wrangler` print `plan`'s KV writes."""
    local = _run(action)

    def command(args: argparse.Namespace) -> int:
        if not args.wrangler:
            return local(args)
        try:
            writes = plan(args)
        except admin_ops.AdminError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print("\n".join(admin_ops.wrangler_put_commands(writes, binding=args.binding)))
        return 0

    return command


def _leaf(
    group: Any,
    name: str,
    func: Callable[[argparse.Namespace], int],
    help: str,
    *positionals: str,
    wrangler: bool = False,
) -> argparse.ArgumentParser:
    """A command of `group` taking `positionals`, with `--state` (and `--wrangler`)."""
    parser = command(group, name, func, help, *positionals)
    if wrangler:
        parser.add_argument(
            "--wrangler",
            action="store_true",
            help="print wrangler commands for a deployed Worker instead",
        )
        parser.add_argument("--binding", default="KV", help="KV binding name (with --wrangler)")
    return parser


def register(sub: Any) -> None:
    gw = sub.add_parser(
        "gateway", help="operate the tool gateway: tenants, keys, credentials, tools"
    )
    groups = gw.add_subparsers(dest="gateway_group", required=True, metavar="GROUP")

    def group(name: str, help: str) -> Any:
        return groups.add_parser(name, help=help).add_subparsers(required=True, metavar="CMD")

    tenant = group("tenant", "tenants")
    write = _write_command(_tenant_create, _plan_tenant_create)
    p = _leaf(tenant, "create", write, "create a tenant", "tenant", wrangler=True)
    p.add_argument("--name", default="")
    p.add_argument("--memory", action="store_true", help="enable recall_memory/store_memory")
    p = _leaf(tenant, "memory", _run(_tenant_memory), "turn the memory tools on or off", "tenant")
    p.add_argument("state_value", choices=["on", "off"])
    _leaf(tenant, "list", _run(_tenant_list), "list tenants")

    key = group("key", "API keys")
    write = _write_command(_key_issue, _plan_key_issue)
    p = _leaf(key, "issue", write, "issue an API key (printed once)", "tenant", wrangler=True)
    p.add_argument("--scope", action="append", choices=list(ALL_SCOPES))
    p.add_argument("--label", default="")
    _leaf(key, "revoke", _run(_key_revoke), "revoke an API key by key_id", "tenant", "key_id")
    _leaf(key, "list", _run(_key_list), "list a tenant's keys (ids, never the keys)", "tenant")

    cred = group("credential", "provider credentials")
    write = _write_command(_cred_set, _plan_credential_set)
    help = "store a provider secret read from stdin or --from-file"
    p = _leaf(cred, "set", write, help, "tenant", "provider", wrangler=True)
    p.add_argument("--from-file", default=None)
    _leaf(cred, "delete", _run(_cred_delete), "delete a provider secret", "tenant", "provider")

    tool = group("tool", "tool configs")
    write = _write_command(_tool_register, _plan_tool_register)
    help = "register a tool from a JSON config file"
    _leaf(tool, "register", write, help, "tenant", "file", wrangler=True)
    _leaf(tool, "remove", _run(_tool_remove), "remove a tool", "tenant", "name")
    _leaf(tool, "list", _run(_tool_list), "list a tenant's tools", "tenant")
