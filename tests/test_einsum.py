"""tl.einsum against numpy.einsum: fixed expressions, dtypes, >52 labels, random expressions."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, random_array
from hypothesis import given
from hypothesis import strategies as st

import tenloom as tl

pytestmark = pytest.mark.usefixtures("pipeline_variant")

SEED = 20240611

# (subscripts, operand shapes); every case is checked against numpy.einsum in float64.
FIXED_CASES = [
    # matrix products
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ik,kj->ij", [(2, 3), (3, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ji,jk->ik", [(4, 3), (4, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("i,ij->j", [(3,), (3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,i", [(5,), (5,)]),
    # batch matmul
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,jk->bik", [(2, 3, 4), (4, 5)]),
    ("ij,bjk->bik", [(3, 4), (2, 4, 5)]),
    ("bij,bjk->", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->kb", [(2, 3, 4), (2, 4, 5)]),
    # outer products
    ("i,j->ij", [(3,), (4,)]),
    ("i,j", [(3,), (4,)]),
    ("j,i->ij", [(3,), (4,)]),
    ("ij,kl->ijkl", [(2, 3), (2, 2)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    # traces and diagonals
    ("ii->", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("iij->ij", [(3, 3, 2)]),
    ("iji->ij", [(3, 2, 3)]),
    ("iij", [(3, 3, 2)]),
    ("iii->i", [(3, 3, 3)]),
    ("iii->", [(3, 3, 3)]),
    ("ijij->ij", [(2, 3, 2, 3)]),
    ("ijji->", [(2, 3, 3, 2)]),
    # repeated indices inside one operand of a multi-operand expression
    ("ii,ij->j", [(3, 3), (3, 4)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ("ij,jjk->ik", [(3, 4), (4, 4, 2)]),
    ("ii,ii->i", [(3, 3), (3, 3)]),
    ("aab,bcc->ac", [(2, 2, 3), (3, 4, 4)]),
    ("ii,jj->ij", [(3, 3), (2, 2)]),
    # ellipsis
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...i,...i", [(2, 3), (2, 3)]),
    ("...i,...i->...", [(2, 1, 3), (4, 3)]),
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("i...->...", [(3, 2, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ij...,jk...->ik...", [(2, 3, 4), (3, 5, 4)]),
    ("...", [(2, 3)]),
    ("...,...->...", [(2, 1), (3,)]),
    ("i...i", [(3, 2, 3)]),
    ("...ij,j->...i", [(2, 2, 3, 4), (4,)]),
    ("ij->...ij", [(2, 3)]),
    # implicit output: transposition semantics, ASCII order (upper case first)
    ("ba", [(3, 4)]),
    ("Ba", [(3, 4)]),
    ("aB", [(3, 4)]),
    ("ab,Ab", [(3, 4), (2, 4)]),
    ("ij,jk,kl", [(2, 3), (3, 4), (4, 2)]),
    ("kj,ji", [(2, 3), (3, 4)]),
    # broadcasting of size-1 labelled dimensions
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("ij,ij->ij", [(2, 1), (1, 3)]),
    ("ij,ij->i", [(2, 3), (1, 3)]),
    # scalars / 0-d operands
    ("->", [()]),
    ("", [()]),
    (",ij->ij", [(), (2, 3)]),
    (",->", [(), ()]),
    ("ij,->ij", [(2, 3), ()]),
    ("i,", [(3,), ()]),
    # zero-size dimensions
    ("ij,jk->ik", [(0, 3), (3, 4)]),
    ("ij,jk->ik", [(3, 0), (0, 4)]),
    ("ii->", [(0, 0)]),
    ("ij->", [(2, 0)]),
    ("bij,bjk->bik", [(0, 2, 3), (0, 3, 4)]),
    # hyper-indices (a label on three or more operands)
    ("ab,ab,ab->a", [(3, 4), (3, 4), (3, 4)]),
    ("ai,bi,ci->abc", [(2, 5), (3, 5), (4, 5)]),
    ("ai,ai,ai->", [(3, 4), (3, 4), (3, 4)]),
    ("abc,ab,bc->b", [(2, 3, 4), (2, 3), (3, 4)]),
    ("ia,ib,ic,id->abcd", [(3, 2), (3, 2), (3, 2), (3, 2)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    # pure permutations
    ("ijk->kij", [(2, 3, 4)]),
    ("ijk->jik", [(2, 3, 4)]),
    ("abcd->dcba", [(2, 3, 4, 5)]),
    ("ij->ij", [(2, 3)]),
    # sums
    ("ij->", [(3, 4)]),
    ("ijk->i", [(2, 3, 4)]),
    ("ijk->k", [(2, 3, 4)]),
    ("ijk->ki", [(2, 3, 4)]),
    # networks of 4 to 8 operands
    ("ab,bc,cd,da->", [(3, 4), (4, 2), (2, 5), (5, 3)]),
    ("ab,bc,cd,de,ef->af", [(2, 3), (3, 4), (4, 3), (3, 2), (2, 3)]),
    ("abc,cde,efg,gha,bdfh->", [(2, 2, 2)] * 4 + [(2, 2, 2, 2)]),
    ("ab,bc,cd,de,ef,fa->", [(2, 3), (3, 2), (2, 3), (3, 2), (2, 3), (3, 2)]),
    ("ab,acd,ce,bf,dfg,eg->", [(2, 3), (2, 2, 3), (2, 3), (3, 2), (3, 2, 2), (3, 2)]),
    ("ab,ac,ad,bc,bd,cd,abcd->", [(2, 3), (2, 2), (2, 3), (3, 2), (3, 3), (2, 3), (2, 3, 2, 3)]),
    (
        "ia,jab,kb,id,jde,ke,xa,yd->xy",
        [(2, 3), (2, 3, 2), (2, 2), (2, 3), (2, 3, 2), (2, 2), (4, 3), (5, 3)],
    ),
    ("ab,bc,cd,de->", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    # spaces
    (" ij , jk -> ik ", [(2, 3), (3, 4)]),
    ("i j,j k->i k", [(2, 3), (3, 4)]),
    ("ii -> i", [(3, 3)]),
]


def _case_id(i, case):
    return f"{i:02d}[{case[0]}]{'x'.join(str(s) for s in case[1])}"


def _run(subscripts, arrays):
    tensors = [tl.asarray(a) for a in arrays]
    return tl.einsum(subscripts, *tensors)


@pytest.mark.parametrize(
    "subscripts,shapes",
    FIXED_CASES,
    ids=[_case_id(i, c) for i, c in enumerate(FIXED_CASES)],
)
def test_einsum_fixed(subscripts, shapes):
    rng = np.random.default_rng(SEED)
    arrays = [random_array(rng, s, np.float64) for s in shapes]
    expected = np.asarray(np.einsum(subscripts, *arrays))
    t = _run(subscripts, arrays)
    # shape and dtype are known at trace time
    assert tuple(t.shape) == expected.shape
    assert t.dtype == expected.dtype
    assert_close(t.evaluate(), expected)


def test_fixed_case_count():
    assert len(FIXED_CASES) >= 60


def test_einsum_scalar_result_is_0d_ndarray():
    rng = np.random.default_rng(SEED)
    a = random_array(rng, (4, 4), np.float64)
    out = tl.einsum("ii->", tl.asarray(a)).evaluate()
    assert isinstance(out, np.ndarray)
    assert out.ndim == 0
    assert_close(out, np.asarray(np.trace(a)))


def test_einsum_evaluate_many_returns_tuple():
    rng = np.random.default_rng(SEED)
    a, b = random_array(rng, (3, 4), "float64"), random_array(rng, (4, 5), "float64")
    ta, tb = tl.asarray(a), tl.asarray(b)
    t1 = tl.einsum("ij,jk->ik", ta, tb)
    t2 = tl.einsum("ij->", ta)
    res = tl.evaluate(t1, t2)
    assert isinstance(res, tuple) and len(res) == 2
    assert_close(res[0], a @ b)
    assert_close(res[1], np.asarray(a.sum()))
    single = tl.evaluate(t1)
    assert isinstance(single, tuple) and len(single) == 1
    assert_close(single[0], a @ b)


# ---------------------------------------------------------------------------------------------
# sublist (interleaved integer) form

SUBLIST_CASES = [
    ("matmul", [(3, 4), (4, 5)], [[0, 1], [1, 2]], [0, 2]),
    ("matmul-implicit", [(3, 4), (4, 5)], [[0, 1], [1, 2]], None),
    ("transpose-implicit", [(3, 4)], [[1, 0]], None),
    ("trace", [(4, 4)], [[0, 0]], []),
    ("diag", [(4, 4)], [[0, 0]], [0]),
    ("big-labels", [(3, 4), (4, 5)], [[10, 51], [51, 40]], [40, 10]),
    ("ellipsis", [(2, 3, 4), (2, 4, 5)], [[Ellipsis, 0, 1], [Ellipsis, 1, 2]], [Ellipsis, 0, 2]),
    ("ellipsis-implicit", [(2, 3), (2, 3)], [[Ellipsis, 0], [Ellipsis, 0]], None),
    ("ellipsis-broadcast", [(2, 1, 3), (4, 3)], [[Ellipsis, 7], [Ellipsis, 7]], [Ellipsis]),
    ("hyper", [(2, 5), (3, 5), (4, 5)], [[0, 9], [1, 9], [2, 9]], [0, 1, 2]),
    ("sum-all", [(3, 4)], [[0, 1]], []),
    ("outer-implicit", [(3,), (4,)], [[5], [2]], None),
    ("scalar-operand", [(), (2, 3)], [[], [0, 1]], [0, 1]),
]


@pytest.mark.parametrize(
    "shapes,sublists,output",
    [c[1:] for c in SUBLIST_CASES],
    ids=[c[0] for c in SUBLIST_CASES],
)
def test_einsum_sublist_form(shapes, sublists, output):
    rng = np.random.default_rng(SEED)
    arrays = [random_array(rng, s, np.float64) for s in shapes]
    np_args, tl_args = [], []
    for a, sub in zip(arrays, sublists):
        np_args += [a, list(sub)]
        tl_args += [tl.asarray(a), list(sub)]
    if output is not None:
        np_args.append(list(output))
        tl_args.append(list(output))
    expected = np.asarray(np.einsum(*np_args))
    t = tl.einsum(*tl_args)
    assert tuple(t.shape) == expected.shape
    assert_close(t.evaluate(), expected)


def test_einsum_sublist_ring_more_than_52_labels():
    """A closed ring of 70 2x2 matrices on integer labels up to 207: trace of the product."""
    n = 70
    rng = np.random.default_rng(SEED)
    mats = [np.eye(2) + 0.3 * rng.standard_normal((2, 2)) for _ in range(n)]
    args = []
    for k, m in enumerate(mats):
        args += [tl.asarray(m), [3 * k, 3 * ((k + 1) % n)]]
    args.append([])
    prod = np.eye(2)
    for m in mats:
        prod = prod @ m
    expected = np.asarray(np.trace(prod))
    t = tl.einsum(*args)
    assert tuple(t.shape) == ()
    assert_close(t.evaluate(), expected)


def test_einsum_sublist_open_chain_more_than_52_labels():
    """An open chain of 60 matrices, output labels are the two (large) end labels, reversed."""
    n = 60
    rng = np.random.default_rng(SEED + 1)
    mats = [np.eye(2) + 0.3 * rng.standard_normal((2, 2)) for _ in range(n)]
    args = []
    for k, m in enumerate(mats):
        args += [tl.asarray(m), [100 + k, 100 + k + 1]]
    args.append([100 + n, 100])
    prod = np.eye(2)
    for m in mats:
        prod = prod @ m
    t = tl.einsum(*args)
    assert tuple(t.shape) == (2, 2)
    assert_close(t.evaluate(), prod.T)


def test_einsum_sublist_mps_norm_ladder():
    """<psi|psi> of a 30-site MPS (bond 2, physical 2, complex): a ladder with 120+ labels."""
    n, chi, d = 30, 2, 2
    rng = np.random.default_rng(SEED + 2)
    sites = []
    for k in range(n):
        left = 1 if k == 0 else chi
        right = 1 if k == n - 1 else chi
        a = rng.standard_normal((left, d, right)) + 1j * rng.standard_normal((left, d, right))
        sites.append(a / np.sqrt(2 * d))
    # labels: ket bonds 0..n, bra bonds 1000..1000+n, physical 500..500+n-1
    args = []
    for k, a in enumerate(sites):
        args += [tl.asarray(a), [k, 500 + k, k + 1]]
        args += [tl.conj(tl.asarray(a)), [1000 + k, 500 + k, 1000 + k + 1]]
    args.append([])
    env = np.ones((1, 1), dtype=complex)
    for a in sites:
        env = np.einsum("xy,xsa,ysb->ab", env, a, a.conj())
    expected = np.asarray(env[0, 0])
    t = tl.einsum(*args)
    assert t.dtype == np.complex128
    assert_close(t.evaluate(), expected)


# ---------------------------------------------------------------------------------------------
# dtype axis

DTYPE_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("iji->ij", [(3, 2, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ab,ab,ab->a", [(3, 4), (3, 4), (3, 4)]),
    ("ijk->kij", [(2, 3, 4)]),
    ("ij->", [(3, 4)]),
    (",ij->ij", [(), (2, 3)]),
    ("ab,bc,cd,da->", [(3, 4), (4, 2), (2, 5), (5, 3)]),
    ("ba", [(3, 4)]),
]
EINSUM_DTYPES = ["float32", "float64", "complex64", "complex128", "int32", "int64"]


@pytest.mark.parametrize("dtype", EINSUM_DTYPES)
@pytest.mark.parametrize(
    "subscripts,shapes", DTYPE_CASES, ids=[_case_id(i, c) for i, c in enumerate(DTYPE_CASES)]
)
def test_einsum_dtypes(subscripts, shapes, dtype):
    rng = np.random.default_rng(SEED)
    arrays = [random_array(rng, s, dtype) for s in shapes]
    expected = np.asarray(np.einsum(subscripts, *arrays))
    t = _run(subscripts, arrays)
    assert t.dtype == expected.dtype
    assert_close(t.evaluate(), expected)


@pytest.mark.parametrize(
    "subscripts,shapes",
    [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij->", [(3, 4)]), ("ii->i", [(3, 3)])],
    ids=["matmul", "sum", "diag"],
)
def test_einsum_bool(subscripts, shapes):
    rng = np.random.default_rng(SEED)
    arrays = [random_array(rng, s, "bool") for s in shapes]
    expected = np.asarray(np.einsum(subscripts, *arrays))
    t = _run(subscripts, arrays)
    assert t.dtype == expected.dtype
    assert_close(t.evaluate(), expected)


@pytest.mark.parametrize(
    "dtypes",
    [
        ("float32", "float64"),
        ("int32", "float32"),
        ("int64", "complex64"),
        ("float32", "complex64"),
        ("int32", "int64"),
        ("bool", "float32"),
    ],
    ids=lambda d: "-".join(d),
)
def test_einsum_mixed_dtypes(dtypes):
    rng = np.random.default_rng(SEED)
    a = random_array(rng, (3, 4), dtypes[0])
    b = random_array(rng, (4, 5), dtypes[1])
    expected = np.einsum("ij,jk->ik", a, b)
    t = tl.einsum("ij,jk->ik", tl.asarray(a), tl.asarray(b))
    assert t.dtype == expected.dtype
    assert_close(t.evaluate(), expected)


def test_einsum_of_lazy_intermediates():
    """Operands that are themselves lazy expressions (not leaves)."""
    rng = np.random.default_rng(SEED)
    a, b = random_array(rng, (3, 4), "float64"), random_array(rng, (4, 5), "float64")
    ta, tb = tl.asarray(a), tl.asarray(b)
    t = tl.einsum("ij,jk->ik", ta * 2.0 + 1.0, tl.einsum("jk->jk", tb))
    inner = tl.einsum("ik->", t)
    assert_close(inner.evaluate(), np.asarray(((a * 2.0 + 1.0) @ b).sum()))


# ---------------------------------------------------------------------------------------------
# property test: random expressions against numpy.einsum

_LABELS = "abcdef"


@st.composite
def einsum_problems(draw):
    n_ops = draw(st.integers(1, 5))
    sizes = {label: draw(st.integers(1, 4)) for label in _LABELS}
    use_ellipsis = draw(st.integers(0, 3)) == 0
    ell_shape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)) if use_ellipsis else []
    terms, shapes = [], []
    any_ellipsis = False
    for _ in range(n_ops):
        ndim = draw(st.integers(0, 4 if n_ops <= 2 else 3))
        labels = draw(st.lists(st.sampled_from(_LABELS), min_size=ndim, max_size=ndim))
        if ndim >= 1 and draw(st.integers(0, 4)) == 0:
            # force a repeated label within this operand
            labels.insert(draw(st.integers(0, len(labels))), labels[0])
        shape = [sizes[label] for label in labels]
        term = "".join(labels)
        if use_ellipsis and draw(st.booleans()):
            any_ellipsis = True
            k = draw(st.integers(0, len(ell_shape)))
            ell = ell_shape[len(ell_shape) - k :]
            ell = [1 if draw(st.integers(0, 3)) == 0 else s for s in ell]
            pos = draw(st.integers(0, len(labels)))
            term = "".join(labels[:pos]) + "..." + "".join(labels[pos:])
            shape = shape[:pos] + ell + shape[pos:]
        terms.append(term)
        shapes.append(tuple(shape))
    subscripts = ",".join(terms)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t if c.isalpha()})
        out = draw(st.permutations(used))
        keep = draw(st.lists(st.booleans(), min_size=len(out), max_size=len(out)))
        out = [c for c, k in zip(out, keep) if k]
        out_str = "".join(out)
        if any_ellipsis:
            pos = draw(st.integers(0, len(out)))
            out_str = "".join(out[:pos]) + "..." + "".join(out[pos:])
        subscripts += "->" + out_str
    dtype = draw(st.sampled_from(["float64", "float64", "complex128", "int64"]))
    seed = draw(st.integers(0, 2**16))
    return subscripts, shapes, dtype, seed


@given(einsum_problems())
def test_einsum_random_expressions(problem):
    subscripts, shapes, dtype, seed = problem
    rng = np.random.default_rng(seed)
    arrays = [random_array(rng, s, dtype) for s in shapes]
    expected = np.asarray(np.einsum(subscripts, *arrays))
    t = _run(subscripts, arrays)
    assert tuple(t.shape) == expected.shape
    assert t.dtype == expected.dtype
    assert_close(t.evaluate(), expected)


# ---------------------------------------------------------------------------------------------
# evaluate options must not change the numbers

_OPTION_CASES = [c for c in FIXED_CASES if len(c[1]) >= 3 or c[0] in ("ii->", "...ij,...jk->...ik")]


@pytest.mark.parametrize(
    "opts", [{"passes": ()}, {"optimize": "greedy"}], ids=["no-passes", "greedy"]
)
@pytest.mark.parametrize(
    "subscripts,shapes", _OPTION_CASES, ids=[_case_id(i, c) for i, c in enumerate(_OPTION_CASES)]
)
def test_einsum_evaluate_options(subscripts, shapes, opts):
    rng = np.random.default_rng(SEED)
    arrays = [random_array(rng, s, np.float64) for s in shapes]
    expected = np.asarray(np.einsum(subscripts, *arrays))
    assert_close(_run(subscripts, arrays).evaluate(**opts), expected)
