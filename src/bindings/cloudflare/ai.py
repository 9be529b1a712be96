"""The Workers AI binding (`env.AI.run`): the `Embedder` (bge), the `Reranker` and the `LLM`;
loads without numpy or pydantic (tests/pyodide). Errors are "<code>: <text>"
(workers-ai/platform/errors): 3036 rate limit, 3040 no capacity, 3007/3008 timeout.

Embeddings pin **cls** pooling (the bge schema's recommendation; `mean` is only the legacy
default); the two are not comparable, so the pooling is part of `config.model`. The reranker
answers `{response: [{id, score}]}` best first (`id`: the context's index); scores are put back
in request order. Chat replies come "traditional" (`{response, tool_calls}`) or OpenAI-shaped
(`{choices}`); an assistant turn's tool calls go both as JSON `content` (all a traditional
model reads) and as `tool_calls`; calls without ids get `call_<step>_<i>`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from bindings.cloudflare import ffi
from bindings.openai_llm import (
    decode_arguments,
    message_to_openai,
    parse_openai_message,
    tool_to_openai,
    usage_of,
)
from bindings.ports.embedder import (
    EmbeddingBadRequestError,
    EmbeddingConfig,
    EmbeddingError,
    EmbeddingOverloadedError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
)
from bindings.ports.llm import (
    ChatMessage,
    ChatResult,
    LLMError,
    LLMRateLimitedError,
    LLMUnavailableError,
    ToolCall,
    ToolSpec,
)
from bindings.ports.reranker import RerankError

BGE_SMALL = "@cf/baai/bge-small-en-v1.5"
BGE_DIMENSIONS = {
    "@cf/baai/bge-small-en-v1.5": 384,
    "@cf/baai/bge-base-en-v1.5": 768,
    "@cf/baai/bge-large-en-v1.5": 1024,
}
MAX_TEXTS_PER_CALL = 100
POOLING = "cls"
MAX_TOKENS = 1024
BGE_RERANKER = "@cf/baai/bge-reranker-base"
# bge-reranker-base reads 512 tokens of question and passage together; longer text is cut
# here rather than sent (about 4 characters a token).
MAX_RERANK_CHARS = 2_000

_RATE_LIMITED = {3036}
_OVERLOADED = {3040}
_TIMEOUT = {3007, 3008}
_BAD_REQUEST = {5007, 5004, 3039, 3003, 5018, 5016, 3023, 3041, 5019, 5005, 3042, 3006}
_CODE = re.compile(r"(?<!\d)([35]\d{3}):")


def _code(message: str) -> int | None:
    found = _CODE.search(message)
    return int(found.group(1)) if found else None


class _WorkersAIModel:
    def __init__(self, ai: Any, model: str) -> None:
        self._ai = ai
        self._raw = ffi.is_raw(ai)
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    async def _run(self, inputs: dict[str, Any]) -> Any:
        """`env.AI.run(model, inputs)` as plain Python; a JS error propagates as `JsException`."""
        return ffi.to_py(await self._ai.run(self._model, ffi.to_js_arg(inputs, self._raw)))


class WorkersAIEmbedder(_WorkersAIModel):
    def __init__(self, ai: Any, model: str = BGE_SMALL, dimensions: int = 384) -> None:
        expected = BGE_DIMENSIONS.get(model)
        if expected is not None and expected != dimensions:
            raise ValueError(f"{model} produces {expected}-dimensional vectors, not {dimensions}")
        super().__init__(ai, model)
        self._config = EmbeddingConfig(
            provider="workers-ai", model=f"{model}#pooling={POOLING}", dimensions=dimensions
        )

    @property
    def config(self) -> EmbeddingConfig:
        return self._config

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector (a plain list) per text, in order. Empty texts, which bge
        rejects without naming them, are refused first, naming their positions."""
        items = list(texts)
        if isinstance(texts, str) or not all(isinstance(text, str) for text in items):
            raise TypeError("embed() takes a sequence of strings (not one string)")
        empty = [index for index, text in enumerate(items) if not text]
        if empty:
            raise EmbeddingBadRequestError(
                f"Workers AI {self._model} rejects empty texts; the texts at positions "
                f"{empty} are empty"
            )
        return [
            _normalised(row)
            for start in range(0, len(items), MAX_TEXTS_PER_CALL)
            for row in await self._embed_batch(items[start : start + MAX_TEXTS_PER_CALL])
        ]

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        try:
            response = await self._run({"text": batch, "pooling": POOLING})
        except ffi.JsException as exc:
            raise _embedding_error(exc) from exc
        if not isinstance(response, dict) or not isinstance(response.get("data"), list):
            raise EmbeddingError(f"Workers AI returned no embeddings for {self._model}")
        pooling = response.get("pooling")
        if pooling is not None and pooling != POOLING:
            raise EmbeddingError(f"asked for {POOLING} pooling, got {pooling}")
        rows = [[float(v) for v in row] for row in response["data"]]
        if len(rows) != len(batch):
            raise EmbeddingError(f"sent {len(batch)} texts, got {len(rows)} embeddings")
        if any(len(row) != self._config.dimensions for row in rows):
            raise EmbeddingError(f"expected {self._config.dimensions} dimensions per embedding")
        return rows


class WorkersAIReranker(_WorkersAIModel):
    def __init__(self, ai: Any, model: str = BGE_RERANKER) -> None:
        super().__init__(ai, model)

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        items = [text[:MAX_RERANK_CHARS] for text in texts]
        if not items:
            return []
        if not query.strip() or not all(text.strip() for text in items):
            raise RerankError(f"Workers AI {self._model} rejects an empty query or passage")
        inputs = {
            "query": query[:MAX_RERANK_CHARS],
            "contexts": [{"text": text} for text in items],
            "top_k": len(items),
        }
        try:
            reply = await self._run(inputs)
        except ffi.JsException as exc:
            raise RerankError(f"Workers AI {self._model}: {ffi.error_message(exc)}") from None
        entries = reply.get("response") if isinstance(reply, dict) else None
        scores: list[float | None] = [None] * len(items)
        for entry in entries if isinstance(entries, list) else []:
            index = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(index, int) and 0 <= index < len(items):
                score = entry.get("score")
                scores[index] = float(score) if isinstance(score, (int, float)) else None
        if any(score is None or not math.isfinite(score) for score in scores):
            raise RerankError(f"Workers AI {self._model} did not score every passage")
        return [float(score or 0.0) for score in scores]


def _normalised(row: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(value * value for value in row))
    if not math.isfinite(norm) or norm == 0:
        raise EmbeddingError("Workers AI returned a zero or non-finite embedding")
    return [value / norm for value in row]


def _embedding_error(exc: BaseException) -> EmbeddingError:
    message = f"Workers AI: {ffi.error_message(exc)}"
    code = _code(message)
    lowered = message.lower()
    if code in _RATE_LIMITED or "rate limit" in lowered or "too many requests" in lowered:
        return EmbeddingRateLimitedError(message)
    if code in _OVERLOADED or "capacity" in lowered or "overloaded" in lowered:
        return EmbeddingOverloadedError(message)
    if code in _TIMEOUT or "timeout" in lowered or "timed out" in lowered:
        return EmbeddingTimeoutError(message)
    if code in _BAD_REQUEST:
        return EmbeddingBadRequestError(message)
    return EmbeddingError(message)


def message_to_workers_ai(message: ChatMessage) -> dict[str, Any]:
    if message.role == "assistant" and message.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        return {
            "role": "assistant",
            "content": message.content or json.dumps(calls),
            "tool_calls": message_to_openai(message)["tool_calls"],
        }
    if message.role == "tool":
        return {
            "role": "tool",
            "name": message.name or "",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    return {"role": message.role, "content": message.content}


def parse_workers_ai_reply(reply: Any, step: int) -> ChatMessage:
    if not isinstance(reply, dict):
        raise LLMError("Workers AI returned no result object")
    if isinstance(reply.get("choices"), list) and reply["choices"]:
        first = reply["choices"][0]
        return parse_openai_message(
            first.get("message") if isinstance(first, dict) else None, f"call_{step}"
        )
    calls = []
    for index, call in enumerate(reply.get("tool_calls") or []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise LLMError("Workers AI returned a tool call without a name")
        arguments = decode_arguments(call.get("arguments"))
        calls.append(ToolCall(id=f"call_{step}_{index}", name=call["name"], arguments=arguments))
    text = reply.get("response")
    if not isinstance(text, str):  # some models put structured output there: keep it readable
        text = "" if text is None else json.dumps(text)
    return ChatMessage(role="assistant", content=text, tool_calls=calls)


class WorkersAILLM(_WorkersAIModel):
    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        inputs: dict[str, Any] = {
            "messages": [message_to_workers_ai(m) for m in messages],
            "max_tokens": MAX_TOKENS,
        }
        if tools:
            inputs["tools"] = [tool_to_openai(t) for t in tools]
        try:
            reply = await self._run(inputs)
        except ffi.JsException as exc:
            message = f"Workers AI {self._model}: {ffi.error_message(exc)}"
            code = _code(message)
            if code in _RATE_LIMITED:
                raise LLMRateLimitedError(message) from None
            if code in _OVERLOADED | _TIMEOUT:
                raise LLMUnavailableError(message) from None
            raise LLMError(message) from None
        step = sum(1 for m in messages if m.role == "assistant")
        return ChatResult(
            message=parse_workers_ai_reply(reply, step), model=self._model, **usage_of(reply)
        )
