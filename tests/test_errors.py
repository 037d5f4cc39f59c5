"""Trace-time errors: typed, raised when the op is built, and naming op/operand/label/shapes."""

from __future__ import annotations

import numpy as np
import pytest

import tenloom as tl


def A(*shape, dtype="float64"):
    return tl.asarray(np.ones(shape, dtype=dtype))


def P(*shape, dtype="float64", name="p"):
    return tl.placeholder(shape, dtype=dtype, name=name)


# ---------------------------------------------------------------------------------------------
# hierarchy

HIERARCHY = [
    ("ShapeError", ValueError),
    ("DTypeError", TypeError),
    ("GraphFormatError", ValueError),
    ("DeviceError", RuntimeError),
    ("MemoryLimitError", MemoryError),
    ("EvaluationError", RuntimeError),
]


@pytest.mark.parametrize("name,base", HIERARCHY, ids=[h[0] for h in HIERARCHY])
def test_error_hierarchy(name, base):
    cls = getattr(tl, name)
    assert issubclass(cls, tl.TenloomError)
    assert issubclass(cls, base)
    assert issubclass(tl.TenloomError, Exception)


# ---------------------------------------------------------------------------------------------
# einsum


def test_einsum_size_mismatch_message():
    with pytest.raises(tl.ShapeError) as info:
        tl.einsum("ij,jk->ik", A(3, 4), A(5, 6))
    msg = str(info.value)
    for part in ("einsum", "'j'", "4", "5"):
        assert part in msg, f"{part!r} not in {msg!r}"


def test_einsum_size_mismatch_on_placeholders_is_trace_time():
    # no data exists at all: the error can only come from the trace-time shape rule
    with pytest.raises(tl.ShapeError) as info:
        tl.einsum("ab,bc->ac", P(2, 7, name="u"), P(3, 2, name="v"))
    msg = str(info.value)
    assert "einsum" in msg and "'b'" in msg and "7" in msg and "3" in msg


def test_einsum_repeated_label_size_mismatch_within_operand():
    with pytest.raises(tl.ShapeError) as info:
        tl.einsum("ii->i", A(3, 4))
    msg = str(info.value)
    assert "einsum" in msg and "'i'" in msg


def test_einsum_ellipsis_broadcast_mismatch():
    with pytest.raises(tl.ShapeError) as info:
        tl.einsum("...ij,...jk->...ik", A(2, 3, 4), A(5, 4, 2))
    assert "einsum" in str(info.value)


EINSUM_PARSE_ERRORS = {
    "bad-char": ("i$,jk->ik", [(3, 4), (4, 5)]),
    "digit-char": ("i1,jk->ik", [(3, 4), (4, 5)]),
    "too-few-operands": ("ij,jk->ik", [(3, 4)]),
    "too-many-operands": ("ij,jk->ik", [(3, 4), (4, 5), (5, 6)]),
    "too-many-labels": ("ijk,jk->ik", [(3, 4), (4, 5)]),
    "too-few-labels": ("i,jk->ik", [(3, 4), (4, 5)]),
    "output-label-not-in-inputs": ("ij->k", [(3, 4)]),
    "repeated-output-label": ("ij->ii", [(3, 3)]),
    "two-arrows": ("ij->i->j", [(3, 4)]),
    "bad-ellipsis": ("..ij->ij", [(3, 4)]),
    "two-ellipses": ("...i...->i", [(3, 4)]),
    "ellipsis-dims-dropped": ("...ij->ij", [(2, 3, 4)]),
}


@pytest.mark.parametrize(
    "subscripts,shapes", list(EINSUM_PARSE_ERRORS.values()), ids=list(EINSUM_PARSE_ERRORS)
)
def test_einsum_parse_errors(subscripts, shapes):
    # sanity: numpy rejects these too
    with pytest.raises(ValueError):
        np.einsum(subscripts, *[np.ones(s) for s in shapes])
    with pytest.raises(tl.TenloomError) as info:
        tl.einsum(subscripts, *[A(*s) for s in shapes])
    assert isinstance(info.value, (tl.ShapeError, ValueError))
    assert "einsum" in str(info.value)


def test_einsum_label_count_names_operand():
    with pytest.raises(tl.ShapeError) as info:
        tl.einsum("ij,jkl->ik", A(3, 4), A(4, 5))
    msg = str(info.value)
    assert "einsum" in msg and "(4, 5)" in msg


def test_einsum_sublist_size_mismatch():
    with pytest.raises(tl.ShapeError) as info:
        tl.einsum(A(3, 4), [0, 70], A(5, 6), [70, 2], [0, 2])
    assert "einsum" in str(info.value)


# ---------------------------------------------------------------------------------------------
# elementwise broadcasting


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: a - b,
        lambda a, b: a / b,
        lambda a, b: a < b,
        lambda a, b: tl.maximum(a, b),
        lambda a, b: tl.where(a > 0, a, b),
    ],
    ids=["add", "mul", "sub", "div", "lt", "maximum", "where"],
)
def test_broadcast_mismatch_names_shapes(build):
    with pytest.raises(tl.ShapeError) as info:
        build(A(3, 4), A(5, 6))
    msg = str(info.value)
    assert "(3, 4)" in msg and "(5, 6)" in msg, msg


def test_broadcast_mismatch_with_numpy_operand():
    with pytest.raises(tl.ShapeError) as info:
        A(3, 4) + np.ones((5, 6))
    msg = str(info.value)
    assert "(3, 4)" in msg and "(5, 6)" in msg, msg


def test_broadcast_mismatch_placeholders():
    with pytest.raises(tl.ShapeError) as info:
        P(3, 4, name="a") + P(2, 4, name="b")
    msg = str(info.value)
    assert "(3, 4)" in msg and "(2, 4)" in msg, msg


def test_broadcast_to_incompatible():
    with pytest.raises(tl.ShapeError) as info:
        tl.broadcast_to(A(3, 4), (3, 5))
    msg = str(info.value)
    assert "(3, 4)" in msg and "(3, 5)" in msg, msg


# ---------------------------------------------------------------------------------------------
# contractions


@pytest.mark.parametrize(
    "build",
    [lambda a, b: a @ b, lambda a, b: tl.matmul(a, b)],
    ids=["operator", "function"],
)
def test_matmul_mismatch_names_both_shapes(build):
    with pytest.raises(tl.ShapeError) as info:
        build(A(3, 4), A(5, 6))
    msg = str(info.value)
    assert "(3, 4)" in msg and "(5, 6)" in msg, msg


def test_matmul_batch_mismatch():
    with pytest.raises(tl.ShapeError) as info:
        A(2, 3, 4) @ A(3, 4, 5)
    msg = str(info.value)
    assert "(2, 3, 4)" in msg and "(3, 4, 5)" in msg, msg


def test_matmul_0d_rejected():
    with pytest.raises(tl.TenloomError):
        tl.matmul(A(), A(3))


def test_tensordot_mismatch():
    with pytest.raises(tl.ShapeError) as info:
        tl.tensordot(A(3, 4), A(5, 6), axes=([1], [0]))
    msg = str(info.value)
    assert "4" in msg and "5" in msg


def test_dot_mismatch():
    with pytest.raises(tl.ShapeError):
        tl.dot(
            A(3, 4),
            A(
                5,
            ),
        )


def test_trace_needs_two_dims():
    with pytest.raises(tl.ShapeError):
        tl.trace(A(3))


def test_diagonal_same_axes():
    with pytest.raises(tl.ShapeError):
        tl.diagonal(A(3, 3), axis1=0, axis2=0)


# ---------------------------------------------------------------------------------------------
# shape manipulation


def test_reshape_incompatible_names_shapes():
    with pytest.raises(tl.ShapeError) as info:
        tl.reshape(A(3, 4), (5, 2))
    msg = str(info.value)
    assert "(3, 4)" in msg and "(5, 2)" in msg, msg


def test_reshape_two_minus_ones():
    with pytest.raises(tl.ShapeError):
        tl.reshape(A(3, 4), (-1, -1))


def test_reshape_minus_one_not_divisible():
    with pytest.raises(tl.ShapeError) as info:
        tl.reshape(A(3, 4), (5, -1))
    assert "(3, 4)" in str(info.value)


def test_transpose_bad_axes():
    with pytest.raises(tl.ShapeError):
        tl.transpose(A(2, 3, 4), (0, 0, 1))
    with pytest.raises(tl.ShapeError):
        tl.transpose(A(2, 3, 4), (0, 1))


def test_squeeze_non_unit_axis():
    with pytest.raises(tl.ShapeError) as info:
        tl.squeeze(A(1, 3), axis=1)
    assert "(1, 3)" in str(info.value)


def test_expand_dims_out_of_range():
    with pytest.raises(tl.ShapeError):
        tl.expand_dims(A(3, 4), 5)


def test_moveaxis_out_of_range():
    with pytest.raises(tl.ShapeError):
        tl.moveaxis(A(3, 4), 2, 0)


def test_concatenate_mismatched_shapes():
    with pytest.raises(tl.ShapeError) as info:
        tl.concatenate([A(3, 4), A(3, 5)], axis=0)
    msg = str(info.value)
    assert "(3, 4)" in msg and "(3, 5)" in msg, msg


def test_concatenate_mismatched_ndim():
    with pytest.raises(tl.ShapeError):
        tl.concatenate([A(3, 4), A(3)], axis=0)


def test_concatenate_bad_axis():
    with pytest.raises(tl.ShapeError):
        tl.concatenate([A(3, 4), A(3, 4)], axis=2)


def test_stack_mismatched_shapes():
    with pytest.raises(tl.ShapeError) as info:
        tl.stack([A(3, 4), A(4, 3)])
    msg = str(info.value)
    assert "(3, 4)" in msg and "(4, 3)" in msg, msg


# ---------------------------------------------------------------------------------------------
# reductions


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean"])
def test_reduction_bad_axis_names_axis_and_shape(name):
    with pytest.raises(tl.ShapeError) as info:
        getattr(tl, name)(A(3, 4), axis=2)
    msg = str(info.value)
    assert "2" in msg and "(3, 4)" in msg, msg


def test_reduction_negative_bad_axis():
    with pytest.raises(tl.ShapeError) as info:
        tl.sum(A(3, 4), axis=-3)
    msg = str(info.value)
    assert "-3" in msg and "(3, 4)" in msg, msg


def test_reduction_repeated_axis():
    with pytest.raises(tl.ShapeError):
        tl.sum(A(3, 4), axis=(0, 0))


# ---------------------------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize("target", [object, "U5", "datetime64[s]", "S3"], ids=str)
def test_astype_unsupported_dtype(target):
    with pytest.raises(tl.DTypeError):
        A(3).astype(target)


def test_asarray_unsupported_dtype():
    with pytest.raises(tl.DTypeError):
        tl.asarray(np.array(["a", "b"]))
    with pytest.raises(tl.DTypeError):
        tl.asarray(np.array([object(), object()], dtype=object))


def test_negative_of_bool_is_dtype_error():
    # numpy: "The numpy boolean negative, the `-` operator, is not supported"
    with pytest.raises(TypeError):
        -np.ones(3, bool)
    with pytest.raises(tl.DTypeError) as info:
        -A(3, dtype=bool)
    assert "bool" in str(info.value)


def test_bool_subtract_is_dtype_error():
    with pytest.raises(TypeError):
        np.ones(3, bool) - np.ones(3, bool)
    with pytest.raises(tl.DTypeError):
        A(3, dtype=bool) - A(3, dtype=bool)


def test_placeholder_bad_dtype():
    with pytest.raises(tl.DTypeError):
        tl.placeholder((3,), dtype="U4", name="s")


# ---------------------------------------------------------------------------------------------
# indexing


@pytest.mark.parametrize(
    "index,axis",
    [((3,), 0), ((slice(None), 4), 1), ((-4,), 0), ((0, -5), 1)],
    ids=["axis0", "axis1", "neg-axis0", "neg-axis1"],
)
def test_index_out_of_bounds(index, axis):
    with pytest.raises((IndexError, tl.ShapeError)) as info:
        A(3, 4)[index]
    assert isinstance(info.value, tl.TenloomError)
    msg = str(info.value)
    assert "axis" in msg and str(axis) in msg, msg


def test_too_many_indices():
    with pytest.raises((IndexError, tl.ShapeError)) as info:
        A(3, 4)[0, 0, 0]
    assert isinstance(info.value, tl.TenloomError)


def test_two_ellipses_in_index():
    with pytest.raises(tl.TenloomError):
        A(3, 4)[..., 0, ...]


@pytest.mark.parametrize(
    "make_index",
    [
        lambda t: [0, 1],
        lambda t: np.array([0, 2]),
        lambda t: np.array([True, False, True]),
        lambda t: t > 0,
        lambda t: (slice(None), [1, 2]),
    ],
    ids=["list", "int-array", "bool-array", "bool-tensor", "list-in-tuple"],
)
def test_advanced_indexing_matches_numpy(make_index):
    """Advanced indexing is supported (graph/ops/gather.py, tests/test_advanced_indexing.py)."""
    t = A(3, 4)
    a = t.evaluate()
    k = make_index(t)
    np.testing.assert_array_equal(t[k].evaluate(), a[make_index(a)])


def test_float_index_rejected():
    t = A(3, 4)
    with pytest.raises((tl.TenloomError, TypeError, IndexError)) as info:
        t[1.5]
    assert str(info.value)


def test_zero_step_slice():
    with pytest.raises((tl.TenloomError, ValueError)):
        A(3, 4)[::0]


# ---------------------------------------------------------------------------------------------
# shape formatting


def test_shapes_formatted_as_python_tuples():
    with pytest.raises(tl.ShapeError) as info:
        A(7) + A(2, 3)
    msg = str(info.value)
    assert "(7,)" in msg and "(2, 3)" in msg, msg


def test_contract_node_checks_both_operands_labels():
    from tenloom.graph.node import make_node
    from tenloom.graph.ops import Op

    a = tl.asarray(np.ones((3, 4))).node
    b = tl.asarray(np.ones((4, 5, 2))).node
    good = ((0, 1), (1, 2, 3), (0, 2, 3), (), (0,), (1,), (2, 3))
    assert make_node(Op.CONTRACT, (a, b), good).shape == (3, 5, 2)
    bad = ((0, 1), (1, 2), (0, 2), (), (0,), (1,), (2,))  # two labels for a 3-axis operand
    with pytest.raises(tl.ShapeError, match=r"operands of shapes \(3, 4\) and \(4, 5, 2\)"):
        make_node(Op.CONTRACT, (a, b), bad)
