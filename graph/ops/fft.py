"""Discrete Fourier transforms (``tl.fft``, the array API's ``fft`` extension): three ops,
FFT_C2C (``fftn`` and ``ifftn``), FFT_R2C (``rfftn``) and FFT_C2R (``irfftn``), over any set of
axes with ``norm`` "backward", "ortho" or "forward", and the builders of NumPy's ten transforms.

**Builders.** ``n``/``s`` (padding with zeros or cropping each transformed axis) is done by the
builders with ordinary ops before the transform (a basic slice crops, SLICE_SCATTER pads), so
the ops see their input at the transform's size and their rules stay those of the plain
transform. ``hfft``/``ihfft`` are NumPy's composites: ``hfft(x) = irfft(conj(x))`` and
``ihfft(x) = conj(rfft(x))`` with the normalization's direction swapped. Dtypes: complex64 and
complex128 transform as they are, float32 gives complex64 and float64 complex128 (``rfft``,
``ihfft``; ``irfft``/``hfft`` give the real dtype of their complex input's precision); float16
computes in float32 and integers and bool are promoted to float64, as ``numpy.fft`` does (the
array API asks for floating-point input and leaves the others unspecified). ``rfft``, ``rfftn``
and ``ihfft`` refuse complex input (DTypeError), as NumPy 2 does. ``s`` without ``axes`` is an
OptionError (the standard forbids it; NumPy 2 deprecates it); ``s[i] = -1`` keeps axis i's
size, and on the last axis of ``irfftn`` gives the default ``2 * (m - 1)`` (all the input used,
as the standard and PyTorch read it; NumPy takes ``m``). Repeated axes are a ShapeError (the
standard leaves them unspecified; NumPy transforms such an axis twice).

**Derivatives** (PyTorch's convention for complex values, graph/autodiff.py). Each op is
linear over the reals, so its JVP is the op applied to the tangent. With c the scale of
``norm`` (1, 1/sqrt(N) or 1/N on the forward transform) the adjoint of a c2c transform is the
opposite direction with the same scale: ``fftn(norm)`` -> ``ifftn(swap(norm))``, swap exchanging
"backward" and "forward". The real transforms need the Hermitian weighting of the halved axis
(length n // 2 + 1 for n points): w_k = 1 for k = 0 and, n even, k = n / 2 (the bins that have
no mirror image), else 2. FFT_R2C's cotangent is ``irfftn(g / w, swap(norm))``: irfft weighs
the bins by w and takes the real part, so dividing by w first gives Re(R^H g), the adjoint of
the real-input transform R. FFT_C2R's cotangent is ``w * rfftn(g, swap(norm))``: the output
y = c Re(sum_k w_k Y_k e^{2 pi i jk/n}) has dL/dRe Y_k + i dL/dIm Y_k = c w_k rfft(g)_k (the
imaginary parts of the unmirrored bins, which irfft ignores, get a zero cotangent, as
rfft(g) is real there).

**Kernels.** The reference is ``numpy.fft`` (also called on CuPy arrays);
runtime/backends/cpu.py runs ``scipy.fft`` with ``workers=`` and cuda.py ``cupy.fft``, all
through :func:`run_transform`. OpenCL has none (its DeviceError names the op).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.autodiff import linear_jvp
from tenloom.graph.errors import DTypeError, OptionError, OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import int_arg
from tenloom.graph.ops.checks import BadFormat, check_arity, check_int, check_ints, short
from tenloom.graph.ops.elementwise import astype, conj
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.movement import getitem
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

Op.define_all("fft_c2c fft_r2c fft_c2r")

NORMS = ("backward", "ortho", "forward")
SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}  # the adjoint's norm


class C2CAttrs(NamedTuple):
    axes: tuple[int, ...]  # sorted, non-negative, distinct
    inverse: bool  # ifftn
    norm: str  # one of NORMS, as the user gave it for this direction


class R2CAttrs(NamedTuple):
    axes: tuple[int, ...]  # the c2c axes sorted, then the halved (real) axis last
    norm: str


class C2RAttrs(NamedTuple):
    axes: tuple[int, ...]  # the c2c axes sorted, then the real (output) axis last
    n: int  # the output's length along axes[-1]; the input has n // 2 + 1 there
    norm: str


_COMPLEX = {np.dtype("float32"): np.dtype("complex64"), np.dtype("float64"): np.dtype("complex128")}
_REAL = {c: r for r, c in _COMPLEX.items()}


# ---- shape and dtype rules --------------------------------------------------------------------


def _check_axes(op: str, x, axes: tuple[int, ...]) -> None:
    for a in axes:
        if not 0 <= a < x.ndim:
            raise ShapeError(
                f"{op}: axis {a} is out of bounds for operand 0 of shape {fmt_shape(x.shape)}"
            )
    if len(set(axes)) != len(axes) or not axes:
        raise ShapeError(f"{op}: axes {axes} must be distinct and at least one")
    for a in axes:
        if x.shape[a] == 0:
            raise ShapeError(
                f"{op}: axis {a} of operand 0 of shape {fmt_shape(x.shape)} has no points to "
                "transform"
            )


def _need_dtype(op: str, x, accepted: dict, what: str) -> None:
    """DTypeError unless ``x``'s dtype is a key of ``accepted`` (_REAL's keys are the complex
    dtypes, _COMPLEX's the real ones)."""
    if x.dtype not in accepted:
        raise DTypeError(
            f"{op}: operand 0 of shape {fmt_shape(x.shape)} has dtype {x.dtype}; {what} "
            f"takes {' or '.join(str(d) for d in accepted)}"
        )


def _c2c_infer(inputs, attrs):
    (x,) = inputs
    _need_dtype("fft_c2c", x, _REAL, "the complex-to-complex transform")
    _check_axes("fft_c2c", x, attrs[0])
    return tuple(x.shape), x.dtype


def _r2c_infer(inputs, attrs):
    (x,) = inputs
    _need_dtype("fft_r2c", x, _COMPLEX, "the real-to-complex transform")
    axes = attrs[0]
    _check_axes("fft_r2c", x, axes)
    shape = list(x.shape)
    shape[axes[-1]] = shape[axes[-1]] // 2 + 1
    return tuple(shape), _COMPLEX[x.dtype]


def _c2r_infer(inputs, attrs):
    (x,) = inputs
    axes, n, _ = attrs
    _need_dtype("fft_c2r", x, _REAL, "the complex-to-real transform")
    _check_axes("fft_c2r", x, axes)
    if n < 1 or x.shape[axes[-1]] != n // 2 + 1:
        raise ShapeError(
            f"fft_c2r: operand 0 of shape {fmt_shape(x.shape)} has {x.shape[axes[-1]]} entries "
            f"along axis {axes[-1]}; {n} output points (n >= 1) need n // 2 + 1 = {n // 2 + 1}"
        )
    shape = list(x.shape)
    shape[axes[-1]] = n
    return tuple(shape), _REAL[x.dtype]


# ---- kernels: the same call on numpy.fft, scipy.fft and cupy.fft -----------------------------


def run_transform(fft: Any, op: Op, x: Any, attrs: tuple, **kw: Any) -> Any:
    """The transform of ``op`` with ``attrs`` by the module ``fft`` (``numpy.fft``,
    ``scipy.fft`` with ``workers=`` in ``kw``, ``cupy.fft``), in the op's result dtype (NumPy
    before 2.0 computes single precision in double)."""
    if op is Op.FFT_C2C:
        axes, inverse, norm = attrs
        out = (fft.ifftn if inverse else fft.fftn)(x, axes=axes, norm=norm, **kw)
        dt = x.dtype
    elif op is Op.FFT_R2C:
        axes, norm = attrs
        out = fft.rfftn(x, axes=axes, norm=norm, **kw)
        dt = _COMPLEX[np.dtype(x.dtype)]
    else:
        axes, n, norm = attrs
        s = [x.shape[a] for a in axes[:-1]] + [n]
        out = fft.irfftn(x, s=s, axes=axes, norm=norm, **kw)
        dt = _REAL[np.dtype(x.dtype)]
    return out.astype(dt, copy=False)


def _ref(op: Op):
    return lambda xs, attrs: run_transform(np.fft, op, xs[0], attrs)


def _cost(node) -> int:
    """About 5 N log2(N) for a complex transform of N points, half that for the real ones."""
    x = node.inputs[0]
    complex_shape = x.shape if x.dtype.kind == "c" else node.shape
    points = math.prod(x.shape[a] for a in node.attrs.axes)
    work = 5 * math.prod(complex_shape) * max(1, math.ceil(math.log2(max(points, 2))))
    return work if node.op is Op.FFT_C2C else work // 2


# ---- derivatives ------------------------------------------------------------------------------


def _bin_weights(n: int, shape: tuple, axis: int, dtype) -> Value:
    """w (see the module docstring) along ``axis`` of ``shape`` (length n // 2 + 1), in the real
    dtype of ``dtype``, shaped to broadcast."""
    w = np.full(n // 2 + 1, 2.0, np.empty(0, dtype).real.dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    view = [1] * len(shape)
    view[axis] = w.size
    return T.asarray(w.reshape(view))


def _c2c_vjp(node, y, xs, g):
    axes, inverse, norm = node.attrs
    return (Value(make_node(Op.FFT_C2C, (g.node,), (axes, not inverse, SWAP[norm]))),)


def _r2c_vjp(node, y, xs, g):
    axes, norm = node.attrs
    n = xs[0].shape[axes[-1]]
    weighted = g / _bin_weights(n, g.shape, axes[-1], g.dtype)
    return (Value(make_node(Op.FFT_C2R, (weighted.node,), (axes, n, SWAP[norm]))),)


def _c2r_vjp(node, y, xs, g):
    axes, n, norm = node.attrs
    spectrum = Value(make_node(Op.FFT_R2C, (g.node,), (axes, SWAP[norm])))
    return (spectrum * _bin_weights(n, spectrum.shape, axes[-1], g.dtype),)


# ---- attributes read from a file, and the dump text -------------------------------------------


def _check_common(ins, axes, norm, op) -> None:
    check_ints(axes, f"{op.value} axes", 0, ins[0].ndim if ins else None)
    if not axes or len(set(axes)) != len(axes) or list(axes[:-1]) != sorted(axes[:-1]):
        raise BadFormat(f"{op.value}: axes {short(axes)} are not distinct and in normal order")
    if norm not in NORMS:
        raise BadFormat(f"{op.value}: norm {short(norm)} is not one of {NORMS}")


def _check_c2c(ins, at, op):
    at = check_arity(at, C2CAttrs, op)
    _check_common(ins, at.axes, at.norm, op)
    if list(at.axes) != sorted(at.axes) or type(at.inverse) is not bool:
        raise BadFormat(f"{op.value}: axes {short(at.axes)} unsorted or inverse not a bool")


def _check_r2c(ins, at, op):
    at = check_arity(at, R2CAttrs, op)
    _check_common(ins, at.axes, at.norm, op)


def _check_c2r(ins, at, op):
    at = check_arity(at, C2RAttrs, op)
    _check_common(ins, at.axes, at.norm, op)
    if check_int(at.n, "fft_c2r n") < 1:
        raise BadFormat(f"fft_c2r: n {at.n} < 1")


def _axes_text(axes) -> str:
    return "[" + ", ".join(str(a) for a in axes) + "]"


for _op, _infer, _attrs, _vjp, _check, _fmt in (
    (
        Op.FFT_C2C,
        _c2c_infer,
        C2CAttrs,
        _c2c_vjp,
        _check_c2c,
        lambda at: (
            f"[axes={_axes_text(at.axes)}{', inverse' if at.inverse else ''}, norm={at.norm}]"
        ),
    ),
    (
        Op.FFT_R2C,
        _r2c_infer,
        R2CAttrs,
        _r2c_vjp,
        _check_r2c,
        lambda at: f"[axes={_axes_text(at.axes)}, norm={at.norm}]",
    ),
    (
        Op.FFT_C2R,
        _c2r_infer,
        C2RAttrs,
        _c2r_vjp,
        _check_c2r,
        lambda at: f"[axes={_axes_text(at.axes)}, n={at.n}, norm={at.norm}]",
    ),
):
    register_op(
        _op,
        OpKind.LINALG,
        _infer,
        _ref(_op),
        1,
        attrs=_attrs,
        vjp=_vjp,
        jvp=linear_jvp,
        cost=_cost,
        check_attrs=_check,
        fmt=_fmt,
    )


# ---- builders (tenloom/fft.py exposes them as tl.fft.*) ---------------------------------------


def _norm(norm: Any, op: str) -> str:
    if norm is None:
        return "backward"  # NumPy's None
    if not isinstance(norm, str):
        raise OptionTypeError(f"{op}: norm {norm!r} is not a string; use one of {NORMS}")
    if norm not in NORMS:
        raise OptionError(f"{op}: norm {norm!r} is not one of {NORMS}")
    return norm


def _axes(axes: Any, n: Node, op: str) -> tuple[int, ...]:
    """The axes in the caller's order, non-negative; ShapeError for one out of bounds or
    repeated."""
    items = tuple(axes) if isinstance(axes, (tuple, list, range, np.ndarray)) else None
    if items is None:
        raise OptionTypeError(f"{op}: axes {axes!r} is not a sequence of ints")
    out: list[int] = []
    for a in items:
        a = int_arg(a, op, "axis")
        if not -n.ndim <= a < n.ndim:
            raise ShapeError(
                f"{op}: axis {a} is out of bounds for operand 0 of shape {fmt_shape(n.shape)} "
                f"({n.ndim} axes)"
            )
        a %= n.ndim
        if a in out:
            raise ShapeError(
                f"{op}: axis {a} repeated in axes {tuple(items)} of operand 0 of shape "
                f"{fmt_shape(n.shape)}"
            )
        out.append(a)
    return tuple(out)


def _sizes(s: Any, axes: tuple[int, ...], n: Node, op: str) -> list[int | None]:
    """``s`` checked against ``axes``: one size >= 1 (or -1: keep) per axis; None: all kept."""
    if s is None:
        return [None] * len(axes)
    if not isinstance(s, (tuple, list, range, np.ndarray)):
        raise OptionTypeError(f"{op}: s {s!r} is not a sequence of ints")
    sizes = [int_arg(v, op, "s entry") for v in s]
    if len(sizes) != len(axes):
        raise ShapeError(
            f"{op}: s {tuple(sizes)} has {len(sizes)} entries for the {len(axes)} axes "
            f"{axes} of operand 0 of shape {fmt_shape(n.shape)}"
        )
    for v, a in zip(sizes, axes):
        if v < 1 and v != -1:
            raise ShapeError(
                f"{op}: s entry {v} for axis {a} of operand 0 of shape {fmt_shape(n.shape)}; "
                "a transform needs at least 1 point (-1 keeps the axis' size)"
            )
    return [None if v == -1 else v for v in sizes]


def _one_axis(n_pts: Any, axis: Any, x: Node, op: str) -> tuple[list, tuple[int, ...]]:
    """``n`` and ``axis`` of a one-axis transform as ``(sizes, axes)``."""
    axes = _axes((axis,), x, op)
    if n_pts is None:
        return [None], axes
    v = int_arg(n_pts, op, "n")
    if v < 1:
        raise ShapeError(
            f"{op}: n={v} for axis {axes[0]} of operand 0 of shape {fmt_shape(x.shape)}; a "
            "transform needs n >= 1 points"
        )
    return [v], axes


def _resize(n: Node, axes: Sequence[int], sizes: Sequence[int], op: str) -> Node:
    """``n`` cropped or padded with zeros at the end of each of ``axes`` to ``sizes``."""
    for a, v in zip(axes, sizes):
        if v < 1:
            raise ShapeError(
                f"{op}: {v} points along axis {a} of operand 0 of shape {fmt_shape(n.shape)}; "
                "a transform needs at least 1 (pass n= or s=)"
            )
    crop = [slice(None)] * n.ndim
    for a, v in zip(axes, sizes):
        if v < n.shape[a]:
            crop[a] = slice(0, v)
    if any(k != slice(None) for k in crop):
        n = getitem(n, tuple(crop))
    target = list(n.shape)
    for a, v in zip(axes, sizes):
        target[a] = v
    if target != list(n.shape):
        spec = tuple((0, m, 1) for m in n.shape)
        n = make_node(Op.SLICE_SCATTER, (n,), (spec, tuple(target)))
    return n


def _promote(n: Node, op: str, complex_: bool) -> Node:
    """Integers and bool to float64, float16 to float32 (NumPy's rule), and, with
    ``complex_``, real to complex of the same precision."""
    dt = n.dtype
    if dt.kind in "biu":
        dt = np.dtype("float64")
    elif dt == np.float16:
        dt = np.dtype("float32")
    if complex_ and dt.kind == "f":
        dt = _COMPLEX[dt]
    return astype(n, dt) if dt != n.dtype else n


def _refuse_complex(n: Node, op: str) -> None:
    if n.dtype.kind == "c":
        raise DTypeError(
            f"{op}: operand 0 of shape {fmt_shape(n.shape)} has the complex dtype {n.dtype}; "
            f"{op} transforms real input (take tl.real(x), or use the complex transform)"
        )


def _c2c(x: Any, sizes: list, axes: tuple[int, ...], norm: Any, inverse: bool, op: str) -> Node:
    n = _promote(x, op, True)
    norm = _norm(norm, op)
    full = [n.shape[a] if v is None else v for a, v in zip(axes, sizes)]
    if not axes:
        return n
    n = _resize(n, axes, full, op)
    return make_node(Op.FFT_C2C, (n,), (tuple(sorted(axes)), inverse, norm))


def _r2c(x: Any, sizes: list, axes: tuple[int, ...], norm: Any, op: str) -> Node:
    _refuse_complex(x, op)
    n = _promote(x, op, False)
    norm = _norm(norm, op)
    if not axes:
        raise ShapeError(f"{op}: no axes to transform (operand 0 of shape {fmt_shape(n.shape)})")
    full = [n.shape[a] if v is None else v for a, v in zip(axes, sizes)]
    n = _resize(n, axes, full, op)
    return make_node(Op.FFT_R2C, (n,), (tuple(sorted(axes[:-1])) + (axes[-1],), norm))


def _c2r(x: Any, sizes: list, axes: tuple[int, ...], norm: Any, op: str) -> Node:
    n = _promote(x, op, True)
    norm = _norm(norm, op)
    if not axes:
        raise ShapeError(f"{op}: no axes to transform (operand 0 of shape {fmt_shape(n.shape)})")
    last = axes[-1]
    points = 2 * (n.shape[last] - 1) if sizes[-1] is None else sizes[-1]
    if points < 1:
        raise ShapeError(
            f"{op}: operand 0 of shape {fmt_shape(n.shape)} has {n.shape[last]} entries along "
            f"axis {last}, which gives 2 * (m - 1) = {points} output points; pass n= (s=) >= 1"
        )
    full = [n.shape[a] if v is None else v for a, v in zip(axes[:-1], sizes[:-1])]
    n = _resize(n, axes, full + [points // 2 + 1], op)
    return make_node(Op.FFT_C2R, (n,), (tuple(sorted(axes[:-1])) + (last,), points, norm))


def _nd_args(x: Any, s: Any, axes: Any, op: str) -> tuple[Node, list, tuple[int, ...]]:
    n = lift(x, op)
    if axes is None:
        if s is not None:
            raise OptionError(
                f"{op}: s={s!r} without axes for operand 0 of shape {fmt_shape(n.shape)}; "
                "pass axes= with s (the array API requires it; NumPy 2 deprecates s alone)"
            )
        axes_t = tuple(range(n.ndim))
    else:
        axes_t = _axes(axes, n, op)
    return n, _sizes(s, axes_t, n, op), axes_t


@builder(public=False)
def fft(x: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Node:
    """The discrete Fourier transform along ``axis``, ``n`` points (the axis cropped or padded
    with zeros), as ``numpy.fft.fft``; ``norm`` "backward" (None), "ortho" or "forward"."""
    lx = lift(x, "fft")
    return _c2c(lx, *_one_axis(n, axis, lx, "fft"), norm, False, "fft")


@builder(public=False)
def ifft(x: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Node:
    """The inverse of :func:`fft` (``numpy.fft.ifft``)."""
    lx = lift(x, "ifft")
    return _c2c(lx, *_one_axis(n, axis, lx, "ifft"), norm, True, "ifft")


@builder(public=False)
def fftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None) -> Node:
    """The n-dimensional transform over ``axes`` (None: all), ``s`` points along each
    (``numpy.fft.fftn``; ``s`` needs ``axes``, -1 keeps an axis' size)."""
    return _c2c(*_nd_args(x, s, axes, "fftn"), norm, False, "fftn")


@builder(public=False)
def ifftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None) -> Node:
    """The inverse of :func:`fftn` (``numpy.fft.ifftn``)."""
    return _c2c(*_nd_args(x, s, axes, "ifftn"), norm, True, "ifftn")


@builder(public=False)
def rfft(x: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Node:
    """The transform of real input along ``axis``: its ``n // 2 + 1`` non-negative frequencies
    (``numpy.fft.rfft``)."""
    lx = lift(x, "rfft")
    return _r2c(lx, *_one_axis(n, axis, lx, "rfft"), norm, "rfft")


@builder(public=False)
def irfft(x: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Node:
    """The inverse of :func:`rfft`: ``n`` real points (default ``2 * (m - 1)``) from the
    ``n // 2 + 1`` first entries along ``axis`` (``numpy.fft.irfft``)."""
    lx = lift(x, "irfft")
    return _c2r(lx, *_one_axis(n, axis, lx, "irfft"), norm, "irfft")


@builder(public=False)
def rfftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None) -> Node:
    """The n-dimensional transform of real input, halved along the last of ``axes``
    (``numpy.fft.rfftn``)."""
    return _r2c(*_nd_args(x, s, axes, "rfftn"), norm, "rfftn")


@builder(public=False)
def irfftn(x: Any, s: Any = None, axes: Any = None, norm: Any = None) -> Node:
    """The inverse of :func:`rfftn`: ``s[-1]`` real points along the last axis (default
    ``2 * (m - 1)``, also for ``s[-1] = -1``) (``numpy.fft.irfftn``)."""
    return _c2r(*_nd_args(x, s, axes, "irfftn"), norm, "irfftn")


@builder(public=False)
def hfft(x: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Node:
    """The transform of a signal with Hermitian symmetry given by its first half: ``n`` real
    points (default ``2 * (m - 1)``), ``irfft(conj(x))`` with the norm's direction swapped
    (``numpy.fft.hfft``)."""
    lx = lift(x, "hfft")
    sizes, axes = _one_axis(n, axis, lx, "hfft")
    return _c2r(conj(_promote(lx, "hfft", True)), sizes, axes, SWAP[_norm(norm, "hfft")], "hfft")


@builder(public=False)
def ihfft(x: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Node:
    """The inverse of :func:`hfft` for real input: ``conj(rfft(x))`` with the norm's direction
    swapped (``numpy.fft.ihfft``)."""
    lx = lift(x, "ihfft")
    sizes, axes = _one_axis(n, axis, lx, "ihfft")
    return conj(_r2c(lx, sizes, axes, SWAP[_norm(norm, "ihfft")], "ihfft"))
