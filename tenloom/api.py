"""The public ops of tenloom: ``graph.build``'s node builders, each returning a ``Tensor``.

The semantics (NumPy's, checked at trace time) live in graph/build.py; this module only wraps
nodes as Tensors, and parses ``einsum``'s string and sublist forms (tenloom/einsum.py).
"""

from __future__ import annotations

from typing import Any

from tenloom import einsum as _einsum
from tenloom.graph import build as _b
from tenloom.graph.value import lifted
from tenloom.tensor import Tensor

abs = lifted(Tensor, _b.abs)
absolute = lifted(Tensor, _b.absolute)
add = lifted(Tensor, _b.add)
amax = lifted(Tensor, _b.amax)
amin = lifted(Tensor, _b.amin)
arange = lifted(Tensor, _b.arange)
asarray = lifted(Tensor, _b.asarray)
astype = lifted(Tensor, _b.astype)
bitwise_and = lifted(Tensor, _b.bitwise_and)
bitwise_or = lifted(Tensor, _b.bitwise_or)
bitwise_xor = lifted(Tensor, _b.bitwise_xor)
broadcast_to = lifted(Tensor, _b.broadcast_to)
clip = lifted(Tensor, _b.clip)
concatenate = lifted(Tensor, _b.concatenate)
conj = lifted(Tensor, _b.conj)
conjugate = lifted(Tensor, _b.conjugate)
cos = lifted(Tensor, _b.cos)
diagonal = lifted(Tensor, _b.diagonal)
divide = lifted(Tensor, _b.divide)
dot = lifted(Tensor, _b.dot)
equal = lifted(Tensor, _b.equal)
exp = lifted(Tensor, _b.exp)
expand_dims = lifted(Tensor, _b.expand_dims)
eye = lifted(Tensor, _b.eye)
floor_divide = lifted(Tensor, _b.floor_divide)
full = lifted(Tensor, _b.full)
greater = lifted(Tensor, _b.greater)
greater_equal = lifted(Tensor, _b.greater_equal)
imag = lifted(Tensor, _b.imag)
inner = lifted(Tensor, _b.inner)
invert = lifted(Tensor, _b.invert)
less = lifted(Tensor, _b.less)
less_equal = lifted(Tensor, _b.less_equal)
log = lifted(Tensor, _b.log)
matmul = lifted(Tensor, _b.matmul)
max = lifted(Tensor, _b.max)
maximum = lifted(Tensor, _b.maximum)
mean = lifted(Tensor, _b.mean)
min = lifted(Tensor, _b.min)
minimum = lifted(Tensor, _b.minimum)
moveaxis = lifted(Tensor, _b.moveaxis)
multiply = lifted(Tensor, _b.multiply)
negative = lifted(Tensor, _b.negative)
not_equal = lifted(Tensor, _b.not_equal)
ones = lifted(Tensor, _b.ones)
outer = lifted(Tensor, _b.outer)
permute_dims = lifted(Tensor, _b.permute_dims)
placeholder = lifted(Tensor, _b.placeholder)
power = lifted(Tensor, _b.power)
prod = lifted(Tensor, _b.prod)
real = lifted(Tensor, _b.real)
remainder = lifted(Tensor, _b.remainder)
reshape = lifted(Tensor, _b.reshape)
sign = lifted(Tensor, _b.sign)
sin = lifted(Tensor, _b.sin)
sqrt = lifted(Tensor, _b.sqrt)
squeeze = lifted(Tensor, _b.squeeze)
stack = lifted(Tensor, _b.stack)
subtract = lifted(Tensor, _b.subtract)
sum = lifted(Tensor, _b.sum)
tanh = lifted(Tensor, _b.tanh)
tensordot = lifted(Tensor, _b.tensordot)
trace = lifted(Tensor, _b.trace)
transpose = lifted(Tensor, _b.transpose)
true_divide = lifted(Tensor, _b.true_divide)
where = lifted(Tensor, _b.where)
zeros = lifted(Tensor, _b.zeros)
operator_power = lifted(Tensor, _b.operator_power)
getitem = lifted(Tensor, _b.getitem)


def einsum(*args: Any) -> Tensor:
    """Einstein summation, as ``numpy.einsum``, plus integer sublists with any number of labels.

    ``einsum("ij,jk->ik", a, b)`` or ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.
    """
    nodes, spec = _einsum.parse(args, _b.lift_operands)
    return Tensor(_b.einsum_spec(nodes, spec))
