"""Random tensor programs for the differential fuzzer (tests/test_fuzz_numpy.py).

A program is a list of steps over a pool of values. Every step is one line of Python with the
array namespace as ``xp`` (``v3 = xp.maximum(v1, v2 + 2.5)``), so the same text runs eagerly
under NumPy (the oracle) and lazily under tenloom, and a failing program prints as a runnable
reproducer (``Program.source()``).

While a program is drawn, each step runs under NumPy at once and the result is analysed:

* ``approx``: the value may legitimately differ from NumPy's in rounding (reductions,
  contractions, transcendental functions, complex arithmetic, float16 chains). Such values are
  compared with a tolerance ``rtol(dtype) * mag``, where ``mag`` (per element) bounds the size
  of the terms that produced the element (the same op applied to the inputs' ``mag``).
* ``amb`` (per element): positions whose value NumPy's semantics does not pin down given the
  legitimate freedom above: a comparison, ``sign`` or cast whose approx operand lies within its
  tolerance of the jump, a float -> int cast of a non-finite or out-of-range value, partial sums
  that may overflow in another order. These positions are not compared (everything else is).
  For elementwise ops the freedom is measured, not guessed: the op is rerun on its approx
  inputs moved by their tolerance, and every output that jumps (finite/non-finite, NaN, a
  comparison flips) is ambiguous.
* multilinear chains: products, contractions, sums and scalar factors that tenloom's passes may
  merge into one n-ary network. For three or more operands the contraction order legitimately
  changes which non-finite value (or overflow) appears, so such chains are only drawn over
  finite, moderate values (the issue's rule: NaN/inf through networks of at most two operands).

Exact values (integers, bools, and floats made by correctly rounded ops from exact inputs) are
compared bit for bit, NaN positions and infinity signs included, and the sign of zero where
NumPy defines it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from tenloom.graph.dtypes import SUPPORTED

#: Every dtype tenloom supports, read from the library so that new ones are fuzzed at once.
DTYPES: tuple[str, ...] = tuple(np.dtype(d).name for d in SUPPORTED)
SUPPORTED_SET = frozenset(np.dtype(d) for d in SUPPORTED)

#: Relative tolerance (times ``mag``) for approx values, by the real dtype.
RTOL = {"float16": 3e-2, "float32": 1e-4, "float64": 1e-9}

LAYOUTS = ("c", "c", "c", "fortran", "strided", "negative", "readonly", "bigendian")

MAX_STEPS = 6

#: Failure classes found by the fuzzer that are still open on this tree, kept out of the
#: generated programs so that the fuzzer passes; each is written up (reproducer, tenloom's
#: result vs NumPy's, likely code) in the issue's findings. Remove a name to generate it again.
KNOWN_OPEN: frozenset[str] = frozenset({})


def real_name(dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if dt.kind == "c":
        return {8: "float32", 16: "float64"}[dt.itemsize]
    return dt.name


def rtol(dt: np.dtype) -> float:
    return RTOL.get(real_name(dt), 1e-9)


def atol(dt: np.dtype) -> float:
    dt = np.dtype(dt)
    if dt.kind not in "fc":
        return 0.0
    return float(np.finfo(dt).tiny) * 16


def fmax(dt: np.dtype) -> float:
    dt = np.dtype(dt)
    if dt.kind in "fc":
        return float(np.finfo(dt).max)
    return math.inf


def native(dt: np.dtype) -> np.dtype:
    return np.dtype(dt).newbyteorder("=")


def quiet():
    """A context where NumPy's floating-point warnings and ComplexWarning are silent."""

    class _Quiet:
        def __enter__(self):
            self._w = warnings.catch_warnings()
            self._w.__enter__()
            warnings.simplefilter("ignore")
            self._e = np.errstate(all="ignore")
            self._e.__enter__()

        def __exit__(self, *exc):
            self._e.__exit__(*exc)
            self._w.__exit__(*exc)

    return _Quiet()


# ---------------------------------------------------------------------------------------------
# values


def finite_abs(x: np.ndarray) -> np.ndarray:
    """|x| as float64 with non-finite entries as 0 (their pattern is compared exactly)."""
    x = np.asarray(x)
    if x.dtype.kind in "biu":  # abs(int64 min) wraps to a negative number
        x = x.astype(np.float64)
    with quiet():
        a = np.array(np.abs(x), dtype=np.float64)
    a[~np.isfinite(a)] = 0.0
    return a


def nonfinite(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind in "fc":
        return ~np.isfinite(x)
    return np.zeros(x.shape, bool)


@dataclass
class Val:
    """A pool value: NumPy's result and what may legitimately differ in tenloom's."""

    ref: np.ndarray
    approx: bool
    mag: np.ndarray  # float64, ref's shape: scale of the terms behind each element
    amb: np.ndarray  # bool, ref's shape: positions not pinned down
    zsign: bool  # the sign of zeros is NumPy-defined here
    m: int = 1  # operands of the multilinear chain ending here
    hi: float = 1.0  # bound of that chain's partial products (>= 1)
    lo: float = 1.0  # lower bound of its non-zero factor magnitudes (<= 1)
    fin: bool = True  # the chain's leaves are all finite and unambiguous
    loose: np.ndarray | None = None  # positions (also in amb) where only finiteness is compared

    @property
    def dtype(self) -> np.dtype:
        return self.ref.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.ref.shape


def leaf_val(arr: np.ndarray) -> Val:
    ref = np.asarray(arr)
    v = Val(ref, False, finite_abs(ref), np.zeros(ref.shape, bool), True)
    chain_reset(v)
    return v


def chain_reset(v: Val) -> None:
    """The value starts a new multilinear chain (it is one operand of any later network)."""
    a = finite_abs(v.ref)
    v.m = 1
    v.hi = max(1.0, float(a.max())) if a.size else 1.0
    nz = a[a > 0]
    v.lo = min(1.0, float(nz.min())) if nz.size else 1.0
    v.fin = not (nonfinite(v.ref).any() or v.amb.any())


# ---------------------------------------------------------------------------------------------
# programs


@dataclass
class Step:
    """``code`` is a template over operand names ``{0}``, ``{1}``...; ``kind`` is the step's
    family: 'input', 'ew' (elementwise), 'lin' (linear in each operand: movement, sum, mean,
    contractions, concatenate), 'prod', 'maxmin' (reductions), 'error' (NumPy rejects it)."""

    code: str
    args: tuple[int, ...]
    kind: str
    op: str = ""
    array: int = -1  # for 'input' steps: index into Program.arrays
    mult: str = ""  # multilinear role: 'mul', 'scale', 'pass' or '' (chain breaks)
    summed: int = 1  # number of terms summed per output element (multilinear ops)
    # a label summed that only one operand carries: tenloom sums it on that operand before the
    # product (trace pre-reduction, as numpy.einsum(optimize=True) and cotengra do), which
    # turns NumPy's 0 * inf = nan into (sum of x) * inf: a tree-dependent value
    presum: bool = False
    scalar: complex = 1.0  # the Python scalar factor of a 'scale' step


@dataclass
class Program:
    arrays: list = field(default_factory=list)  # the input arrays, as passed to asarray
    layouts: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # Steps; pool index = index among non-error steps
    vals: list = field(default_factory=list)  # Val per pool entry
    pool_steps: list = field(default_factory=list)  # step index of each pool entry
    errors: list = field(default_factory=list)  # (step, numpy's exception) NumPy rejected
    unsupported: list = field(
        default_factory=list
    )  # (step, dtype) NumPy's result dtype unsupported
    outputs: list = field(default_factory=list)  # pool indices to evaluate

    def line(self, step: Step, i: int | None = None, xp: str = "xp") -> str:
        code = step.code.format(*(f"v{j}" for j in step.args)).replace("xp.", f"{xp}.")
        if step.kind == "input":
            code = f"{xp}.asarray(a{step.array})"
        return code if i is None else f"v{i} = {code}"

    def source(self, xp: str = "tl") -> str:
        """The program as a runnable snippet (tenloom's names when ``xp='tl'``)."""
        out = [
            "import numpy as np",
            "import tenloom as tl",
            "nan, inf = float('nan'), float('inf')",
            "def readonly(a):",
            "    a = a[...]",
            "    a.flags.writeable = False",
            "    return a",
        ]
        for k, arr in enumerate(self.arrays):
            out.append(f"a{k} = {render_array(arr, self.layouts[k])}")
        for i, s in enumerate(self.pool_steps):
            out.append(self.line(self.steps[s], i, xp))
        outs = ", ".join(f"v{i}" for i in self.outputs)
        out.append(f"print(tl.evaluate({outs}))")
        return "\n".join(out)


def render_array(arr: np.ndarray, layout: str) -> str:
    base = np.ascontiguousarray(arr)
    flat = base.reshape(-1).tolist()
    if base.dtype.kind == "c":
        items = ", ".join(f"complex({z.real!r}, {z.imag!r})" for z in flat)
    else:
        items = ", ".join(repr(z) for z in flat)
    dt = native(base.dtype).name
    text = f"np.array([{items}], dtype='{dt}').reshape({base.shape})"
    if layout == "fortran":
        text = f"np.asfortranarray({text})"
    elif layout == "negative":
        text = f"np.ascontiguousarray({text}[{'::-1, ' * base.ndim}])[{'::-1, ' * base.ndim}]"
    elif layout == "strided":
        text = f"np.repeat({text}, 2, axis=-1)[..., ::2]" if base.ndim else text
    elif layout == "readonly":
        text = f"readonly({text})"
    elif layout == "bigendian":
        text = f"{text}.astype('>{base.dtype.str[1:]}')"
    return text


def make_layout(base: np.ndarray, layout: str) -> np.ndarray:
    """``base``'s values in the given memory layout (a view where the layout needs one)."""
    if layout == "fortran":
        return np.asfortranarray(base)
    if layout == "negative" and base.ndim:
        idx = (slice(None, None, -1),) * base.ndim
        return np.ascontiguousarray(base[idx])[idx]
    if layout == "strided" and base.ndim:
        return np.repeat(base, 2, axis=-1)[..., ::2]
    if layout == "readonly":
        arr = np.array(base)
        view = arr[...]
        view.flags.writeable = False
        return view
    if layout == "bigendian" and base.dtype.itemsize > 1:
        return base.astype(base.dtype.newbyteorder(">"))
    return np.array(base)


# ---------------------------------------------------------------------------------------------
# element pools


def float_pool(dt: np.dtype, special: bool) -> list:
    fi = np.finfo(dt)
    base = [1.0, 0.0, -1.0, 2.0, 0.5, -1.5, 3.0, -0.25, 0.1, -2.0, 1.75, -0.0]
    if special:
        base += [
            math.nan,
            math.inf,
            -math.inf,
            float(fi.max) / 2,
            -float(fi.max),
            float(fi.smallest_subnormal),
            -float(fi.tiny),
            1e4 if dt.itemsize > 2 else 300.0,
        ]
    return base


def element_strategy(dt: np.dtype, special: bool):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        ii = np.iinfo(dt)
        vals = [v for v in (1, 0, 2, -1, 3, -2, 5, -7, 4) if ii.min <= v <= ii.max]
        if special:
            vals += [int(ii.max), int(ii.min), int(ii.max) - 1, int(ii.min) + (ii.min < 0)]
        return st.sampled_from(vals)
    width = {2: 16, 4: 32, 8: 64}
    if dt.kind == "f":
        pool = st.sampled_from(float_pool(dt, special))
        return st.one_of(pool, st.floats(-8, 8, width=width[dt.itemsize]))
    rdt = np.dtype(real_name(dt))
    part = st.one_of(
        st.sampled_from(float_pool(rdt, special)), st.floats(-8, 8, width=width[rdt.itemsize])
    )
    return st.builds(complex, part, part)


DIMS = (2, 3, 1, 2, 4, 3, 1, 2, 3, 4, 2, 3, 1, 2, 4, 0)  # zero-size: 1 in 16


def draw_array(data, shape: tuple[int, ...], dt: np.dtype, special: bool) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    elems = data.draw(st.lists(element_strategy(dt, special), min_size=n, max_size=n))
    with quiet():
        return np.array(elems, dtype=object).astype(dt).reshape(shape) if n else np.zeros(shape, dt)


# ---------------------------------------------------------------------------------------------
# running a step under NumPy and analysing its result

_CODE_CACHE: dict[str, object] = {}


def run_code(step: Step, operands: list, xp) -> object:
    """Evaluate ``step`` with ``operands`` bound to its argument names and ``xp`` the namespace."""
    text = step.code.format(*(f"v{j}" for j in range(len(step.args))))
    code = _CODE_CACHE.get(text)
    if code is None:
        code = _CODE_CACHE[text] = compile(text, "<fuzz step>", "eval")
    ns = {"xp": xp, "np": np, "nan": math.nan, "inf": math.inf}
    for j, x in enumerate(operands):
        ns[f"v{j}"] = x
    return eval(code, ns)  # noqa: S307 - our own generated one-liners


class _NumPyOracle:
    """NumPy as the oracle, except ``tensordot``: NumPy's is a BLAS call that loses IEEE values
    (``np.dot`` of an (n, 1) by a (1, 1) matrix scales by the one element, so (1+nanj) * False
    comes out 0j), where its ``einsum`` of the same contraction keeps them; the oracle for one
    pairwise contraction is NumPy's einsum (docs/reliability.md). NumPy's tensordot still
    decides the errors and the dtype."""

    def __getattr__(self, name: str):
        return getattr(np, name)

    @staticmethod
    def tensordot(a, b, axes=2):
        ref = np.tensordot(a, b, axes)
        a, b = np.asarray(a), np.asarray(b)
        if isinstance(axes, (int, np.integer)):
            xa, xb = list(range(a.ndim - axes, a.ndim)), list(range(axes))
        else:
            xa, xb = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
        xa, xb = [x % a.ndim for x in xa], [x % b.ndim for x in xb]
        la, lb = list(range(a.ndim)), list(range(a.ndim, a.ndim + b.ndim))
        for i, j in zip(xa, xb):
            lb[j] = la[i]
        out = [lab for k, lab in enumerate(la) if k not in xa]
        out += [lab for k, lab in enumerate(lb) if k not in xb]
        return np.einsum(a, la, b, lb, out).astype(ref.dtype, copy=False)


ORACLE = _NumPyOracle()


class Reject(Exception):
    """The drawn step is not usable (not an error of either library)."""


# ops whose result is correctly rounded (so exact from exact inputs), except as noted below
EXACT_OPS = frozenset(
    [
        "neg",
        "abs",
        "sqrt",
        "add",
        "sub",
        "mul",
        "truediv",
        "floordiv",
        "mod",
        # not "pow": IEEE does not require a correctly rounded pow, and device libraries differ
        # from the host's by an ulp or two (CUDA's double pow: 2 ulp)
        "maximum",
        "minimum",
        "clip",
        "where",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and",
        "or",
        "xor",
        "invert",
        "sign",
        "astype",
        "real",
        "imag",
        "conj",
    ]
)
# ... but not for complex operands (no correctly rounded complex multiply/divide/abs/...)
COMPLEX_INEXACT = frozenset(["abs", "sqrt", "mul", "truediv", "pow", "sign", "floordiv", "mod"])
# ops that keep the sign of a zero NumPy-defined
ZSIGN_OPS = frozenset(
    [
        "neg",
        "abs",
        "sqrt",
        "add",
        "sub",
        "mul",
        "truediv",
        "astype",
        "real",
        "imag",
        "conj",
        "where",
    ]
)
CONTRACTIONS = frozenset(["sum", "mean", "einsum", "matmul", "tensordot", "trace", "outer"])
# float16 arithmetic may run at float32 inside a fused region (rounded once, at the end)
F16_ARITH = frozenset(["abs", "sqrt", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow"])


def _promote(x):
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x


def _broadcast(mask: np.ndarray, shape) -> np.ndarray:
    try:
        return np.broadcast_to(mask, shape)
    except ValueError:  # e.g. a reduction of the operand: conservatively all
        return np.broadcast_to(mask.any(), shape)


def analyse_ew(step: Step, ins: list[Val], out: np.ndarray) -> Val:
    dts = [v.dtype for v in ins] + [out.dtype]
    exact_op = step.op in EXACT_OPS
    if any(d.kind == "c" for d in dts) and step.op in COMPLEX_INEXACT:
        exact_op = False
    if any(d == np.float16 for d in dts) and step.op in F16_ARITH:
        exact_op = False
    amb = np.zeros(out.shape, bool)
    for v in ins:
        amb = amb | _broadcast(v.amb, out.shape)
    if step.op == "astype" and ins[0].dtype.kind in "fc" and out.dtype.kind in "iu":
        # float -> int of a non-finite or out-of-range value: undefined in NumPy (C casts)
        x = np.real(ins[0].ref).astype(np.float64)
        ii = np.iinfo(out.dtype)
        with quiet():
            bad = ~np.isfinite(x) | (x <= float(ii.min) - 1) | (x >= float(ii.max) + 1)
        amb = amb | bad
    if exact_op and not any(v.approx for v in ins):
        zs = step.op in ZSIGN_OPS and all(v.zsign for v in ins)
        return Val(out, False, finite_abs(out), np.array(amb), zs)
    approx = out.dtype.kind in "fc"
    mag = finite_abs(out)
    with quiet():
        base = np.asarray(run_code(step, [_promote(v.ref) for v in ins], ORACLE))
        for j, v in enumerate(ins):
            if not v.approx or v.dtype.kind not in "fc":
                continue
            delta = rtol(v.dtype) * v.mag + atol(v.dtype)
            shifts = [delta, -delta] + ([1j * delta, -1j * delta] if v.dtype.kind == "c" else [])
            for d in shifts:
                moved = [_promote(w.ref) for w in ins]
                moved[j] = moved[j] + d
                try:
                    p = np.asarray(run_code(step, moved, ORACLE))
                except Exception:
                    return Val(out, approx, mag, np.ones(out.shape, bool), False)
                if p.shape != out.shape:
                    p = np.broadcast_to(p, out.shape)
                b = np.broadcast_to(base, out.shape)
                if out.dtype.kind in "biu":
                    amb = amb | (p != b)
                else:
                    amb = amb | (np.isnan(p) != np.isnan(b)) | (np.isinf(p) != np.isinf(b))
                    diff = np.array(np.abs(p - b), dtype=np.float64)
                    diff[~np.isfinite(diff)] = 0.0
                    mag = mag + diff / rtol(out.dtype)
        if out.dtype.kind in "fc" and any(d == np.float16 for d in dts):
            # float16 computed at higher precision inside a fused region overflows later
            b = np.broadcast_to(base, out.shape)
            amb = amb | (nonfinite(out) != nonfinite(b))
    mag = np.array(mag, dtype=np.float64)
    if approx:
        amb = amb | (mag > fmax(out.dtype) / 4)
    return Val(out, approx, mag, np.array(amb), False)


def _mag_in(v: Val, out: np.ndarray) -> np.ndarray:
    """``v``'s magnitude in units of ``out``'s tolerance: an approximate float32 value widened
    into a float64 result keeps float32's error (tolerances are rtol(dtype) * magnitude)."""
    if v.approx and v.dtype.kind in "fc" and out.dtype.kind in "fc":
        return v.mag * max(1.0, rtol(v.dtype) / rtol(out.dtype))
    return v.mag


def analyse_lin(step: Step, ins: list[Val], out: np.ndarray, reducing: bool) -> Val:
    with quiet():
        mags = [_mag_in(v, out) for v in ins]
        mag = np.array(run_code(step, mags, ORACLE), dtype=np.float64)
        amb = np.zeros(out.shape, bool)
        for j, v in enumerate(ins):
            if not v.amb.any():
                continue
            ones = [
                np.ones(w.shape) if k != j else v.amb.astype(np.float64) for k, w in enumerate(ins)
            ]
            amb = amb | (np.asarray(run_code(step, ones, ORACLE)) != 0)
    approx = any(v.approx for v in ins) or (
        out.dtype.kind in "fc" and (reducing or step.op in CONTRACTIONS)
    )
    # movement ops keep the sign of a zero; contractions start from +0 (NumPy's einsum does)
    zsign = len(ins) == 1 and step.op not in CONTRACTIONS and all(v.zsign for v in ins)
    if approx and out.dtype.kind in "fc":
        amb = amb | ~np.isfinite(mag) | (mag > fmax(out.dtype) / 4)
    mag[~np.isfinite(mag)] = 0.0
    loose = None
    if out.dtype.kind == "c" and step.op in CONTRACTIONS and step.summed > 1:
        # complex sums of products with inf: which part is nan and which inf depends on the
        # kernel (NumPy's own matmul (BLAS) and einsum differ); only non-finiteness is defined
        loose = nonfinite(out) & ~amb
        amb = amb | loose
    return Val(out, approx, mag, amb, zsign, loose=loose)


def analyse_reduce(step: Step, v: Val, out: np.ndarray) -> Val:
    with quiet():
        if step.kind == "maxmin":
            # the element picked may be any of those reduced: the largest magnitude bounds it
            largest = Step(step.code.replace("xp.min(", "xp.max("), step.args, step.kind)
            mag = np.array(run_code(largest, [v.mag], ORACLE), dtype=np.float64)
            amb = np.asarray(run_code(step, [v.amb.astype(np.float64)], ORACLE)) != 0
            if v.approx and v.dtype.kind == "c":
                # complex numbers are ordered by real part first: a rounding of one real part
                # can pick another element, whose imaginary part is anything
                amb = np.ones(out.shape, bool)
            return Val(out, v.approx, mag, amb, False)
        # prod: order-dependent over/underflow; mags multiply
        a = finite_abs(v.ref)
        hi = np.asarray(run_code(step, [np.maximum(v.mag, 1.0)], ORACLE), dtype=np.float64)
        lo = np.asarray(run_code(step, [np.where(a > 0, np.minimum(a, 1.0), 1.0)], ORACLE))
        amb = np.asarray(run_code(step, [1.0 - v.amb.astype(np.float64)], ORACLE)) == 0
        approx = out.dtype.kind in "fc"
        mag = np.array(run_code(step, [v.mag], ORACLE), dtype=np.float64)
        if approx:
            tiny = float(np.finfo(out.dtype).tiny)
            amb = amb | ~np.isfinite(hi) | (hi > fmax(out.dtype) / 4) | (lo < tiny * 2**10)
        mag[~np.isfinite(mag)] = 0.0
        return Val(out, approx, mag, amb, False)


def analyse(step: Step, vals: list[Val]) -> Val:
    """Run ``step`` under NumPy and analyse the result; NumPy's exceptions propagate."""
    ins = [vals[j] for j in step.args]
    with quiet():
        out = np.asarray(run_code(step, [v.ref for v in ins], ORACLE))
    if step.kind == "ew":
        v = analyse_ew(step, ins, out)
    elif step.kind == "lin":
        v = analyse_lin(step, ins, out, step.summed != 1 or step.op in ("sum", "mean"))
    else:
        v = analyse_reduce(step, ins[0], out)
    chain_update(step, ins, v)
    return v


def chain_update(step: Step, ins: list[Val], v: Val) -> None:
    if step.mult in ("", "div") or not ins:
        chain_reset(v)
        if step.mult == "div" and len(ins) == 2:  # a / b merges as a * (1/b)
            a, b = ins
            bb = finite_abs(b.ref)
            nz = bb[bb > 0]
            v.m = a.m + 1
            v.hi = a.hi * (max(1.0, 1.0 / float(nz.min())) if nz.size else 1.0)
            v.lo = a.lo * (min(1.0, 1.0 / float(bb.max())) if nz.size else 1.0)
            v.fin = v.fin and a.fin and not nonfinite(b.ref).any()  # v.fin: its own value
    else:
        v.m = sum(w.m for w in ins) + (1 if step.mult == "scale" else 0)
        v.hi = math.prod(w.hi for w in ins) * max(1, step.summed)
        v.lo = math.prod(w.lo for w in ins)
        v.fin = all(w.fin for w in ins) and not any(w.amb.any() for w in ins)
        if step.mult == "scale":
            s = abs(complex(step.scalar))
            v.hi *= max(1.0, s) if math.isfinite(s) else math.inf
            v.lo *= min(1.0, s) if s > 0 else 1.0
            v.fin = v.fin and math.isfinite(s)
    # a sum over a product of two or more factors may be pre-reduced too (x[:, None] * y summed
    # becomes einsum('a,b->') with lone labels): tree-dependent like three or more operands
    chain_sum = step.summed > 1 and ins and max(w.m for w in ins) >= 2 and step.mult != "mul"
    if (v.m >= 3 or step.presum or chain_sum) and v.dtype.kind in "fc":
        tiny = float(np.finfo(v.dtype).tiny)
        if not (v.fin and v.hi <= fmax(v.dtype) / 64 and v.lo >= tiny * 2**20):
            # NaN/inf/overflow through a network of three or more operands, or through a
            # pre-reduced label: order-dependent
            raise Reject("non-finite or extreme values in a tree-dependent network")


# ---------------------------------------------------------------------------------------------
# drawing programs

UNARY = {
    "neg": "(-{0})",
    "abs": "xp.abs({0})",
    "exp": "xp.exp({0})",
    "log": "xp.log({0})",
    "sqrt": "xp.sqrt({0})",
    "sin": "xp.sin({0})",
    "cos": "xp.cos({0})",
    "tanh": "xp.tanh({0})",
    "sign": "xp.sign({0})",
    "conj": "xp.conj({0})",
    "real": "xp.real({0})",
    "imag": "xp.imag({0})",
    "invert": "(~{0})",
}
BINARY = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "truediv": "({a} / {b})",
    # NumPy's floor_divide on both sides: tenloom's ``//`` follows the array API standard at
    # infinities (``inf // 2`` is inf, ``1 // -inf`` is -0; NumPy's NaN and -1), tested in
    # tests/test_complex_parts.py
    "floordiv": "xp.floor_divide({a}, {b})",
    "mod": "({a} % {b})",
    "pow": "({a} ** {b})",
    "maximum": "xp.maximum({a}, {b})",
    "minimum": "xp.minimum({a}, {b})",
    "eq": "({a} == {b})",
    "ne": "({a} != {b})",
    "lt": "({a} < {b})",
    "le": "({a} <= {b})",
    "gt": "({a} > {b})",
    "ge": "({a} >= {b})",
    "and": "({a} & {b})",
    "or": "({a} | {b})",
    "xor": "({a} ^ {b})",
}


def scalar_strategy(special: bool, dt=None):
    """A Python scalar operand (weak under NEP 50), biased to the kind of ``dt``."""
    plain = [2, 0.5, -1, True, 3, 1.5, 0, -0.0, 1j, 1 - 2j, False, 1, 2.0, -3.0, 0.0]
    extreme = [
        math.nan,
        math.inf,
        -math.inf,
        2**40,
        300,
        -129,
        1e300,
        1e-320,
        2**63 - 1,
        complex(math.inf, 0),
        70000.0,
        -(2**31),
    ]
    if dt is not None and np.dtype(dt).kind in "iu":
        ii = np.iinfo(dt)
        extreme += [int(ii.max) + 1, int(ii.min) - 1, int(ii.max), int(ii.min)]
    if dt is not None and np.dtype(dt).kind in "fc":
        fi = np.finfo(dt)
        extreme += [float(fi.max), float(fi.max) * 0.75, float(fi.tiny) / 4]
    if not special:
        return st.sampled_from(plain)
    return st.one_of(st.sampled_from(plain), st.sampled_from(extreme))


class Drawer:
    """Draws one program step by step, running each step under NumPy as it goes."""

    def __init__(self, data, special: bool, layouts: bool = True):
        self.data = data
        self.special = special
        self.layouts = layouts
        self.prog = Program()
        self._current = None

    # -- helpers ---------------------------------------------------------------------------
    def draw(self, strategy):
        return self.data.draw(strategy)

    def dtype(self) -> np.dtype:
        return np.dtype(self.draw(st.sampled_from(DTYPES)))

    def shape(self, max_ndim: int = 3) -> tuple[int, ...]:
        nd = self.draw(st.integers(0, max_ndim))
        return tuple(self.draw(st.sampled_from(DIMS)) for _ in range(nd))

    def add_input(self, shape, dt=None) -> int:
        dt = self.dtype() if dt is None else np.dtype(dt)
        base = draw_array(self.data, tuple(shape), dt, self.special)
        layout = self.draw(st.sampled_from(LAYOUTS)) if self.layouts else "c"
        arr = make_layout(base, layout)
        p = self.prog
        p.arrays.append(arr)
        p.layouts.append(layout)
        step = Step("", (), "input", array=len(p.arrays) - 1)
        p.steps.append(step)
        p.vals.append(leaf_val(arr))
        p.pool_steps.append(len(p.steps) - 1)
        return len(p.vals) - 1

    def pick(self, pred=None) -> int | None:
        cands = [i for i, v in enumerate(self.prog.vals) if pred is None or pred(v)]
        if not cands:
            return None
        return self.draw(st.sampled_from(cands[::-1]))

    def like(self, shape) -> tuple[int, ...]:
        """A shape that broadcasts against ``shape`` (dims kept or 1, leading ones dropped)."""
        out = [d if self.draw(st.booleans()) else 1 for d in shape]
        drop = self.draw(st.integers(0, len(out)))
        out = out[drop:]
        if self.draw(st.integers(0, 5)) == 0:
            out = [self.draw(st.sampled_from((2, 1)))] + out
        return tuple(out)

    def dtype_of(self, shape):
        return self._current.dtype if self._current is not None else None

    def other(self, shape) -> str | int:
        """A second operand: an existing value, a fresh input or a Python scalar."""
        how = self.draw(st.sampled_from(["fresh", "scalar", "pool"]))
        if how == "scalar":
            return repr(self.draw(scalar_strategy(self.special, self.dtype_of(shape))))
        if how == "pool":
            j = self.pick(lambda v: _broadcastable(v.shape, shape))
            if j is not None:
                return j
        return self.add_input(self.like(shape))

    # -- one step ---------------------------------------------------------------------------
    def step(self) -> None:
        a = self.pick()
        v = self.prog.vals[a]
        self._current = v
        family = self.draw(
            st.sampled_from(
                [
                    "binary",
                    "unary",
                    "reduce",
                    "index",
                    "move",
                    "contract",
                    "where",
                    "binary",
                    "astype",
                    "join",
                    "contract",
                ]
            )
        )
        step = getattr(self, "step_" + family)(a, v)
        if step is not None:
            self.commit(step)

    def commit(self, step: Step) -> None:
        p = self.prog
        try:
            val = analyse(step, p.vals)
        except Reject:
            return
        except (TypeError, ValueError, IndexError, OverflowError) as e:
            if step.op == "pow":  # integers to negative powers: a value-dependent error
                return
            p.steps.append(Step(step.code, step.args, "error", op=step.op))
            p.errors.append((len(p.steps) - 1, f"{type(e).__name__}: {e}"))
            return
        if native(val.dtype) not in SUPPORTED_SET:
            p.steps.append(Step(step.code, step.args, "error", op=step.op))
            p.unsupported.append((len(p.steps) - 1, val.dtype))
            return
        p.steps.append(step)
        p.vals.append(val)
        p.pool_steps.append(len(p.steps) - 1)

    def binary_code(self, op: str, a: int, other) -> tuple[str, tuple[int, ...], complex]:
        tmpl = BINARY[op]
        if isinstance(other, str):  # a Python scalar, on either side
            if self.draw(st.booleans()):
                return tmpl.format(a="{0}", b=other), (a,), _as_scalar(other)
            return tmpl.format(a=other, b="{0}"), (a,), _as_scalar(other)
        return tmpl.format(a="{0}", b="{1}"), (a, other), 1.0

    def step_binary(self, a, v):
        op = self.draw(st.sampled_from(list(BINARY)))
        y = self.other(v.shape)
        if op == "truediv" and isinstance(y, str):
            y = _in_range(y, v.dtype)
        if op == "pow" and isinstance(y, str) and v.dtype.kind == "c" and y.strip() == "-1":
            # a design difference (docs/reliability.md): NumPy's ** takes np.reciprocal for a
            # complex array to the int -1, tenloom np.power (they differ at infinities)
            y = "-2"
        code, args, s = self.binary_code(op, a, y)
        mult = ""
        if op == "mul":
            mult = "scale" if len(args) == 1 else "mul"
        elif op == "truediv" and code.startswith("({0}"):
            mult = "scale" if len(args) == 1 else "div"
            s = 1 / s if s else math.inf
        return Step(code, args, "ew", op=op, mult=mult, scalar=s)

    def step_unary(self, a, v):
        op = self.draw(st.sampled_from(list(UNARY)))
        if op == "conj" and v.dtype == np.bool_ and "conj-bool" in KNOWN_OPEN:
            op = "neg"
        return Step(UNARY[op], (a,), "ew", op=op, mult="pass" if op in ("neg", "conj") else "")

    def step_where(self, a, v):
        form = self.draw(st.sampled_from(["cond", "clip", "pool"]))
        if form == "clip":
            lo = self.draw(st.one_of(st.none(), scalar_strategy(self.special, v.dtype)))
            hi = self.draw(st.one_of(st.none(), scalar_strategy(self.special, v.dtype)))
            if lo is None and hi is None and "clip-without-bounds" in KNOWN_OPEN:
                hi = 2
            lo = None if lo is None else _as_scalar(_in_range(repr(lo), v.dtype))
            hi = None if hi is None else _as_scalar(_in_range(repr(hi), v.dtype))
            return Step(f"xp.clip({{0}}, {lo!r}, {hi!r})", (a,), "ew", op="clip")
        cmp = self.draw(st.sampled_from(["lt", "ge", "eq", "ne"]))
        s = self.draw(scalar_strategy(self.special, v.dtype))
        y = self.other(v.shape)
        if isinstance(y, str):
            # a design difference (docs/reliability.md): tl.where refuses a Python int outside
            # the array's integer range with a DTypeError, where NumPy 2 casts it unsafely
            # (np.where(c, uint8_array, -129) holds 127); tests/test_reliability_dtypes.py
            # checks the refusal
            y = _in_range(y, v.dtype, always=True)
        cond = BINARY[cmp].format(a="{0}", b=repr(s))
        if isinstance(y, str):
            return Step(f"xp.where({cond}, {{0}}, {y})", (a,), "ew", op="where")
        if form == "pool":
            return Step(f"xp.where({cond}, {{1}}, {{0}})", (a, y), "ew", op="where")
        return Step(f"xp.where({cond}, {{0}}, {{1}})", (a, y), "ew", op="where")

    def step_astype(self, a, v):
        dt = self.dtype()
        both = v.dtype.kind in "fc" and dt.kind in "fc"
        return Step(
            f"xp.astype({{0}}, '{dt.name}')", (a,), "ew", op="astype", mult="pass" if both else ""
        )

    def axes(self, ndim: int):
        if ndim == 0 or self.draw(st.integers(0, 3)) == 0:
            return None
        if self.draw(st.booleans()):
            return self.draw(st.integers(-ndim, ndim - 1))
        k = self.draw(st.integers(1, ndim))
        picked = self.draw(st.permutations(range(ndim)))[:k]
        return tuple(ax - ndim if self.draw(st.booleans()) else ax for ax in picked)

    def step_reduce(self, a, v):
        op = self.draw(st.sampled_from(["sum", "prod", "max", "min", "mean"]))
        axis = self.axes(v.ref.ndim)
        keep = self.draw(st.booleans())
        code = f"xp.{op}({{0}}, axis={axis!r}, keepdims={keep})"
        n = v.ref.size // max(1, int(np.prod(_reduced_shape(v.shape, axis))))
        kind = {"prod": "prod", "max": "maxmin", "min": "maxmin"}.get(op, "lin")
        mult = {"sum": "pass", "mean": "scale"}.get(op, "")
        scalar = 1.0 / n if (op == "mean" and n) else 1.0
        return Step(code, (a,), kind, op=op, mult=mult, summed=max(n, 1), scalar=scalar)

    def step_index(self, a, v):
        parts = []
        nd = v.ref.ndim
        ell = self.draw(st.booleans()) and nd > 0
        for ax in range(nd):
            if ell and ax == nd - 1 and ax > 0:
                parts.append("...")
                break
            n = v.shape[ax]
            kind = self.draw(st.sampled_from(["slice", "slice", "int", "full", "none"]))
            if kind == "none":
                parts.append("None")
            if kind == "int":
                parts.append(str(self.draw(st.integers(-n - 1, n))))
            elif kind == "full":
                parts.append(":")
            else:
                b = st.one_of(st.none(), st.integers(-2 * n - 3, 2 * n + 3))
                start, stop = self.draw(b), self.draw(b)
                stp = self.draw(st.sampled_from([None, -1, 2, -2, 1, 3, -3]))
                parts.append(
                    ("" if start is None else str(start))
                    + ":"
                    + ("" if stop is None else str(stop))
                    + ("" if stp is None else f":{stp}")
                )
        if not parts or self.draw(st.integers(0, 4)) == 0:
            parts.append("None")
        return Step("{0}[" + ", ".join(parts) + "]", (a,), "lin", op="getitem", mult="pass")

    def step_move(self, a, v):
        nd = v.ref.ndim
        op = self.draw(
            st.sampled_from(
                ["reshape", "transpose", "moveaxis", "squeeze", "expand_dims", "broadcast_to", "T"]
            )
        )
        if op == "reshape":
            code = f"xp.reshape({{0}}, {self.reshape_target(v.shape)!r})"
        elif op == "transpose" and nd:
            perm = tuple(self.draw(st.permutations(range(nd))))
            code = f"xp.transpose({{0}}, {perm!r})"
        elif op == "moveaxis" and nd:
            src = self.draw(st.integers(-nd, nd - 1))
            dst = self.draw(st.integers(-nd, nd - 1))
            code = f"xp.moveaxis({{0}}, {src}, {dst})"
        elif op == "squeeze":
            ones = [i for i, d in enumerate(v.shape) if d == 1]
            axis = self.draw(st.sampled_from(ones)) if ones and self.draw(st.booleans()) else None
            code = f"xp.squeeze({{0}}, axis={axis!r})"
        elif op == "expand_dims":
            code = f"xp.expand_dims({{0}}, {self.draw(st.integers(-nd - 1, nd))})"
        elif op == "broadcast_to":
            shape = tuple(self.draw(st.sampled_from((d, 2, 3))) if d == 1 else d for d in v.shape)
            if self.draw(st.booleans()):
                shape = (self.draw(st.sampled_from((2, 0, 1))),) + shape
            code = f"xp.broadcast_to({{0}}, {shape!r})"
        else:
            code = "xp.transpose({0})"
        return Step(code, (a,), "lin", op=op, mult="pass")

    def reshape_target(self, shape) -> tuple[int, ...]:
        size = int(np.prod(shape, dtype=np.int64))
        if size == 0:
            dims = [0] + [
                self.draw(st.sampled_from((1, 2, 3))) for _ in range(self.draw(st.integers(0, 2)))
            ]
            return tuple(self.draw(st.permutations(dims)))
        factors = []
        n = size
        for p in (2, 3, 5, 7):
            while n % p == 0:
                factors.append(p)
                n //= p
        if n > 1:
            factors.append(n)
        k = self.draw(st.integers(1, 4))
        dims = [1] * k
        for f in factors:
            dims[self.draw(st.integers(0, k - 1))] *= f
        if self.draw(st.booleans()):
            dims[self.draw(st.integers(0, k - 1))] = -1
        return tuple(dims)

    def step_join(self, a, v):
        nd = v.ref.ndim
        stack = self.draw(st.booleans()) or nd == 0
        n_more = self.draw(st.integers(1, 2))
        if stack:
            others = [
                self.add_input(v.shape) if self.draw(st.booleans()) else a for _ in range(n_more)
            ]
            axis = self.draw(st.integers(-nd - 1, nd))
            fn = "stack"
        else:
            axis = self.draw(st.integers(-nd, nd - 1))
            others = []
            for _ in range(n_more):
                shape = list(v.shape)
                shape[axis] = self.draw(st.sampled_from((1, 2, 0, 3)))
                others.append(self.add_input(tuple(shape)))
            fn = "concatenate"
        names = ", ".join(f"{{{i}}}" for i in range(1 + len(others)))
        return Step(f"xp.{fn}([{names}], axis={axis})", (a, *others), "lin", op=fn)

    def step_contract(self, a, v):
        form = self.draw(
            st.sampled_from(
                ["einsum", "einsum", "matmul", "tensordot", "trace", "outer", "diagonal"]
            )
        )
        nd = v.ref.ndim
        if form == "matmul" and nd:
            k = v.shape[-1]
            shape = self.draw(st.sampled_from([(k,), (k, 2), (k, 3), (2, k, 1)]))
            b = self.add_input(shape)
            left = self.draw(st.booleans())
            code = "({0} @ {1})" if left else "xp.matmul({0}, {1})"
            return Step(code, (a, b), "lin", op="matmul", mult="mul", summed=max(k, 1))
        if form == "tensordot":
            k = self.draw(st.integers(0, nd))
            shape = v.shape[nd - k :] + self.shape(1)
            b = self.add_input(shape)
            summed = int(np.prod(v.shape[nd - k :], dtype=np.int64))
            return Step(
                f"xp.tensordot({{0}}, {{1}}, axes={k})",
                (a, b),
                "lin",
                op="tensordot",
                mult="mul",
                summed=max(summed, 1),
            )
        if form in ("trace", "diagonal") and nd >= 2:
            ax1, ax2 = self.draw(st.permutations(range(nd)))[:2]
            off = self.draw(st.integers(-2, 2))
            n1, n2 = v.shape[ax1], v.shape[ax2]
            diag = max(0, min(n1 + min(off, 0), n2 - max(off, 0)))
            code = f"xp.{form}({{0}}, offset={off}, axis1={ax1}, axis2={ax2})"
            summed = max(diag, 1) if form == "trace" else 1
            return Step(code, (a,), "lin", op=form, mult="pass", summed=summed)
        if form == "outer":
            b = self.add_input((self.draw(st.sampled_from(DIMS)),))
            return Step("xp.outer({0}, {1})", (a, b), "lin", op="outer", mult="mul")
        return self.einsum(a, v)

    def einsum(self, a, v):
        letters = "abcdefgh"
        sizes: dict[str, int] = {}

        def label_for(size):
            same = [c for c, s in sizes.items() if s == size]
            if same and self.draw(st.integers(0, 2)) > 0:
                return self.draw(st.sampled_from(same))
            c = letters[len(sizes)] if len(sizes) < len(letters) else None
            if c is None:
                return self.draw(st.sampled_from(same)) if same else None
            sizes[c] = size
            return c

        subs = []
        labs = [label_for(d) for d in v.shape]
        if None in labs:
            return None
        subs.append("".join(labs))
        args = [a]
        for _ in range(self.draw(st.integers(0, 2))):
            nd = self.draw(st.integers(0, 3))
            labs = []
            for _ in range(nd):
                if sizes and self.draw(st.booleans()):
                    labs.append(self.draw(st.sampled_from(sorted(sizes))))
                else:
                    lab = label_for(self.draw(st.sampled_from(DIMS)))
                    if lab is None:
                        return None
                    labs.append(lab)
            subs.append("".join(labs))
            j = self.pick(lambda w, s=tuple(sizes[c] for c in labs): w.shape == s)
            if j is None or self.draw(st.booleans()):
                j = self.add_input(tuple(sizes[c] for c in labs))
            args.append(j)
        used = sorted(set("".join(subs)))
        out = [c for c in self.draw(st.permutations(used)) if self.draw(st.booleans())]
        spec = ",".join(subs) + "->" + "".join(out)
        summed = int(np.prod([sizes[c] for c in used if c not in out], dtype=np.int64))
        presum = len(subs) > 1 and any(
            c not in out and sum(c in t for t in subs) == 1 and sizes[c] > 1 for c in used
        )
        names = ", ".join(f"{{{i}}}" for i in range(len(args)))
        return Step(
            f"xp.einsum('{spec}', {names})",
            tuple(args),
            "lin",
            op="einsum",
            mult="mul" if len(args) > 1 else "pass",
            summed=max(summed, 1),
            presum=presum,
        )


def _in_range(text: str, dt: np.dtype, always: bool = False) -> str:
    """The scalar ``text``, or 2 in place of an int outside ``dt``'s range while
    "weak-int-out-of-range" is in KNOWN_OPEN (or ``always``)."""
    x = _as_scalar(text)
    out_of_range = type(x) is int and np.dtype(dt).kind in "iu"
    out_of_range = out_of_range and not np.iinfo(dt).min <= x <= np.iinfo(dt).max
    if out_of_range and (always or "weak-int-out-of-range" in KNOWN_OPEN):
        return "2"
    return text


def _as_scalar(text: str):
    return eval(text, {"nan": math.nan, "inf": math.inf})  # noqa: S307


def _broadcastable(s1, s2) -> bool:
    try:
        np.broadcast_shapes(s1, s2)
        return True
    except ValueError:
        return False


def _reduced_shape(shape, axis):
    if axis is None:
        return ()
    axes = (axis,) if isinstance(axis, int) else axis
    axes = {ax % len(shape) for ax in axes} if shape else set()
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def draw_program(
    data, *, layouts: bool = True, special: bool | None = None, max_steps: int = MAX_STEPS
) -> Program:
    """Draw a program: 1-2 inputs, then up to ``max_steps`` steps, then the outputs."""
    if special is None:
        special = data.draw(st.booleans(), label="special values")
    d = Drawer(data, special, layouts)
    for _ in range(data.draw(st.integers(1, 2))):
        d.add_input(d.shape())
    for _ in range(data.draw(st.integers(1, max_steps))):
        d.step()
    p = d.prog
    last = len(p.vals) - 1
    p.outputs = [i for i in range(last) if data.draw(st.integers(0, 3)) == 0] + [last]
    return p
