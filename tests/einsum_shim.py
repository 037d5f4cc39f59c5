"""pytest plugin: run NumPy's and opt_einsum's own einsum tests, in place, against tenloom.

    python -m pytest -p einsum_shim --einsum-shim-report=REPORT.json \\
        --pyargs numpy._core.tests.test_einsum opt_einsum.tests.test_contract \\
        opt_einsum.tests.test_edge_cases opt_einsum.tests.test_input

(with this folder on ``PYTHONPATH``; ``tests/test_external_suites.py`` runs exactly that and
checks the report). The test modules stay where the installed packages put them; this plugin
changes only the names *those modules* import:

* ``numpy._core.tests.test_einsum``: its ``np`` is a proxy whose ``einsum`` is :func:`einsum`
  below (tenloom) and whose every other attribute is NumPy's (``np.einsum_path``, ``np.dot``
  and ``numpy.testing`` stay NumPy's: they are the oracles).
* ``opt_einsum.tests.test_*``: ``contract`` and ``contract_expression`` are :func:`contract` and
  :func:`contract_expression` below; ``contract_path`` and the modules' ``np.einsum`` stay
  opt_einsum's and NumPy's (there they are the oracles).

``numpy.einsum`` itself is never patched (tenloom's CPU kernels call it). The shims convert the
arguments as a user would (``tl.einsum(*args).evaluate(optimize=...)``; a compiled plan per
dtype signature for ``contract_expression``) and never fall back to NumPy. After each tenloom
result they also run ``numpy.einsum`` on the same arguments, only to compare (value and dtype):
opt_einsum's tests mostly compare ``contract(optimize=False)`` with ``contract(optimize=X)``,
both tenloom here, so a wrong answer common to both would otherwise pass. Disagreements go to
the report's ``mismatches`` (Python-scalar operands included: ``tl.einsum``, like
``numpy.einsum``, makes them int64/float64/complex128 arrays rather than weak scalars).

Keyword arguments tenloom has no counterpart for (docs/reliability.md, "Design differences"):

* ``out=``: tenloom returns new arrays. The shim writes the result into ``out`` with
  ``out[...] = result`` and returns ``out``, as a user would (NumPy's assignment casting, which
  is also what numpy.einsum's optimized path does); a non-array ``out`` is a TypeError, a
  wrong shape a ValueError (NumPy's types).
* ``dtype=``: routed to ``tl.astype`` on each operand (tenloom checks the dtype) where
  ``numpy.can_cast(operand dtype, dtype, casting)`` allows it, NumPy's rule for einsum's
  ``dtype=``; an operand tenloom cannot hold (object, long double) is cast on the host first.
* ``casting=``: checked against NumPy's five names (ValueError otherwise) and applied to
  ``dtype=`` as above.
* ``order=``: tenloom picks result layouts itself; the shim converts the result with
  ``numpy.asarray(order=...)`` ("K" leaves it as tenloom made it; "A" is "F" when every array
  operand is Fortran-contiguous).
* ``optimize=``: NumPy's True means greedy, opt_einsum's True "auto"; a search's name is passed
  through (tenloom takes its own and cotengra's and opt_einsum's preset names). An explicit
  path (``["einsum_path", (0, 1), ...]`` or a list of pairs) has no tenloom counterpart:
  tenloom picks its own order ("auto").
* ``use_blas=`` (tenloom decides what becomes a GEMM) is accepted and ignored; opt_einsum's
  ``memory_limit=`` and ``backend=`` are not routed (NotImplementedError; these suites do not
  use them).

``contract_expression`` keeps opt_einsum's own API rules (no ``optimize=False``, no ``out=``
when building, exactly N arrays when called, errors while evaluating re-raised as
"Internal error while evaluating `ContractExpression`"): they belong to the wrapper the shim
stands in for. Shapes, labels and dtypes are checked by tenloom.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import types
from collections import Counter
from typing import Any

import numpy
import pytest

import tenloom as tl

# test module (by file: pytest imports numpy's as plain ``test_einsum``, its folder having no
# __init__.py) -> which of its names are routed to tenloom
_NUMPY_DIR = os.path.dirname(os.path.realpath(numpy.__file__))
_OPT_EINSUM_DIR = os.path.dirname(os.path.realpath(importlib.util.find_spec("opt_einsum").origin))
TARGETS = {
    os.path.join(_NUMPY_DIR, "_core", "tests", "test_einsum.py"): "numpy",
    os.path.join(_OPT_EINSUM_DIR, "tests", "test_contract.py"): "opt_einsum",
    os.path.join(_OPT_EINSUM_DIR, "tests", "test_edge_cases.py"): "opt_einsum",
    os.path.join(_OPT_EINSUM_DIR, "tests", "test_input.py"): "opt_einsum",
}
_BASENAMES = {os.path.basename(p)[:-3] for p in TARGETS}
LOADED: dict[str, types.ModuleType] = {}  # file -> the test module, once imported

_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
# opt_einsum's optimize= names kept by --einsum-shim-optimize-subset (the others are the same
# searches with other budgets: auto-hq, eager, opportunistic, random-greedy-128,
# dynamic-programming, branch-all, branch-1)
_CI_OPTIMIZE = ("auto", "greedy", "optimal", "dp", "branch-2", "random-greedy")

# ---- bookkeeping: what was called, from which test, and what disagreed with NumPy -----------

_STATE = threading.local()
CALLS: Counter = Counter()  # entry point -> calls routed to tenloom
TESTS_CALLING: Counter = Counter()  # nodeid -> calls routed while that test ran
CHECKED: Counter = Counter()  # "agree" / "numpy-rejects" / "mismatch"
MISMATCHES: list[dict] = []
NUMPY_REJECTS: list[dict] = []  # examples: calls numpy.einsum refuses and tenloom accepts
_OUTCOMES: dict[str, dict] = {}  # nodeid -> {"outcome", "message"}


def _current_test() -> str:
    return getattr(_STATE, "nodeid", "<no test>")


def _describe(args: tuple) -> str:
    parts = []
    for a in args:
        if isinstance(a, numpy.ndarray):
            parts.append(f"array{a.shape}:{a.dtype}")
        elif isinstance(a, str):
            parts.append(repr(a))
        else:
            text = repr(a)
            parts.append(text if len(text) < 60 else text[:57] + "...")
    return "(" + ", ".join(parts) + ")"


def _tolerance(dt: numpy.dtype) -> float | None:
    if dt.kind in "fc":
        return {2: 2e-2, 4: 2e-4, 8: 2e-4, 16: 1e-9}.get(dt.itemsize, 1e-9)
    return None  # exact


def _problem(got: numpy.ndarray, ref: numpy.ndarray) -> str | None:
    """How tenloom's result differs from NumPy's (dtype, shape, values), or None."""
    if got.dtype != ref.dtype:
        return f"dtype {got.dtype}, NumPy {ref.dtype}"
    if got.shape != ref.shape:
        return f"shape {got.shape}, NumPy {ref.shape}"
    rtol = _tolerance(ref.dtype)
    if rtol is None:
        ok = numpy.array_equal(got, ref)
    else:
        finite = numpy.isfinite(ref)
        scale = float(numpy.max(numpy.abs(ref[finite]), initial=1.0))
        # equal_nan; +inf and -inf, and NaN against a number, still differ
        ok = numpy.allclose(got, ref, rtol=rtol, atol=rtol * scale, equal_nan=True)
    if ok:
        return None
    text = f"values differ: tenloom {got!r}, NumPy {ref!r}"
    return text if len(text) < 400 else text[:400] + "..."


def _operand_positions(args: tuple) -> range:
    if isinstance(args[0], str):
        return range(1, len(args))
    return range(0, len(args) - len(args) % 2, 2)


def _reference(args: tuple, kwargs: dict) -> numpy.ndarray | None:
    try:
        with numpy.errstate(all="ignore"):
            return numpy.asarray(numpy.einsum(*args, **kwargs))
    except Exception:  # noqa: BLE001 - NumPy refusing what tenloom accepts is not a mismatch
        return None


def _compare(entry: str, args: tuple, kwargs: dict, result: Any) -> None:
    """Check tenloom's result against numpy.einsum on the same arguments (never returned)."""
    ref = _reference(args, kwargs)
    if ref is None:
        CHECKED["numpy-rejects"] += 1
        if len(NUMPY_REJECTS) < 20:
            NUMPY_REJECTS.append({"test": _current_test(), "call": _describe(args)})
        return
    got = numpy.asarray(result)
    problem = _problem(got, ref)
    if problem is None:
        CHECKED["agree"] += 1
        return
    record = {
        "test": _current_test(),
        "entry": entry,
        "call": _describe(args) + (f" {kwargs}" if kwargs else ""),
        "problem": problem,
    }
    CHECKED["mismatch"] += 1
    MISMATCHES.append(record)


def _count(entry: str) -> None:
    CALLS[entry] += 1
    TESTS_CALLING[_current_test()] += 1


# ---- argument conversion: what a user porting NumPy / opt_einsum code to tenloom writes -------


def _optimize_option(optimize: Any, true_means: str) -> Any:
    """NumPy's / opt_einsum's ``optimize=`` as tenloom's: booleans as each library means them,
    a path-search name passed through (tenloom takes cotengra's and opt_einsum's names and
    rejects others), an explicit path as "auto" (tenloom has no explicit paths)."""
    if optimize is False:
        return False
    if optimize is True or optimize is None:
        return true_means
    if isinstance(optimize, (list, tuple)):
        return "auto"  # an explicit path: tenloom chooses its own order (a design difference)
    return optimize


def _check_casting(casting: Any) -> None:
    if casting not in _CASTINGS:
        raise ValueError(f"casting must be one of {_CASTINGS}, got {casting!r}")


def _check_order(order: Any) -> None:
    if not isinstance(order, str) or order.upper() not in ("C", "F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', 'K', got {order!r}")


def _cast_operands(args: tuple, dtype: Any, casting: str) -> tuple:
    """``dtype=``: each operand cast with ``tl.astype`` (tenloom checks the dtype) where NumPy's
    casting rule for einsum's ``dtype=`` allows it. An operand of a dtype tenloom cannot hold
    (object, long double) is cast on the host first, as a user would have to."""
    out = list(args)
    for k in _operand_positions(args):
        src = numpy.asarray(args[k])
        try:
            operand = tl.asarray(args[k])
        except tl.DTypeError:
            operand = tl.asarray(src.astype(numpy.dtype(dtype), casting=casting))
        cast = tl.astype(operand, dtype)
        if not numpy.can_cast(src.dtype, cast.dtype, casting):
            raise TypeError(
                f"einsum shim: cannot cast operand {k} from {src.dtype} to {cast.dtype} with "
                f"casting={casting!r}"
            )
        out[k] = cast
    return tuple(out)


def _finish(result: numpy.ndarray, args: tuple, out: Any, order: str) -> Any:
    order = order.upper()
    if order == "A":
        arrays = [a for a in args if isinstance(a, numpy.ndarray)]
        order = "F" if arrays and all(a.flags.f_contiguous for a in arrays) else "C"
    if order in ("C", "F"):
        result = numpy.asarray(result, order=order)
    if out is None:
        return result
    if result.shape != out.shape:
        raise ValueError(f"out has shape {out.shape}, the result has shape {result.shape}")
    out[...] = result  # what a user writes (NumPy's assignment casting, as einsum's optimized path)
    return out


def _check_out(out: Any) -> None:
    if out is not None and not isinstance(out, numpy.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")


def einsum(
    *operands: Any,
    out: Any = None,
    dtype: Any = None,
    order: str = "K",
    casting: str = "safe",
    optimize: Any = False,
) -> Any:
    """``numpy.einsum``'s signature, computed by tenloom."""
    return _route("numpy.einsum", operands, out, dtype, order, casting, optimize, "greedy")


def _route(entry, operands, out, dtype, order, casting, optimize, default) -> Any:
    """One einsum call through tenloom, checked against numpy.einsum (``entry`` names it)."""
    _count(entry)
    _check_out(out)
    _check_order(order)
    _check_casting(casting)
    option = _optimize_option(optimize, default)
    args = operands if dtype is None else _cast_operands(operands, dtype, casting)
    result = tl.einsum(*args).evaluate(optimize=option)
    ref_kwargs = {} if dtype is None else {"dtype": dtype, "casting": casting}
    _compare(entry, operands, ref_kwargs, result)
    return _finish(result, operands, out, order)


def contract(
    *operands: Any,
    out: Any = None,
    dtype: Any = None,
    order: str = "K",
    casting: str = "safe",
    use_blas: bool = True,
    optimize: Any = True,
    memory_limit: Any = None,
    backend: str = "auto",
) -> Any:
    """``opt_einsum.contract``'s signature, computed by tenloom."""
    if memory_limit is not None or backend not in ("auto", "numpy"):
        raise NotImplementedError("einsum shim: memory_limit= and backend= are not routed")
    return _route("opt_einsum.contract", operands, out, dtype, order, casting, optimize, "auto")


class ContractExpression:
    """``opt_einsum.contract_expression``'s object: a tenloom plan compiled per dtype signature
    (placeholders of the declared shapes; ``constants=`` become constants of the graph)."""

    def __init__(self, args: tuple, constants: Any, optimize: Any) -> None:
        self.args = args
        self.string_form = isinstance(args[0], str)
        self.positions = (
            list(range(1, len(args)))
            if self.string_form
            else list(range(0, len(args) - len(args) % 2, 2))
        )
        self.constants = set(constants or ())
        self.num_args = len(self.positions) - len(self.constants)
        self.optimize = optimize
        self.plans: dict[tuple, Any] = {}
        self.text = args[0] if self.string_form else repr(args[1::2])
        # trace once in float64 now: tenloom's shape checks run at build time, as opt_einsum's do
        self._build(("float64",) * self.num_args)

    def _build(self, dtypes: tuple) -> Any:
        plan = self.plans.get(dtypes)
        if plan is not None:
            return plan
        args = list(self.args)
        inputs = []
        dts = iter(dtypes)
        for k, pos in enumerate(self.positions):
            if k in self.constants:
                args[pos] = tl.asarray(args[pos])
            else:
                shape = tuple(args[pos])
                args[pos] = tl.placeholder(shape, dtype=next(dts))
                inputs.append(args[pos])
        plan = tl.compile(tl.einsum(*args), inputs=inputs, optimize=self.optimize)
        self.plans[dtypes] = plan
        return plan

    def __call__(self, *arrays: Any, out: Any = None, backend: str = "auto") -> Any:
        _count("opt_einsum.contract_expression")
        if len(arrays) != self.num_args:
            raise ValueError(
                f"This `ContractExpression` takes exactly {self.num_args} array arguments but "
                f"received {len(arrays)}."
            )
        _check_out(out)
        try:
            plan = self._build(tuple(numpy.asarray(a).dtype.name for a in arrays))
            (result,) = plan(*arrays)
            if out is not None and out.shape != result.shape:
                raise ValueError(f"out has shape {out.shape}, the result has shape {result.shape}")
        except ValueError as err:  # opt_einsum's own wrapping of errors raised while evaluating
            raise ValueError(
                f"Internal error while evaluating `ContractExpression`. ({err})"
            ) from err
        full = list(self.args)
        given = iter(arrays)
        for k, pos in enumerate(self.positions):
            if k not in self.constants:
                full[pos] = next(given)
        _compare("opt_einsum.contract_expression", tuple(full), {}, result)
        return _finish(result, tuple(arrays), out, "K")

    def __repr__(self) -> str:
        return f"ContractExpression({self.text!r}, tenloom)"

    __str__ = __repr__


def contract_expression(
    *args: Any,
    constants: Any = None,
    optimize: Any = "auto",
    memory_limit: Any = None,
    use_blas: bool = True,
    **kwargs: Any,
) -> ContractExpression:
    """``opt_einsum.contract_expression``'s signature (shapes for the non-constant operands)."""
    _count("opt_einsum.contract_expression build")
    # opt_einsum's own API rules for expressions (the shim stands in for its wrapper)
    if not optimize:
        raise ValueError("Can only generate a `ContractExpression` with an optimize path.")
    for name in ("out", "backend"):
        if name in kwargs:
            raise ValueError(f"'{name}' should only be specified when calling the expression")
    if kwargs:
        raise TypeError(f"contract_expression: unexpected keyword(s) {sorted(kwargs)}")
    if memory_limit is not None:
        raise NotImplementedError("einsum shim: memory_limit= is not routed")
    return ContractExpression(args, constants, _optimize_option(optimize, "auto"))


# ---- routing: the test modules' own names -----------------------------------------------------


class _NumpyProxy(types.ModuleType):
    """``numpy`` with ``einsum`` replaced, for one test module's ``np``."""

    def __init__(self) -> None:
        super().__init__("numpy")
        self.einsum = einsum

    def __getattr__(self, name: str) -> Any:
        return getattr(numpy, name)


class _OptEinsumProxy(types.ModuleType):
    """``opt_einsum`` with ``contract`` and ``contract_expression`` replaced."""

    def __init__(self) -> None:
        super().__init__("opt_einsum")
        self.contract = contract
        self.contract_expression = contract_expression

    def __getattr__(self, name: str) -> Any:
        import opt_einsum

        return getattr(opt_einsum, name)


def _routing_import(kind: str):
    real_import = builtins.__import__
    proxy = _NumpyProxy() if kind == "numpy" else _OptEinsumProxy()

    def _import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        module = real_import(name, globals, locals, fromlist, level)
        if level == 0 and name == kind:
            return proxy  # ``import numpy as np`` / ``from opt_einsum import contract, ...``
        return module

    return _import


class _RoutingLoader(importlib.abc.Loader):
    """Runs the real loader (pytest's assertion rewriter included) with a module-level
    ``__builtins__`` whose ``__import__`` hands the test module our proxies."""

    def __init__(self, loader: Any, kind: str) -> None:
        self.loader = loader
        self.kind = kind

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        env = dict(vars(builtins))
        env["__import__"] = _routing_import(self.kind)
        module.__dict__["__builtins__"] = env
        LOADED[os.path.realpath(module.__file__)] = module
        self.loader.exec_module(module)


class _RoutingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.rpartition(".")[2] not in _BASENAMES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            kind = TARGETS.get(os.path.realpath(spec.origin or ""))
            if kind is not None:
                spec.loader = _RoutingLoader(spec.loader, kind)
            return spec
        return None


_FINDER = _RoutingFinder()


def routed(module: types.ModuleType) -> bool:
    """Whether a loaded test module's entry points are the shims."""
    if TARGETS[os.path.realpath(module.__file__)] == "numpy":
        return getattr(module, "np", None) is not numpy and module.np.einsum is einsum
    names = [n for n in ("contract", "contract_expression") if hasattr(module, n)]
    shims = {"contract": contract, "contract_expression": contract_expression}
    return bool(names) and all(getattr(module, n) is shims[n] for n in names)


# ---- pytest hooks ----------------------------------------------------------------------------


def pytest_addoption(parser) -> None:
    parser.addoption("--einsum-shim-report", default=None, help="write the shim's JSON report")
    parser.addoption(
        "--einsum-shim-optimize-subset",
        action="store_true",
        help="run opt_einsum's optimize= parametrizations for "
        + ", ".join(_CI_OPTIMIZE)
        + " only (the others are the same searches with other budgets)",
    )


def pytest_configure(config) -> None:
    for module in list(sys.modules.values()):
        if os.path.realpath(getattr(module, "__file__", None) or "") in TARGETS:
            raise pytest.UsageError(f"einsum shim: {module.__name__} was imported before the shim")
    sys.meta_path.insert(0, _FINDER)


def pytest_collection_modifyitems(session, config, items) -> None:
    if not config.getoption("--einsum-shim-optimize-subset"):
        return
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("optimize") if callspec is not None else None
        same_as_another = isinstance(name, str) and name not in _CI_OPTIMIZE
        (drop if same_as_another else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_logstart(nodeid, location) -> None:
    _STATE.nodeid = nodeid  # calls are attributed to the test that made them


def pytest_runtest_logfinish(nodeid, location) -> None:
    _STATE.nodeid = "<no test>"


def pytest_runtest_logreport(report) -> None:
    outcomes = _OUTCOMES
    if report.when == "call" or report.outcome != "passed":
        prev = outcomes.get(report.nodeid)
        if prev is not None and prev["outcome"] != "passed":
            return  # keep the first failure (a teardown error after a failed call)
        outcome = report.outcome
        if report.when != "call" and report.failed:
            outcome = "error"
        message = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)[-500:]
        elif report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])
        outcomes[report.nodeid] = {"outcome": outcome, "message": message[:1000]}


def pytest_sessionfinish(session, exitstatus) -> None:
    path = session.config.getoption("--einsum-shim-report")
    if not path:
        return
    outcomes = _OUTCOMES
    report = {
        "routed": {
            os.path.relpath(f, os.path.dirname(_NUMPY_DIR)): routed(m) for f, m in LOADED.items()
        },
        "calls": dict(CALLS),
        "tests_calling": len(TESTS_CALLING),
        "checked": dict(CHECKED),
        "mismatches": MISMATCHES,
        "numpy_rejects_examples": NUMPY_REJECTS,
        "counts": dict(Counter(o["outcome"] for o in outcomes.values())),
        "tests": outcomes,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
