"""Advanced indexing (integer arrays, lists, boolean masks: GATHER, graph/ops/gather.py) and
functional updates (``t.at[idx].set/add/multiply/get``, tenloom/updates.py) against NumPy:
index forms, dtypes, errors, empty selections, gradients and the data-dependent rule."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import require_cuda
from hypothesis import given, settings
from hypothesis import strategies as st
from tenloom.graph import build as _b
from tenloom.graph.ops import Op
from tenloom.graph.traverse import toposort
from tenloom.graph.value import Value
from test_autodiff import check_grads
from test_jvp import MODES, check_jvp

import tenloom as tl

A = np.arange(60.0).reshape(3, 4, 5)

FORMS = {
    "list": ([0, 2],),
    "int-array-2d": (np.array([[0, 1], [2, 0]]),),
    "negative": ([-1, -3, 0],),
    "slice-then-array": (slice(None), [1, 3]),
    "two-arrays-adjacent": (slice(None), [0, 1], [1, 2]),
    "separated-by-slice": ([0, 1], slice(None), [1, 2]),
    "int-and-array-separated": (0, slice(None), [1, 2]),
    "int-and-array-adjacent": (slice(None), 1, [1, 2]),
    "ellipsis": (Ellipsis, [1, -1]),
    "broadcast-arrays": ([[0], [2]], [1, 2, 3]),
    "none-between": (None, [0, 1], None, [1, 2]),
    "stepped-slices": (slice(1, None), [[0, 1]], slice(None, None, -2)),
    "mask-full": (A > 30,),
    "mask-2d": (A[:, :, 0] > 10,),
    "mask-middle": (slice(None), np.array([True, False, True, True])),
    "mask-and-array": (np.array([True, False, True]), slice(None), [0, 4]),
    "true": (True,),
    "false": (False,),
    "empty-list": ([],),
    "empty-arrays": (np.array([], int), []),
    "duplicates": ([2, 2, 0, 2],),
    "int-then-list": (1, [2]),
    "list-int-slice": ([2], 1, slice(None)),
    "scalar-array": (np.array(1), np.array(2)),
}


@pytest.mark.parametrize("name", list(FORMS))
def test_index_forms_match_numpy(name):
    key = FORMS[name]
    got = tl.asarray(A)[key].evaluate()
    want = A[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "dtype",
    ["float32", "float64", "complex64", "complex128", "bool", "int8", "int32", "int64", "uint8"],
)
def test_every_dtype(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((4, 3)) * 10).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((4, 3)).astype(dtype)
    t = tl.asarray(a)
    for key in (([3, 0, 3],), (slice(None), [2, 0]), (a.real > 0,), ([1, 2], [0, 2])):
        got = t[key].evaluate()
        assert got.dtype == a[key].dtype
        np.testing.assert_array_equal(got, a[key])
    for key in (([1, 1, 3], 0), (slice(None, 2), [2]), (a.real > 0,)):
        vals = a[::-1, ::-1][key]
        want = a.copy()
        want[key] = vals
        np.testing.assert_array_equal(t.at[key].set(vals).evaluate(), want)
        np.testing.assert_array_equal(t.at[key].get().evaluate(), a[key])
        want = a.copy()
        np.add.at(want, key, vals)  # for bool: logical or, as tenloom's bool addition
        np.testing.assert_array_equal(t.at[key].add(vals).evaluate(), want)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_index_combinations(data):
    """Random mixes of ints, slices, None, Ellipsis, integer arrays (negative, broadcast) and
    masks on a random shape, against NumPy."""
    ndim = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    key, ax, ellipsis = [], 0, False
    while ax < ndim:
        kind = data.draw(st.sampled_from(["int", "slice", "none", "arr", "mask", "ellipsis"]))
        n = shape[ax]
        if kind == "int":
            key.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = data.draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = data.draw(st.sampled_from([None, 1, 2, -1, -2]))
            key.append(slice(start, None, step))
        elif kind == "none":
            key.append(None)
            continue
        elif kind == "ellipsis":
            if ellipsis:
                continue
            ellipsis = True
            key.append(Ellipsis)
            break
        elif kind == "arr":
            bshape = data.draw(st.sampled_from([(), (2,), (1, 3), (3,)]))
            vals = data.draw(st.lists(st.integers(-n, n - 1), min_size=6, max_size=6))
            key.append(np.array(vals[: int(np.prod(bshape))]).reshape(bshape))
        else:
            bits = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
            key.append(np.array(bits))
        ax += 1
    key = tuple(key)
    try:
        want = a[key]
    except IndexError:  # index arrays that do not broadcast together
        with pytest.raises(IndexError):
            tl.asarray(a)[key]
        return
    got = tl.asarray(a)[key].evaluate()
    assert got.shape == want.shape, key
    np.testing.assert_array_equal(got, want)


def test_values_index_through_the_builder():
    """graph Values (as the autodiff rules use them) get advanced indexing too."""
    v = Value(_b.asarray(A))
    out = v[[0, 2], 1]
    assert isinstance(out, Value) and out.shape == (2, 5)
    assert any(n.op is Op.GATHER for n in toposort([out.node]))
    np.testing.assert_array_equal(tl.Tensor(out.node).evaluate(), A[[0, 2], 1])


def test_constant_index_tensor_and_lazy_integer_index():
    t = tl.asarray(A)
    idx = tl.asarray(np.array([2, -1, 0]))
    np.testing.assert_array_equal(t[idx, 1].evaluate(), A[[2, -1, 0], 1])
    lazy = tl.asarray(np.array([1, 2])) * 2 - 3  # a computed integer tensor: -1, 1
    np.testing.assert_array_equal(t[:, lazy].evaluate(), A[:, [-1, 1]])

    @tl.function
    def f(x, i, j):
        return x[i, :, j]

    i, j = np.array([[0], [2]]), np.array([4, -5, 1])
    np.testing.assert_array_equal(f(A, i, j), A[i, :, j])


# ---- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, match",
    [
        (([3],), r"index 3 is out of bounds for axis 0 with size 3.*\(3, 4, 5\)"),
        (([0], [0, -5]), r"index -5 is out of bounds for axis 1 with size 4"),
        ((slice(None), slice(None), [5]), r"index 5 is out of bounds for axis 2 with size 5"),
        ((np.ones(4, bool),), r"boolean index of shape \(4,\) does not match.*\(3,\)"),
        (([0], [0], [0], [0]), r"too many indices \(4\)"),
    ],
)
def test_out_of_bounds_errors(key, match):
    with pytest.raises(tl.IndexOutOfBoundsError, match=match) as e:
        tl.asarray(A)[key]
    assert "getitem" in str(e.value) and isinstance(e.value, IndexError)
    with pytest.raises(IndexError):
        A[key]


@pytest.mark.parametrize(
    "key, match",
    [
        (([0, 1], [0, 1, 2]), "cannot be broadcast together"),
        (([0.5],), "integer or boolean"),
        ((1.5,), "integer or boolean"),
        (([0], Ellipsis, Ellipsis), "single ellipsis"),
        ((tl.asarray(np.array([0.5])),), "integer or boolean"),
    ],
)
def test_bad_index_errors(key, match):
    with pytest.raises(tl.IndexingError, match=match) as e:
        tl.asarray(A)[key]
    assert "getitem" in str(e.value) and isinstance(e.value, IndexError)


def test_op_level_shape_errors():
    x = _b.asarray(np.ones(4))
    with pytest.raises(tl.ShapeError, match="gather: operand 1.*not an integer dtype"):
        _b.take_flat(x, np.array([0.0]))
    with pytest.raises(tl.ShapeError, match="gather: operand 0 of shape \\(\\)"):
        _b.take_flat(_b.asarray(np.float64(1)), np.array([0]))
    with pytest.raises(tl.ShapeError, match="scatter_add: operand 0 of shape \\(4,\\)"):
        _b.scatter_add_flat(x, np.array([0, 1]), 3)
    with pytest.raises(tl.ShapeError, match="scatter_add: operand 1.*not an integer dtype"):
        _b.scatter_add_flat(x, np.zeros(4), 3)


def test_empty_selections():
    t = tl.asarray(A)
    for key in ([], (np.zeros(3, bool),), (slice(None), []), (A > 1000,)):
        got = t[key].evaluate()
        assert got.shape == A[key].shape and got.size == 0
    e = tl.asarray(np.ones((0, 3)))
    assert e[[], 1].evaluate().shape == (0,)
    np.testing.assert_array_equal(t.at[[]].set(1.0).evaluate(), A)
    np.testing.assert_array_equal(t.at[A > 1000].add(1.0).evaluate(), A)
    np.testing.assert_array_equal(t.at[[]].multiply(2.0).evaluate(), A)


# ---- functional updates -----------------------------------------------------------------


UPDATE_KEYS = {
    "basic": (slice(1, None), 0, slice(None, None, 2)),
    "ints": (1, 2),
    "arrays": ([0, 2], slice(None), [1, 3]),
    "mask": (A > 40,),
    "duplicates": ([0, 0, 2, 0], [1, 1, 3, 1]),
}


@pytest.mark.parametrize("name", list(UPDATE_KEYS))
@pytest.mark.parametrize("method", ["set", "add", "multiply", "get"])
def test_updates_match_numpy(name, method):
    key = UPDATE_KEYS[name]
    rng = np.random.default_rng(1)
    v = rng.standard_normal(A[key].shape)
    ref = tl.asarray(A).at[key]
    want = A.copy()
    if method == "set":
        want[key] = v  # with duplicates NumPy keeps the last write, as .set does
        got = ref.set(v)
    elif method == "add":
        np.add.at(want, key, v)
        got = ref.add(v)
    elif method == "multiply":
        np.multiply.at(want, key, v)
        got = ref.multiply(v)
    else:
        want = A[key]
        got = ref.get()
    assert isinstance(got, tl.Tensor)
    np.testing.assert_allclose(got.evaluate(), want, rtol=1e-12)


def test_duplicates_add_accumulates_and_set_keeps_the_last():
    t = tl.zeros((4,))
    np.testing.assert_array_equal(t.at[[1, 1, 1, 3]].add(2.0).evaluate(), [0, 6, 0, 2])
    np.testing.assert_array_equal(
        t.at[[1, 3, 1, 1]].set(np.array([5.0, 6.0, 7.0, 8.0])).evaluate(), [0, 8, 0, 6]
    )
    np.testing.assert_array_equal(
        tl.ones((3,)).at[[2, 2, 0]].multiply(np.array([2.0, 3.0, 5.0])).evaluate(), [5, 1, 6]
    )


def test_update_broadcasts_and_casts_like_numpy():
    a = np.zeros((3, 4), np.float32)
    got = tl.asarray(a).at[:, [0, 2]].set(np.array([1.0, 2.0]))
    want = a.copy()
    want[:, [0, 2]] = [1.0, 2.0]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.evaluate(), want)
    with pytest.raises(tl.ShapeError):
        tl.asarray(a).at[:, [0, 2]].set(np.ones(3))
    with pytest.raises(tl.IndexOutOfBoundsError, match="index 4 is out of bounds"):
        tl.asarray(a).at[:, [4]].add(1.0)


# ---- gradients --------------------------------------------------------------------------


GRAD_CASES = {
    "gather": (lambda x: x[[2, 0, 2], ::-1] * x[1, [0, 0, 3, 1]], [(3, 4)]),
    "mask": (lambda x: x[np.array([[True, False, True, False]] * 3)], [(3, 4)]),
    "batched": (lambda x: x[:, [1, 1], [0, 3]] ** 2, [(2, 3, 4)]),
    "separated": (lambda x: x[[0, 1], :, [3, 3]], [(2, 3, 4)]),
    "set": (lambda x, v: x.at[[0, 0, 2], [1, 1, 3]].set(v * 2), [(3, 4), (3,)]),
    "add": (lambda x, v: x.at[[0, 0, 2], [1, 1, 3]].add(v * x[0, :3]), [(3, 4), (3,)]),
    "multiply": (lambda x, v: x.at[[1, 1, 2]].multiply(v), [(3, 4), (4,)]),
    "set_basic": (lambda x, v: x.at[1:, ::2].set(v), [(3, 4), (2,)]),
}


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_against_finite_differences(name, dtype):
    f, shapes = GRAD_CASES[name]
    check_grads(f, shapes, dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["gather", "batched", "set", "add", "multiply"])
def test_jvp_against_finite_differences_and_the_vjp(name, mode):
    f, shapes = GRAD_CASES[name]
    check_jvp(f, shapes, "complex128", mode=mode)


def test_second_order_gather_scatter_transpose():
    """The VJP of GATHER is SCATTER_ADD and its VJP is GATHER: a Hessian-vector product."""
    x = tl.placeholder((4,), "float64", name="x")
    loss = tl.sum(x[[0, 0, 3]] ** 3)
    (g,) = tl.grad(loss, [x])
    (h,) = tl.grad(tl.sum(g * tl.asarray(np.ones(4))), [x])
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(tl.evaluate(h, feed={x: xv})[0], [12.0, 0, 0, 24.0])


# ---- lazy masks: the data-dependent-shape rule ---------------------------------------


def test_lazy_mask_is_evaluated_on_concrete_operands():
    t = tl.asarray(A) * 2
    got = t[t > 50].evaluate()
    np.testing.assert_array_equal(got, (A * 2)[A * 2 > 50])
    np.testing.assert_array_equal(t.at[t > 50].set(0.0).evaluate(), np.where(A * 2 > 50, 0, A * 2))


def test_lazy_mask_in_a_traced_function_raises():
    @tl.function
    def f(x):
        return x[x > 1]

    with pytest.raises(tl.DataDependentShapeError, match="getitem.*placeholder"):
        f(np.ones(3))

    @tl.function
    def g(x):
        return x.at[x > 1].set(0.0)

    with pytest.raises(tl.DataDependentShapeError, match="at.*placeholder"):
        g(np.ones(3))


# ---- backends, dump and save ------------------------------------------------------------


def test_opencl_names_the_op():
    from helpers import opencl_device

    dev = opencl_device()
    if dev is None:
        pytest.skip("no OpenCL device")
    with pytest.raises(tl.DeviceError, match="gather"):
        tl.asarray(A)[[0, 1]].evaluate(device=dev)


def test_save_load_and_dump(tmp_path):
    x = tl.placeholder((3, 4), "float64", name="x")
    out = x.at[[0, 0], [1, 2]].add(x[[2, 1], [3, 0]])
    path = tmp_path / "g.json"
    tl.save(out, path)
    back = tl.load(path)
    xv = np.arange(12.0).reshape(3, 4)
    want = xv.copy()
    np.add.at(want, ([0, 0], [1, 2]), xv[[2, 1], [3, 0]])
    got = back(xv) if callable(back) else tl.evaluate(back, feed={x: xv})[0]
    np.testing.assert_array_equal(np.asarray(got), want)
    text = tl.dump(out)
    assert "gather" in text and "scatter_add[size=12]" in text


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_cuda_gather_scatter_add_and_updates(dtype):
    """On CUDA the references run on CuPy arrays (x[idx], np.add.at -> CuPy's add.at)."""
    require_cuda()
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 6)).astype(dtype)
    t = tl.asarray(a)
    out = t[[4, -1, 0], 1:] * 2 + 0
    np.testing.assert_allclose(out.evaluate(device="cuda:0"), a[[4, -1, 0], 1:] * 2, rtol=1e-6)
    upd = t.at[[0, 0, 3], [1, 1, 5]].add(np.ones(3, dtype))
    want = a.copy()
    np.add.at(want, ([0, 0, 3], [1, 1, 5]), 1)
    np.testing.assert_allclose(upd.evaluate(device="cuda:0"), want, rtol=1e-6)
    x = tl.placeholder((5, 6), dtype, name="x")
    (g,) = tl.grad(tl.sum(tl.real(x[[0, 0, 2], [1, 1, 3]] * 3)), [x])
    got = tl.evaluate(g, feed={x: a}, device="cuda:0")[0]
    want = np.zeros_like(a)
    np.add.at(want, ([0, 0, 2], [1, 1, 3]), 3)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
