"""tenloom: lazy graph-tracing tensors with an optimizing scheduler.

Build computations lazily with the functions below, then ``evaluate`` them.
"""

from tenloom import fft, linalg, random  # random: tl.random, a seeded Generator of lazy constants
from tenloom import interop as _interop
from tenloom.api import *  # noqa: F403  (every public op: tenloom/api.py)
from tenloom.api import einsum
from tenloom.autodiff import grad, hvp, jvp, value_and_grad, vjp
from tenloom.explain import explain
from tenloom.function import Plan, compile, function, load
from tenloom.graph.errors import (
    ConcretizationError,
    DataDependentShapeError,
    DeviceError,
    DTypeError,
    EvaluationError,
    GraphFormatError,
    IndexingError,
    IndexOutOfBoundsError,
    MemoryLimitError,
    OptionError,
    OptionTypeError,
    ShapeError,
    TenloomError,
)
from tenloom.inspect import dump, to_networkx
from tenloom.interop import from_dlpack
from tenloom.passes.caches import cache_info, clear_caches
from tenloom.runtime.devices import Device, devices
from tenloom.runtime.evaluate import evaluate, evaluate_async
from tenloom.runtime.plan import save
from tenloom.tensor import Tensor
from tenloom.visualize import visualize

__version__ = "0.1.0"

_interop.install_autoray_hook()  # registers tenloom with autoray once autoray is imported
