"""``complex(real, imag)``: a complex number assembled from its real and imaginary parts.

An elementwise op (JAX's ``lax.complex``): each element is ``real + i imag`` with the two parts
stored as they are. ``real + 1j * imag`` is not the same number once a part is infinite:
``1j * inf`` multiplies ``0 * inf`` into its real part, so ``0 + 1j * inf`` comes out
``nan + inf j``; this op gives ``0 + inf j``. The array API's complex composites
(tenloom/array_api_elementwise.py) build their infinite and NaN parts with it.

The node takes two real operands of one dtype, float32 (complex64 result) or float64
(complex128), broadcast against each other. The builder ``complex`` (``tl.complex``) brings
its operands there: NEP 50 for Python scalars, then NumPy's promotion of the two dtypes with
complex64 (float32, float16, bool, int8 and int16 give complex64; float64, int32, int64 and
the unsigned integers above 8 bits complex128, as ``np.result_type(..., np.complex64)``).
A complex operand is a DTypeError.

Not fused (passes/fuse_elementwise.py): a fused region computes in one arithmetic dtype, and
this op's operands are real where its result is complex, like ``real``, ``imag`` and ``cast``;
it runs as its own kernel (CPU and CUDA: the reference below, on NumPy or CuPy arrays; OpenCL:
one generated kernel, runtime/codegen/opencl.py).

Differentiation (graph/autodiff.py's PyTorch convention, cotangent dL/dRe + i dL/dIm): for
``z = x + i y`` the cotangent of ``x`` is ``Re(g)`` and of ``y`` is ``Im(g)``, summed back to
each operand's shape; the tangent is ``complex(tx, ty)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tenloom.graph.autodiff import unbroadcast
from tenloom.graph.errors import DTypeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import check_no_attrs
from tenloom.graph.ops.elementwise import astype, broadcast_shapes
from tenloom.graph.ops.leaf import _lift_pair
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T

Op.define_all("complex")

# the real dtype of the parts -> the complex dtype of the result
COMPLEX_OF = {
    np.dtype(np.float32): np.dtype(np.complex64),
    np.dtype(np.float64): np.dtype(np.complex128),
}
_PARTS = ("real", "imag")


def _infer(inputs, attrs):
    a, b = inputs
    for k, x in enumerate(inputs):
        if x.dtype not in COMPLEX_OF or x.dtype != a.dtype:
            raise DTypeError(
                f"complex: operand {k} ({_PARTS[k]}) is {x.dtype}{fmt_shape(x.shape)} next to "
                f"{inputs[1 - k].dtype}{fmt_shape(inputs[1 - k].shape)}; the node takes two "
                "parts of one dtype, float32 or float64 (tl.complex converts them)"
            )
    shape = a.shape if a.shape == b.shape else broadcast_shapes("complex", (a.shape, b.shape))
    return shape, COMPLEX_OF[a.dtype]


def _ref(xs, attrs):
    """Each part written into its half of the result: exact, whatever the values. Written with
    ``empty_like`` and the ``real``/``imag`` setters, which CuPy's arrays dispatch to CuPy."""
    a, b = xs
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty_like(a, dtype=COMPLEX_OF[np.dtype(a.dtype)], shape=shape)
    out.real = a
    out.imag = b
    return out


def _vjp(node, y, xs, g):
    x, yy = xs
    return unbroadcast(T.real(g), x.shape), unbroadcast(T.imag(g), yy.shape)


def _jvp(node, y, xs, ts):
    tx, ty = ts
    # fit_tangent (graph/autodiff.py) broadcasts a one-sided tangent to the node's shape
    return T.complex(0.0 if tx is None else tx, 0.0 if ty is None else ty)


register_op(
    Op.COMPLEX,
    OpKind.ELEMENTWISE,
    _infer,
    _ref,
    2,
    vjp=_vjp,
    jvp=_jvp,
    cost=lambda node: node.size,
    check_attrs=check_no_attrs,
)


@builder
def complex_(real: Any, imag: Any) -> Node:
    """The complex number ``real + i imag`` elementwise, each part exactly as given (an infinite
    part stays infinite beside a zero one, where ``real + 1j * imag`` makes NaN), broadcast as
    NumPy does. float32 parts give complex64 and float64 parts complex128; integers, booleans
    and float16 promote as ``np.result_type(real, imag, np.complex64)``, and a Python scalar
    takes the other part's dtype (NEP 50). A complex part is a DTypeError."""
    a, b = _lift_pair(real, imag, "complex")
    for k, x in enumerate((a, b)):
        if x.dtype.kind not in "biuf":
            raise DTypeError(
                f"complex: operand {k} ({_PARTS[k]}) is {x.dtype}{fmt_shape(x.shape)}; "
                "the parts must be real (bool, integer or floating point)"
            )
    out = np.result_type(a.dtype, b.dtype, np.complex64)
    part = np.dtype(np.float32 if out == np.complex64 else np.float64)
    return make_node(Op.COMPLEX, (astype(a, part), astype(b, part)))
