"""The CPU kernel of EINSUM: NumPy's subscripts worked out once per node, then the op's
reference (graph/einsum.py ``einsum_ref``) called with them."""

from __future__ import annotations

from tenloom.graph.einsum import einsum_ref, einsum_subscripts


def einsum_kernel(inputs, output):
    """A function ``(*arrays) -> array`` contracting over integer labels."""
    sub = einsum_subscripts(inputs, output)
    return lambda *arrays: einsum_ref(arrays, inputs, output, sub)
