"""``grad``, ``value_and_grad``, ``vjp`` and ``jvp``: derivatives as lazy graphs.

Before differentiating, the forward graph goes through the passes up to the contraction order
(canonicalize, merge, pre-reduce, CSE, order). Each n-ary network is then a tree of pairwise
contractions, and the reverse sweep emits two pairwise contractions per tree node that reuse
the forward intermediates (the "environments"): a gradient with respect to every tensor of a
network costs a small multiple of the forward pass rather than one network per tensor. The
forward sweep (``jvp``) follows the same tree: two pairwise contractions per tree node.
The inputs are kept as outputs of that pre-pass, so they survive it (as nodes of equal value).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tenloom import api
from tenloom.graph.autodiff import check_differentiable, jvp_nodes, vjp_nodes
from tenloom.graph.build import lift
from tenloom.graph.errors import DTypeError, OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.graph import Graph
from tenloom.graph.value import Value
from tenloom.passes import PRE_GRAD
from tenloom.passes.options import Options
from tenloom.runtime.options import GRAD_OPTIONS, parse_options
from tenloom.runtime.session import SHARED_FORWARDS, optimize
from tenloom.tensor import Tensor

__all__ = ["PRE_GRAD", "grad", "hvp", "jvp", "value_and_grad", "vjp"]

# gradient node -> the forward outputs it differentiates (the pre-pass graph's), for explain's
# forward / backward split; weak, so it never keeps a graph alive by itself
SWEEPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# gradient node -> the networks the pre-pass ordered (equation, operands, flops along the tree)
SWEEP_NETWORKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _networks(before) -> list[dict]:
    """The n-ary networks the pre-pass's order search saw (equation, operands)."""
    from tenloom.dump import einsum_text

    return [
        {"equation": einsum_text(*n.attrs), "operands": len(n.inputs)}
        for n in before.order
        if n.op.value == "einsum" and len(n.inputs) >= 3
    ]


def _as_list(xs: Any) -> tuple[list[Tensor], bool]:
    if isinstance(xs, Tensor):
        return [xs], True
    return list(xs), False


def _check(what: str, opts: dict[str, Any]) -> Options:
    """The options of ``what`` checked (runtime/options.py), before any work."""
    return parse_options(what, opts, GRAD_OPTIONS)


# Each pairwise step of the forward tree has two cotangent (reverse mode) or two tangent
# (forward mode) contractions of its own cost, so a derivative's program runs about 3x the
# forward's predicted time: its tree search gets 3x the effort. (Lattice 8x8 D=6, the value
# and the gradient of all 64 tensors: the effort-1 tree had 9.1e9 multiply-adds, the effort-3
# one 5.4e9, near the 5.2e9 of cotengra's auto and the compile-effort searches together.)
# Its tree may then differ from the one the value alone gets; asked for together, the value
# takes the derivative's forward (runtime/session.py shared_forwards), so it runs once.
SWEEP_EFFORT = 3.0
# ... and among the trees it finds, each one's multiply-adds count 1 + SWEEP_MADDS times (the
# forward's copies do not predict the sweep's cost; passes/contraction_order.py _auto_path)
SWEEP_MADDS = 2.0


def _pre_options(o: Options, reverse_sweep: bool | str = True) -> Options:
    """Options of the pre-pass: the order search, and ``memory_limit`` (a network whose tree
    does not fit is sliced; with ``reverse_sweep`` its slices leave room for the reverse sweep,
    which then runs slice by slice too; ``"forward"``: room for the tangents of forward mode)."""
    # the differentiated tensors' uses stay in the graph (passes/prereduce.py)
    sweep = reverse_sweep if o.memory_limit is not None else False
    # the search's budget is its effort x the forward's predicted run time; the tree found
    # here also carries the derivative's sweep (SWEEP_EFFORT)
    effort = o.search_effort * SWEEP_EFFORT
    return replace(
        o,
        fold_constants=False,
        reverse_sweep=sweep,
        search_effort=effort,
        sweep_madds=SWEEP_MADDS,
    )


def _lift_matching(fn: str, what: str, values: list, of: str, targets: list) -> list:
    """``values`` as nodes, one per target and of the target's shape (else ShapeError)."""
    if len(values) != len(targets):
        raise ShapeError(f"{fn}: {len(values)} {what}s for {len(targets)} {of}s")
    nodes = [lift(v, fn) for v in values]
    for t, v in zip(targets, nodes):
        if v.shape != t.shape:
            raise ShapeError(
                f"{fn}: {what} of shape {fmt_shape(v.shape)} for an {of} of shape "
                f"{fmt_shape(t.shape)}"
            )
    return nodes


def _check_wrt(what: str, inputs: Any) -> None:
    """DTypeError, before any work, for an integer or boolean tensor differentiated against."""
    ins, _ = _as_list(inputs)
    check_differentiable(what, [lift(t, what) for t in ins])


def vjp(outputs: Any, inputs: Any, cotangents: Any, **opts: Any) -> Any:
    """Input cotangents J^H c for output cotangents ``cotangents`` (lazy Tensors).

    ``optimize=`` chooses the forward trees' search; ``memory_limit=`` slices networks whose
    tree does not fit, so that forward and reverse sweeps run slice by slice within it."""
    o = _check("vjp", opts)
    _check_wrt("vjp", inputs)
    outs, single_out = _as_list(outputs)
    ins, single_in = _as_list(inputs)
    cts, _ = _as_list(cotangents)
    ct_nodes = _lift_matching("vjp", "cotangent", cts, "output", outs)
    graph = Graph(tuple(lift(t, "vjp") for t in (*outs, *ins)))
    prepass = optimize(graph, _pre_options(o), PRE_GRAD, stages=True)
    pre = prepass.graph
    # the networks as the order search got them (the graph before it, after CSE)
    seen: dict = {k: g for k, g in prepass.stages or () if k == "cse"}
    outs_n = pre.outputs[: len(outs)]
    ins_n = pre.outputs[len(outs) :]
    grads = vjp_nodes(outs_n, ins_n, ct_nodes)
    forms = _forms(graph.outputs[: len(outs)], outs_n)
    result = []
    for x, g in zip(ins, grads):
        result.append(Tensor(g) if g is not None else api.zeros(x.shape, x.dtype))
        if g is not None:
            SWEEPS[g] = tuple(outs_n)
            if forms:
                SHARED_FORWARDS[g] = forms
            if "nets" not in seen:
                seen["nets"] = _networks(seen.get("cse", graph))
            SWEEP_NETWORKS[g] = seen["nets"]
    return result[0] if single_in else result


def grad(loss: Tensor, inputs: Any, **opts: Any) -> Any:
    """Gradient of a real scalar ``loss`` with respect to each of ``inputs`` (lazy Tensors);
    options as for ``vjp``."""
    o = _check("grad", opts)
    _check_wrt("grad", inputs)
    if not isinstance(loss, Value):
        raise OptionTypeError(
            f"grad: the loss is a {type(loss).__module__}.{type(loss).__name__}, not a lazy "
            "Tensor (an evaluated value, e.g. a NumPy function tenloom does not have, called "
            "on Tensors, is outside the graph and has no gradient)"
        )
    if loss.shape != ():
        raise ShapeError(f"grad: the loss must be a scalar, got shape {fmt_shape(loss.shape)}")
    if loss.dtype.kind != "f":
        raise DTypeError(f"grad: the loss must be real floating point, got {loss.dtype}")
    return vjp(loss, inputs, api.ones((), loss.dtype), **o.given)


def value_and_grad(loss: Tensor, inputs: Any, **opts: Any) -> tuple[Tensor, Any]:
    o = _check("value_and_grad", opts)
    _check_wrt("value_and_grad", inputs)
    return loss, grad(loss, inputs, **o.given)


def jvp(outputs: Any, inputs: Any, tangents: Any, **opts: Any) -> Any:
    """Output tangents J t for input tangents ``tangents`` (lazy Tensors), by forward mode.

    The forward graph goes through the same pre-pass as ``vjp``, so a contraction network is
    differentiated through its chosen tree: each tree node's tangent is two pairwise
    contractions (one per child with a tangent) reusing the forward intermediates. Outputs that
    do not depend on the inputs get a symbolic zero. ``optimize=`` chooses the trees' search;
    ``memory_limit=`` slices networks whose tree does not fit (leaving room for the tangents),
    and each one's tangent is one network sliced the same way that carries the tangents through
    the tree slice by slice."""
    o = _check("jvp", opts)
    _check_wrt("jvp", inputs)
    outs, single_out = _as_list(outputs)
    ins, _ = _as_list(inputs)
    tans, _ = _as_list(tangents)
    tan_nodes = _lift_matching("jvp", "tangent", tans, "input", ins)
    graph = Graph(tuple(lift(t, "jvp") for t in (*outs, *ins)))
    pre = optimize(graph, _pre_options(o, reverse_sweep="forward"), PRE_GRAD).graph
    outs_n = pre.outputs[: len(outs)]
    ins_n = pre.outputs[len(outs) :]
    forms = _forms(graph.outputs[: len(outs)], outs_n)
    result = []
    for o, t in zip(outs, jvp_nodes(outs_n, ins_n, tan_nodes)):
        result.append(Tensor(t) if t is not None else api.zeros(o.shape, o.dtype))
        if t is not None and forms:
            SHARED_FORWARDS[t] = forms
    return result[0] if single_out else result


def _forms(originals, pre_outputs) -> dict:
    """{an output as the user has it: the pre-pass's form of it} where they differ."""
    return {a: b for a, b in zip(originals, pre_outputs) if a is not b}


def hvp(
    loss: Tensor, inputs: Sequence[Tensor], vectors: Sequence[Tensor], **opts: Any
) -> list[Tensor]:
    """Hessian-vector products: the gradient of <grad(loss), v>, one vector per input (of its
    shape); options as for ``grad`` (both sweeps use them)."""
    o = _check("hvp", opts)
    _check_wrt("hvp", inputs)
    inputs = list(inputs)
    vs = [Tensor(v) for v in _lift_matching("hvp", "vector", list(vectors), "input", inputs)]
    g = grad(loss, inputs, **o.given)
    inner = None
    for gi, v in zip(g, vs):
        term = api.sum(api.real(gi * api.conj(v)))
        inner = term if inner is None else inner + term
    return grad(inner, inputs, **o.given)
