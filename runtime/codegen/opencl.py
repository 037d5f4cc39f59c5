"""The OpenCL C dialect: a fused region (or any elementwise op) as one OpenCL kernel, and the
per-op expressions, value loads/stores/casts and helper library that the OpenCL backend's other
kernels (runtime/backends/opencl/source.py: copies, reductions, GEMM) build on. Generated from
our own op tables, never from user strings.

Value representation inside kernels ("compute types"): bool as ``int`` 0/1 (stored as
``uchar``), the integers as their C types (``char`` ... ``long``, ``uchar`` ... ``ulong``),
float16 as ``float`` (stored as ``half`` through ``vload_half``/``vstore_half``, which need no
extension), complex64/complex128 as ``float2``/``double2`` with the helper functions below.
Every op computes in the dtype NumPy's loop for it uses, so results match NumPy: integer
arithmetic wraps (done on unsigned types, where C leaves signed overflow undefined; char and
short widened to uint first, as C would promote them to int), signed and unsigned 64-bit
integers compare exactly (not through float64), integer ``//`` and ``%`` by zero give 0, float
``//``/``%`` follow NumPy's ``npy_divmod``, ``maximum``/``minimum``/``max``/``min`` propagate
NaN, complex numbers order lexicographically, and float16 results are rounded to half after
every step.
"""

from __future__ import annotations

from string import Template

import numpy as np
from tenloom.graph.errors import DTypeError
from tenloom.graph.ops import OPS, Op

BOOL = np.dtype(bool)

COMPUTE = {
    "bool": "int",
    "int8": "char",
    "int16": "short",
    "int32": "int",
    "int64": "long",
    "uint8": "uchar",
    "uint16": "ushort",
    "uint32": "uint",
    "uint64": "ulong",
    "float16": "float",
    "float32": "float",
    "float64": "double",
    "complex64": "float2",
    "complex128": "double2",
}
STORAGE = {**COMPUTE, "bool": "uchar", "float16": "half"}
# helper-function prefix of each compute type
PREFIX = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f32",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
}


def uses_double(dtypes) -> bool:
    return any(np.dtype(d).name in ("float64", "complex128") for d in dtypes)


# ---- helper library -----------------------------------------------------------------------------

_INT_HELPERS = Template("""
inline $T ${P}_add($T a, $T b) { return ($T)(($U)a + ($U)b); }
inline $T ${P}_sub($T a, $T b) { return ($T)(($U)a - ($U)b); }
inline $T ${P}_mul($T a, $T b) { return ($T)(($U)a * ($U)b); }
inline $T ${P}_neg($T a) { return ($T)(($U)0 - ($U)a); }
inline $T ${P}_abs($T a) { return a < 0 ? ${P}_neg(a) : a; }
inline $T ${P}_floordiv($T a, $T b) {
  if (b == 0) return 0;
  if (b == -1) return ${P}_neg(a);
  $T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
inline $T ${P}_mod($T a, $T b) {
  if (b == 0 || b == -1) return 0;
  $T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
inline $T ${P}_pow($T a, $T b) {
  if (b < 0) return 0;
  $U r = 1, x = ($U)a;
  while (b > 0) { if (b & 1) r *= x; x *= x; b >>= 1; }
  return ($T)r;
}
""")

# unsigned integers: C's unsigned arithmetic wraps as NumPy's does (char and short operands are
# widened to uint first: C would promote them to int, where a product can overflow)
_UINT_HELPERS = Template("""
inline $T ${P}_add($T a, $T b) { return ($T)(($U)a + ($U)b); }
inline $T ${P}_sub($T a, $T b) { return ($T)(($U)a - ($U)b); }
inline $T ${P}_mul($T a, $T b) { return ($T)(($U)a * ($U)b); }
inline $T ${P}_neg($T a) { return ($T)(($U)0 - ($U)a); }
inline $T ${P}_abs($T a) { return a; }
inline $T ${P}_floordiv($T a, $T b) { return b == 0 ? ($T)0 : ($T)(a / b); }
inline $T ${P}_mod($T a, $T b) { return b == 0 ? ($T)0 : ($T)(a % b); }
inline $T ${P}_pow($T a, $T b) {
  $U r = 1, x = ($U)a;
  while (b > 0) { if (b & 1) r *= x; x *= x; b >>= 1; }
  return ($T)r;
}
""")

_REAL_HELPERS = Template("""
inline $T ${P}_max($T a, $T b) { return (a > b || isnan(a)) ? a : b; }
inline $T ${P}_min($T a, $T b) { return (a < b || isnan(a)) ? a : b; }
inline $T ${P}_sign($T a) { return isnan(a) ? a : (a > 0 ? ($T)1 : (a < 0 ? ($T)-1 : ($T)0)); }
inline $T ${P}_divmod($T a, $T b, $T *modulus) {
  $T mod = fmod(a, b);
  if (b == 0) { *modulus = mod; return a / b; }
  $T div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) { mod += b; div -= ($T)1; }
  } else {
    mod = copysign(($T)0, b);
  }
  $T fl;
  if (div != 0) {
    fl = floor(div);
    if (div - fl > ($T)0.5) fl += ($T)1;
  } else {
    fl = copysign(($T)0, a / b);
  }
  *modulus = mod;
  return fl;
}
inline $T ${P}_floordiv($T a, $T b) {
  $T m;
  if (b == 0) return a / b;
  return ${P}_divmod(a, b, &m);
}
inline $T ${P}_mod($T a, $T b) {
  $T m;
  if (b == 0) return fmod(a, b);
  ${P}_divmod(a, b, &m);
  return m;
}
""")

_COMPLEX_HELPERS = Template("""
inline $T2 ${P}_mul($T2 a, $T2 b) { return ($T2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
inline $T2 ${P}_div($T2 a, $T2 b) {
  /* Smith's algorithm, as NumPy */
  $T abs_br = fabs(b.x), abs_bi = fabs(b.y);
  if (abs_br >= abs_bi) {
    if (abs_br == 0 && abs_bi == 0) return ($T2)(a.x / abs_br, a.y / abs_bi);
    $T rat = b.y / b.x, scl = ($T)1 / (b.x + b.y * rat);
    return ($T2)((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
  }
  $T rat = b.x / b.y, scl = ($T)1 / (b.y + b.x * rat);
  return ($T2)((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}
inline $T ${P}_abs($T2 a) { return hypot(a.x, a.y); }
/* c * exp(x) with no overflow in between: finite whenever the product is */
inline $T ${P}_mulexp($T c, $T x) {
  if (x <= ($T)$EXPLIM) return c * exp(x);
  return ldexp(c * exp(x - ($T)64 * ($T)0.69314718055994530942), 64);
}
inline $T2 ${P}_exp($T2 a) {
  if (a.y == 0) return ($T2)(exp(a.x), a.y);
  if (isinf(a.x) && !isfinite(a.y))  /* C99 Annex G, as NumPy */
    return a.x < 0 ? ($T2)(($T)0, ($T)0) : ($T2)(a.x, a.y - a.y);
  return ($T2)(${P}_mulexp(cos(a.y), a.x), ${P}_mulexp(sin(a.y), a.x));
}
/* log|a| as log(hypot) of a scaled copy: hypot itself overflows past the largest float and
   loses digits among subnormals */
inline $T2 ${P}_log($T2 a) {
  $T m = fmax(fabs(a.x), fabs(a.y)), n = fmin(fabs(a.x), fabs(a.y)), re;
  if (m > ($T)0.5 && m < ($T)1.5 && n < ($T)0.5)  /* |a| near 1: log1p keeps the digits */
    re = ($T)0.5 * log1p((m - 1) * (m + 1) + n * n);
  else if (m > ($T)$BIG)
    re = log(hypot(a.x * ($T)0.25, a.y * ($T)0.25)) + 2 * ($T)0.69314718055994530942;
  else if (m < ($T)$TINY)
    re = log(hypot(ldexp(a.x, $KTINY), ldexp(a.y, $KTINY)))
         - ($T)$KTINY * ($T)0.69314718055994530942;
  else
    re = log(hypot(a.x, a.y));
  return ($T2)(re, atan2(a.y, a.x));
}
/* Algorithm 312 (CACM 10, 1967) as in FreeBSD's csqrt: scaled down near overflow */
inline $T2 ${P}_sqrt($T2 a) {
  $T x = a.x, y = a.y;
  if (x == 0 && y == 0) return ($T2)(($T)0, y);
  if (isinf(y)) return ($T2)(INFINITY, y);
  if (isnan(x)) return ($T2)(x, (y - y) / (y - y));
  if (isinf(x)) {
    if (signbit(x)) return ($T2)(fabs(y - y), copysign(x, y));
    return ($T2)(x, copysign(y - y, y));
  }
  int scale = fabs(x) >= ($T)$BIG || fabs(y) >= ($T)$BIG;
  if (scale) { x *= ($T)0.25; y *= ($T)0.25; }
  $T t = sqrt((fabs(x) + hypot(x, y)) * ($T)0.5);
  $T2 r = x >= 0 ? ($T2)(t, y / (2 * t)) : ($T2)(fabs(y) / (2 * t), copysign(t, y));
  return scale ? r * ($T)2 : r;
}
/* sin(x + iy) = sin x cosh y + i cos x sinh y; for |y| > 20, cosh y = |sinh y| = exp|y|/2 to
   working precision, multiplied in without overflowing first */
inline $T2 ${P}_sin($T2 a) {
  if (fabs(a.y) <= ($T)20) return ($T2)(sin(a.x) * cosh(a.y), cos(a.x) * sinh(a.y));
  $T h = fabs(a.y);
  return ($T2)(${P}_mulexp(sin(a.x) * ($T)0.5, h),
               copysign(${P}_mulexp(cos(a.x) * ($T)0.5, h), cos(a.x) * a.y));
}
inline $T2 ${P}_cos($T2 a) {
  if (fabs(a.y) <= ($T)20) return ($T2)(cos(a.x) * cosh(a.y), -sin(a.x) * sinh(a.y));
  $T h = fabs(a.y);
  return ($T2)(${P}_mulexp(cos(a.x) * ($T)0.5, h),
               copysign(${P}_mulexp(sin(a.x) * ($T)0.5, h), -sin(a.x) * a.y));
}
/* Kahan's formula, as FreeBSD's ctanh: tan y and sinh x stay finite where sinh 2x and
   sin 2y / (cosh 2x + cos 2y) would not */
inline $T2 ${P}_tanh($T2 a) {
  if (isnan(a.x)) return ($T2)(a.x + a.y, a.y == 0 ? a.y : a.x + a.y);
  if (isinf(a.x))
    return ($T2)(copysign(($T)1, a.x), copysign(($T)0, isinf(a.y) ? a.y : sin(a.y) * cos(a.y)));
  if (!isfinite(a.y)) return ($T2)(a.y - a.y, a.y - a.y);
  if (fabs(a.x) > ($T)20) {
    $T e = exp(-2 * fabs(a.x));
    return ($T2)(copysign(($T)1, a.x), 4 * sin(a.y) * cos(a.y) * e);
  }
  $T t = tan(a.y), beta = 1 + t * t, s = sinh(a.x), rho = sqrt(1 + s * s);
  $T den = 1 + beta * s * s;
  return ($T2)(beta * rho * s / den, t / den);
}
inline $T2 ${P}_pow($T2 a, $T2 b) {
  if (b.x == 0 && b.y == 0) return ($T2)(($T)1, ($T)0);
  if (a.x == 0 && a.y == 0) {
    if (b.x > 0) return ($T2)(($T)0, ($T)0);
    return ($T2)(NAN, NAN);
  }
  if (b.y == 0 && b.x == floor(b.x) && fabs(b.x) < 100) {
    /* small integer powers by repeated squaring, as NumPy */
    int n = (int)b.x, m = n < 0 ? -n : n;
    $T2 r = ($T2)(($T)1, ($T)0), x = a;
    while (m > 0) { if (m & 1) r = ${P}_mul(r, x); x = ${P}_mul(x, x); m >>= 1; }
    return n < 0 ? ${P}_div(($T2)(($T)1, ($T)0), r) : r;
  }
  return ${P}_exp(${P}_mul(b, ${P}_log(a)));
}
inline $T2 ${P}_sign($T2 a) {
  if (isinf(a.x) || isinf(a.y)) {
    if (isinf(a.x) && isinf(a.y)) return ($T2)(NAN, NAN);
    return ($T2)(isinf(a.x) ? copysign(($T)1, a.x) : ($T)0,
                 isinf(a.y) ? copysign(($T)1, a.y) : ($T)0);
  }
  $T h = hypot(a.x, a.y);
  if (h == 0) return ($T2)(($T)0, ($T)0);
  return ($T2)(a.x / h, a.y / h);
}
inline int ${P}_eq($T2 a, $T2 b) { return a.x == b.x && a.y == b.y; }
inline int ${P}_lt($T2 a, $T2 b) {
  return (a.x < b.x && !isnan(a.y) && !isnan(b.y)) || (a.x == b.x && a.y < b.y);
}
inline int ${P}_le($T2 a, $T2 b) {
  return (a.x < b.x && !isnan(a.y) && !isnan(b.y)) || (a.x == b.x && a.y <= b.y);
}
inline int ${P}_ge($T2 a, $T2 b) {
  return (a.x > b.x && !isnan(a.y) && !isnan(b.y)) || (a.x == b.x && a.y >= b.y);
}
inline int ${P}_gt($T2 a, $T2 b) {
  return (a.x > b.x && !isnan(a.y) && !isnan(b.y)) || (a.x == b.x && a.y > b.y);
}
inline $T2 ${P}_max($T2 a, $T2 b) { return (${P}_ge(a, b) || isnan(a.x) || isnan(a.y)) ? a : b; }
inline $T2 ${P}_min($T2 a, $T2 b) { return (${P}_le(a, b) || isnan(a.x) || isnan(a.y)) ? a : b; }
""")

_HALF_ROUND = """
inline float tl_rh(float x) {
  ushort h;
  vstore_half_rte(x, 0, (__private half *)&h);
  return vload_half(0, (__private const half *)&h);
}
"""


_LIBRARY = {
    "i8_": _INT_HELPERS.substitute(T="char", U="uint", P="i8"),
    "i16_": _INT_HELPERS.substitute(T="short", U="uint", P="i16"),
    "i32_": _INT_HELPERS.substitute(T="int", U="uint", P="i32"),
    "i64_": _INT_HELPERS.substitute(T="long", U="ulong", P="i64"),
    "u8_": _UINT_HELPERS.substitute(T="uchar", U="uint", P="u8"),
    "u16_": _UINT_HELPERS.substitute(T="ushort", U="uint", P="u16"),
    "u32_": _UINT_HELPERS.substitute(T="uint", U="uint", P="u32"),
    "u64_": _UINT_HELPERS.substitute(T="ulong", U="ulong", P="u64"),
    "f32_": _REAL_HELPERS.substitute(T="float", P="f32"),
    "f64_": _REAL_HELPERS.substitute(T="double", P="f64"),
    # BIG: past it x + hypot(x, y) may overflow; EXPLIM: exp's last safe argument (less a
    # margin); below TINY, hypot is exact only after scaling by 2**KTINY
    "c64_": _COMPLEX_HELPERS.substitute(
        T="float", T2="float2", P="c64", BIG="1.4e38", EXPLIM="88.0", TINY="1e-18", KTINY=80
    ),
    "c128_": _COMPLEX_HELPERS.substitute(
        T="double",
        T2="double2",
        P="c128",
        BIG="7.4e307",
        EXPLIM="709.0",
        TINY="1e-150",
        KTINY=600,
    ),
    "tl_rh(": _HALF_ROUND,
}


def preamble(fp64: bool, body: str) -> str:
    """The parts of the helper library that ``body`` calls (each costs compile time), and the
    fp64 pragma where the device has double precision."""
    parts = ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"] if fp64 else []
    parts += [code for prefix, code in _LIBRARY.items() if prefix in body]
    return "\n".join(parts)


# ---- values: loads, stores, casts ---------------------------------------------------------------


def load(dt: np.dtype, ptr: str, index: str) -> str:
    """A value of dtype ``dt`` read from ``ptr[index]``, in its compute type."""
    if dt.name == "float16":
        return f"vload_half({index}, {ptr})"
    if dt == BOOL:
        return f"(int)({ptr}[{index}] != 0)"
    return f"{ptr}[{index}]"


def store(dt: np.dtype, ptr: str, index: str, value: str) -> str:
    if dt.name == "float16":
        return f"vstore_half_rte({value}, {index}, {ptr});"
    if dt == BOOL:
        return f"{ptr}[{index}] = (uchar)({value});"
    return f"{ptr}[{index}] = {value};"


def real_of(dt: np.dtype) -> np.dtype:
    return np.dtype({"complex64": "float32", "complex128": "float64"}.get(dt.name, dt.name))


def cast(e: str, src: np.dtype, dst: np.dtype) -> str:
    """Expression ``e`` (compute type of ``src``) converted as NumPy's astype does."""
    if src == dst:
        return e
    ct = COMPUTE[dst.name]
    if dst == BOOL:
        if src.kind == "c":
            return f"(int)(({e}).x != 0 || ({e}).y != 0)"
        return f"(int)(({e}) != 0)"
    if dst.kind == "c":
        rt = COMPUTE[real_of(dst).name]
        if src.kind == "c":
            return f"({ct})(({rt})({e}).x, ({rt})({e}).y)"
        return f"({ct})(({rt})({e}), ({rt})0)"
    if src.kind == "c":
        e = f"({e}).x"
    if src.kind in "fc" and dst.kind in "iu" and dst.itemsize < 8:
        # through long, as NumPy's C casts on x86-64 truncate: -1.0 -> 255 for uint8 (C leaves
        # an out-of-range float-to-int conversion undefined; NumPy warns of those)
        return f"(({ct})(long)({e}))"
    return f"(({ct})({e}))"


def zero(dt: np.dtype) -> str:
    return cast("0", np.dtype("int32"), dt)


# ---- elementwise ops ----------------------------------------------------------------------------

_CMP = {Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}
_CMP_COMPLEX = {Op.EQ: "eq", Op.LT: "lt", Op.LE: "le", Op.GT: "gt", Op.GE: "ge"}
_MATH = {Op.EXP: "exp", Op.LOG: "log", Op.SQRT: "sqrt", Op.SIN: "sin", Op.COS: "cos"}
_MATH[Op.TANH] = "tanh"
_BITWISE = {Op.AND: "&", Op.OR: "|", Op.XOR: "^"}
# ops whose operands keep their own dtype (everything else computes in the result dtype)
_OWN_DTYPE = frozenset({Op.ABS, Op.REAL, Op.IMAG, Op.CAST, Op.CONJ, Op.SIGN})


def operand_dtype(op: Op, in_dtypes: list[np.dtype], out: np.dtype) -> np.dtype:
    if op in _CMP:
        return np.result_type(*in_dtypes)
    if op in _OWN_DTYPE:
        return in_dtypes[0]
    return out


def emit(op: Op, attrs: tuple, args: list[tuple[str, np.dtype]], out: np.dtype) -> str:
    """C expression computing ``op`` on ``args`` ((expression, dtype) pairs) in the compute type
    of ``out``; operands are cast to the dtype NumPy's loop for ``op`` computes in."""
    if op is Op.WHERE:
        (c, cdt), (a, adt), (b, bdt) = args
        return f"(({cast(c, cdt, BOOL)}) ? ({cast(a, adt, out)}) : ({cast(b, bdt, out)}))"
    if op is Op.COMPLEX:  # graph/ops/complex_parts.py: two real parts of one dtype, as is
        (re, _), (im, _) = args
        return f"(({COMPUTE[out.name]})({re}, {im}))"
    cdt = operand_dtype(op, [d for _, d in args], out)
    if op in _CMP and cdt.kind == "f" and all(d.kind in "iu" for _, d in args):
        return _mixed_int_compare(op, args)
    xs = [cast(e, d, cdt) for e, d in args]
    k = "i" if cdt.kind == "u" else cdt.kind  # unsigned: the same code, their own helpers
    p = PREFIX.get(cdt.name, "")
    a = xs[0]
    b = xs[1] if len(xs) > 1 else None
    ct = COMPUTE[out.name]
    unsupported = DTypeError(f"opencl: {op.value} is not defined for {cdt}")
    if op is Op.CAST:
        (dtype,) = attrs  # a fused step's attrs: the record, or a plain tuple from a file
        return cast(a, cdt, np.dtype(dtype))
    if op in _CMP:
        if k == "c":
            if op is Op.NE:
                return f"(!{p}_eq({a}, {b}))"
            return f"{p}_{_CMP_COMPLEX[op]}({a}, {b})"
        return f"(int)(({a}) {_CMP[op]} ({b}))"
    if op in (Op.ADD, Op.SUB, Op.MUL):
        if k == "b":
            if op is Op.SUB:
                raise unsupported
            return f"(({a}) {'|' if op is Op.ADD else '&'} ({b}))"
        if k == "i" or (k == "c" and op is Op.MUL):
            return f"{p}_{op.value}({a}, {b})"
        return f"(({a}) {dict(add='+', sub='-', mul='*')[op.value]} ({b}))"
    if op is Op.DIV:
        return f"{p}_div({a}, {b})" if k == "c" else f"(({a}) / ({b}))"
    if op in (Op.FLOORDIV, Op.MOD):
        if k not in "if":
            raise unsupported
        return f"{p}_{op.value}({a}, {b})"
    if op is Op.POW:
        if k == "b":
            raise unsupported
        return f"pow({a}, {b})" if k == "f" else f"{p}_pow({a}, {b})"
    if op in (Op.MAXIMUM, Op.MINIMUM):
        if k == "b":
            return f"(({a}) {'|' if op is Op.MAXIMUM else '&'} ({b}))"
        fn = op.value[:3]
        if cdt.name == "float16":  # NumPy's half loop gives the first of equal operands
            return f"{p}_{fn}({b}, {a})"
        return f"{fn}({a}, {b})" if k == "i" else f"{p}_{fn}({a}, {b})"
    if op in _BITWISE:
        if k not in "bi":
            raise unsupported
        return f"(({a}) {_BITWISE[op]} ({b}))"
    if op is Op.INVERT:
        if k == "b":
            return f"(!({a}))"
        if k != "i":
            raise unsupported
        return f"(~({a}))"
    if op is Op.NEG:
        if k == "b":
            raise unsupported
        return f"{p}_neg({a})" if k == "i" else f"(-({a}))"
    if op is Op.ABS:
        if k == "b":
            return a
        return {"i": f"{p}_abs({a})", "f": f"fabs({a})", "c": f"{p}_abs({a})"}[k]
    if op in _MATH:
        if k == "c":
            return f"{p}_{_MATH[op]}({a})"
        return f"{_MATH[op]}({a})"
    if op is Op.SIGN:
        if k == "i":
            return f"(({ct})(({a}) > 0) - ({ct})(({a}) < 0))"
        if k == "b":
            raise unsupported
        return f"{p}_sign({a})"
    if op is Op.CONJ:
        return f"({ct})(({a}).x, -({a}).y)" if k == "c" else a
    if op is Op.REAL:
        return f"({a}).x" if k == "c" else a
    if op is Op.IMAG:
        return f"({a}).y" if k == "c" else zero(out)
    raise DTypeError(f"opencl: no kernel for op {op.value!r}")


# a < b for a signed, b unsigned (as long and ulong): the sign decides, then the magnitudes
_SIGNED_UNSIGNED = {
    Op.LT: "(({a}) < 0 || (ulong)({a}) < ({b}))",
    Op.LE: "(({a}) < 0 || (ulong)({a}) <= ({b}))",
    Op.GT: "(({a}) >= 0 && (ulong)({a}) > ({b}))",
    Op.GE: "(({a}) >= 0 && (ulong)({a}) >= ({b}))",
    Op.EQ: "(({a}) >= 0 && (ulong)({a}) == ({b}))",
    Op.NE: "(({a}) < 0 || (ulong)({a}) != ({b}))",
}
_SWAPPED = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}


def _mixed_int_compare(op: Op, args: list[tuple[str, np.dtype]]) -> str:
    """A comparison of a signed with an unsigned integer whose common dtype is float64 (uint64
    with a signed type): NumPy 2 compares those exactly, not through float64."""
    (a, adt), (b, bdt) = args
    if adt.kind == "u":  # the signed operand first
        op, (a, adt), (b, bdt) = _SWAPPED[op], (b, bdt), (a, adt)
    i64, u64 = np.dtype("int64"), np.dtype("uint64")
    expr = _SIGNED_UNSIGNED[op].format(a=cast(a, adt, i64), b=cast(b, bdt, u64))
    return f"(int){expr}"


# exactly commutative in every dtype (IEEE + and * included; complex * adds two products)
COMMUTATIVE = frozenset({Op.ADD, Op.MUL, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR})


class Spec:
    """Shape and dtype of a value inside a program, for the ops' own inference rules."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)


def step_dtypes(program: tuple, inputs: list) -> list[np.dtype]:
    """The dtype of each step of an elementwise program (by the ops' own inference rules)."""
    vals: list[Spec] = []
    for op, attrs, args in program:
        xs = [inputs[i] if kind == "in" else vals[i] for kind, i in args]
        shape, dt = OPS[op].infer(xs, attrs)
        vals.append(Spec(shape, dt))
    return [v.dtype for v in vals]


def elementwise_source(
    program: tuple,
    in_dtypes: list[np.dtype],
    modes: list[str],
    out_dtype: np.dtype,
    step_dts: list[np.dtype],
    ndim: int,
    fp64: bool,
) -> str:
    """``ew(out, in0.., meta, n)``: one work-item per output element. Input modes: ``flat``
    (same shape as the output), ``scalar`` (one element) or ``strided`` (broadcast: offsets
    from the output index and the input's strides in ``meta``: ndim sizes, then ndim strides
    per strided input)."""
    params = [f"__global {STORAGE[out_dtype.name]} *out"]
    params += [f"__global const {STORAGE[d.name]} *in{k}" for k, d in enumerate(in_dtypes)]
    params += ["__global const long *meta", "const long n"]
    body = ["const long o = get_global_id(0);", "if (o >= n) return;"]
    strided = [k for k, m in enumerate(modes) if m == "strided"]
    if strided:
        body.append(" ".join(f"long off{k} = 0;" for k in strided))
        body.append("long r = o, i;")
        for d in reversed(range(ndim)):
            body.append(f"i = r % meta[{d}]; r /= meta[{d}];")
            for j, k in enumerate(strided):
                body.append(f"off{k} += i * meta[{ndim * (1 + j) + d}];")
    for k, (dt, mode) in enumerate(zip(in_dtypes, modes)):
        index = {"flat": "o", "scalar": "0", "strided": f"off{k}"}[mode]
        body.append(f"const {COMPUTE[dt.name]} x{k} = {load(dt, f'in{k}', index)};")
    for j, ((op, attrs, args), dt) in enumerate(zip(program, step_dts)):
        if op in COMMUTATIVE:
            # one source for ``a + b`` and ``b + a`` (CSE orders operands by identity)
            args = sorted(args, key=lambda a: (a[0] != "in", a[1]))
        operands = [
            (f"x{i}", in_dtypes[i]) if kind == "in" else (f"v{i}", step_dts[i]) for kind, i in args
        ]
        e = emit(op, attrs, operands, dt)
        if dt.name == "float16":
            e = f"tl_rh({e})"
        body.append(f"const {COMPUTE[dt.name]} v{j} = {e};")
    last = f"v{len(program) - 1}"
    body.append(store(out_dtype, "out", "o", cast(last, step_dts[-1], out_dtype)))
    return kernel_text(fp64, "ew", params, body)


def kernel_text(fp64: bool, name: str, params: list[str], body: list[str], attr: str = "") -> str:
    lines = [f"__kernel {attr}void {name}({', '.join(params)})", "{"]
    lines += [f"  {b}" for b in body]
    lines.append("}")
    text = "\n".join(lines)
    return preamble(fp64, text) + "\n" + text
