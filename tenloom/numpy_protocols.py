"""NumPy's protocols on lazy Tensors: ``__array_ufunc__`` (NEP 13), ``__array_function__``
(NEP 18) and the scalar conversions (``float(t)``, ``int(t)``, ``complex(t)``,
``operator.index(t)``, ``t.item()``). ``Tensor`` (tenloom/tensor.py) delegates its dunders here.

**The rule.** A NumPy call on Tensors builds a lazy node (a ``Tensor``, differentiable, nothing
runs) when tenloom can express that call exactly: NumPy's values, dtypes and errors. Otherwise
it *evaluates then calls*: the Tensor operands (anywhere in the arguments, lists and dicts
included) are evaluated together, NumPy's own function runs on the ndarrays and its result is
returned as NumPy returns it (an ndarray, a tuple, a bool): concrete, outside the graph, so
``tl.grad`` of it raises rather than giving a gradient that silently lacks a term. That is
JAX's behaviour for every NumPy call (``np.log1p(jax_array)`` is an ndarray) and dask.array's
for the functions it lacks (it warns); ``np.asarray(t)`` and SciPy (``scipy.linalg.expm(t)``,
which calls ``np.asarray``) evaluate the same way. A Tensor that depends on a placeholder (a
traced function's input, ``tl.placeholder``) has no value: the evaluating path then raises
``ConcretizationError`` naming the NumPy function, so a traced function never evaluates.

**Ufuncs** (``np.exp(t)``, ``np.add(a, t)``, ``ndarray + t``, ``ndarray @ t``,
``np.maximum``, comparisons, ``np.conj``, ...). ``__call__`` is lazy when tenloom has a builder
of the ufunc's name (graph/ops/elementwise.py, through tenloom/api.py: ``add``, ``exp``,
``matmul``, ``equal``, ...) or a composite below (``positive``, ``square``, ``reciprocal`` of
floats, ``isnan``, ``logical_not``/``and``/``or``/``xor``, ``divmod``), and every keyword is at
its default (``where=True``, ``casting="same_kind"``, ``order="K"``, ``dtype=None``, ...).
``reduce`` of ``add``, ``multiply``, ``maximum``, ``minimum`` is ``tl.sum``, ``prod``, ``max``,
``min`` (``axis`` default 0 as NumPy's, ``keepdims``, and ``dtype=``: the operand cast to it);
``outer`` of a lazy binary ufunc broadcasts. Everything else evaluates then calls:
``accumulate``, ``reduceat``, ``initial=``, ``where=``, ``dtype=`` of ``__call__``, and
``out=`` an ndarray (``arr += t`` writes the values into ``arr``, as with JAX). A ufunc's
``out=`` holding a Tensor, and ``ufunc.at`` on a Tensor, raise ``OptionTypeError``: Tensors are
immutable (write ``t = np.add(a, b)``). Operands of a foreign array type with its own
``__array_ufunc__`` (CuPy, dask) get ``NotImplemented`` (NEP 13), so NumPy raises TypeError.

**Functions** (``np.sum(t)``, ``np.reshape``, ``np.einsum``, ``np.linalg.svd``, ...): the table
``FUNCTIONS`` maps a NumPy function to an adapter with NumPy's signature that builds the node
through ``tenloom`` / ``tl.linalg``. An argument the adapter cannot honour exactly (``out=``,
``where=``, ``initial=``, ``order="A"``, ``hermitian=True``, ``upper=True``, a ``dtype=``
tenloom cannot cast to as NumPy does) is never dropped: the call evaluates then calls, so
NumPy applies it. ``np.fft``'s transforms and shifts are ``tl.fft``'s (lazy, except for what
``tl.fft`` takes differently: see their table). Linear algebra returns NumPy's result tuples
(``SVDResult``, ``EighResult``, ``QRResult``, ``SlogdetResult``, ``EigResult``: the same field
names). ``np.linalg.eig`` and ``eigvals`` are lazy for complex input only: for real input
NumPy's result dtype depends on the values (real when every eigenvalue is). ``np.where(c)``
(one argument) and every function missing from the table evaluate then call. ``np.shape``,
``np.ndim``, ``np.size`` and ``np.result_type`` answer from the static shape and dtype, without
evaluating.

**Scalars.** ``float(t)``, ``int(t)``, ``complex(t)``, ``operator.index(t)`` and ``t.item()``
evaluate (only the element ``t.item(i)`` names); a shape or dtype that NumPy refuses raises
NumPy's error (TypeError, ValueError, IndexError) before anything runs. ``bool(t)`` still
raises ``ConcretizationError`` (SPEC: a lazy truth value is never guessed).
"""

from __future__ import annotations

import operator
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from tenloom import api as tl
from tenloom import fft as tlf
from tenloom import linalg as tla
from tenloom.graph import build as _b
from tenloom.graph.errors import ConcretizationError, OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.ops import Op
from tenloom.graph.traverse import toposort
from tenloom.tensor import Tensor

# NumPy's result tuples (numpy.linalg returns these named tuples; same names and fields)
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])

_NOV = np._NoValue  # NumPy's "argument not given"


class _Unsupported(Exception):
    """Raised by an adapter for an argument it cannot honour exactly: evaluate then call."""


def _need(ok: bool) -> None:
    if not ok:
        raise _Unsupported


# ---- evaluate then call ---------------------------------------------------------------------
def _tensors_in(obj: Any, found: dict[int, Tensor]) -> None:
    if isinstance(obj, Tensor):
        found[id(obj)] = obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors_in(x, found)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors_in(x, found)


def _replace(obj: Any, values: dict[int, np.ndarray]) -> Any:
    if isinstance(obj, Tensor):
        return values[id(obj)]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(_replace(x, values) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_replace(x, values) for x in obj)
    if isinstance(obj, dict):
        return {k: _replace(v, values) for k, v in obj.items()}
    return obj


def check_concrete(tensors: list[Tensor], what: str) -> None:
    """ConcretizationError naming ``what`` when one of ``tensors`` depends on a placeholder."""
    for n in toposort([t.node for t in tensors]):
        if n.op is Op.PLACEHOLDER:
            raise ConcretizationError(
                f"{what} needs the values of a Tensor that depends on the placeholder "
                f"{n.attrs.name!r} (a traced function's input), which has none until the "
                "function runs; build the computation from tenloom ops instead "
                "(tenloom/numpy_protocols.py lists the NumPy calls that stay lazy)"
            )


def evaluate_then_call(fn: Callable, what: str, args: tuple, kwargs: dict) -> Any:
    """Evaluate every Tensor in ``args``/``kwargs`` (together: shared subgraphs run once) and
    call ``fn`` on the ndarrays; ``what`` names the call in the placeholder error."""
    found: dict[int, Tensor] = {}
    _tensors_in(args, found)
    _tensors_in(kwargs, found)
    tensors = list(found.values())
    if tensors:
        from tenloom.runtime.evaluate import evaluate

        check_concrete(tensors, what)
        values = dict(zip(found, evaluate(*tensors)))
        args, kwargs = _replace(args, values), _replace(kwargs, values)
    return fn(*args, **kwargs)


# ---- ufuncs ---------------------------------------------------------------------------------
_ND_UFUNC = np.ndarray.__array_ufunc__


def _foreign(x: Any) -> bool:
    """An operand of another array library that handles ufuncs itself (NEP 13)."""
    if isinstance(x, Tensor):
        return False
    over = getattr(type(x), "__array_ufunc__", _ND_UFUNC)
    return over is not _ND_UFUNC


def _lift(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else tl.asarray(x)


def _truth(x: Any) -> Tensor:
    t = _lift(x)
    return t if t.dtype.kind == "b" else tl.not_equal(t, 0)


def _positive(x):
    t = _lift(x)
    _need(t.dtype.kind != "b")  # NumPy has no bool loop: it raises
    return t


def _square(x):
    t = _lift(x)
    base = tl.astype(t, "int8") if t.dtype.kind == "b" else t  # NumPy's square of bool is int8
    return tl.multiply(base, base)


def _reciprocal(x):
    t = _lift(x)
    _need(t.dtype.kind == "f")  # NumPy's integer reciprocal truncates; complex differs in ulps
    return tl.divide(1, t)


# ufuncs with no builder of their name, composed of builders with NumPy's exact results
COMPOSITES: dict[str, Callable] = {
    "positive": _positive,
    "square": _square,
    "reciprocal": _reciprocal,
    "isnan": lambda x: tl.not_equal(_lift(x), _lift(x)),
    "logical_not": lambda x: tl.invert(_truth(x)),
    "logical_and": lambda a, b: tl.bitwise_and(_truth(a), _truth(b)),
    "logical_or": lambda a, b: tl.bitwise_or(_truth(a), _truth(b)),
    "logical_xor": lambda a, b: tl.bitwise_xor(_truth(a), _truth(b)),
    "divmod": lambda a, b: (tl.floor_divide(a, b), tl.remainder(a, b)),
}

# ufunc.reduce -> the reduction
REDUCTIONS: dict[str, str] = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}

# a ufunc's keywords at their defaults (any other value evaluates then calls)
_UFUNC_DEFAULTS = {
    "out": None,
    "where": True,
    "casting": "same_kind",
    "order": "K",
    "dtype": None,
    "subok": True,
    "signature": None,
}


def ufunc_impl(ufunc: np.ufunc) -> Callable | None:
    """The lazy implementation of NumPy's ``ufunc`` (its builder, or a composite), else None."""
    name = ufunc.__name__
    if getattr(np, name, None) is not ufunc:  # not NumPy's own (scipy.special's erf, ...)
        return None
    if name in _b.PUBLIC_BUILDERS:
        return getattr(tl, name)
    return COMPOSITES.get(name)


def _at_default(kwargs: dict) -> bool:
    for k, v in kwargs.items():
        if k not in _UFUNC_DEFAULTS:
            return False
        d = _UFUNC_DEFAULTS[k]
        if v is not d and not (isinstance(v, str) and v == d) and not (k == "out" and v == ()):
            return False
    return True


def _cast_to(x: Any, dtype: Any) -> Tensor:
    return tl.astype(_lift(x), np.dtype(dtype))


def _reduce(name: str, x, axis=0, dtype=None, out=None, keepdims=False, initial=_NOV, where=True):
    _need(out is None and initial is _NOV and where is True)
    _need(dtype is None or name in ("sum", "prod"))
    t = _lift(x) if dtype is None else _cast_to(x, dtype)
    r = getattr(tl, name)(t, axis, keepdims=keepdims)
    return r if dtype is None or r.dtype == np.dtype(dtype) else tl.astype(r, dtype)


def _lazy_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    fn = ufunc_impl(ufunc)
    if fn is None:
        raise _Unsupported
    if method == "__call__":
        _need(_at_default(kwargs))
        return fn(*inputs)
    if method == "reduce" and ufunc.__name__ in REDUCTIONS:
        (x,) = inputs
        return _reduce(REDUCTIONS[ufunc.__name__], x, **kwargs)
    if method == "outer" and ufunc.nin == 2 and ufunc.signature is None and not kwargs:
        a, b = (_lift(x) for x in inputs)
        return fn(tl.reshape(a, a.shape + (1,) * b.ndim), b)
    raise _Unsupported


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``Tensor.__array_ufunc__``: lazy where the module docstring says, else evaluate then
    call; NotImplemented for foreign array operands."""
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else () if out is None else (out,)
    if any(_foreign(x) for x in (*inputs, *outs)):
        return NotImplemented
    name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    if any(isinstance(o, Tensor) for o in outs):
        raise OptionTypeError(
            f"{name}: out= is a Tensor, and Tensors are immutable; use the result "
            f"(t = {name}(...)) instead"
        )
    if method == "at" and isinstance(inputs[0], Tensor):
        raise OptionTypeError(
            f"{name}: updates its first operand in place, and it is a Tensor, which is "
            "immutable; build the updated tensor with tl.where or evaluate it first"
        )
    if not outs:
        try:
            return _lazy_ufunc(ufunc, method, inputs, kwargs)
        except _Unsupported:
            pass
    return evaluate_then_call(getattr(ufunc, method), name, inputs, kwargs)


# ---- functions ------------------------------------------------------------------------------
def _reduction(name: str, with_dtype: bool) -> Callable:
    def impl(a, axis=None, *rest, **kw):
        if with_dtype:
            names = ("dtype", "out", "keepdims", "initial", "where")
        else:
            names = ("out", "keepdims", "initial", "where")
        kw = {**dict(zip(names, rest)), **kw}
        dtype = kw.pop("dtype", None)
        keepdims = kw.pop("keepdims", _NOV)
        keepdims = False if keepdims is _NOV else keepdims
        _need(kw.pop("out", None) is None and kw.pop("initial", _NOV) is _NOV)
        where = kw.pop("where", _NOV)
        _need((where is _NOV or where is True) and not kw)
        return _reduce(name, a, axis, dtype=dtype, keepdims=keepdims)

    return impl


def _mean(a, axis=None, dtype=None, out=None, keepdims=_NOV, *, where=_NOV):
    _need(out is None and (where is _NOV or where is True))
    _need(dtype is None or np.dtype(dtype).kind in "fc")  # NumPy truncates an int mean
    t = _lift(a) if dtype is None else _cast_to(a, dtype)
    return tl.mean(t, axis, keepdims=False if keepdims is _NOV else keepdims)


def _reshape(a, shape=None, order="C", *, copy=None):
    _need(shape is not None and order in ("C", "F"))
    if order == "C":
        return tl.reshape(a, shape)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return tl.transpose(tl.reshape(tl.transpose(a), shape[::-1]))  # column-major order


def _ravel(a, order="C"):
    return _reshape(a, -1, order)


def _swapaxes(a, axis1, axis2):
    t = _lift(a)
    a1, a2 = (_b.normalize_axes(x, t.ndim, "swapaxes", t.shape)[0] for x in (axis1, axis2))
    perm = list(range(t.ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return tl.transpose(t, perm)


def _matrix_transpose(x):
    t = _lift(x)
    if t.ndim < 2:
        raise ShapeError(
            f"matrix_transpose: operand 0 of shape {fmt_shape(t.shape)} needs at least 2 axes"
        )
    return _swapaxes(t, -1, -2)


def _with_dtype(arrays, dtype, casting):
    """The operands of concatenate/stack cast to ``dtype`` as NumPy casts them."""
    ts = [_lift(x) for x in arrays]
    if dtype is None:
        _need(casting == "same_kind")
        return ts
    _need(all(np.can_cast(t.dtype, dtype, casting) for t in ts))
    return [tl.astype(t, dtype) for t in ts]


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _need(out is None)
    return tl.concatenate(_with_dtype(arrays, dtype, casting), axis)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _need(out is None)
    return tl.stack(_with_dtype(arrays, dtype, casting), axis)


def _where(condition, x=_NOV, y=_NOV):
    _need(x is not _NOV and y is not _NOV)  # where(c) is nonzero(c): data-dependent shape
    return tl.where(condition, x, y)


def _clip(a, a_min=_NOV, a_max=_NOV, out=None, *, min=_NOV, max=_NOV, **kwargs):
    _need(out is None and not kwargs)
    _need(a_min is _NOV or min is _NOV)
    _need(a_max is _NOV or max is _NOV)
    lo = a_min if a_min is not _NOV else None if min is _NOV else min
    hi = a_max if a_max is not _NOV else None if max is _NOV else max
    return tl.clip(a, lo, hi)


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _need(out is None)
    t = _lift(a) if dtype is None else _cast_to(a, dtype)
    r = tl.trace(t, offset, axis1, axis2)
    return r if dtype is None or r.dtype == np.dtype(dtype) else tl.astype(r, dtype)


def _einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    # optimize (a path hint) and order (a memory layout) do not change the values: tenloom
    # picks its own contraction order and lays results out itself
    _need(out is None and dtype is None)
    return tl.einsum(*operands)


def _like(a, fill, dtype, shape, device, order="K", subok=True):
    _need(device is None)
    t = _lift(a)
    dt = t.dtype if dtype is None else np.dtype(dtype)
    shape = t.shape if shape is None else shape
    if isinstance(fill, Tensor):
        return tl.broadcast_to(tl.astype(fill, dt), shape)
    value = np.asarray(fill).astype(dt)  # NumPy's copyto(casting="unsafe")
    if value.ndim == 0:
        return tl.full(shape, value[()], dt)
    return tl.broadcast_to(tl.asarray(value), shape)


def _zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, 0, dtype, shape, device)


def _ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, 1, dtype, shape, device)


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, fill_value, dtype, shape, device)


def _astype(x, dtype, /, *, copy=True, device=None):
    _need(device is None)
    return tl.astype(x, dtype)


def _size(a, axis=None):
    t = _lift(a)
    if axis is None:
        return t.size
    return t.shape[_b.normalize_axes(axis, t.ndim, "size", t.shape)[0]]


def _result_type(*arrays_and_dtypes):
    return np.result_type(
        *(np.empty((), x.dtype) if isinstance(x, Tensor) else x for x in arrays_and_dtypes)
    )


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    _need(not hermitian)
    out = tla.svd(a, full_matrices, compute_uv)
    return SVDResult(*out) if compute_uv else out


def _qr(a, mode="reduced"):
    out = tla.qr(a, mode)
    return QRResult(*out) if mode in ("reduced", "complete") else out


def _eig(a):
    _need(_lift(a).dtype.kind == "c")  # real input: NumPy's dtype depends on the values
    return EigResult(*tla.eig(a))


def _eigvals(a):
    _need(_lift(a).dtype.kind == "c")
    return tla.eigvals(a)


def _cholesky(a, /, *, upper=False):
    _need(not upper)  # NumPy's upper factor reads the upper triangle
    return tla.cholesky(a)


def _pinv(a, rcond=None, hermitian=False, *, rtol=_NOV):
    kw = {} if rcond is None else {"rcond": rcond}
    return tla.pinv(a, None if rtol is _NOV else rtol, hermitian=hermitian, **kw)


def _linalg_trace(x, /, *, offset=0, dtype=None):
    t = _lift(x) if dtype is None else _cast_to(x, dtype)
    r = tla.trace(t, offset)
    return r if dtype is None or r.dtype == np.dtype(dtype) else tl.astype(r, dtype)


def _linalg_outer(x1, x2, /):
    for i, x in enumerate((x1, x2)):
        t = _lift(x)
        if t.ndim != 1:
            raise ShapeError(
                f"numpy.linalg.outer: operand {i} of shape {fmt_shape(t.shape)} must be 1-d"
            )
    return tl.outer(x1, x2)


def _multi_dot(arrays, *, out=None):
    _need(out is None and len(arrays) >= 2)
    ts = [_lift(x) for x in arrays]
    _need(ts[0].ndim in (1, 2) and ts[-1].ndim in (1, 2))
    _need(all(t.ndim == 2 for t in ts[1:-1]))
    r = ts[0]
    for t in ts[1:]:  # one network: the contraction-order pass picks the order
        r = tl.matmul(r, t)
    return r


FUNCTIONS: dict[Callable, Callable] = {
    np.sum: _reduction("sum", True),
    np.prod: _reduction("prod", True),
    np.max: _reduction("max", False),
    np.amax: _reduction("max", False),
    np.min: _reduction("min", False),
    np.amin: _reduction("min", False),
    np.mean: _mean,
    np.reshape: _reshape,
    np.ravel: _ravel,
    np.transpose: lambda a, axes=None: tl.transpose(a, axes),
    np.moveaxis: lambda a, source, destination: tl.moveaxis(a, source, destination),
    np.swapaxes: _swapaxes,
    np.squeeze: lambda a, axis=None: tl.squeeze(a, axis),
    np.expand_dims: lambda a, axis: tl.expand_dims(a, axis),
    np.broadcast_to: lambda array, shape, subok=False: tl.broadcast_to(array, shape),
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.where: _where,
    np.clip: _clip,
    np.diagonal: lambda a, offset=0, axis1=0, axis2=1: tl.diagonal(a, offset, axis1, axis2),
    np.trace: _trace,
    np.dot: lambda a, b, out=None: _need(out is None) or tl.dot(a, b),
    np.inner: lambda a, b: tl.inner(a, b),
    np.outer: lambda a, b, out=None: _need(out is None) or tl.outer(a, b),
    np.tensordot: lambda a, b, axes=2: tl.tensordot(a, b, axes),
    np.einsum: _einsum,
    np.real: lambda val: tl.real(val),
    np.imag: lambda val: tl.imag(val),
    np.zeros_like: _zeros_like,
    np.ones_like: _ones_like,
    np.full_like: _full_like,
    np.shape: lambda a: _lift(a).shape,
    np.ndim: lambda a: _lift(a).ndim,
    np.size: _size,
    np.result_type: _result_type,
    np.linalg.svd: _svd,
    np.linalg.qr: _qr,
    np.linalg.eigh: lambda a, UPLO="L": EighResult(*tla.eigh(a, UPLO)),
    np.linalg.eigvalsh: lambda a, UPLO="L": tla.eigvalsh(a, UPLO),
    np.linalg.eig: _eig,
    np.linalg.eigvals: _eigvals,
    np.linalg.inv: lambda a: tla.inv(a),
    np.linalg.solve: lambda a, b: tla.solve(a, b),
    np.linalg.det: lambda a: tla.det(a),
    np.linalg.slogdet: lambda a: SlogdetResult(*tla.slogdet(a)),
    np.linalg.cholesky: _cholesky,
    np.linalg.pinv: _pinv,
    np.linalg.matrix_power: lambda a, n: tla.matrix_power(a, n),
    np.linalg.norm: lambda x, ord=None, axis=None, keepdims=False: tla.norm(
        x, ord=ord, axis=axis, keepdims=keepdims
    ),
    np.linalg.multi_dot: _multi_dot,
}
# functions NumPy 2 added (NumPy >= 1.25 is supported): mapped where this NumPy has them
_NUMPY2: dict[str, Callable] = {
    "matrix_transpose": _matrix_transpose,
    "astype": _astype,
    "linalg.svdvals": lambda x: tla.svdvals(x),
    "linalg.trace": _linalg_trace,
    "linalg.matmul": lambda x1, x2, /: tl.matmul(x1, x2),
    "linalg.tensordot": lambda x1, x2, /, *, axes=2: tl.tensordot(x1, x2, axes),
    "linalg.outer": _linalg_outer,
    "linalg.diagonal": lambda x, /, *, offset=0: tl.diagonal(x, offset, -2, -1),
    "linalg.matrix_transpose": _matrix_transpose,
    "linalg.matrix_norm": lambda x, /, *, keepdims=False, ord="fro": tla.matrix_norm(
        x, keepdims=keepdims, ord=ord
    ),
    "linalg.vector_norm": lambda x, /, *, axis=None, keepdims=False, ord=2: tla.vector_norm(
        x, axis=axis, keepdims=keepdims, ord=ord
    ),
}
for _path, _impl in _NUMPY2.items():
    _obj: Any = np
    for _part in _path.split("."):
        _obj = getattr(_obj, _part, None)
    if _obj is not None:
        FUNCTIONS[_obj] = _impl


# numpy.fft: tl.fft's functions (lazy). Evaluated then called instead: out=, float16 input
# (NumPy's irfft and hfft keep float16) and what tl.fft refuses where NumPy goes on: repeated
# axes, s without axes, and irfftn's s[-1] = -1 (NumPy takes m points, tl.fft 2 * (m - 1)).
def _distinct(axes: Any, ndim: int) -> bool:
    try:
        return len({operator.index(a) % max(ndim, 1) for a in axes}) == len(axes)
    except TypeError:  # not ints: tl.fft's own error
        return True


def _np_fft(name: str) -> Callable:
    fn = getattr(tlf, name)

    def adapter(a, n=None, axis=-1, norm=None, out=None):
        a = _lift(a)
        _need(out is None and a.dtype != np.float16)
        return fn(a, n, axis, norm)

    return adapter


def _np_fftn(name: str) -> Callable:
    fn = getattr(tlf, name)

    def adapter(a, s=None, axes=None, norm=None, out=None):
        a = _lift(a)
        _need(out is None and a.dtype != np.float16 and (s is None or axes is not None))
        _need(axes is None or _distinct(axes, a.ndim))
        _need(name != "irfftn" or s is None or -1 not in list(s))
        return fn(a, s, axes, norm)

    return adapter


def _np_shift(name: str) -> Callable:
    fn = getattr(tlf, name)

    def adapter(x, axes=None):
        x = _lift(x)
        _need(axes is None or isinstance(axes, (int, np.integer)) or _distinct(axes, x.ndim))
        return fn(x, axes)

    return adapter


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    FUNCTIONS[getattr(np.fft, _name)] = _np_fft(_name)
for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    FUNCTIONS[getattr(np.fft, _name)] = _np_fftn(_name)
for _name in ("fftshift", "ifftshift"):
    FUNCTIONS[getattr(np.fft, _name)] = _np_shift(_name)


def _function_name(func: Callable) -> str:
    mod = getattr(func, "__module__", None) or "numpy"
    return f"{mod}.{getattr(func, '__name__', repr(func))}"


def array_function(func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
    """``Tensor.__array_function__``: the adapter in ``FUNCTIONS`` (lazy), else evaluate then
    call; NotImplemented when another array type also overrides ``func`` (NEP 18)."""
    if not all(issubclass(t, (Tensor, np.ndarray)) for t in types):
        return NotImplemented
    impl = FUNCTIONS.get(func)
    if impl is not None:
        try:
            return impl(*args, **kwargs)
        except _Unsupported:
            pass
    numpy_fn = getattr(func, "_implementation", func)  # NumPy's, without dispatching again
    return evaluate_then_call(numpy_fn, _function_name(func), args, kwargs)


# ---- scalar conversions ---------------------------------------------------------------------
def _probe(t: Tensor) -> np.ndarray:
    """An ndarray of ``t``'s shape and dtype (a broadcast view: no memory), on which NumPy
    raises the errors it would raise for ``t``'s value, without evaluating it."""
    return np.broadcast_to(np.zeros((), t.dtype), t.shape)


_CONVERSIONS = {"float": float, "int": int, "complex": complex, "index": operator.index}


def to_scalar(t: Tensor, kind: str) -> Any:
    """``float(t)`` (kind "float"), ``int``, ``complex``, ``operator.index``: NumPy's checks
    on the shape and dtype first, then the value, evaluated."""
    conv = _CONVERSIONS[kind]
    conv(_probe(t))
    check_concrete([t], f"{kind}() of a Tensor")
    return conv(t.evaluate())


def item(t: Tensor, args: tuple) -> Any:
    """``t.item(*args)`` as ``ndarray.item``: evaluates only the element it names."""
    _probe(t).item(*args)  # NumPy's errors: size not 1, an index out of range, bad arguments
    if args:
        idx = args[0] if len(args) == 1 else args
        if isinstance(idx, tuple):
            key = tuple(operator.index(i) % s for i, s in zip(idx, t.shape))
        else:
            key = np.unravel_index(operator.index(idx) % t.size, t.shape)
        t = t[tuple(int(i) for i in key)]
    check_concrete([t], "item() of a Tensor")
    return t.evaluate().item()
