"""``tl.random``: a seeded random Generator whose draws are lazy constants.

    rng = tl.random.default_rng(0)
    w = rng.normal(0.0, 0.05, (784, 256), dtype="float32")   # a Tensor (a constant node)

The numbers are drawn **when the method is called**, by NumPy's ``Generator`` (PCG64), and
wrapped as constants of the graph: evaluating a graph twice gives the same numbers, and the
same seed gives the same numbers in every run (``default_rng(seed)`` draws exactly what
``numpy.random.default_rng(seed)`` draws: ``normal(loc, scale, size)`` is NumPy's
``normal(loc, scale, size)``, float32 draws are NumPy's float32 generators
(``standard_normal(size, dtype=float32) * scale + loc``, ``random(size, dtype=float32)``)).
Nothing is random at evaluation time; a fresh draw is a fresh call.

``loc``/``scale`` of ``normal`` and ``low``/``high`` of ``uniform`` may be lazy Tensors: the
draw is then the constant standard sample moved and scaled lazily (``loc + scale * z``), so it
is differentiable with respect to them (the reparameterization trick); with plain numbers or
arrays it is one constant. ``permutation`` of a Tensor permutes its first axis lazily (a
gather where tenloom indexes with integer arrays, else the runs of consecutive rows
concatenated: one slice node per run).

Bad arguments raise tenloom's typed errors before any draw: a dtype a method does not make is
a DTypeError, a bad size or bound an OptionError (NumPy's ValueError), a wrong type an
OptionTypeError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenloom import api
from tenloom.graph.errors import DTypeError, IndexingError, OptionError, OptionTypeError
from tenloom.graph.value import Value
from tenloom.tensor import Tensor

__all__ = ["Generator", "default_rng"]

_FLOATS = (np.dtype("float32"), np.dtype("float64"))


def _float_dtype(dtype: Any, method: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise OptionTypeError(f"random.{method}: dtype {dtype!r} is not a dtype") from None
    if dt not in _FLOATS:
        raise DTypeError(f"random.{method}: dtype {dt} is not supported; give float32 or float64")
    return dt


def _size(size: Any, method: str) -> tuple[int, ...] | None:
    if size is None:
        return None
    items = size if isinstance(size, (tuple, list)) else (size,)
    out = []
    for s in items:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise OptionTypeError(
                f"random.{method}: size {size!r} is not an int or a tuple of ints"
            )
        if s < 0:
            raise OptionError(f"random.{method}: size {size!r} has a negative dimension")
        out.append(int(s))
    return tuple(out)


def _lazy(*xs: Any) -> bool:
    return any(isinstance(x, Value) for x in xs)


def _numpy_call(method: str, fn, *args, **kwargs) -> np.ndarray:
    """NumPy's draw, its ValueError/TypeError as tenloom's typed errors."""
    try:
        return np.asarray(fn(*args, **kwargs))
    except TypeError as e:
        raise OptionTypeError(f"random.{method}: {e}") from None
    except ValueError as e:
        raise OptionError(f"random.{method}: {e}") from None


def _shape_with(size: tuple[int, ...] | None, *params: Any) -> tuple[int, ...]:
    """The draw's shape: ``size``, else the broadcast shape of the parameters (NumPy's rule)."""
    if size is not None:
        return size
    return tuple(
        np.broadcast_shapes(*(np.shape(p) if not isinstance(p, Value) else p.shape for p in params))
    )


class Generator:
    """Draws lazy constants from a NumPy ``Generator`` (see the module docstring); made by
    :func:`default_rng`. ``.numpy`` is the NumPy generator it draws from."""

    def __init__(self, bit_generator: np.random.Generator):
        if not isinstance(bit_generator, np.random.Generator):
            raise OptionTypeError(
                f"random.Generator: give a numpy.random.Generator, not {type(bit_generator)}"
            )
        self.numpy = bit_generator

    def __repr__(self) -> str:
        return f"tenloom.random.Generator({type(self.numpy.bit_generator).__name__})"

    def standard_normal(self, size: Any = None, dtype: Any = "float64") -> Tensor:
        """Standard normal draws (NumPy's ``standard_normal``) as a constant."""
        dt = _float_dtype(dtype, "standard_normal")
        shape = _size(size, "standard_normal")
        return api.asarray(self.numpy.standard_normal(shape, dtype=dt))

    def normal(
        self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None, dtype: Any = "float64"
    ) -> Tensor:
        """Normal draws: NumPy's ``normal(loc, scale, size)`` in float64; in float32
        ``standard_normal(size, float32) * scale + loc``. Lazy ``loc``/``scale``: differentiable."""
        dt = _float_dtype(dtype, "normal")
        shape = _size(size, "normal")
        if not _lazy(loc, scale):
            if np.any(np.asarray(scale) < 0):
                raise OptionError(f"random.normal: scale {scale!r} is negative")
            if dt == np.float64:
                return api.asarray(_numpy_call("normal", self.numpy.normal, loc, scale, shape))
            z = _numpy_call(
                "normal", self.numpy.standard_normal, _shape_with(shape, loc, scale), dtype=dt
            )
            return api.asarray((z * np.asarray(scale, dt) + np.asarray(loc, dt)).astype(dt))
        z = api.asarray(self.numpy.standard_normal(_shape_with(shape, loc, scale), dtype=dt))
        out = z * scale + loc
        return out if shape is None or out.shape == shape else api.broadcast_to(out, shape)

    def uniform(
        self, low: Any = 0.0, high: Any = 1.0, size: Any = None, dtype: Any = "float64"
    ) -> Tensor:
        """Uniform draws on [low, high): NumPy's ``uniform`` in float64; in float32
        ``low + (high - low) * random(size, float32)``. Lazy ``low``/``high``: differentiable."""
        dt = _float_dtype(dtype, "uniform")
        shape = _size(size, "uniform")
        if not _lazy(low, high):
            if dt == np.float64:
                return api.asarray(_numpy_call("uniform", self.numpy.uniform, low, high, shape))
            u = self.numpy.random(_shape_with(shape, low, high), dtype=dt)
            lo, hi = np.asarray(low, dt), np.asarray(high, dt)
            return api.asarray((lo + (hi - lo) * u).astype(dt))
        u = api.asarray(self.numpy.random(_shape_with(shape, low, high), dtype=dt))
        out = low + (high - low) * u
        return out if shape is None or out.shape == shape else api.broadcast_to(out, shape)

    def random(self, size: Any = None, dtype: Any = "float64") -> Tensor:
        """Uniform draws on [0, 1) (NumPy's ``random``)."""
        dt = _float_dtype(dtype, "random")
        return api.asarray(self.numpy.random(_size(size, "random"), dtype=dt))

    def integers(
        self,
        low: Any,
        high: Any = None,
        size: Any = None,
        dtype: Any = "int64",
        endpoint: bool = False,
    ) -> Tensor:
        """Integers in [low, high) (``endpoint=True``: [low, high]), NumPy's ``integers``."""
        if _lazy(low, high):
            raise OptionTypeError(
                "random.integers: low and high must be numbers or arrays, not lazy Tensors "
                "(the bounds decide the draws when the method is called)"
            )
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise OptionTypeError(f"random.integers: dtype {dtype!r} is not a dtype") from None
        if dt.kind not in "iu":
            raise DTypeError(f"random.integers: dtype {dt} is not an integer dtype")
        shape = _size(size, "integers")
        return api.asarray(
            _numpy_call(
                "integers", self.numpy.integers, low, high, shape, dtype=dt, endpoint=endpoint
            )
        )

    def permutation(self, x: Any) -> Tensor:
        """A random permutation of ``range(x)`` for an int ``x`` (int64), else ``x`` shuffled
        along its first axis (NumPy's ``permutation``); a Tensor is shuffled lazily."""
        if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
            if x < 0:
                raise OptionError(f"random.permutation: {x} is negative")
            return api.asarray(self.numpy.permutation(int(x)))
        if not isinstance(x, Value):
            arr = np.asarray(x)
            if arr.ndim == 0:
                raise OptionTypeError(
                    f"random.permutation: give an int or an array with at least one axis, not {x!r}"
                )
            return api.asarray(self.numpy.permutation(arr))
        if x.ndim == 0:
            raise OptionError("random.permutation: a 0-d Tensor has no axis to shuffle")
        order = self.numpy.permutation(x.shape[0])
        return _take_rows(x, order)


def _take_rows(x: Value, order: np.ndarray) -> Tensor:
    """Rows of ``x`` in ``order``, lazily: one gather where tenloom indexes with integer
    arrays, else runs of consecutive rows (basic slices) concatenated along the first axis."""
    t = Tensor(x.node)
    if len(order) == 0:
        return t
    try:
        return t[order]
    except IndexingError:  # basic indexing only: slices of the runs, concatenated
        pass
    runs, start = [], 0
    for i in range(1, len(order) + 1):
        if i == len(order) or order[i] != order[i - 1] + 1:
            runs.append((int(order[start]), int(order[i - 1]) + 1))
            start = i
    parts = [t[a:b] for a, b in runs]
    return parts[0] if len(parts) == 1 else api.concatenate(parts, axis=0)


def default_rng(seed: Any = None) -> Generator:
    """A :class:`Generator` on NumPy's PCG64 seeded with ``seed`` (an int, a sequence of ints,
    a ``numpy.random.SeedSequence``, None for fresh entropy, or a NumPy Generator to draw from),
    as ``numpy.random.default_rng``."""
    if isinstance(seed, Value):
        raise OptionTypeError("random.default_rng: the seed must be a number, not a Tensor")
    try:
        return Generator(np.random.default_rng(seed))
    except TypeError as e:
        raise OptionTypeError(f"random.default_rng: {e}") from None
    except ValueError as e:
        raise OptionError(f"random.default_rng: {e}") from None
