"""`worker.entry`: the Worker's fetch/scheduled handlers and the AgentRuntime Durable Object,
run on the real workers SDK over the fake runtime, the way workerd drives them."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from tests.fakes.js_runtime import FakeJsRuntime, FakeRequest, JSPlainObject


def assert_secure(headers: dict[str, str]) -> None:
    """The security headers `handle` adds, on an answer given before it runs (issue 26)."""
    from http_messages import SECURITY_HEADERS

    assert {name: headers.get(name) for name in SECURITY_HEADERS} == SECURITY_HEADERS


def worker_env(runtime: FakeJsRuntime, **overrides: Any) -> JSPlainObject:
    members: dict[str, Any] = {
        "KV": runtime.kv(),
        "DB": runtime.d1(),
        "AI": runtime.ai(),
        "AGENT_RUNTIME": runtime.do_namespace(),
        "ENVIRONMENT": "test",
        "MAX_BODY_BYTES": "2048",
    }
    members.update(overrides)
    return runtime.env(**members)


def new_default(runtime: FakeJsRuntime, env: JSPlainObject) -> tuple[Any, Any]:
    """Instantiate `Default` as workerd does: raw JS ctx and env to the constructor."""
    from worker.entry import Default

    ctx = runtime.execution_context()
    return Default(runtime.proxy(ctx), runtime.proxy(env)), ctx


async def fetch(
    runtime: FakeJsRuntime, entry: Any, request: FakeRequest
) -> tuple[int, dict[str, str], bytes]:
    import workers

    response = await entry.fetch(workers.Request(runtime.proxy(request)))
    assert isinstance(response, workers.Response)
    return response.status, dict(response.headers.items()), await response.bytes()


async def test_fetch_answers_healthz_with_the_deployments_bindings(
    js_runtime: FakeJsRuntime,
) -> None:
    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    status, headers, body = await fetch(
        js_runtime, entry, js_runtime.request("https://w.example/healthz")
    )
    assert status == 200
    assert headers["content-type"] == "application/json"
    payload = json.loads(body)
    assert payload["environment"] == "test"
    assert payload["bindings"]["kv"] and payload["bindings"]["agent_runtime"]
    assert not payload["bindings"]["vectorize"]
    assert payload["embedding"]["model"] == "@cf/baai/bge-small-en-v1.5#pooling=cls"


async def test_fetch_reads_the_body_and_maps_errors_to_json(js_runtime: FakeJsRuntime) -> None:
    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    request = js_runtime.request(
        "https://w.example/nowhere", "POST", {"Content-Type": "application/json"}, b'{"a": 1}'
    )
    status, _, body = await fetch(js_runtime, entry, request)
    assert status == 404
    assert json.loads(body)["error"]["code"] == "not_found"
    assert request.used  # the body was read through the SDK


async def test_a_declared_oversized_body_is_refused_unread(js_runtime: FakeJsRuntime) -> None:
    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    request = js_runtime.request(
        "https://w.example/healthz", "POST", {"Content-Length": "4096"}, b"x" * 4096
    )
    status, headers, body = await fetch(js_runtime, entry, request)
    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert_secure(headers)
    assert not request.used


async def test_an_undeclared_oversized_body_is_refused_at_the_chunk_that_passes_the_limit(
    js_runtime: FakeJsRuntime,
) -> None:
    """No Content-Length (a chunked body): the entry reads the stream only until it passes
    MAX_BODY_BYTES (2048 here) and cancels the rest. Real workerd: tests/workerd."""
    from tests.fakes.js_runtime import FakeReadableStream

    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    chunk = FakeReadableStream.CHUNK_BYTES
    request = js_runtime.request("https://w.example/healthz", "POST", {}, b"x" * (10 * chunk))
    status, headers, body = await fetch(js_runtime, entry, request)
    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert_secure(headers)
    assert request.stream is not None
    assert (request.stream.bytes_read, request.stream.cancelled) == (chunk, True)


async def test_an_undeclared_body_within_the_limit_is_read_whole(
    js_runtime: FakeJsRuntime,
) -> None:
    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    request = js_runtime.request("https://w.example/nowhere", "POST", {}, b"y" * 2048)
    status, _, body = await fetch(js_runtime, entry, request)
    assert (status, json.loads(body)["error"]["code"]) == (404, "not_found")  # the router's
    assert request.stream is not None and request.stream.bytes_read == 2048


async def test_a_misconfigured_var_answers_a_json_500(js_runtime: FakeJsRuntime) -> None:
    entry, _ = new_default(js_runtime, worker_env(js_runtime, MAX_BODY_BYTES="lots"))
    status, headers, body = await fetch(
        js_runtime, entry, js_runtime.request("https://w.example/admin/tenants")
    )
    assert status == 500
    assert json.loads(body)["error"]["code"] == "internal_error"
    assert_secure(headers)
    assert headers["cache-control"] == "no-store"


async def test_fetch_accepts_a_bare_js_request(js_runtime: FakeJsRuntime) -> None:
    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    response = await entry.fetch(js_runtime.proxy(js_runtime.request("https://w.example/healthz")))
    assert response.status == 200


async def test_null_body_statuses_send_no_body(js_runtime: FakeJsRuntime) -> None:
    from http_messages import HttpResponse, empty_response
    from worker.entry import to_workers_response

    response = to_workers_response(empty_response(204, {"x-trace": "1"}))
    assert response.status == 204 and response.headers["x-trace"] == "1"
    assert response.body is None  # JS null: no body at all (a 204 with one throws)
    import workers
    from pyodide.ffi import JsException

    with pytest.raises(JsException, match="null body status"):  # what the guard avoids
        workers.Response(b"", status=204)
    created = to_workers_response(HttpResponse(status=201, body=b""))
    assert await created.bytes() == b""


def test_scheduled_takes_three_positional_arguments() -> None:
    with FakeJsRuntime():
        from worker.entry import Default

        parameters = list(inspect.signature(Default.scheduled).parameters.values())
        positional = [p for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert [p.name for p in positional] == ["self", "controller", "env", "ctx"]
        assert positional[2].default is None and positional[3].default is None


async def test_scheduled_runs_the_cron_job_with_bindings_from_self_env(
    js_runtime: FakeJsRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import worker.cron

    seen: list[tuple[Any, float]] = []

    async def job(bindings: Any, scheduled_time: float) -> dict[str, Any]:
        seen.append((bindings, scheduled_time))
        return {"pruned": 0}

    monkeypatch.setitem(worker.cron.JOBS, "0 3 * * SUN", job)
    entry, _ = new_default(js_runtime, worker_env(js_runtime))
    controller = js_runtime.proxy(js_runtime.controller("0 3 * * SUN", 1_750_000_000_500.0))
    # workerd: three positional arguments, env and ctx `undefined` for a class entrypoint.
    await entry.scheduled(controller, None, None)
    bindings, scheduled_time = seen[0]
    assert scheduled_time == pytest.approx(1_750_000_000.5)
    assert bindings.kv is not None and bindings.settings.environment == "test"


def test_main_module_exposes_the_entrypoint_and_durable_object(js_runtime: FakeJsRuntime) -> None:
    """Like workerd's introspection: classes found by scanning the main module."""
    from workers import DurableObject, WorkerEntrypoint

    import worker.entry

    def collect(base: type) -> list[str]:
        return [
            key
            for key in worker.entry.__all__
            if inspect.isclass(getattr(worker.entry, key))
            and issubclass(getattr(worker.entry, key), base)
            and getattr(worker.entry, key) is not base
        ]

    assert collect(WorkerEntrypoint) == ["Default"]
    assert collect(DurableObject) == ["AgentRuntime"]


async def test_agent_runtime_creates_its_schema_under_block_concurrency_while(
    js_runtime: FakeJsRuntime,
) -> None:
    from tests.fakes.js_runtime import FakeDurableObjectState
    from worker.entry import AgentRuntime

    state = FakeDurableObjectState("t1:planner:i1")
    runtime_object = AgentRuntime(js_runtime.proxy(state), js_runtime.proxy(worker_env(js_runtime)))
    assert len(state.blockers) == 1  # initialize() was handed to blockConcurrencyWhile
    assert "turn_state" not in state.storage_obj.table_names()  # not run synchronously
    await state.input_gate()
    assert {"turn_state", "run_log", "procedural_workflows"} <= state.storage_obj.table_names()
    assert await runtime_object.call("ping", {}) == {"ok": True, "instances": 0}


async def test_agent_runtime_answers_rpc_through_the_namespace_adapter(
    js_runtime: FakeJsRuntime, mode: str
) -> None:
    import workers

    from bindings.cloudflare.environment import build_bindings
    from worker.entry import AgentRuntime

    namespace = js_runtime.do_namespace()
    env = worker_env(js_runtime, AGENT_RUNTIME=namespace)
    namespace.serve(AgentRuntime, env)
    raw_env = js_runtime.proxy(env)
    bindings = build_bindings(
        raw_env if mode == "raw" else workers._EnvWrapper(raw_env),
        js_runtime.proxy(js_runtime.execution_context()),
    )
    assert bindings.agents is not None
    stub = bindings.agents.get_by_name("t1:planner:i1")
    assert await stub.call("ping", {"note": None}) == {"ok": True, "instances": 0}
    # One object per name; the schema ran once, before the first call was delivered.
    assert await stub.call("ping", {}) == {"ok": True, "instances": 0}
    assert list(namespace.hosts) == ["t1:planner:i1"]

    from pyodide.ffi import JsException

    with pytest.raises(JsException, match="UnknownMethodError"):
        await stub.call("no_such_method", {})
