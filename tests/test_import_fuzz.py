"""Importers never crash: seeded mutations of a valid .tflite and a valid int8 QDQ .onnx (byte
flips, random 32-bit words over offsets and lengths, truncation, deleted and duplicated chunks)
either import (and then run in the numpy reference) or fail with a one-line MsfError naming the
file; any other exception is a bug. Deterministic: the seed fixes every mutation."""
import random

import numpy as np
import pytest

from msf_pio.errors import MsfError
from msf_pio.model import load_model
from msf_pio.reference import run_model

from .test_onnx_import import _qdq
from .tflite_builder import foreign_net

MUTATIONS = 300


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:                                  # a few random bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:                                # a random 32-bit word (offsets, lengths)
        i = rng.randrange(len(b) - 4) & ~3
        b[i:i + 4] = rng.choice([rng.getrandbits(32), rng.randrange(256), 0xFFFFFFFF,
                                 0x7FFFFFFF, 0x80000000]).to_bytes(4, "little")
    elif kind == 2:                                # truncated
        del b[rng.randrange(len(b)):]
    elif kind == 3:                                # a chunk deleted
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 64)]
    else:                                          # a chunk duplicated
        i = rng.randrange(len(b))
        b[i:i] = b[i:i + rng.randint(1, 64)]
    return bytes(b)


def fuzz(tmp_path, name: str, data: bytes, seed: int) -> dict:
    rng = random.Random(seed)
    path = tmp_path / name
    counts = {"tried": 0, "imported": 0, "msf_error": 0}
    crashes = []
    for i in range(MUTATIONS):
        path.write_bytes(mutate(data, rng))
        counts["tried"] += 1
        try:
            model = load_model(str(path))
            if model.quantized:
                run_model(model, np.zeros(model.input_shape, np.int8))
            counts["imported"] += 1
        except MsfError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(path)), str(exc)
            counts["msf_error"] += 1
        except Exception as exc:                   # noqa: BLE001 - the point of the test
            crashes.append(f"mutation {i}: {type(exc).__name__}: {exc}")
    print(f"\n  {name}: {counts}, {len(crashes)} other exceptions")
    assert not crashes, crashes[:5]
    return counts


def test_mutated_tflite_files_never_crash(tmp_path):
    counts = fuzz(tmp_path, "mutated.tflite", foreign_net(0), seed=12)
    assert counts["tried"] == MUTATIONS and counts["msf_error"] > MUTATIONS // 3


def test_mutated_onnx_files_never_crash(tmp_path):
    data = _qdq(tmp_path, True).read_bytes()
    counts = fuzz(tmp_path, "mutated.onnx", data, seed=12)
    assert counts["tried"] == MUTATIONS and counts["msf_error"] > MUTATIONS // 3


def test_mutated_streaming_tflite_files_never_crash(tmp_path):
    """A stateful streaming file: two subgraphs, state variables, an initial state."""
    from .tflite_builder import streaming_net
    counts = fuzz(tmp_path, "mutated_stream.tflite", streaming_net(0), seed=13)
    assert counts["tried"] == MUTATIONS and counts["msf_error"] > MUTATIONS // 3
