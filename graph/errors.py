"""The exception hierarchy. Every error tenloom raises on purpose subclasses TenloomError."""

from __future__ import annotations


class TenloomError(Exception):
    """Base class of all tenloom errors."""


class ShapeError(TenloomError, ValueError):
    """Operand shapes (or einsum labels) do not fit the op; raised at trace time."""


class IndexOutOfBoundsError(ShapeError, IndexError):
    """A basic index lies outside an axis; also an IndexError, as in NumPy."""


class DTypeError(TenloomError, TypeError):
    """An operand's dtype is not accepted by the op or backend; raised at trace time."""


class GraphFormatError(TenloomError, ValueError):
    """A saved graph or plan is malformed."""


class DeviceError(TenloomError, RuntimeError):
    """A device is unknown, absent, or its backend is not installed."""


class MemoryLimitError(TenloomError, MemoryError):
    """No execution plan fits the requested memory limit."""


class OptionError(TenloomError, ValueError):
    """An option of ``evaluate``, ``compile``, ``grad`` and friends, or an op's own argument
    (``axis=``, ``keepdims=``, a shape, a permutation, einsum subscripts), has a value that is
    not accepted. Raised before any work; the message names the option, the value and what is
    accepted (runtime/options.py checks the run options in one place)."""


class OptionTypeError(OptionError, TypeError):
    """An unknown option, or an option or argument of the wrong type (``threads=1.5``,
    ``axis=True``, an einsum sublist label ``0.5``); also a TypeError, as NumPy raises."""


class EvaluationError(TenloomError, RuntimeError):
    """A node failed while running; the original exception is ``__cause__``."""


def fmt_shape(shape: tuple[int, ...]) -> str:
    """Shapes in messages read like Python tuples: ``(3, 4)``, ``(5,)``, ``()``."""
    return repr(tuple(shape))


class IndexingError(TenloomError, TypeError, IndexError):
    """An index tenloom cannot take: one that is none (``x[1.0]``, two Ellipses), index arrays
    that do not broadcast together, or a mask whose shape does not fit; also an IndexError, as
    NumPy raises there. Integer arrays, lists and boolean masks are traced
    (graph/ops/gather.py)."""


class ConcretizationError(TenloomError, TypeError):
    """A lazy Tensor was asked for a Python value it only has once evaluated (``bool(t)``,
    ``len()`` of a 0-d Tensor); also a TypeError, as NumPy raises for unsized objects."""


class DataDependentShapeError(ConcretizationError):
    """A shape that depends on values (a rank chosen by a cutoff, a boolean mask's count) was
    needed where there are no values: in a traced function (placeholders), or in a graph
    builder that cannot evaluate. docs/linalg.md has the rule: give a bound (``max_rank=``),
    or call on concrete operands so that the front end evaluates up to that point."""
