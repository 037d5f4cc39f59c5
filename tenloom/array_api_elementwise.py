"""The array API standard's elementwise functions (2024.12) for ``tenloom.array_api``.

Each is lazy: a tenloom builder of that meaning (``add``, ``exp``, ``maximum``, ...) under the
standard's name, or a composite of builders (``tan`` is ``sin / cos``, ``floor`` is
``floor_divide(x, 1)`` where finite, ``atan2`` the angle of ``log(x + iy)``, ...). The
composites give the values to a few ulps and keep NaN and the infinities where they flow
through; the signed-zero special cases of the standard that a composite loses are listed in
docs/array_api.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tenloom import api as tl
from tenloom.graph.errors import DTypeError
from tenloom.tensor import Tensor


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else tl.asarray(x)


def _pair(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands as Tensors; a Python scalar takes the dtype it promotes to next to the
    other operand (weak, NEP 50: ``float32_tensor + 1.0`` stays float32)."""
    if not isinstance(a, Tensor) and isinstance(b, Tensor):
        a = tl.asarray(a, dtype=np.result_type(b.dtype, a))
    elif not isinstance(b, Tensor) and isinstance(a, Tensor):
        b = tl.asarray(b, dtype=np.result_type(a.dtype, b))
    return _t(a), _t(b)


def _need(x: Tensor, kinds: str, op: str) -> None:
    if x.dtype.kind not in kinds:
        names = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}
        allowed = ", ".join(names[k] for k in kinds)
        raise DTypeError(f"{op}: the operand's dtype {x.dtype} is not one of the {allowed} kinds")


def _complex_of(x: Tensor) -> np.dtype:
    return np.result_type(x.dtype, np.complex64)


# ---- complex numbers part by part (tl.complex keeps infinite parts: no 0 * inf) ---------------
def _times_i(z: Tensor) -> Tensor:
    """``i z``, exactly: ``-Im z + i Re z`` (``z * 1j`` makes ``0 * inf`` NaN parts)."""
    return tl.complex(tl.negative(tl.imag(z)), tl.real(z))


def _times_minus_i(z: Tensor) -> Tensor:
    """``-i z``, exactly: ``Im z - i Re z``."""
    return tl.complex(tl.imag(z), tl.negative(tl.real(z)))


def _scaled(z: Tensor, s: float) -> Tensor:
    """``s z`` for a real ``s``, part by part (``z * s`` multiplies ``0 * inf`` into a part)."""
    return tl.complex(tl.multiply(tl.real(z), s), tl.multiply(tl.imag(z), s))


def _odd_parts(z: Tensor, finite: Tensor, table) -> Tensor:
    """``f(z)`` for ``f`` (asinh, atanh) that keeps each quadrant (the real part of the result
    has the sign of ``Re z``, the imaginary part that of ``Im z``, signed zeros included, as
    ``f(conj z) = conj f(z)`` and ``f(-z) = -f(z)`` make it): ``finite`` where ``z`` is finite,
    else ``table(a, b, k)``, the (real, imaginary) result for ``a = |Re z|``, ``b = |Im z|``
    of C99's Annex G and the standard's special cases (``k(v)``: a 0-d constant of their
    dtype); then the signs of ``z``'s parts."""
    re, im = tl.real(z), tl.imag(z)
    dt = re.dtype

    def k(v: float) -> Tensor:
        return tl.full((), v, dt)

    r, i = table(tl.abs(re), tl.abs(im), k)
    fin = isfinite(z)
    r, i = tl.where(fin, tl.real(finite), r), tl.where(fin, tl.imag(finite), i)
    return tl.complex(copysign(r, re), copysign(i, im))


def _asinh_table(a: Tensor, b: Tensor, k):
    inf_a, inf_b, nan_a, nan_b = isinf(a), isinf(b), isnan(a), isnan(b)
    r = tl.where(tl.bitwise_or(inf_a, inf_b), k(math.inf), k(math.nan))
    angle = tl.where(inf_b, tl.where(inf_a, k(math.pi / 4), k(math.pi / 2)), k(0.0))
    i = tl.where(tl.bitwise_or(nan_a, nan_b), tl.where(tl.equal(b, 0), k(0.0), k(math.nan)), angle)
    return r, i


def _acosh_table(a: Tensor, b: Tensor, k):
    """acosh(a + bj) for ``b = |Im z|`` where a part is infinite or NaN (C99's cacosh, the
    standard's table): the real part +inf or NaN, the imaginary part a multiple of pi or NaN;
    acosh(conj z) = conj(acosh(z)) gives the other half plane."""
    inf_a, inf_b, nan_a, nan_b = isinf(a), isinf(b), isnan(a), isnan(b)
    r = tl.where(tl.bitwise_or(inf_a, inf_b), k(math.inf), k(math.nan))
    neg = tl.less(a, 0)
    on_b = tl.where(inf_a, tl.where(neg, k(3 * math.pi / 4), k(math.pi / 4)), k(math.pi / 2))
    i = tl.where(inf_b, on_b, tl.where(neg, k(math.pi), k(0.0)))  # b inf, or a inf, b finite
    i = tl.where(nan_a, k(math.nan), i)
    i = tl.where(nan_b, tl.where(tl.equal(a, 0), k(math.pi / 2), k(math.nan)), i)
    return r, i


def _atanh_table(a: Tensor, b: Tensor, k):
    inf_a, inf_b = isinf(a), isinf(b)
    zero = tl.bitwise_or(tl.bitwise_or(inf_a, inf_b), tl.equal(a, 0))
    r = tl.where(zero, k(0.0), k(math.nan))
    right = tl.bitwise_or(inf_b, tl.bitwise_and(inf_a, tl.invert(isnan(b))))
    return r, tl.where(right, k(math.pi / 2), k(math.nan))


# ---- tenloom's own builders under the standard's names --------------------------------------
abs = tl.abs  # noqa: A001
add = tl.add
bitwise_and = tl.bitwise_and
bitwise_or = tl.bitwise_or
bitwise_xor = tl.bitwise_xor
conj = tl.conj
cos = tl.cos
divide = tl.divide
equal = tl.equal
exp = tl.exp
greater = tl.greater
greater_equal = tl.greater_equal
imag = tl.imag
less = tl.less
less_equal = tl.less_equal
log = tl.log
maximum = tl.maximum
minimum = tl.minimum
multiply = tl.multiply
negative = tl.negative
not_equal = tl.not_equal
pow = tl.power  # noqa: A001
real = tl.real
remainder = tl.remainder
sin = tl.sin
sqrt = tl.sqrt
subtract = tl.subtract


def tanh(x: Any) -> Tensor:
    """NumPy's tanh, and for complex ``a + bj`` with ``a`` infinite and ``b`` finite the
    standard's ``+-1 + 0j`` with the sign of ``b`` (``tanh(inf + 2j)`` is ``1 + 0j``; NumPy's C
    library gives ``1 + 0 * sin(2b) j``, ``1 - 0j`` there)."""
    x = _t(x)
    out = tl.tanh(x)
    if x.dtype.kind != "c":
        return out
    a, b = tl.real(x), tl.imag(x)
    edge = tl.complex(copysign(1.0, a), copysign(0.0, b))
    return tl.where(tl.bitwise_and(isinf(a), isfinite(b)), edge, out)


def floor_divide(a: Any, b: Any) -> Tensor:
    """``floor(a / b)``: NumPy's floor_divide with the standard's infinities (``inf // 2`` is
    inf, ``1 // -inf`` is -0, where NumPy gives NaN and -1). Also ``Tensor.__floordiv__``.

    The operands are promoted and checked by NumPy's floor_divide (``tl.floor_divide``: NEP 50
    for Python scalars, a DTypeError for a value that does not fit); the infinite and zero
    results are constants chosen by the quotient's sign, so the derivative stays zero as
    floor_divide's (no ``a / b`` whose derivative is NaN at ``b == 0``)."""
    out = tl.floor_divide(a, b)
    dt = out.dtype
    if dt.kind != "f":
        return out
    a, b = (tl.astype(Tensor(n), dt) for n in out.node.inputs)  # as floor_divide lifted them
    negative = tl.bitwise_xor(signbit(a), signbit(b))

    def signed(v: float) -> Tensor:
        return tl.where(negative, tl.full((), -v, dt), tl.full((), v, dt))

    out = tl.where(tl.bitwise_and(isinf(a), isfinite(b)), signed(math.inf), out)
    return tl.where(tl.bitwise_and(isfinite(a), isinf(b)), signed(0.0), out)


def bitwise_invert(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "biu", "bitwise_invert")
    return tl.invert(x)


def sign(x: Any) -> Tensor:
    """``x / |x|`` for complex (0 at 0), as the standard (NumPy 2 agrees)."""
    x = _t(x)
    if x.dtype.kind != "c":
        return tl.sign(x)
    m = tl.abs(x)
    return tl.where(
        tl.equal(m, 0), tl.zeros((), x.dtype), tl.divide(x, tl.where(tl.equal(m, 0), 1, m))
    )


def positive(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "iufc", "positive")
    return x


def square(x: Any) -> Tensor:
    x = _t(x)
    return tl.multiply(x, x)


def reciprocal(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "reciprocal")
    return tl.divide(1, x)


# ---- predicates -------------------------------------------------------------------------------
def isnan(x: Any) -> Tensor:
    x = _t(x)
    if x.dtype.kind == "c":
        return tl.bitwise_or(isnan(tl.real(x)), isnan(tl.imag(x)))
    return tl.not_equal(x, x)


def isinf(x: Any) -> Tensor:
    x = _t(x)
    if x.dtype.kind == "c":
        return tl.bitwise_or(isinf(tl.real(x)), isinf(tl.imag(x)))
    if x.dtype.kind != "f":
        return tl.not_equal(x, x)  # all False, x's shape
    return tl.equal(tl.abs(x), math.inf)


def isfinite(x: Any) -> Tensor:
    x = _t(x)
    if x.dtype.kind == "c":
        return tl.bitwise_and(isfinite(tl.real(x)), isfinite(tl.imag(x)))
    if x.dtype.kind != "f":
        return tl.equal(x, x)
    return tl.less(tl.abs(x), math.inf)  # False for NaN and the infinities


def signbit(x: Any) -> Tensor:
    """True for negative values and -0.0 (NaN's sign bit is not visible to a composite)."""
    x = _t(x)
    _need(x, "f", "signbit")
    neg_zero = tl.bitwise_and(tl.equal(x, 0), tl.less(tl.divide(1, tl.where(x == 0, x, 1)), 0))
    return tl.bitwise_or(tl.less(x, 0), neg_zero)


# ---- logical ----------------------------------------------------------------------------------
def _truth(x: Any) -> Tensor:
    x = _t(x)
    return x if x.dtype.kind == "b" else tl.not_equal(x, 0)


def logical_not(x: Any) -> Tensor:
    return tl.invert(_truth(x))


def logical_and(a: Any, b: Any) -> Tensor:
    return tl.bitwise_and(_truth(a), _truth(b))


def logical_or(a: Any, b: Any) -> Tensor:
    return tl.bitwise_or(_truth(a), _truth(b))


def logical_xor(a: Any, b: Any) -> Tensor:
    return tl.bitwise_xor(_truth(a), _truth(b))


# ---- rounding ---------------------------------------------------------------------------------
def floor(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "biuf", "floor")
    if x.dtype.kind != "f":
        return x
    return tl.where(isfinite(x), tl.floor_divide(x, 1), x)


def ceil(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "biuf", "ceil")
    if x.dtype.kind != "f":
        return x
    return copysign(tl.negative(floor(tl.negative(x))), x)


def trunc(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "biuf", "trunc")
    if x.dtype.kind != "f":
        return x
    return tl.where(tl.less(x, 0), ceil(x), floor(x))


def round(x: Any) -> Tensor:  # noqa: A001
    """To the nearest integer, halves to even (NumPy's and the standard's rule)."""
    x = _t(x)
    if x.dtype.kind == "c":
        return tl.complex(round(tl.real(x)), round(tl.imag(x)))  # (no inf * 1j: NaN parts)
    _need(x, "biuf", "round")
    if x.dtype.kind != "f":
        return x
    f = floor(x)
    d = tl.subtract(x, f)
    even = tl.equal(tl.remainder(f, 2), 0)
    up = tl.bitwise_or(tl.greater(d, 0.5), tl.bitwise_and(tl.equal(d, 0.5), tl.invert(even)))
    r = tl.where(up, tl.add(f, 1), f)
    return tl.where(isfinite(x), copysign(r, x), x)


def copysign(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    _need(a, "f", "copysign")
    _need(b, "f", "copysign")
    dt = np.result_type(a.dtype, b.dtype)
    m = tl.abs(tl.astype(a, dt))
    return tl.where(signbit(tl.astype(b, dt)), tl.negative(m), m)


# ---- trigonometric and hyperbolic --------------------------------------------------------------
def tan(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "tan")
    if x.dtype.kind == "c":
        return _times_minus_i(tanh(_times_i(x)))  # tan(z) = -i tanh(iz)
    return tl.divide(tl.sin(x), tl.cos(x))


def _hyperbolic_times(
    a: Tensor, t: Tensor, odd: bool, below: Tensor | None = None, limit: float = 20.0
) -> Tensor:
    """``sinh(a) * t`` (``odd``) or ``cosh(a) * t`` for real ``a``: for ``|a| > 20``, where
    both are ``+-e^|a| / 2``, as ``(e * t / 2) * e`` with ``e = e^(|a|/2)``, finite wherever the
    product is (``cosh(89.4)`` overflows float32, ``cosh(89.4) * cos(b)`` need not; NumPy's
    ccosh scales alike). ``below``: the product below ``limit`` (20 unless given), where given
    (real sinh and cosh's own, with the limit where e^|a| would overflow)."""
    near = below if below is not None else tl.multiply(sinh(a) if odd else cosh(a), t)
    big = tl.greater(tl.abs(a), limit)
    e = tl.exp(tl.multiply(tl.where(big, tl.abs(a), 0), 0.5))
    far = tl.multiply(tl.multiply(e, tl.multiply(t, 0.5)), e)
    if odd:
        far = tl.where(tl.less(a, 0), tl.negative(far), far)
    return tl.where(big, far, near)


def sinh(x: Any) -> Tensor:
    """Complex: ``sinh(a) cos(b) + i cosh(a) sin(b)``, with C99's parts where ``inf * 0`` or
    ``0 * NaN`` would make NaN (``sinh(inf + 0j)`` is ``inf + 0j``, ``sinh(0 + inf j)`` is
    ``0 + NaN j``)."""
    x = _t(x)
    _need(x, "fc", "sinh")
    if x.dtype.kind == "c":
        a, b = tl.real(x), tl.imag(x)
        re = _hyperbolic_times(a, tl.cos(b), odd=True)
        im = _hyperbolic_times(a, tl.sin(b), odd=False)
        # an infinite or NaN b: +-0 keeps its sign, +-inf gives +inf (the sign unspecified;
        # NumPy's)
        nonfinite_b = tl.invert(isfinite(b))
        re = tl.where(tl.bitwise_and(nonfinite_b, isinf(a)), tl.abs(a), re)
        re = tl.where(tl.bitwise_and(nonfinite_b, tl.equal(a, 0)), a, re)
        im = tl.where(tl.equal(b, 0), b, im)  # cosh(a) * +-0, a infinite or NaN included
        return tl.complex(re, im)
    small = tl.less(tl.abs(x), 1)
    # near e^|x|'s overflow, +-e^|x| / 2 as (e * 1/2) * e with e = e^(|x|/2)
    # (_hyperbolic_times): finite up to the largest float (e^x overflows first: sinh(710.0) is
    # 1.1e308); the other branches see 0 there (no overflow to warn about)
    limit = _exp_limit(x)
    xm = tl.where(tl.greater(tl.abs(x), limit), 0, x)
    e = expm1(xm)  # sinh = (e^x - e^-x)/2 = (expm1(x) + expm1(x)/(expm1(x)+1)) / 2
    near = tl.multiply(tl.add(e, tl.divide(e, tl.add(e, 1))), 0.5)
    mid = tl.multiply(tl.subtract(tl.exp(xm), tl.exp(tl.negative(xm))), 0.5)
    one = tl.full(x.shape, 1, x.dtype)
    return tl.where(small, near, _hyperbolic_times(x, one, odd=True, below=mid, limit=limit))


def cosh(x: Any) -> Tensor:
    """Complex: ``cosh(a) cos(b) + i sinh(a) sin(b)``, with C99's parts where ``inf * 0`` or
    ``0 * NaN`` would make NaN (``cosh(inf + 0j)`` is ``inf + 0j``, ``cosh(0 + inf j)`` is
    ``NaN + 0j``)."""
    x = _t(x)
    _need(x, "fc", "cosh")
    if x.dtype.kind == "c":
        a, b = tl.real(x), tl.imag(x)
        re = _hyperbolic_times(a, tl.cos(b), odd=False)
        im = _hyperbolic_times(a, tl.sin(b), odd=True)
        finite_b = isfinite(b)
        re = tl.where(tl.bitwise_and(isinf(a), tl.invert(finite_b)), tl.abs(a), re)
        # +0 (the sign unspecified; NumPy's)
        im = tl.where(tl.bitwise_and(tl.equal(a, 0), tl.invert(finite_b)), tl.abs(a), im)
        # sinh(a) * +-0 with the sign of the product (a infinite or NaN included)
        im = tl.where(tl.equal(b, 0), tl.where(signbit(a), tl.negative(b), b), im)
        return tl.complex(re, im)
    limit = _exp_limit(x)  # (as sinh)
    xm = tl.where(tl.greater(tl.abs(x), limit), 0, x)
    mid = tl.multiply(tl.add(tl.exp(xm), tl.exp(tl.negative(xm))), 0.5)
    one = tl.full(x.shape, 1, x.dtype)
    return _hyperbolic_times(x, one, odd=False, below=mid, limit=limit)


def _exp_limit(x: Tensor) -> float:
    """Just below where e^|x| overflows x's dtype: past it, real sinh and cosh take
    ``_hyperbolic_times``'s square of e^(|x|/2) (2 ulp rather than 1)."""
    return float(np.log(np.finfo(x.dtype).max)) - 1.0


def atan2(y: Any, x: Any) -> Tensor:
    """The angle of ``x + iy``: the imaginary part of its complex logarithm, with the standard's
    infinities and signed zeros (the result has the sign of ``y``)."""
    y, x = _pair(y, x)
    _need(y, "f", "atan2")
    _need(x, "f", "atan2")
    dt = np.result_type(y.dtype, x.dtype)
    x, y = tl.astype(x, dt), tl.astype(y, dt)
    inf_x, inf_y = isinf(x), isinf(y)
    some_inf = tl.bitwise_or(inf_x, inf_y)  # the directions of the infinities, as unit steps
    xs = tl.where(some_inf, tl.where(inf_x, tl.sign(x), 0), x)
    ys = tl.where(some_inf, tl.where(inf_y, tl.sign(y), 0), y)
    both_zero = tl.bitwise_and(tl.equal(xs, 0), tl.equal(ys, 0))
    xs = tl.where(both_zero, 1, xs)  # log(0) is not needed: the angle is 0 or pi
    z = tl.add(tl.astype(xs, _complex_of(xs)), tl.multiply(ys, 1j))
    r = tl.astype(tl.imag(tl.log(z)), dt)
    r = tl.where(both_zero, tl.astype(tl.where(signbit(x), math.pi, 0), dt), r)
    # NaN in either operand is NaN (the unit steps above would drop it beside an infinity)
    r = tl.where(tl.bitwise_or(isnan(x), isnan(y)), math.nan, r)
    return copysign(tl.abs(r), y)


def atan(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "atan")
    if x.dtype.kind == "c":
        return _times_minus_i(atanh(_times_i(x)))  # atan(z) = -i atanh(iz)
    return atan2(x, tl.full(x.shape, 1, x.dtype))


def asin(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "asin")
    if x.dtype.kind == "c":
        return _times_minus_i(asinh(_times_i(x)))  # asin(z) = -i asinh(iz)
    return atan2(x, tl.sqrt(tl.multiply(tl.subtract(1, x), tl.add(1, x))))


def acos(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "acos")
    if x.dtype.kind == "c":  # pi/2 - asin(z), part by part (the imaginary part negated exactly)
        w = asin(x)
        return tl.complex(tl.subtract(math.pi / 2, tl.real(w)), tl.negative(tl.imag(w)))
    return atan2(tl.sqrt(tl.multiply(tl.subtract(1, x), tl.add(1, x))), x)


def _big(x: Tensor) -> float:
    """Above this magnitude ``x * x`` would overflow."""
    return float(np.sqrt(np.finfo(x.dtype).max)) / 4


def asinh(x: Any) -> Tensor:
    """``log(x + sqrt(x^2 + 1))`` on the half plane Re >= 0 (odd symmetry for the other half,
    so nothing cancels), ``log(2x)`` where ``x^2`` would overflow; a complex ``x`` with an
    infinite or NaN part takes C99's values (``_asinh_table``)."""
    x = _t(x)
    _need(x, "fc", "asinh")
    if x.dtype.kind == "c":
        neg = tl.less(tl.real(x), 0)
        w = tl.where(neg, tl.negative(x), x)
        big = tl.greater(tl.abs(w), _big(w))
        ws = tl.where(big, 0, w)
        root = tl.sqrt(tl.add(tl.multiply(ws, ws), 1))
        near = tl.log(tl.add(ws, root))
        # near 0 as log1p(w + w^2 / (1 + sqrt(w^2 + 1))), without log(1 + ...)'s cancellation
        small = tl.less(tl.abs(ws), 0.5)
        w2 = tl.multiply(ws, ws)
        tiny = log1p(tl.add(ws, tl.divide(w2, tl.add(root, 1))))
        near = tl.where(small, tiny, near)
        r = tl.where(big, tl.add(tl.log(w), math.log(2)), near)
        r = tl.where(neg, tl.negative(r), r)
        return _odd_parts(x, r, _asinh_table)
    a = tl.abs(x)
    big = tl.greater(a, _big(x))  # x*x would overflow: asinh(a) = log(2a) there
    a2 = tl.where(big, 0, tl.multiply(a, a))
    small = log1p(tl.add(a, tl.divide(a2, tl.add(1, tl.sqrt(tl.add(a2, 1))))))
    r = tl.where(big, tl.add(tl.log(a), math.log(2)), small)
    return copysign(r, x)


def acosh(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "acosh")
    if x.dtype.kind == "c":
        r = tl.log(tl.add(x, tl.multiply(tl.sqrt(tl.add(x, 1)), tl.sqrt(tl.subtract(x, 1)))))
        a, b = tl.real(x), tl.imag(x)
        sr, si = _acosh_table(a, tl.abs(b), lambda v: tl.full((), v, a.dtype))
        fin = isfinite(x)
        re = tl.where(fin, tl.real(r), sr)
        im = tl.where(fin, tl.imag(r), si)
        # the real part is >= 0 and the imaginary part has the sign of Im z (C99; the sum
        # above loses the sign of a zero Im z on the branch cut, and rounds |Re| below 0)
        return tl.complex(tl.abs(re), copysign(im, b))
    big = tl.greater(x, _big(x))
    xs = tl.where(big, 2, x)
    # log1p((x - 1) + sqrt((x - 1)(x + 1))): x - 1 is exact near 1, where log(x + ...) lost
    # a million ulps at 1 + 1.3e-13
    d = tl.subtract(xs, 1)
    r = log1p(tl.add(d, tl.sqrt(tl.multiply(d, tl.add(xs, 1)))))
    r = tl.where(big, tl.add(tl.log(x), math.log(2)), r)
    return tl.where(tl.less(x, 1), math.nan, r)  # below the domain (no cancellation to -inf)


def atanh(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "atanh")
    if x.dtype.kind == "c":  # halved part by part: atanh(1 + 0j) is inf + 0j, not inf + NaN j
        # log1p's: accurate near 0, where log(1 + z) - log(1 - z) cancelled
        r = _scaled(tl.subtract(log1p(x), log1p(tl.negative(x))), 0.5)
        return _odd_parts(x, r, _atanh_table)
    # odd: computed at |x|, where 1 - |x| is exact near 1 (log1p near -1 lost 4% at -0.99999994)
    a = tl.abs(x)
    return copysign(tl.multiply(log1p(tl.divide(tl.multiply(a, 2), tl.subtract(1, a))), 0.5), x)


# ---- exponentials and logarithms --------------------------------------------------------------
def expm1(x: Any) -> Tensor:
    """``exp(x) - 1``; near 0 as ``2 t / (1 - t)`` with ``t = tanh(x/2)`` (no cancellation)."""
    x = _t(x)
    _need(x, "fc", "expm1")
    if x.dtype.kind == "c":  # near 0, part by part without cancellation (below)
        a, b = tl.real(x), tl.imag(x)
        small = tl.bitwise_and(tl.less(tl.abs(a), 1), tl.less(tl.abs(b), 1))
        a0, b0 = tl.where(small, a, 0), tl.where(small, b, 0)
        h = tl.sin(tl.multiply(b0, 0.5))
        # e^a cos b - 1 = expm1(a) cos b - 2 sin^2(b/2); Im: e^a sin b
        re = tl.subtract(tl.multiply(expm1(a0), tl.cos(b0)), tl.multiply(tl.multiply(h, h), 2))
        near = tl.complex(re, tl.multiply(tl.exp(a0), tl.sin(b0)))
        return tl.where(small, near, tl.subtract(tl.exp(x), 1))
    t = tl.tanh(tl.multiply(x, 0.5))
    near = tl.divide(tl.multiply(t, 2), tl.subtract(1, t))
    return tl.where(tl.less(tl.abs(x), 1), near, tl.subtract(tl.exp(x), 1))


def log1p(x: Any) -> Tensor:
    """``log(1 + x)`` with Goldberg's correction ``log(u) * x / (u - 1)``, ``u = 1 + x``."""
    x = _t(x)
    _need(x, "fc", "log1p")
    if x.dtype.kind == "c":
        a, b = tl.real(x), tl.imag(x)
        # 1 + z part by part (keeps the sign of a zero imaginary part: log1p(-inf - 0j) is
        # inf - pi j)
        far = tl.log(tl.complex(tl.add(a, 1), b))
        # near 0: Re = log1p(|1 + z|^2 - 1) / 2 with |1 + z|^2 - 1 = a (2 + a) + b^2, and
        # Im = atan2(b, 1 + a): log(1 + z) lost Re's digits (log1p(1e-10 j) had 5e-21)
        small = tl.less(tl.add(tl.abs(a), tl.abs(b)), 0.5)
        a0, b0 = tl.where(small, a, 0), tl.where(small, b, 0)
        u = tl.add(tl.multiply(a0, tl.add(a0, 2)), tl.multiply(b0, b0))
        near = tl.complex(tl.multiply(log1p(u), 0.5), atan2(b0, tl.add(a0, 1)))
        return tl.where(small, near, far)
    u = tl.add(x, 1)
    d = tl.subtract(u, 1)
    safe = tl.where(tl.equal(d, 0), 1, d)
    corrected = tl.multiply(tl.log(u), tl.divide(x, safe))
    return tl.where(tl.equal(d, 0), x, tl.where(isfinite(x), corrected, tl.log(u)))


def log2(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "log2")
    if x.dtype.kind == "c":  # part by part: a complex division makes inf / c NaN parts
        return _scaled(tl.log(x), 1 / math.log(2))
    return tl.divide(tl.log(x), math.log(2))


def log10(x: Any) -> Tensor:
    x = _t(x)
    _need(x, "fc", "log10")
    if x.dtype.kind == "c":
        return _scaled(tl.log(x), 1 / math.log(10))
    return tl.divide(tl.log(x), math.log(10))


def logaddexp(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    _need(a, "f", "logaddexp")
    _need(b, "f", "logaddexp")
    m = tl.maximum(a, b)
    same = tl.equal(a, b)  # covers inf + inf (the difference would be NaN)
    d = tl.negative(tl.abs(tl.subtract(a, b)))
    r = tl.add(m, log1p(tl.exp(tl.where(same, 0, d))))
    return tl.where(same, tl.add(a, math.log(2)), r)


def hypot(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    _need(a, "f", "hypot")
    _need(b, "f", "hypot")
    x, y = tl.abs(a), tl.abs(b)
    m = tl.maximum(x, y)
    s = tl.where(tl.equal(m, 0), 1, m)
    r = tl.multiply(m, tl.sqrt(tl.add(square(tl.divide(x, s)), square(tl.divide(y, s)))))
    r = tl.where(tl.equal(m, 0), 0 * m, r)
    return tl.where(tl.bitwise_or(isinf(a), isinf(b)), math.inf, r)


# ---- nextafter -------------------------------------------------------------------------------
def nextafter(a: Any, b: Any) -> Tensor:
    """The float next to ``a`` toward ``b``: ``a`` plus or minus one unit in the last place,
    the unit read from the binary exponent of ``|a|`` (a power of two, computed exactly; half a
    unit when stepping down from a power of two), subnormals and zero included."""
    a, b = _pair(a, b)
    _need(a, "f", "nextafter")
    _need(b, "f", "nextafter")
    dt = np.result_type(a.dtype, b.dtype)
    a, b = tl.astype(a, dt), tl.astype(b, dt)
    fi = np.finfo(dt)
    emin, p = int(fi.minexp), int(fi.nmant)
    two = tl.full((), 2, dt)
    m = tl.abs(a)
    usable = tl.bitwise_and(tl.greater(m, 0), isfinite(m))
    e = floor(log2(tl.where(usable, m, 1)))
    for _ in range(2):  # log2 is a few ulps off near powers of two: settle the exponent
        e = tl.where(tl.greater(tl.power(two, e), m), tl.subtract(e, 1), e)
        e = tl.where(tl.less_equal(tl.power(two, tl.add(e, 1)), m), tl.add(e, 1), e)
    e = tl.maximum(e, emin)  # subnormals share the smallest exponent's unit
    # 2^k, k = e - p, as 2^max(k, emin) * 2^min(k - emin, 0): both factors are normal powers
    # of two (no pow of a subnormal result), and their product is exact where it is subnormal.
    # (On CUDA float32 subnormals are flushed to zero all the same: the steps next to zero
    # are lost there, docs/benchmarks.md, session 16.)
    k = tl.subtract(e, p)
    ulp = tl.multiply(
        tl.power(two, tl.maximum(k, emin)), tl.power(two, tl.minimum(tl.subtract(k, emin), 0))
    )
    toward_zero = tl.bitwise_xor(tl.less(b, a), tl.less(a, 0))
    at_power = tl.bitwise_and(tl.equal(m, tl.power(two, e)), tl.greater(e, emin))
    step = tl.where(tl.bitwise_and(toward_zero, at_power), tl.multiply(ulp, 0.5), ulp)
    out = tl.where(tl.greater(b, a), tl.add(a, step), tl.subtract(a, step))
    out = tl.where(tl.equal(out, 0), tl.multiply(a, 0.0), out)  # -tiny up to 0 is -0.0
    tiny = float(fi.smallest_subnormal)
    out = tl.where(tl.equal(a, 0), tl.astype(tl.where(tl.greater(b, 0), tiny, -tiny), dt), out)
    out = tl.where(isinf(a), tl.multiply(tl.sign(a), float(fi.max)), out)
    out = tl.where(tl.equal(a, b), b, out)
    return tl.where(tl.bitwise_or(isnan(a), isnan(b)), math.nan, out)


# ---- shifts ----------------------------------------------------------------------------------
def _shift_parts(a: Any, b: Any, op: str) -> tuple[Tensor, Tensor, Tensor, int]:
    a, b = _pair(a, b)
    _need(a, "iu", op)
    _need(b, "iu", op)
    dt = np.result_type(a.dtype, b.dtype)
    if dt.kind not in "iu":  # uint64 with a signed type: no common integer type (NumPy raises)
        raise DTypeError(
            f"{op}: operands of dtypes {a.dtype} and {b.dtype} have no common integer dtype"
        )
    a, b = tl.astype(a, dt), tl.astype(b, dt)
    bits = dt.itemsize * 8
    scale = tl.power(
        tl.astype(tl.asarray(2), dt), tl.clip(b, 0, bits - 2 if dt.kind == "i" else bits - 1)
    )
    return a, b, scale, bits


def bitwise_left_shift(a: Any, b: Any) -> Tensor:
    a, b, scale, bits = _shift_parts(a, b, "bitwise_left_shift")
    out = tl.multiply(a, scale)
    if a.dtype.kind == "i":  # a shift of bits-1 for a signed type: twice the last power
        out = tl.where(tl.equal(b, bits - 1), tl.multiply(tl.multiply(a, scale), 2), out)
    return tl.where(tl.greater_equal(b, bits), 0, out)


def bitwise_right_shift(a: Any, b: Any) -> Tensor:
    a, b, scale, bits = _shift_parts(a, b, "bitwise_right_shift")
    out = tl.floor_divide(a, scale)
    limit = bits - 1 if a.dtype.kind == "i" else bits
    far = tl.astype(tl.where(tl.less(a, 0), -1, 0), a.dtype) if a.dtype.kind == "i" else 0
    return tl.where(tl.greater_equal(b, limit), far, out)


NAMES = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1", "floor",
    "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan",
    "less", "less_equal", "log", "log10", "log1p", "log2", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter",
    "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round", "sign",
    "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc",
]  # fmt: skip
