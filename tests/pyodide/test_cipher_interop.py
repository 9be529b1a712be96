"""WebCrypto and `cryptography` read each other's AES-256-GCM (issue 13): the CPython half.

The in-Pyodide half (tests/pyodide/py/test_cipher.py) decrypts aes_gcm_vectors.json with
`crypto.subtle` and returns ciphertext WebCrypto made; here `cryptography` must reproduce
every vector of that file byte for byte (so it is `cryptography`'s output, not a hand-made
file) and decrypt what WebCrypto returned, through the local adapter the runtime uses.
"""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bindings.ports.crypto import CipherError
from local_runtime.adapters.cipher import CryptographyCipher
from tests.pyodide.conftest import PY_TESTS, PyodideRun

OUTPUT_ID = "test_cipher.py::test_webcrypto_output_for_cryptography"


def test_the_vectors_are_cryptography_output() -> None:
    vectors = json.loads((PY_TESTS / "aes_gcm_vectors.json").read_text())["vectors"]
    assert len(vectors) >= 4
    for v in vectors:
        key, nonce, aad, pt = (bytes.fromhex(v[n]) for n in ("key", "nonce", "aad", "plaintext"))
        assert AESGCM(key).encrypt(nonce, pt, aad) == bytes.fromhex(v["ciphertext"])


@pytest.mark.parametrize("test_id", [OUTPUT_ID])
async def test_cryptography_decrypts_webcrypto_output(
    test_id: str, pyodide_run: PyodideRun
) -> None:
    if pyodide_run.failure is not None:
        pytest.fail(pyodide_run.failure, pytrace=False)
    assert pyodide_run.results is not None
    real = pyodide_run.results[test_id]
    assert real["outcome"] == "passed", real["traceback"]
    cipher = CryptographyCipher()
    assert real["data"]
    for v in real["data"]:
        key, nonce, aad, ct = (bytes.fromhex(v[n]) for n in ("key", "nonce", "aad", "ciphertext"))
        assert await cipher.decrypt(key, nonce, ct, aad) == bytes.fromhex(v["plaintext"])
        with pytest.raises(CipherError):
            await cipher.decrypt(key, nonce, ct, aad + b"!")
