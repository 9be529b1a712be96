"""`worker.entry`'s own glue in real Pyodide with the real workers SDK: JS Request ->
`HttpRequest`, `HttpResponse` -> JS Response, the cron handler, the `AgentRuntime` Durable
Object's construction and RPC.

entry.py imports modules that need pydantic (the app, the cron jobs, the Durable Object
core, `build_bindings` through `Settings`), and pydantic-core has no Pyodide wheel offline.
Those application modules are replaced here, while entry.py is imported, by recording
doubles (`_install_doubles`; the app double answers 404/405 like the router, which needs
pydantic through `agent_memory.namespace`); everything the glue itself touches is real: the
SDK's `Request`/`Response`/`WorkerEntrypoint`/`DurableObject`, Pyodide's conversions, JS
Request/Response/Headers objects and the error bodies (`http_messages`). That the real app
answers any method string with a JSON 405/404 is tests/test_edge.py's part.
docs/architecture.md lists what this leaves untested in Pyodide.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import harness_js
from js import Object, Request
from pyodide.ffi import to_js

from http_messages import ApiError, HttpRequest, HttpResponse, json_response, method_not_allowed

seen: dict[str, list[Any]] = {
    "requests": [],
    "crons": [],
    "rpc": [],
    "initialized": [],
    "alarms": [],
}


class _Settings:
    max_body_bytes = 64


class _Bindings:
    settings = _Settings()


class _Core:
    fail_alarms = False

    def __init__(self, storage: Any, bindings: Any, alarms: Any = None) -> None:
        self.storage = storage
        self.alarms = alarms

    async def initialize(self) -> None:
        seen["initialized"].append(True)

    async def alarm(self, retry_count: int = 0) -> None:
        # What the handler sees of its own alarm while it runs (docs: null unless set anew).
        seen["alarms"].append((retry_count, await self.alarms.get_alarm()))
        if self.fail_alarms:
            raise RuntimeError("D1 unavailable")
        await self.alarms.set_alarm(1_750_086_400.0)

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        seen["rpc"].append((method, payload))
        return {"method": method, "payload": payload}


async def _echo(request: HttpRequest, params: dict[str, str], bindings: Any) -> HttpResponse:
    response = json_response(
        {"method": request.method, "query": request.query, "body": request.body.decode()},
        status=201,
    )
    response.headers.set("x-echo", "1")
    return response


# The routes of the app double: path -> methods (the real router upper-cases the method).
_ROUTES = {"/echo": ("GET", "POST")}


async def _handle(request: HttpRequest, bindings: Any) -> HttpResponse:
    seen["requests"].append(request)
    if request.path == "/empty":
        return HttpResponse(status=204, body=b"should not be sent")
    allowed = _ROUTES.get(request.path)
    if allowed is None:
        return ApiError(404, "not_found", f"no route for {request.path}").to_response()
    if request.method.upper() not in allowed:
        return method_not_allowed(list(allowed)).to_response()
    return await _echo(request, {}, bindings)


async def _run_scheduled(cron: str, scheduled_time: float, bindings: Any) -> None:
    seen["crons"].append((cron, scheduled_time))


def _module(name: str, **members: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(members)
    return module


def _install_doubles() -> Any:
    doubles = {
        "pydantic": _module("pydantic", ValidationError=type("ValidationError", (ValueError,), {})),
        "bindings.cloudflare.environment": _module(
            "bindings.cloudflare.environment", build_bindings=lambda env, ctx: _Bindings()
        ),
        "worker.app": _module("worker.app", handle=_handle),
        "worker.cron": _module("worker.cron", run_scheduled=_run_scheduled),
    }
    saved = {name: sys.modules.get(name) for name in doubles}
    sys.modules.update(doubles)
    try:
        import worker.entry as entry
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return entry


entry = _install_doubles()
# The Durable Object imports its core on its first construction: the double stays.
sys.modules["agent_runtime_do.core"] = _module("agent_runtime_do.core", AgentRuntimeCore=_Core)


def _js_request(
    url: str, method: str = "GET", body: str | None = None, headers: dict[str, str] | None = None
) -> Any:
    init: dict[str, Any] = {"method": method, "headers": headers or {}}
    if body is not None:
        init["body"] = body
    return Request.new(url, to_js(init, dict_converter=Object.fromEntries))


async def _fetch(request: Any) -> tuple[int, Any, str]:
    worker = entry.Default(harness_js.newExecutionContext(), harness_js.env)
    response = await worker.fetch(request)
    js_response = response.js_object
    return int(js_response.status), js_response.headers, await js_response.text()


async def test_any_method_string_gets_a_json_answer_not_a_crash() -> None:
    # workerd keeps a non-standard method's case (only DELETE/GET/HEAD/OPTIONS/POST/PUT are
    # normalised), and the SDK's `Request.method` is `HTTPMethod[...]`, which raises for
    # PROPFIND or "patch": the entry must read the method string itself.
    for method in ["PROPFIND", "patch", "M-SEARCH", "PUT"]:
        status, headers, text = await _fetch(_js_request("https://w.example/echo", method))
        assert seen["requests"][-1].method == method  # passed through verbatim
        assert status == 405, (method, status, text)
        assert headers.get("content-type") == "application/json"
        assert json.loads(text)["error"]["code"] == "method_not_allowed"
    status, _, text = await _fetch(_js_request("https://w.example/nowhere", "PROPFIND"))
    assert status == 404 and json.loads(text)["error"]["code"] == "not_found", text


async def test_request_and_response_cross_the_edge_unchanged() -> None:
    request = _js_request(
        "https://w.example/echo?a=1&b=%C3%A9", "POST", body='{"x": "é"}', headers={"x-tenant": "t1"}
    )
    status, headers, text = await _fetch(request)
    assert status == 201 and headers.get("x-echo") == "1"
    assert json.loads(text) == {
        "method": "POST",
        "query": {"a": "1", "b": "é"},
        "body": '{"x": "é"}',
    }
    sent = seen["requests"][-1]
    assert sent.url == "https://w.example/echo?a=1&b=%C3%A9"
    assert sent.headers.get("x-tenant") == "t1" and sent.headers.get("X-TENANT") == "t1"
    assert sent.body == '{"x": "é"}'.encode()


async def test_a_declared_oversized_body_is_refused_before_it_is_read() -> None:
    before = len(seen["requests"])
    # An incoming request carries the client's Content-Length (a constructed one does not).
    request = _js_request(
        "https://w.example/echo", "POST", body="x" * 100, headers={"content-length": "100"}
    )
    status, _, text = await _fetch(request)
    assert status == 413 and json.loads(text)["error"]["code"] == "payload_too_large"
    assert len(seen["requests"]) == before


async def test_a_null_body_status_is_sent_without_a_body() -> None:
    status, _, text = await _fetch(_js_request("https://w.example/empty"))
    assert (status, text) == (204, "")


async def test_the_cron_string_reaches_the_dispatcher_exactly_as_configured() -> None:
    worker = entry.Default(harness_js.newExecutionContext(), harness_js.env)
    controller = to_js(
        {"cron": "0 3 * * SUN", "scheduledTime": 1_767_225_600_000},
        dict_converter=Object.fromEntries,
    )
    # workerd calls a class entrypoint's scheduled(controller, env, ctx) with undefined
    # env/ctx; Pyodide passes JS undefined to Python as None.
    await worker.scheduled(controller, None, None)
    assert seen["crons"][-1] == ("0 3 * * SUN", 1_767_225_600.0)


async def test_agent_runtime_initializes_behind_the_gate_and_answers_rpc() -> None:
    state = harness_js.newDurableObjectState(harness_js.newStorage())
    obj = entry.AgentRuntime(state, harness_js.env)
    assert isinstance(obj._core.storage, entry.CloudflareDurableObjectStorage)
    await harness_js.nextTurn()
    assert seen["initialized"] == [True]
    payload = to_js({"tenant": "t1", "n": 1, "none": None}, dict_converter=Object.fromEntries)
    answer = await obj.call("ping", payload)
    assert answer == {"method": "ping", "payload": {"tenant": "t1", "n": 1, "none": None}}
    assert await obj.call("ping", None) == {"method": "ping", "payload": {}}
    try:
        await obj.call("ping", "not an object")
    except TypeError as exc:
        assert "must be an object" in str(exc)
    else:
        raise AssertionError("a string payload was accepted")


async def test_the_alarm_handler_reaches_the_core_with_its_retry_count() -> None:
    from pyodide.ffi import create_proxy

    from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage

    state = harness_js.newDurableObjectState(harness_js.newStorage())
    obj = entry.AgentRuntime(state, harness_js.env)
    await harness_js.nextTurn()
    core = obj._core
    assert isinstance(core.alarms, CloudflareDurableObjectStorage)
    await core.alarms.set_alarm(1_750_000_000.0)
    assert state.alarms.scheduled == 1_750_000_000_000
    handler = create_proxy(obj.alarm)
    try:
        early = (await state.deliverAlarm(handler, 1_749_999_999_999)).to_py()
        assert early == {"ran": False}
        ran = (await state.deliverAlarm(handler, 1_750_000_000_000)).to_py()
        assert ran == {"ran": True, "retryCount": 0}, ran
        # The handler saw no alarm set (it had started), then set the next one itself.
        assert seen["alarms"][-1] == (0, None)
        assert await core.alarms.get_alarm() == 1_750_086_400.0

        # A handler that raises is retried by the runtime, 2 s later, with retryCount 1,
        # which the entry hands to the core. alarmInfo is an AlarmInvocationInfo instance, as
        # in workerd: `to_py` leaves it a JsProxy, so the old reading (`to_py(info)` then
        # `.get("retryCount")` if a dict) gave the core 0 here (failed once the model stopped
        # passing a plain object).
        _Core.fail_alarms = True
        failed = (await state.deliverAlarm(handler, 1_750_086_400_000)).to_py()
        assert "RuntimeError: D1 unavailable" in failed["error"], failed
        assert state.alarms.scheduled == 1_750_086_402_000
        _Core.fail_alarms = False
        retried = (await state.deliverAlarm(handler, 1_750_086_402_000)).to_py()
        assert retried == {"ran": True, "retryCount": 1}, retried
        assert seen["alarms"][-1] == (1, None)
    finally:
        _Core.fail_alarms = False
        handler.destroy()
