"""Parsing ``einsum``'s arguments: the string and sublist forms into labelled terms.

Everything NumPy accepts is accepted: ``...`` (broadcast from the right), labels repeated within
one operand (diagonals), implicit output, size-1 broadcasting of a label, scalars and zero-size
dimensions. The integer-sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` takes any number
of distinct labels, so networks with hundreds of indices work (numpy stops at 52). The parsed
``EinsumSpec`` goes to ``graph.build.einsum_spec``, which normalizes it into an EINSUM node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tenloom.graph.einsum import _ELL, _LETTERS, EinsumSpec, _is_ell, _show
from tenloom.graph.errors import OptionTypeError, ShapeError, fmt_shape


def _parse_string_term(term: str, where: str) -> list:
    labels: list = []
    i = 0
    seen_ell = False
    while i < len(term):
        ch = term[i]
        if term.startswith(_ELL, i):
            if seen_ell:
                raise ShapeError(f"einsum: more than one '...' in term '{term}' of {where}")
            labels.append(Ellipsis)
            seen_ell = True
            i += 3
            continue
        if ch not in _LETTERS:
            raise ShapeError(
                f"einsum: invalid subscript character {ch!r} in term '{term}' of {where}; "
                "use letters a-z, A-Z and '...' (or the integer-sublist form)"
            )
        labels.append(ch)
        i += 1
    return labels


def _split_args(args: Sequence[Any]) -> tuple[list, list[list], list | None, str]:
    """(operands, per-operand raw labels with Ellipsis markers, output or None, text)."""
    if not args:
        raise ShapeError("einsum: no subscripts and no operands given")
    if isinstance(args[0], str):
        subscripts = args[0].replace(" ", "")
        operands = list(args[1:])
        text = subscripts
        if subscripts.count("->") > 1:
            raise ShapeError(f"einsum: more than one '->' in '{text}'")
        if "->" in subscripts:
            lhs, rhs = subscripts.split("->")
            out = _parse_string_term(rhs, f"the output of '{text}'")
        else:
            lhs, out = subscripts, None
        if "-" in lhs or ">" in lhs:
            raise ShapeError(f"einsum: misplaced '-' or '>' in '{text}'")
        terms = lhs.split(",")
        if len(terms) != len(operands):
            raise ShapeError(
                f"einsum: '{text}' has {len(terms)} input term(s) but {len(operands)} "
                "operand(s) were given"
            )
        ins = [_parse_string_term(t, f"operand {k} in '{text}'") for k, t in enumerate(terms)]
        return operands, ins, out, text
    # sublist form: op0, sub0, op1, sub1, ..., [out]
    operands = list(args[0::2])
    subs = list(args[1::2])
    out = None
    if len(args) % 2 == 1:
        out = operands.pop()
    if len(subs) != len(operands):
        raise ShapeError("einsum: sublist form needs one sublist per operand")

    # malformed sublists raise OptionTypeError, a TypeError, as NumPy does
    def check(seq, where):
        if isinstance(seq, (str, bytes)) or not isinstance(seq, Sequence | np.ndarray):
            raise OptionTypeError(
                f"einsum: {where} sublist {seq!r} is not a list of int labels (and Ellipsis)"
            )
        labels = list(seq)
        for lab in labels:
            if lab is Ellipsis:
                continue
            if isinstance(lab, (bool, np.bool_)) or not isinstance(lab, (int, np.integer)):
                raise OptionTypeError(
                    f"einsum: sublist label {lab!r} of {where} is not an int or Ellipsis"
                )
        if labels.count(Ellipsis) > 1:
            raise ShapeError(f"einsum: more than one Ellipsis in {where} sublist")
        return [lab if lab is Ellipsis else int(lab) for lab in labels]

    ins = [check(s, f"operand {k}") for k, s in enumerate(subs)]
    if out is not None:
        out = check(out, "the output")
    text = ",".join(_fmt_term(t) for t in ins) + ("->" + _fmt_term(out) if out is not None else "")
    return operands, ins, out, text


def _fmt_term(labels: Sequence) -> str:
    if all(isinstance(x, str) or x is Ellipsis for x in labels):
        return "".join("..." if x is Ellipsis else x for x in labels)
    return "[" + ", ".join("..." if x is Ellipsis else str(x) for x in labels) + "]"


def parse(args: Sequence[Any], shapes_of) -> tuple[list, EinsumSpec]:
    """Parse einsum arguments. ``shapes_of(operands)`` lifts operands and returns their shapes.

    Returns the lifted operands and the spec with Ellipsis expanded to labels
    ``(Ellipsis, i)`` for broadcast axis i (counted from the left of the broadcast shape).
    """
    operands, ins, out, text = _split_args(args)
    operands, shapes = shapes_of(operands)
    n_ell = 0
    for k, (labels, shape) in enumerate(zip(ins, shapes)):
        named = len(labels) - (1 if Ellipsis in labels else 0)
        if Ellipsis in labels:
            if named > len(shape):
                raise ShapeError(
                    f"einsum: term {_fmt_term(labels)!r} of operand {k} names {named} axes but "
                    f"operand {k} has shape {fmt_shape(shape)} in '{text}'"
                )
            n_ell = max(n_ell, len(shape) - named)
        elif named != len(shape):
            raise ShapeError(
                f"einsum: term {_fmt_term(labels)!r} of operand {k} has {named} labels but operand "
                f"{k} has {len(shape)} axes, shape {fmt_shape(shape)}, in '{text}'"
            )
    expanded = []
    for labels, shape in zip(ins, shapes):
        if Ellipsis in labels:
            i = labels.index(Ellipsis)
            m = len(shape) - (len(labels) - 1)
            ell = [(Ellipsis, j) for j in range(n_ell - m, n_ell)]
            labels = labels[:i] + ell + labels[i + 1 :]
        expanded.append(tuple(labels))
    counts: dict = {}
    for labels in expanded:
        for lab in labels:
            counts[lab] = counts.get(lab, 0) + 1
    all_ell = [(Ellipsis, j) for j in range(n_ell)]
    if out is None:
        singles = [lab for lab, c in counts.items() if c == 1 and not _is_ell(lab)]
        singles.sort(key=lambda x: (isinstance(x, str), x))
        output = tuple(all_ell) + tuple(singles)
    else:
        if Ellipsis in out:
            i = out.index(Ellipsis)
            output = tuple(out[:i] + all_ell + out[i + 1 :])
        else:
            used_ell = [lab for lab in all_ell if lab in counts]
            if used_ell:
                raise ShapeError(
                    f"einsum: the operands have '...' axes but the output of '{text}' has no '...'"
                )
            output = tuple(out)
        seen = set()
        for lab in output:
            if lab in seen:
                raise ShapeError(f"einsum: output label {_show(lab)} repeated in '{text}'")
            seen.add(lab)
            if lab not in counts:
                raise ShapeError(
                    f"einsum: output label {_show(lab)} does not appear in any input of '{text}'"
                )
    return operands, EinsumSpec(tuple(expanded), output, text)
