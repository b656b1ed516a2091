"""One query through onnxruntime's C API (ctypes), without numpy.

onnxruntime's Python module needs numpy, and importing numpy was the largest
single cost of a first query (measured in benchmarks/results/first_query.md).
The onnxruntime wheel also ships its C library (``capi/libonnxruntime.so.*``,
the same version and kernels); this module loads it with ctypes, starts a
session on the edited model and runs one query's token ids. The float
results are mean-pooled and L2-normalised in plain Python (float64, then
float32), which agrees with the numpy pipeline to ~1e-7 (tests/integration).

Only functions of the C API's version 1 are used (their slots in the OrtApi
table never move). Anything unexpected -- no C library in the wheel, another
platform, an error status -- raises OrtUnavailableError and the caller uses the
Python module instead.
"""

from __future__ import annotations

import ctypes
import math
import struct
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Slots in the OrtApi function table (onnxruntime_c_api.h, version 1 block).
GET_ERROR_MESSAGE = 2
CREATE_ENV = 3
CREATE_SESSION = 7
RUN = 9
CREATE_SESSION_OPTIONS = 10
DISABLE_MEM_PATTERN = 17
SET_SESSION_LOG_SEVERITY_LEVEL = 22
SET_SESSION_GRAPH_OPTIMIZATION_LEVEL = 23
SET_INTRA_OP_NUM_THREADS = 24
SESSION_GET_INPUT_COUNT = 30
SESSION_GET_OUTPUT_COUNT = 31
SESSION_GET_INPUT_NAME = 36
SESSION_GET_OUTPUT_NAME = 37
CREATE_TENSOR_WITH_DATA_AS_ORT_VALUE = 49
GET_TENSOR_MUTABLE_DATA = 51
GET_TENSOR_SHAPE_ELEMENT_COUNT = 64
GET_TENSOR_TYPE_AND_SHAPE = 65
CREATE_CPU_MEMORY_INFO = 69
ALLOCATOR_FREE = 76
GET_ALLOCATOR_WITH_DEFAULT_OPTIONS = 78
RELEASE_STATUS = 93
RELEASE_VALUE = 96
RELEASE_TENSOR_TYPE_AND_SHAPE_INFO = 99
RELEASE_SESSION_OPTIONS = 100

ORT_LOGGING_LEVEL_ERROR = 3
ORT_DISABLE_ALL = 0
ORT_ARENA_ALLOCATOR, ORT_MEM_TYPE_DEFAULT = 1, 0
TENSOR_INT64 = 7

P = ctypes.c_void_p
PP = ctypes.POINTER(ctypes.c_void_p)
STATUS = ctypes.c_void_p


class OrtUnavailableError(RuntimeError):
    """The C library cannot be used here; use the Python module."""


def library_path(package_dir: Path) -> Path:
    found = sorted(package_dir.glob("capi/libonnxruntime.so.*"))
    if not found:
        raise OrtUnavailableError(f"no C library in {package_dir / 'capi'}")
    return found[-1]


class QuerySession:
    """A session of the edited MiniLM model: ids in, a unit vector out."""

    def __init__(self, library: Path, model: Path, threads: int = 1) -> None:
        try:
            lib = ctypes.CDLL(str(library))
        except OSError as exc:
            raise OrtUnavailableError(str(exc)) from None
        get_base = lib.OrtGetApiBase
        get_base.restype = ctypes.POINTER(P)
        base = get_base()
        get_api = ctypes.CFUNCTYPE(P, ctypes.c_uint32)(base[0])
        api = get_api(1)
        if not api:
            raise OrtUnavailableError("OrtGetApiBase()->GetApi(1) returned NULL")
        self._table = ctypes.cast(api, ctypes.POINTER(P))
        self._error_message = self._fn(GET_ERROR_MESSAGE, ctypes.c_char_p, P)
        self._release_status = self._fn(RELEASE_STATUS, None, P)
        self._release_value = self._fn(RELEASE_VALUE, None, P)

        self.env = P()
        self._call(CREATE_ENV, [ctypes.c_int, ctypes.c_char_p, PP],
                   ORT_LOGGING_LEVEL_ERROR, b"kbstore", ctypes.byref(self.env))
        options = P()
        self._call(CREATE_SESSION_OPTIONS, [PP], ctypes.byref(options))
        try:
            # The settings of embed_minilm.session_options (lean: int8 weights
            # kept, no memory pattern); one thread has no pool to start or spin.
            self._call(SET_SESSION_LOG_SEVERITY_LEVEL, [P, ctypes.c_int], options, 3)
            self._call(SET_SESSION_GRAPH_OPTIMIZATION_LEVEL, [P, ctypes.c_int], options,
                       ORT_DISABLE_ALL)
            self._call(DISABLE_MEM_PATTERN, [P], options)
            self._call(SET_INTRA_OP_NUM_THREADS, [P, ctypes.c_int], options, threads)
            self.session = P()
            self._call(CREATE_SESSION, [P, ctypes.c_char_p, P, PP], self.env,
                       str(model).encode(), options, ctypes.byref(self.session))
        finally:
            self._fn(RELEASE_SESSION_OPTIONS, None, P)(options)
        self.memory = P()
        self._call(CREATE_CPU_MEMORY_INFO, [ctypes.c_int, ctypes.c_int, PP],
                   ORT_ARENA_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, ctypes.byref(self.memory))
        self.inputs = self._names(SESSION_GET_INPUT_COUNT, SESSION_GET_INPUT_NAME)
        self.outputs = self._names(SESSION_GET_OUTPUT_COUNT, SESSION_GET_OUTPUT_NAME)
        if not {"input_ids", "attention_mask"} <= set(self.inputs) or not self.outputs:
            raise OrtUnavailableError(f"unexpected model inputs {self.inputs}")
        # Sessions and the environment live as long as the process (like the
        # Python module's, they are not worth releasing at exit).

    def _fn(self, slot: int, restype: object, *argtypes: object) -> Any:
        return ctypes.CFUNCTYPE(restype, *argtypes)(self._table[slot])  # type: ignore[arg-type]

    def _call(self, slot: int, argtypes: list[object], *args: object) -> None:
        status = self._fn(slot, STATUS, *argtypes)(*args)
        if status:
            message = self._error_message(status)
            self._release_status(status)
            raise OrtUnavailableError((message or b"onnxruntime error").decode("utf-8", "replace"))

    def _names(self, count_slot: int, name_slot: int) -> list[str]:
        allocator = P()
        self._call(GET_ALLOCATOR_WITH_DEFAULT_OPTIONS, [PP], ctypes.byref(allocator))
        count = ctypes.c_size_t()
        self._call(count_slot, [P, ctypes.POINTER(ctypes.c_size_t)], self.session,
                   ctypes.byref(count))
        free = self._fn(ALLOCATOR_FREE, STATUS, P, P)
        names = []
        for i in range(count.value):
            name = ctypes.c_char_p()
            self._call(name_slot, [P, ctypes.c_size_t, P, ctypes.POINTER(ctypes.c_char_p)],
                       self.session, i, allocator, ctypes.byref(name))
            names.append((name.value or b"").decode())
            status = free(allocator, name)
            if status:
                self._release_status(status)
        return names

    def embed(self, ids: Sequence[int]) -> bytes:
        """The unit-length float32 vector (bytes) of one row of token ids:
        the first output mean-pooled over the tokens (all of them are real:
        one row has no padding)."""
        n = len(ids)
        buffers = {"input_ids": array("q", ids), "attention_mask": array("q", [1] * n),
                   "token_type_ids": array("q", [0] * n)}
        shape = (ctypes.c_int64 * 2)(1, n)
        values = []
        try:
            for name in self.inputs:
                if name not in buffers:
                    raise OrtUnavailableError(f"unexpected model input {name!r}")
                data = buffers[name]
                address, _ = data.buffer_info()
                value = P()
                self._call(CREATE_TENSOR_WITH_DATA_AS_ORT_VALUE,
                           [P, P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64),
                            ctypes.c_size_t, ctypes.c_int, PP],
                           self.memory, address, 8 * n, shape, 2, TENSOR_INT64,
                           ctypes.byref(value))
                values.append(value)
            input_names = (ctypes.c_char_p * len(self.inputs))(*(s.encode() for s in self.inputs))
            input_values = (P * len(values))(*(v.value for v in values))
            output_names = (ctypes.c_char_p * 1)(self.outputs[0].encode())
            output = (P * 1)()
            self._call(RUN, [P, P, P, P, ctypes.c_size_t, P, ctypes.c_size_t, P],
                       self.session, None, input_names, input_values, len(values),
                       output_names, 1, output)
            try:
                hidden = self._floats(P(output[0]))
            finally:
                self._release_value(output[0])
        finally:
            for value in values:
                self._release_value(value)
        return _mean_unit(hidden, n)

    def _floats(self, value: ctypes.c_void_p) -> memoryview[float]:
        info = P()
        self._call(GET_TENSOR_TYPE_AND_SHAPE, [P, PP], value, ctypes.byref(info))
        count = ctypes.c_size_t()
        try:
            self._call(GET_TENSOR_SHAPE_ELEMENT_COUNT, [P, ctypes.POINTER(ctypes.c_size_t)],
                       info, ctypes.byref(count))
        finally:
            self._fn(RELEASE_TENSOR_TYPE_AND_SHAPE_INFO, None, P)(info)
        data = P()
        self._call(GET_TENSOR_MUTABLE_DATA, [P, PP], value, ctypes.byref(data))
        raw = ctypes.string_at(data.value or 0, 4 * count.value)  # a copy: value is released
        return memoryview(raw).cast("f")


def _mean_unit(hidden: memoryview[float], tokens: int) -> bytes:
    dim = len(hidden) // tokens
    if dim * tokens != len(hidden) or dim == 0:
        raise OrtUnavailableError(f"unexpected output size {len(hidden)} for {tokens} tokens")
    pooled = [math.fsum(hidden[t * dim + d] for t in range(tokens)) / tokens
              for d in range(dim)]
    # float32 first, as the numpy pipeline holds the pooled vector
    pooled = list(struct.unpack(f"{dim}f", struct.pack(f"{dim}f", *pooled)))
    norm = math.sqrt(math.fsum(x * x for x in pooled)) or 1.0
    return struct.pack(f"{dim}f", *(x / norm for x in pooled))
