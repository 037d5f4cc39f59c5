"""One registry of tenloom's caches and counters: each cache bounded, all of them inspected with
``cache_info()`` and emptied with ``clear_caches()`` (``tl.cache_info``, ``tl.clear_caches``).

    LRUCache(name, maxsize)      a thread-safe cache that drops its least recently used entry
                                 past ``maxsize``; registered under ``name`` when made
    register(name, cache)        a cache kept elsewhere, by reference: anything with ``clear()``
                                 and ``info() -> CacheInfo`` (see ``Table``, ``FunctionCache``)
    counter(name, **fields)      a dict of event counts (``{"n": 0}``), reported, never cleared

This module is in passes/ because the lowest layer whose caches it holds is passes/ (the path
and slicing searches); graph/ keeps no locks, so its memo tables (scalar nodes, per-slice
networks) are registered by reference from the runtime (runtime/session.py), as are the
runtime's own. Names say where a cache lives: ``"passes.paths"``, ``"runtime.programs"``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING: Any = object()


@dataclass(frozen=True)
class CacheInfo:
    """One cache's figures. ``maxsize`` None with ``weak``: bounded by the lifetimes of what it
    is keyed by (an entry goes with its array or graph); None without: no bound by count (the
    backends' compiled kernels, one per distinct kernel source). ``hits``/``misses`` None: the
    cache does not count them."""

    currsize: int
    maxsize: int | None
    hits: int | None = None
    misses: int | None = None
    unit: str = "entries"  # what currsize and maxsize count ("bytes" for buffer pools)
    weak: bool = False


class Cache(Protocol):
    def clear(self) -> None: ...

    def info(self) -> CacheInfo: ...


class LRUCache(Generic[K, V]):
    """A bounded, thread-safe mapping that forgets its least recently used entry first."""

    __slots__ = ("name", "maxsize", "hits", "misses", "_data", "_lock")

    def __init__(self, name: str, maxsize: int, *, registered: bool = True) -> None:
        if maxsize < 1:
            raise ValueError(f"cache {name!r}: maxsize must be at least 1, not {maxsize}")
        self.name = name
        self.maxsize = maxsize
        self.hits = self.misses = 0
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        if registered:
            register(name, self)

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key`` (now the most recently used), else ``default``. An unhashable
        key raises TypeError, as a dict's lookup does."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``, dropping the least recently used entries past
        ``maxsize``."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    __setitem__ = put

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def pop(self, key: K, default: Any = None) -> Any:
        with self._lock:
            return self._data.pop(key, default)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def info(self) -> CacheInfo:
        return CacheInfo(len(self._data), self.maxsize, self.hits, self.misses)

    def __repr__(self) -> str:
        return f"LRUCache({self.name!r}, {len(self._data)}/{self.maxsize})"


class Table:
    """A plain dict (or weak dictionary) kept by its owner, registered by reference: its owner
    bounds it (``maxsize``: cleared or no longer filled past it; None: weakly keyed)."""

    __slots__ = ("table", "maxsize")

    def __init__(self, table: MutableMapping, maxsize: int | None) -> None:
        self.table = table
        self.maxsize = maxsize

    def clear(self) -> None:
        self.table.clear()

    def info(self) -> CacheInfo:
        return CacheInfo(len(self.table), self.maxsize, weak=self.maxsize is None)


class FunctionCache:
    """A ``functools.lru_cache``-wrapped function, registered by reference."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def clear(self) -> None:
        self.fn.cache_clear()

    def info(self) -> CacheInfo:
        i = self.fn.cache_info()
        return CacheInfo(i.currsize, i.maxsize, i.hits, i.misses)


class Computed:
    """A cache spread over objects made at run time (one table per device), reported and
    cleared by the two functions given."""

    __slots__ = ("_info", "_clear")

    def __init__(self, info: Callable[[], CacheInfo], clear: Callable[[], None]) -> None:
        self._info, self._clear = info, clear

    def clear(self) -> None:
        self._clear()

    def info(self) -> CacheInfo:
        return self._info()


_CACHES: dict[str, Cache] = {}
_COUNTERS: dict[str, dict[str, int]] = {}
_REGISTRY_LOCK = threading.Lock()


def register(name: str, cache: Cache) -> Cache:
    """Put ``cache`` in the registry under ``name`` (a name taken by another cache raises
    ValueError; the same cache again is a no-op). Returns ``cache``."""
    with _REGISTRY_LOCK:
        old = _CACHES.get(name)
        if old is not None and old is not cache and not _same_reference(old, cache):
            raise ValueError(f"cache {name!r} is already registered")
        _CACHES[name] = cache
    return cache


def _same_reference(a: Any, b: Any) -> bool:
    """Two adapters of one underlying table or function (a module registering it again)."""
    return type(a) is type(b) and (
        (isinstance(a, Table) and a.table is b.table)
        or (isinstance(a, FunctionCache) and a.fn is b.fn)
    )


def counter(name: str, **fields: int) -> dict[str, int]:
    """A registered dict of event counts (``{"n": 0}`` when no fields are given); the caller
    increments it in place. The same name again returns the same dict."""
    with _REGISTRY_LOCK:
        counts = _COUNTERS.get(name)
        if counts is None:
            counts = _COUNTERS[name] = dict(fields or {"n": 0})
    return counts


@dataclass(frozen=True)
class CacheReport:
    """What ``cache_info()`` returns: every cache's ``CacheInfo`` by name, and every counter
    (``"runtime.plans.compiles"``); ``report["passes.paths"]`` is one cache's info."""

    caches: dict[str, CacheInfo]
    counters: dict[str, int]

    def __getitem__(self, name: str) -> CacheInfo:
        return self.caches[name]

    def __str__(self) -> str:
        head = f"{'cache':<34}{'size':>11}{'bound':>11}{'hits':>10}{'misses':>10}"
        lines = [head, "-" * len(head)]
        for name, i in self.caches.items():
            bound = str(i.maxsize) if i.maxsize is not None else "weak" if i.weak else "none"
            hits = "-" if i.hits is None else str(i.hits)
            misses = "-" if i.misses is None else str(i.misses)
            unit = "" if i.unit == "entries" else f"  ({i.unit})"
            lines.append(f"{name:<34}{i.currsize:>11}{bound:>11}{hits:>10}{misses:>10}{unit}")
        if self.counters:
            lines += ["", f"{'counter':<34}{'count':>8}"]
            lines += [f"{name:<34}{n:>8}" for name, n in self.counters.items()]
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(str(self))


def cache_info() -> CacheReport:
    """Every registered cache's size, bound, hits and misses, and every counter."""
    with _REGISTRY_LOCK:
        caches = dict(sorted(_CACHES.items()))
        counters = {
            f"{name}.{field}" if field != "n" else name: value
            for name, counts in sorted(_COUNTERS.items())
            for field, value in counts.items()
        }
    return CacheReport({name: c.info() for name, c in caches.items()}, counters)


def clear_caches() -> None:
    """Empty every registered cache (counters keep counting: they record events, not state).
    What was cached is worked out again when next needed: optimized graphs, contraction paths
    and slicings (a ``cache_dir=`` on disk is kept), compiled programs, device copies of
    constants."""
    with _REGISTRY_LOCK:
        caches = list(_CACHES.values())
    for cache in caches:
        cache.clear()


# ---- the disk cache folder ------------------------------------------------------------------

CACHE_ENV = "TENLOOM_CACHE_DIR"  # overrides the user cache folder (tests point it at a tmp dir)
# bumped when what the disk caches hold changes meaning (the cost model, the search budgets):
# files written under another format are never read
DISK_FORMAT = 1


def cache_folder(cache_dir: Any) -> str | None:
    """The folder the disk caches (paths, slicings, copy-layout timings) use for the option
    ``cache_dir``: a folder given; ``None`` the default, ``$TENLOOM_CACHE_DIR`` or else the
    user cache folder (``$XDG_CACHE_HOME/tenloom``, ``~/.cache/tenloom``; ``%LOCALAPPDATA%``
    on Windows, ``~/Library/Caches`` on macOS); ``False`` (or an empty variable) none."""
    import os
    import sys

    if cache_dir is False:
        return None
    if cache_dir is not None:
        return os.fspath(cache_dir)
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return env or None
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "tenloom")


_DISK_KEY: list[str] = []


def _model_digest() -> str:
    """A digest of what decides which tree a search keeps: the source of the cost model
    (passes/cost.py) and of the search (passes/contraction_order.py, passes/paths.py), their
    constants as they are now, cotengra's version and the optional packages its searches pick
    up (kahypar, its default optimizer library). A change to any of them makes every entry
    written before unreadable, so a cached tree is always the tree a fresh search would give."""
    import hashlib

    import cotengra
    from cotengra.hyperoptimizers.hyper import get_default_hq_methods, get_default_optlib
    from tenloom.passes import contraction_order, cost, paths

    items = sorted(
        (f"{mod.__name__}.{name}", repr(value))
        for mod in (cost, contraction_order, paths)
        for name, value in vars(mod).items()
        if name.isupper() and isinstance(value, (int, float)) and not isinstance(value, bool)
    )
    h = hashlib.sha256(repr(items).encode())
    for mod in (cost, contraction_order, paths):
        with open(mod.__file__, "rb") as f:
            h.update(f.read())
    h.update(repr((cotengra.__version__, get_default_hq_methods(), get_default_optlib())).encode())
    return h.hexdigest()[:12]


def disk_key() -> str:
    """What a disk cache entry is valid for: tenloom's version, the disk format and the cost
    model with the search budgets (``_model_digest``)."""
    if _DISK_KEY:
        return _DISK_KEY[0]
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("tenloom")
    except PackageNotFoundError:  # a source checkout run without installing
        v = "source"
    _DISK_KEY.append(f"{v}/{DISK_FORMAT}/{_model_digest()}")
    return _DISK_KEY[0]


__all__ = [
    "CACHE_ENV",
    "CacheInfo",
    "CacheReport",
    "Computed",
    "FunctionCache",
    "LRUCache",
    "Table",
    "cache_folder",
    "cache_info",
    "clear_caches",
    "disk_key",
    "counter",
    "register",
]
