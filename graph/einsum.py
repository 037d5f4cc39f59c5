"""Einsum specifications in the IR, and the NumPy reference contraction.

A specification (``EinsumSpec``: hashable labels per operand and for the output, as the front
end's parser in tenloom/einsum.py produces them) is normalized for the IR: labels become
``0..k-1`` in order of first appearance, and operand axes of size 1 whose label is bigger
elsewhere are reshaped away, so every label has one size across all operands.
"""

from __future__ import annotations

import string
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from tenloom.graph.errors import ShapeError, fmt_shape

_LETTERS = string.ascii_letters  # numpy's order for implicit output: 'A' < 'Z' < 'a' < 'z'
_ELL = "..."


def _is_ell(label: Hashable) -> bool:
    return isinstance(label, tuple) and len(label) == 2 and label[0] is Ellipsis


def _show(label: Hashable) -> str:
    if _is_ell(label):
        return f"'...' axis {label[1]}"
    return repr(label)


@dataclass(frozen=True)
class EinsumSpec:
    """A parsed einsum before normalization: user labels per operand and for the output."""

    inputs: tuple[tuple[Hashable, ...], ...]
    output: tuple[Hashable, ...]
    text: str  # for messages


def label_sizes(spec: EinsumSpec, shapes: Sequence[tuple[int, ...]]) -> dict:
    """Size of every label, with size-1 broadcasting; ShapeError names label, operands, sizes."""
    sizes: dict = {}
    owner: dict = {}
    for k, (labels, shape) in enumerate(zip(spec.inputs, shapes)):
        local: dict = {}
        for lab, n in zip(labels, shape):
            if lab in local and local[lab] != n:
                raise ShapeError(
                    f"einsum: label {_show(lab)} repeats in operand {k} of shape "
                    f"{fmt_shape(shape)} with sizes {local[lab]} and {n} in '{spec.text}'"
                )
            local[lab] = n
            if n == 1 and lab in sizes:
                continue
            if lab not in sizes or sizes[lab] == 1:
                sizes[lab] = n
                owner[lab] = k
            elif sizes[lab] != n:
                j = owner[lab]
                raise ShapeError(
                    f"einsum: size of label {_show(lab)} for operand {k} ({n}) does not match "
                    f"operand {j} ({sizes[lab]}) in '{spec.text}'; shapes "
                    f"{fmt_shape(shapes[j])} and {fmt_shape(shape)}"
                )
    return sizes


def normalize(spec: EinsumSpec, shapes: Sequence[tuple[int, ...]]):
    """Integer labels and the size-1 axes to squeeze away.

    Returns ``(in_labels, out_labels, squeeze, sizes)`` where ``squeeze[k]`` is the tuple of axes
    of operand k that broadcast (size 1 against a bigger size of the same label), to be reshaped
    away before the einsum node is built, and ``sizes`` maps integer labels to sizes.
    """
    sizes = label_sizes(spec, shapes)
    ids: dict = {}
    in_labels, squeeze = [], []
    for labels, shape in zip(spec.inputs, shapes):
        keep, drop = [], []
        for ax, (lab, n) in enumerate(zip(labels, shape)):
            if n == 1 and sizes[lab] != 1:
                drop.append(ax)
            else:
                keep.append(ids.setdefault(lab, len(ids)))
        in_labels.append(tuple(keep))
        squeeze.append(tuple(drop))
    # an output label may now be carried by no operand (it broadcast everywhere it appeared):
    # only possible if its size is 1 in every operand, in which case nothing was dropped.
    out = tuple(ids.setdefault(lab, len(ids)) for lab in spec.output)
    int_sizes = {ids[lab]: n for lab, n in sizes.items() if lab in ids}
    return tuple(in_labels), out, tuple(squeeze), int_sizes


def einsum_subscripts(inputs, output) -> str | None:
    """NumPy's subscripts for integer-label terms, or None past 52 distinct labels."""
    distinct: dict = {}
    for labels in (*inputs, output):
        for lab in labels:
            distinct.setdefault(lab, len(distinct))
    if len(distinct) > 52:
        return None
    letter = {lab: _LETTERS[i] for lab, i in distinct.items()}
    sub = ",".join("".join(letter[x] for x in t) for t in inputs)
    return sub + "->" + "".join(letter[x] for x in output)


def in_one_dtype(arrays: Sequence) -> Sequence:
    """``arrays`` cast to their result dtype where they differ: a contraction done pair by pair
    (NumPy's optimized einsum, cotengra) would otherwise compute each pair in that pair's own
    dtype (int32 partial products wrap inside an int64 network), unlike NumPy's plain einsum."""
    first = arrays[0].dtype
    if all(a.dtype == first for a in arrays):
        return arrays
    dt = np.result_type(*arrays)
    return [a.astype(dt, copy=False) for a in arrays]


def einsum_ref(arrays: Sequence[np.ndarray], inputs, output, sub: str | None = "") -> np.ndarray:
    """Contract ``arrays`` over integer labels with NumPy (cotengra past 52 distinct labels),
    as ``numpy.einsum`` would: the EINSUM op's reference (``sub``: the subscripts when the
    caller worked them out already)."""
    if sub == "":
        sub = einsum_subscripts(inputs, output)
    if sub is not None:
        if len(arrays) <= 2:
            return np.einsum(sub, *arrays, optimize=False)
        arrays = in_one_dtype(arrays)
        # a zero-size label: NumPy's pairwise path sums it first (0 * NaN = NaN); the plain loop
        # gives the exact zeros (empty sums) without iterating. Otherwise greedy without numpy's
        # default cap on intermediate size (the size of the biggest input), which otherwise
        # falls back to one nested loop over all labels: 50x slower on an MPS transfer step.
        empty = any(a.size == 0 for a in arrays)
        return np.einsum(sub, *arrays, optimize=False if empty else ("greedy", 2**62))
    import cotengra as ctg

    arrays = in_one_dtype(arrays)
    if any(a.size == 0 for a in arrays):  # a zero-size label: exact zeros (empty sums)
        sizes = {lab: n for labels, a in zip(inputs, arrays) for lab, n in zip(labels, a.shape)}
        return np.zeros(tuple(sizes[lab] for lab in output), np.result_type(*arrays))
    res = ctg.array_contract(list(arrays), inputs, output, optimize="greedy")
    return np.asarray(res, dtype=np.result_type(*arrays))


def einsum_node(nodes: Sequence, terms: Sequence[Sequence[Hashable]], output: Sequence[Hashable]):
    """The EINSUM node for operands ``nodes`` with any hashable labels: labels are renumbered in
    order of first appearance and size-1 broadcast axes reshaped away, as the front end does.
    A one-operand einsum that only restates its operand returns the operand itself."""
    from tenloom.graph.node import make_node
    from tenloom.graph.ops import Op

    spec = EinsumSpec(tuple(tuple(t) for t in terms), tuple(output), "<internal>")
    nodes = list(nodes)
    in_labels, out, squeeze_axes, _ = normalize(spec, [n.shape for n in nodes])
    for k, drop in enumerate(squeeze_axes):
        if drop:
            shape = tuple(s for i, s in enumerate(nodes[k].shape) if i not in drop)
            nodes[k] = make_node(Op.RESHAPE, (nodes[k],), (shape,))
    if len(nodes) == 1 and in_labels[0] == out:
        return nodes[0]
    return make_node(Op.EINSUM, tuple(nodes), (in_labels, out))


def in_network_dtype(nodes: Sequence, dtype) -> list:
    """``nodes`` cast to ``dtype`` where they differ: NumPy's einsum casts every operand to the
    result dtype before it multiplies or sums anything, so a network's partial products and
    partial sums (a lone label summed first, a pairwise contraction of two operands) are in
    the network's dtype, never in an operand's narrower one (bool sums are not ORs when the
    network is numeric, int32 partial sums do not wrap inside an int64 network)."""
    from tenloom.graph.node import make_node
    from tenloom.graph.ops import Op

    return [x if x.dtype == dtype else make_node(Op.CAST, (x,), (dtype.str,)) for x in nodes]
