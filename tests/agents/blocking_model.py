"""`agent-memory dev` whose model blocks forever on any input containing "block" (and answers
at once otherwise), printing `model-called <input>` on stdout when it blocks: a test kills
this process mid-turn on that signal (tests/agents/test_interrupted_runs.py).

Usage: python -m tests.agents.blocking_model STATE_DIR PORT
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from bindings.ports.llm import ChatMessage, ChatResult, ToolSpec
from local_runtime.runtime import LocalRuntime
from local_runtime.server import serve
from tests.fakes.embedder import HashingEmbedder


class BlockingLLM:
    model = "blocking"

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        text = messages[-1].content
        if "block" in text:
            print(f"model-called {text}", flush=True)
            await asyncio.Event().wait()  # until the process is killed
        return ChatResult(message=ChatMessage(role="assistant", content="noted"), model=self.model)


if __name__ == "__main__":
    runtime = LocalRuntime.open(sys.argv[1], embedder=HashingEmbedder(), llm=BlockingLLM())
    serve(runtime, port=int(sys.argv[2]))
