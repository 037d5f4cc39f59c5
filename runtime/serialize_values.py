"""Tagged values: attribute values as JSON that comes back exactly.

Tuples are JSON arrays; everything JSON would blur is an object with one ``$tag`` key:
``$list``, ``$float`` (non-finite: "inf", "-inf", "nan" or "bits:<16 hex>"), ``$complex``,
``$bytes`` (hex), ``$dtype``, ``$scalar`` (a NumPy scalar as dtype name and little-endian hex
bytes), ``$op`` and ``$dict`` (key/value pairs). Decoding accepts nothing else.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import numpy as np
from tenloom.graph.errors import TenloomError
from tenloom.graph.ops import OPS, Op
from tenloom.graph.ops.checks import DTYPE_STRS, NODE_DTYPES, BadFormat, short  # noqa: F401

MAX_DEPTH = 32  # nesting of a value

# dtypes of nodes and arrays: tenloom's own (NODE_DTYPES, DTYPE_STRS: graph/ops/checks.py);
# dtypes inside tagged values: plain numeric ones
_VALUE_DTYPE_NAMES = (
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64 "
    "complex128"
)
VALUE_DTYPES: dict[str, np.dtype] = {n: np.dtype(n) for n in _VALUE_DTYPE_NAMES.split()}
OP_NAMES: dict[str, Op] = {op.value: op for op in Op}
_NAN_BITS = 0x7FF8000000000000


class SaveTypeError(TenloomError, TypeError):
    """``save`` was given something it cannot write (not a Tensor, Plan or sequence of Tensors,
    or an attribute value with no tagged encoding)."""


def _float_tag(x: float) -> dict:
    if x == math.inf:
        return {"$float": "inf"}
    if x == -math.inf:
        return {"$float": "-inf"}
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    return {"$float": "nan" if bits == _NAN_BITS else f"bits:{bits:016x}"}


def encode_value(v: Any, depth: int = 0) -> Any:
    """A JSON-able form of an attribute value: tuples are JSON arrays, everything that JSON
    would blur (lists, non-finite floats, complex, bytes, NumPy scalars and dtypes, ops,
    dicts) is an object with one ``$tag`` key."""
    if depth > MAX_DEPTH:
        raise SaveTypeError(f"save: attribute value nested deeper than {MAX_DEPTH} levels")
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else _float_tag(v)
    if t is tuple or (isinstance(v, tuple) and hasattr(t, "_fields")):  # an attrs record too
        return [encode_value(x, depth + 1) for x in v]
    if t is list:
        return {"$list": [encode_value(x, depth + 1) for x in v]}
    if t is complex:
        return {"$complex": [encode_value(v.real), encode_value(v.imag)]}
    if t is bytes:
        return {"$bytes": v.hex()}
    if isinstance(v, Op):
        return {"$op": v.value}
    if isinstance(v, np.dtype) and v.name in VALUE_DTYPES and v == VALUE_DTYPES[v.name]:
        return {"$dtype": v.name}
    if isinstance(v, np.generic) and v.dtype.name in VALUE_DTYPES:
        le = np.asarray(v).astype(v.dtype.newbyteorder("<"))
        return {"$scalar": [v.dtype.name, le.tobytes().hex()]}
    if t is dict:
        return {
            "$dict": [
                [encode_value(k, depth + 1), encode_value(x, depth + 1)] for k, x in v.items()
            ]
        }
    raise SaveTypeError(f"save: cannot encode a value of type {t.__name__}: {v!r}")


def _finite(x: Any) -> float:
    if type(x) is not float or not math.isfinite(x):
        raise BadFormat(f"{x!r} is not a finite float (non-finite floats use the $float tag)")
    return x


def _float_from_tag(s: Any) -> float:
    if s == "inf":
        return math.inf
    if s == "-inf":
        return -math.inf
    if s == "nan":
        return math.nan
    if isinstance(s, str) and re.fullmatch(r"bits:[0-9a-f]{16}", s):
        x = struct.unpack("<d", struct.pack("<Q", int(s[5:], 16)))[0]
        if not math.isfinite(x):
            return x
    raise BadFormat(
        f"bad $float value {short(s)}: use 'inf', '-inf', 'nan' or 'bits:<16 hex digits>' "
        "of a non-finite float"
    )


def _hex(s: Any, what: str) -> bytes:
    if not isinstance(s, str) or not re.fullmatch(r"(?:[0-9a-f]{2})*", s):
        raise BadFormat(f"{what} must be a string of lower-case hex digit pairs")
    return bytes.fromhex(s)


def decode_value(j: Any, depth: int = 0) -> Any:
    """Inverse of :func:`encode_value`; raises BadFormat on anything it did not write."""
    if depth > MAX_DEPTH:
        raise BadFormat(f"value nested deeper than {MAX_DEPTH} levels")
    t = type(j)
    if j is None or t is bool or t is int or t is str:
        return j
    if t is float:
        return _finite(j)
    if t is list:
        return tuple(decode_value(x, depth + 1) for x in j)
    if t is not dict or len(j) != 1:
        raise BadFormat(f"a tagged value must be an object with one '$tag' key, got {short(j)}")
    ((tag, body),) = j.items()
    if tag == "$list":
        if type(body) is not list:
            raise BadFormat("$list needs an array")
        return [decode_value(x, depth + 1) for x in body]
    if tag == "$float":
        return _float_from_tag(body)
    if tag == "$complex":
        if type(body) is not list or len(body) != 2:
            raise BadFormat("$complex needs [real, imag]")
        re_, im = (decode_value(x, depth + 1) for x in body)
        if type(re_) is not float or type(im) is not float:
            raise BadFormat("$complex parts must be floats")
        return complex(re_, im)
    if tag == "$bytes":
        return _hex(body, "$bytes")
    if tag == "$op":
        op = OP_NAMES.get(body) if isinstance(body, str) else None
        if op is None or op not in OPS:
            raise BadFormat(f"unknown op {short(body)} in $op")
        return op
    if tag == "$dtype":
        dt = VALUE_DTYPES.get(body) if isinstance(body, str) else None
        if dt is None:
            raise BadFormat(f"unknown dtype {short(body)}; known: {', '.join(VALUE_DTYPES)}")
        return dt
    if tag == "$scalar":
        if type(body) is not list or len(body) != 2 or not isinstance(body[0], str):
            raise BadFormat("$scalar needs [dtype name, hex bytes]")
        dt = VALUE_DTYPES.get(body[0])
        if dt is None:
            raise BadFormat(f"unknown dtype {short(body[0])} in $scalar")
        raw = _hex(body[1], "$scalar bytes")
        if len(raw) != dt.itemsize:
            raise BadFormat(f"$scalar of {dt} needs {dt.itemsize} bytes, got {len(raw)}")
        return np.frombuffer(raw, dt.newbyteorder("<")).astype(dt)[0]
    if tag == "$dict":
        if type(body) is not list or any(type(p) is not list or len(p) != 2 for p in body):
            raise BadFormat("$dict needs an array of [key, value] pairs")
        out = {}
        for k, v in body:
            key = decode_value(k, depth + 1)
            try:
                hash(key)
            except TypeError:
                raise BadFormat(f"$dict key {short(k)} is not hashable") from None
            if key in out:
                raise BadFormat(f"$dict repeats the key {key!r}")
            out[key] = decode_value(v, depth + 1)
        return out
    raise BadFormat(f"unknown tag {short(tag)}")
