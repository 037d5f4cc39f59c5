"""The CUDA dialect: a fused region as the body of one CuPy ``ElementwiseKernel`` (CUDA C++,
thrust's complex), and NumPy's order of complex numbers as another.

    in_params "float64 in0, float64 in1"   out_params "float64 out"
    body      auto v0 = (in0 * in1); auto v1 = exp(v0); out = v1;

The templates are numexpr's (runtime/codegen/numexpr.py: the same operand set) with C
spellings where the two languages differ, and a preamble of helpers where CuPy's own operators
differ from NumPy's. Plain strings: no CuPy import here (runtime/backends/cuda.py compiles them).
"""

from __future__ import annotations

import numpy as np
from tenloom.graph.ops import Op
from tenloom.runtime.codegen.numexpr import TEMPLATES

# op -> C expression: the numexpr templates of the fusion pass (the same operand set), with
# C spellings where the two languages differ
C_TEMPLATES: dict[Op, str] = {
    **TEMPLATES,
    Op.POW: "pow({0}, {1})",
    Op.AND: "({0} && {1})",
    Op.OR: "({0} || {1})",
    Op.INVERT: "(!{0})",
    Op.WHERE: "({0} ? {1} : {2})",
    Op.DIV: "tl_div({0}, {1})",
    Op.FLOORDIV: "tl_floordiv({0}, {1})",
    Op.MOD: "tl_mod({0}, {1})",
    Op.MAXIMUM: "((({0}) > ({1}) || ({0}) != ({0})) ? ({0}) : ({1}))",
    Op.MINIMUM: "((({0}) < ({1}) || ({0}) != ({0})) ? ({0}) : ({1}))",
}
# Complex division by Smith's algorithm, as NumPy's: CuPy's operator/ scales by |c| + |d|,
# whose reciprocal overflows for a subnormal divisor (1e-300 / 1e-310: CuPy nan+nanj, NumPy's
# Smith inf+nanj, checked on an H100 with CuPy 14)
FUSED_PREAMBLE = """
template <typename T> __device__ T tl_div(T a, T b) { return a / b; }
template <typename T> __device__ complex<T> tl_div(complex<T> a, complex<T> b) {
  T ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
  T abs_br = fabs(br), abs_bi = fabs(bi);
  if (abs_br >= abs_bi) {
    if (abs_br == 0 && abs_bi == 0) return complex<T>(ar / abs_br, ai / abs_bi);
    T rat = bi / br, scl = T(1) / (br + bi * rat);
    return complex<T>((ar + ai * rat) * scl, (ai - ar * rat) * scl);
  }
  T rat = br / bi, scl = T(1) / (bi + br * rat);
  return complex<T>((ar * rat + ai) * scl, (ai * rat - ar) * scl);
}
/* floating // and % as NumPy's npy_divmod: CuPy's differ at infinities and signed zeros
   (-128 // inf: CuPy -0.0, NumPy -1.0; 1 % inf: CuPy nan, NumPy 1.0; H100, CuPy 14) */
template <typename T> __device__ T tl_divmod(T a, T b, T *modulus) {
  T mod = fmod(a, b);
  if (b == 0) { *modulus = mod; return a / b; }
  T div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) { mod += b; div -= T(1); }
  } else {
    mod = copysign(T(0), b);
  }
  T fl;
  if (div != 0) {
    fl = floor(div);
    if (div - fl > T(0.5)) fl += T(1);
  } else {
    fl = copysign(T(0), a / b);
  }
  *modulus = mod;
  return fl;
}
template <typename T> __device__ T tl_floordiv(T a, T b) {
  T m;
  return b == 0 ? a / b : tl_divmod(a, b, &m);
}
template <typename T> __device__ T tl_mod(T a, T b) {
  T m;
  if (b == 0) return fmod(a, b);
  tl_divmod(a, b, &m);
  return m;
}
"""
C_TYPES = {
    "bool": "bool",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "float16": "float16",
    "float32": "float",
    "float64": "double",
    "complex64": "complex<float>",
    "complex128": "complex<double>",
}


# NumPy's order of complex numbers (its CLT/CLE/CGT/CGE): by real part, then imaginary part; a
# NaN in either imaginary part makes the real-part test false
_ORDERED = "(x.real() {0} y.real() && x.imag() == x.imag() && y.imag() == y.imag())"
COMPLEX_ORDER = {
    op: f"out = {_ORDERED.format(strict)} || (x.real() == y.real() && x.imag() {c} y.imag());"
    for op, strict, c in (
        (Op.LT, "<", "<"),
        (Op.LE, "<", "<="),
        (Op.GT, ">", ">"),
        (Op.GE, ">", ">="),
    )
}
_BOOL_RESULT = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.INVERT})
_LOGIC = frozenset({Op.AND, Op.OR, Op.INVERT})


def c_literal(value, dtype: np.dtype) -> str | None:
    """The C spelling of a constant input's value, exact in ``dtype``, or None where it is not
    written out (complex, non-finite, 8- and 16-bit, unsigned, and integers of 62 bits or
    more: those stay kernel arguments). A Python float's repr is the shortest string that
    reads back as the same double, and a float32's double reads back as itself, so the C
    literal is the value (-0.0 and subnormals included)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if dtype in (np.int32, np.int64):
        v = int(value)
        if abs(v) >= 2**62:
            return None
        return f"((int){v})" if dtype == np.int32 else f"((long long){v}LL)"
    if dtype in (np.float32, np.float64):
        v = float(value)
        if not np.isfinite(v):
            return None
        return f"(({C_TYPES[dtype.name]}){v!r})"
    return None


def fused_source(
    program: tuple,
    in_dtypes: list[np.dtype],
    out_dtype: np.dtype,
    literals: dict[int, str] | None = None,
):
    """(in_params, out_params, body) of an ElementwiseKernel computing the program.

    ``literals`` maps inputs that are constants (a FULL node: one value everywhere) to their C
    literal (:func:`c_literal`): they are written into the body and are not parameters. issue
    23: the 2000-op chain's five scalars as 0-d array parameters cost 35.6 ms a call on an H100,
    as literals 31.5 ms (jax.jit: 29.9 ms), the compiler folding what it could not see before.

    A region mixes bool values (inputs, comparisons) into arithmetic of one dtype; C promotes
    bool for real types, but thrust's complex has no operator taking a bool: in a complex
    region a bool operand of an arithmetic op or comparison is converted first, as NumPy casts
    it to the loop's dtype."""
    literals = literals or {}
    arith = [dt for dt in (*in_dtypes, out_dtype) if dt != np.bool_]
    to_complex = None
    if arith and arith[0].kind == "c":
        real = "float" if arith[0].itemsize == 8 else "double"
        to_complex = f"{C_TYPES[arith[0].name]}(({real})({{}}))"
    lines = []
    is_bool: list[bool] = []
    for j, (op, _attrs, args) in enumerate(program):
        parts, bools = [], []
        for kind, i in args:
            parts.append((literals.get(i) or f"in{i}") if kind == "in" else f"v{i}")
            bools.append(in_dtypes[i] == np.bool_ if kind == "in" else is_bool[i])
        if to_complex is not None and op not in _LOGIC:
            first = 1 if op is Op.WHERE else 0  # where's condition stays bool
            parts = [
                to_complex.format(p) if b and k >= first else p
                for k, (p, b) in enumerate(zip(parts, bools))
            ]
        is_bool.append(op in _BOOL_RESULT or (op is Op.WHERE and all(bools[1:])))
        lines.append(f"auto v{j} = {C_TEMPLATES[op].format(*parts)};")
    lines.append(f"out = v{len(program) - 1};")
    in_params = ", ".join(f"{dt.name} in{i}" for i, dt in enumerate(in_dtypes) if i not in literals)
    return in_params, f"{out_dtype.name} out", "\n".join(lines)
