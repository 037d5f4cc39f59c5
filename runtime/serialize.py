"""Saving and loading graphs: a versioned JSON document plus a sibling ``.npz`` of constants.

    {"format": "tenloom", "version": 1, "kind": "graph", "constants": "g.npz",
     "nodes": [{"id": 0, "op": "const", "inputs": [], "data": "c0", "shape": [3],
                "dtype": "float64"},
               {"id": 1, "op": "exp", "inputs": [0], "attrs": [], "shape": [3],
                "dtype": "float64"}],
     "outputs": [1]}

One entry per node, in topological order; attributes are written with explicit type tags so
that they come back exactly (tuple vs list, int vs float vs bool, non-finite floats, complex,
bytes, NumPy scalars and dtypes, op kinds). ``docs/format.md`` is the full schema.

Loading trusts nothing in the files. It never unpickles (the ``.npz`` is read member by member
with ``allow_pickle=False`` semantics and object dtypes are refused from the header), never
evaluates text, follows no path but a bare file name in the JSON file's own folder, checks every
size before allocating, and rebuilds every node through ``make_node`` so each op's shape/dtype
rule runs; the recorded shape and dtype must agree with it. Anything wrong raises
``GraphFormatError`` naming the file and the node. Arrays are read only once the whole graph
has been validated (on zero-stride stand-ins for the constants).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import secrets
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tenloom.graph.errors import GraphFormatError, MemoryLimitError
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import OPS, Op
from tenloom.graph.ops.leaf import Constant, issued_here, next_placeholder_id
from tenloom.graph.traverse import toposort
from tenloom.runtime.serialize_checks import CHECKS, check_fused, check_inferred, check_shape
from tenloom.runtime.serialize_values import (
    NODE_DTYPES,
    OP_NAMES,
    BadFormat,
    SaveTypeError,
    decode_value,
    encode_value,
    short,
)

FORMAT = "tenloom"
VERSION = 1
KINDS = ("graph", "plan")

# Caps checked before anything is allocated (shapes: graph/ops/checks.py MAX_ELEMENTS, MAX_NDIM).
# Loading takes at most about 40x the JSON file's size for the parsed document and the nodes,
# plus each constant's declared size once (docs/format.md, "Limits").
MAX_JSON_BYTES = 256 << 20
MAX_NODES = 5_000_000
DEFLATE_MAX_RATIO = 1032  # deflate cannot expand more than 1032:1 (258-byte matches in 2 bits)
NPY_MAX_HEADER = 10_000  # .npy header text (numpy's own max_header_size)
ZIP_MEMBER_OVERHEAD = 8192  # zip headers of one member (names are at most 68 bytes)
ZIP_ARCHIVE_OVERHEAD = 1 << 17  # end records and the archive comment
READ_CHUNK = 1 << 18  # bytes decompressed or copied per read into a constant
_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")


# ---- writing ----------------------------------------------------------------------------------


def npz_name(path: str | os.PathLike) -> str:
    """The constants file that goes with ``path``: ``g.json`` -> ``g.npz``."""
    base = os.path.basename(os.fspath(path))
    return (base[:-5] if base.endswith(".json") else base) + ".npz"


def graph_document(
    outputs: Sequence[Node], roots: Sequence[Node] = ()
) -> tuple[list[dict], list[int], dict[str, np.ndarray], dict[int, int]]:
    """(node entries, output ids, constants by key, id(node) -> entry id) for the graph of
    ``outputs``; ``roots`` are extra nodes to keep (a plan's inputs, even unused ones)."""
    order = toposort([*outputs, *roots])
    ids: dict[int, int] = {}
    entries: list[dict] = []
    arrays: dict[str, np.ndarray] = {}
    for k, node in enumerate(order):
        ids[id(node)] = k
        entry: dict[str, Any] = {
            "id": k,
            "op": node.op.value,
            "inputs": [ids[id(i)] for i in node.inputs],
        }
        if node.op is Op.CONST:
            key = f"c{len(arrays)}"
            arrays[key] = node.attrs.constant.value
            entry["data"] = key
        else:
            try:
                entry["attrs"] = encode_value(node.attrs)
            except SaveTypeError as e:
                raise SaveTypeError(f"{e} (attributes of a {node.op.value} node)") from None
        entry["shape"] = list(node.shape)
        entry["dtype"] = node.dtype.name
        entries.append(entry)
    return entries, [ids[id(o)] for o in outputs], arrays, ids


def write_document(path: str | os.PathLike, doc: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``doc`` to ``path`` (and ``arrays`` to the sibling .npz), each file atomically;
    the npz is written first so the JSON never names a missing file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    doc = dict(doc)
    doc["constants"] = None
    if arrays:
        name = npz_name(path)
        _atomic_write(os.path.join(folder, name), lambda f: _write_npz(f, arrays))
        doc["constants"] = name
    _atomic_write(path, lambda f: f.write(_json_text(doc).encode("utf-8")))


def _json_text(doc: dict) -> str:
    """The document with one node per line (readable, and diffs stay small)."""
    order = ("format", "version", "kind", "constants", "nodes", "outputs")
    keys = [k for k in order if k in doc] + [k for k in doc if k not in order]
    parts = []
    for k in keys:
        if k == "nodes":
            body = ",\n    ".join(json.dumps(e, allow_nan=False) for e in doc[k])
            parts.append(f'  "nodes": [\n    {body}\n  ]')
        else:
            parts.append(f"  {json.dumps(k)}: {json.dumps(doc[k], allow_nan=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _write_npz(f, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)


def _atomic_write(path: str, write: Callable) -> None:
    """Write through a temporary file in the same folder, then rename it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(100):
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
        try:  # like open(path, "wb"), the umask decides the permissions (mkstemp's are 0600)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"save: cannot create a temporary file in {folder}")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---- reading: JSON ----------------------------------------------------------------------------


@dataclass
class Loaded:
    """A validated document: its kind, output nodes, and (plans) inputs, options and stats."""

    kind: str
    outputs: tuple[Node, ...]
    inputs: tuple[Node, ...] = ()
    options: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)


_TOP_KEYS = {
    "graph": {"format", "version", "kind", "constants", "nodes", "outputs"},
    "plan": {
        "format",
        "version",
        "kind",
        "constants",
        "nodes",
        "outputs",
        "inputs",
        "options",
        "stats",
    },
}
_NODE_KEYS = {"id", "op", "inputs", "shape", "dtype"}


def _pairs(pairs: list) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise BadFormat(f"object repeats the key {k!r}")
        out[k] = v
    return out


def _reject_constant(name: str):
    raise BadFormat(f"{name} is not JSON (non-finite floats use the $float tag)")


def read_json(path: str) -> dict:
    """Parse the JSON file strictly: size cap, UTF-8, no NaN/Infinity literals, no repeated
    keys, and the format/version/kind header checked."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_JSON_BYTES:
                raise BadFormat(f"file is {size} bytes; the limit is {MAX_JSON_BYTES}")
            raw = f.read(size + 1)  # not a buffer of the limit's size
            if len(raw) > size:
                raise BadFormat("the file grew while it was read")
    except OSError as e:
        raise GraphFormatError(f"{path}: cannot read ({e})") from e
    except BadFormat as e:
        raise GraphFormatError(f"{path}: {e}") from None
    try:
        doc = json.loads(
            raw.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_reject_constant
        )
    except BadFormat as e:
        raise GraphFormatError(f"{path}: {e}") from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError too
        raise GraphFormatError(f"{path}: not valid JSON ({e})") from None
    if type(doc) is not dict:
        raise GraphFormatError(f"{path}: the document must be a JSON object")
    if doc.get("format") != FORMAT:
        raise GraphFormatError(
            f"{path}: not a tenloom file (format is {short(doc.get('format'))}, "
            f"expected {FORMAT!r})"
        )
    version = doc.get("version")
    if type(version) is not int:
        raise GraphFormatError(f"{path}: version must be an int, got {short(version)}")
    if version != VERSION:
        newer = " (written by a newer tenloom)" if version > VERSION else ""
        raise GraphFormatError(
            f"{path}: format version {version}{newer}; this tenloom reads version {VERSION}"
        )
    kind = doc.get("kind")
    if kind not in KINDS:
        raise GraphFormatError(f"{path}: kind must be one of {KINDS}, got {short(kind)}")
    extra = set(doc) - _TOP_KEYS[kind]
    missing = _TOP_KEYS[kind] - set(doc)
    if extra or missing:
        raise GraphFormatError(
            f"{path}: a {kind} document has the keys {sorted(_TOP_KEYS[kind])}; "
            f"unexpected {sorted(extra)}, missing {sorted(missing)}"
        )
    return doc


# ---- reading: node entries --------------------------------------------------------------------


@dataclass
class _Entry:
    id: int
    op: Op
    inputs: list[int]
    shape: tuple[int, ...]
    dtype: np.dtype
    attrs: tuple = ()
    data: str | None = None


def _parse_entries(nodes: Any) -> list[_Entry]:
    if type(nodes) is not list or not nodes:
        raise BadFormat("'nodes' must be a non-empty array")
    if len(nodes) > MAX_NODES:
        raise BadFormat(f"{len(nodes)} nodes; the limit is {MAX_NODES}")
    entries: list[_Entry] = []
    seen: dict[int, int] = {}
    keys: set[str] = set()
    for k, e in enumerate(nodes):
        where = f"node entry {k}"
        try:
            if type(e) is not dict:
                raise BadFormat("must be an object")
            nid = e.get("id")
            if type(nid) is not int or nid < 0:
                raise BadFormat(f"id must be a non-negative int, got {short(nid)}")
            where = f"node {nid}"
            if nid in seen:
                raise BadFormat(f"duplicate node id {nid} (entries {seen[nid]} and {k})")
            seen[nid] = k
            name = e.get("op")
            op = OP_NAMES.get(name) if isinstance(name, str) else None
            if op is None or op not in OPS:
                raise BadFormat(
                    f"unknown op {short(name)}; known ops: "
                    + ", ".join(sorted(o.value for o in OPS))
                )
            where = f"node {nid} ({op.value})"
            want = _NODE_KEYS | ({"data"} if op is Op.CONST else {"attrs"})
            if set(e) != want:
                raise BadFormat(f"keys must be {sorted(want)}, got {sorted(e)}")
            ins = e["inputs"]
            if type(ins) is not list or any(type(i) is not int for i in ins):
                raise BadFormat(f"inputs must be an array of node ids, got {short(ins)}")
            dt = NODE_DTYPES.get(e["dtype"]) if isinstance(e["dtype"], str) else None
            if dt is None:
                raise BadFormat(
                    f"unknown dtype {short(e['dtype'])}; known: {', '.join(NODE_DTYPES)}"
                )
            entry = _Entry(nid, op, ins, check_shape(e["shape"]), dt)
            if op is Op.CONST:
                key = e["data"]
                if not isinstance(key, str) or not _KEY.fullmatch(key) or key in keys:
                    raise BadFormat(
                        f"data must be a unique key of letters, digits and _, got {short(key)}"
                    )
                keys.add(key)
                entry.data = key
            else:
                attrs = decode_value(e["attrs"])
                if type(attrs) is not tuple:
                    raise BadFormat("attrs must be an array")
                entry.attrs = attrs
        except BadFormat as err:
            raise BadFormat(f"{where}: {err}") from None
        entries.append(entry)
    _check_references(entries, seen)
    return entries


def _check_references(entries: list[_Entry], index: dict[int, int]) -> None:
    """Every input names a node defined earlier; otherwise say whether it is missing, a cycle
    or only out of order."""
    for e in entries:
        for i in e.inputs:
            if i not in index:
                raise BadFormat(f"node {e.id} ({e.op.value}) reads node {i}, which does not exist")
    for k, e in enumerate(entries):
        for i in e.inputs:
            if index[i] >= k:
                cycle = _find_cycle(entries, index)
                if cycle:
                    raise BadFormat("the graph has a cycle: " + " -> ".join(map(str, cycle)))
                raise BadFormat(
                    f"node {e.id} reads node {i}, which comes after it; nodes must be in "
                    "topological order"
                )


def _find_cycle(entries: list[_Entry], index: dict[int, int]) -> list[int] | None:
    state = [0] * len(entries)  # 0 new, 1 on the stack, 2 done
    for start in range(len(entries)):
        if state[start]:
            continue
        stack = [(start, 0)]
        state[start] = 1
        while stack:
            k, i = stack[-1]
            ins = entries[k].inputs
            if i < len(ins):
                stack[-1] = (k, i + 1)
                j = index[ins[i]]
                if state[j] == 1:
                    path = [entries[s].id for s, _ in stack]
                    return path[path.index(entries[j].id) :] + [entries[j].id]
                if state[j] == 0:
                    state[j] = 1
                    stack.append((j, 0))
            else:
                state[k] = 2
                stack.pop()
    return None


# ---- reading: the graph -----------------------------------------------------------------------


def _placeholder_attrs(attrs: tuple, renamed: dict[tuple, tuple]) -> tuple:
    """The attrs a loaded placeholder gets. One this process made (its uid was issued here)
    comes back as itself, so the placeholders the caller holds feed the loaded graph. Any
    other (a file from another process, or from a tenloom with other uids) becomes a new
    placeholder with the saved name, shape and dtype and a fresh uid, so it can never be one
    made before or after the load; ``renamed`` (one per load) keeps the entries of one file
    that name the same placeholder together."""
    name, uid, shape, dtype = attrs  # a plain tuple, as read (its check passed)
    if issued_here(uid):
        return attrs
    new = renamed.get(attrs)
    if new is None:
        new = renamed[attrs] = (name, next_placeholder_id(), shape, dtype)
    return new


def _build(
    entries: list[_Entry],
    consts: dict[str, np.ndarray],
    fused_check,
    renamed: dict[tuple, tuple],
) -> dict[int, Node]:
    """Nodes through make_node, each checked against its entry; id -> node. Placeholders
    are mapped through :func:`_placeholder_attrs` (``renamed`` is shared by the two builds of
    one load)."""
    nodes: dict[int, Node] = {}
    for e in entries:
        try:
            ins = tuple(nodes[i] for i in e.inputs)
            arity = OPS[e.op].arity
            if arity is not None and len(ins) != arity:
                raise BadFormat(f"takes {arity} inputs, got {len(ins)}")
            try:
                if e.op is Op.CONST:
                    attrs: tuple = (Constant(consts[e.data]),)
                elif e.op is Op.FUSED:
                    check_fused(ins, e.attrs, fused_check)
                    attrs = e.attrs
                else:
                    attrs = e.attrs
                    if e.op is Op.SLICED and isinstance(attrs, tuple) and len(attrs) == 5:
                        attrs = (*attrs, None)  # saved before SLICED had a semiring: ordinary
                    check = CHECKS.get(e.op)
                    if check is not None:
                        check(ins, attrs, e.op)
                    if e.op is Op.PLACEHOLDER:
                        attrs = _placeholder_attrs(attrs, renamed)
            except BadFormat:
                raise
            except Exception as err:  # a check tripping over a value of an unexpected shape
                raise BadFormat(f"malformed attributes ({type(err).__name__}: {err})") from None
            try:
                node = make_node(e.op, ins, attrs)
            except Exception as err:
                raise BadFormat(f"rejected by the op's rule: {type(err).__name__}: {err}") from None
            check_inferred(node.shape, node.dtype, "result")
            if node.shape != e.shape or node.dtype != e.dtype:
                raise BadFormat(
                    f"recorded as {e.dtype}{e.shape} but the op's rule gives "
                    f"{node.dtype}{node.shape}"
                )
        except BadFormat as err:
            raise BadFormat(f"node {e.id} ({e.op.value}): {err}") from None
        nodes[e.id] = node
    return nodes


def _npz_path(path: str, ref: Any) -> str:
    """The constants file: a bare file name, resolved (symlinks included) inside the folder of
    the JSON file."""
    if (
        not isinstance(ref, str)
        or not ref.endswith(".npz")
        or ref in (".", "..")
        or "/" in ref
        or "\\" in ref
        or "\0" in ref
        or (os.altsep and os.altsep in ref)
        or os.path.basename(ref) != ref
    ):
        raise BadFormat(
            f"constants must be a bare .npz file name next to the JSON file, got {short(ref)}"
        )
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    real = os.path.realpath(os.path.join(folder, ref))
    if os.path.dirname(real) != folder:
        raise BadFormat(f"constants file {ref!r} resolves to {real}, outside {folder}")
    if not os.path.isfile(real):
        raise BadFormat(f"constants file {ref!r} does not exist in {folder}")
    return real


def _nbytes(e: _Entry) -> int:
    return math.prod(e.shape) * e.dtype.itemsize


def _read_constants(real: str, wanted: dict[str, _Entry]) -> dict[str, np.ndarray]:
    """The arrays named by ``wanted`` (key -> CONST entry). Nothing is allocated beyond what
    the JSON declares: the file's size, its zip directory and every ``.npy`` header are checked
    against the declared shapes and dtypes first, and each array is then read in place, in
    chunks, from a stream that stops at its declared size (a directory that lies about a
    member's size cannot make it decompress more)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except OSError as e:
        raise BadFormat(f"cannot open the constants file ({e})") from None
    with os.fdopen(fd, "rb") as f:
        disk = os.fstat(f.fileno()).st_size
        declared = sum(_nbytes(e) for e in wanted.values())
        allowed = (
            declared
            + len(wanted) * (ZIP_MEMBER_OVERHEAD + NPY_MAX_HEADER + 16)
            + ZIP_ARCHIVE_OVERHEAD
        )
        if disk > allowed:
            raise BadFormat(
                f"the constants file is {disk} bytes; its {len(wanted)} constants declare "
                f"{declared} bytes of data, so with headers it can be at most {allowed}"
            )
        _check_directory(f, len(wanted))
        try:
            zf = zipfile.ZipFile(f)
        except Exception as e:  # BadZipFile, OSError, ValueError, struct errors...
            raise BadFormat(f"the constants file is not a valid npz ({e})") from None
        with zf:
            members = zf.infolist()
            infos = {i.filename: i for i in members}
            names = {f"{k}.npy" for k in wanted}
            if set(infos) != names or len(members) != len(names):
                raise BadFormat(
                    f"the constants file holds {sorted(infos)[:8]} ({len(members)} members), "
                    f"expected {sorted(names)[:8]}"
                )
            headers = {k: _check_member(zf, infos[f"{k}.npy"], e, disk) for k, e in wanted.items()}
            return {k: _read_member(zf, infos[f"{k}.npy"], wanted[k], *headers[k]) for k in wanted}


def _check_directory(f, n: int) -> None:
    """The zip's end record, before ``zipfile`` parses the central directory: ``n`` members
    and a directory no bigger than ``n`` entries need (it is read whole into memory)."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:  # a Python without it: the file-size bound still holds
        return
    try:
        rec = end_record(f)
    except Exception as e:
        raise BadFormat(f"the constants file is not a valid npz ({e})") from None
    if rec is None:
        raise BadFormat("the constants file is not a valid npz (no end of central directory)")
    entries, size = rec[zipfile._ECD_ENTRIES_TOTAL], rec[zipfile._ECD_SIZE]
    if entries != n:
        raise BadFormat(f"the constants file's directory lists {entries} members, expected {n}")
    if size > n * 1024 + 1024:
        raise BadFormat(
            f"the constants file's directory is {size} bytes, more than {n} members need"
        )


def _read_exact(m, n: int, what: str) -> bytes:
    """``n`` bytes of a member stream, read in bounded steps."""
    out = b""
    while len(out) < n:
        got = m.read(min(n - len(out), READ_CHUNK))
        if not got:
            raise BadFormat(f"{what}: ends after {len(out)} of {n} bytes")
        out += got
    return out


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, e: _Entry, disk: int):
    """(header length, fortran order) of one .npy member after checking it fits its node: the
    directory's sizes, then the header, read from a bounded stream and at most
    ``NPY_MAX_HEADER`` bytes long."""
    key = info.filename
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise BadFormat(f"{key}: compression method {info.compress_type} is not supported")
    if info.flag_bits & 0x1:
        raise BadFormat(f"{key}: the member is encrypted")
    if info.header_offset + info.compress_size > disk:
        raise BadFormat(f"{key}: the member runs past the end of the file")
    nbytes = _nbytes(e)
    if not nbytes + 10 < info.file_size <= nbytes + 12 + NPY_MAX_HEADER:
        raise BadFormat(
            f"{key}: the zip directory gives {info.file_size} bytes, expected {nbytes} bytes "
            f"of {e.dtype}{e.shape} data plus a .npy header"
        )
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise BadFormat(
            f"{key}: stored, yet {info.compress_size} bytes on disk for {info.file_size}"
        )
    if info.file_size > info.compress_size * DEFLATE_MAX_RATIO + 1024:
        raise BadFormat(
            f"{key}: declares {info.file_size} bytes in {info.compress_size} deflated bytes, "
            f"more than deflate can expand ({DEFLATE_MAX_RATIO}:1)"
        )
    try:
        with zf.open(info) as m:
            magic = _read_exact(m, 8, key)
            if magic[:6] != b"\x93NUMPY":
                raise BadFormat(f"{key}: not a .npy member (bad magic {magic[:6]!r})")
            version = (magic[6], magic[7])
            if version not in ((1, 0), (2, 0)):
                raise BadFormat(f"{key}: unsupported .npy version {version}")
            width = 2 if version == (1, 0) else 4
            length = _read_exact(m, width, key)
            hlen = int.from_bytes(length, "little")
            if hlen > NPY_MAX_HEADER:
                raise BadFormat(
                    f"{key}: .npy header of {hlen} bytes; the limit is {NPY_MAX_HEADER}"
                )
            text = io.BytesIO(length + _read_exact(m, hlen, key))
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(text)
            header = 8 + width + hlen
    except BadFormat:
        raise
    except Exception as err:  # a malformed header, a corrupt stream, a bad local header...
        raise BadFormat(f"{key}: bad .npy header ({type(err).__name__}: {err})") from None
    if dtype.hasobject:
        raise BadFormat(f"{key}: holds Python objects (pickled); only numeric arrays are accepted")
    if dtype != e.dtype or dtype.str != e.dtype.str:
        raise BadFormat(f"{key}: dtype {dtype} does not match its node's {e.dtype}")
    if tuple(shape) != e.shape:
        raise BadFormat(f"{key}: shape {tuple(shape)} does not match its node's {e.shape}")
    if info.file_size != header + nbytes:
        raise BadFormat(
            f"{key}: {info.file_size} bytes, expected {header + nbytes} for {dtype}{e.shape}"
        )
    return header, bool(fortran)


def _read_member(zf, info, e: _Entry, header: int, fortran: bool) -> np.ndarray:
    """The member's data read straight into its (read-only) array, ``READ_CHUNK`` bytes at a
    time: no second copy, and never more than the declared bytes decompressed."""
    try:
        arr = np.empty(e.shape, e.dtype, order="F" if fortran else "C")
    except MemoryError:  # a valid file bigger than this machine's memory
        raise MemoryLimitError(
            f"{info.filename}: cannot allocate {_nbytes(e)} bytes for its {e.dtype}{e.shape} "
            "constant"
        ) from None
    view = memoryview(arr.reshape(-1, order="A").view(np.uint8))
    try:
        with zf.open(info) as m:
            _read_exact(m, header, info.filename)
            got = 0
            while got < len(view):
                n = m.readinto(view[got : got + READ_CHUNK])
                if not n:
                    raise BadFormat(f"{info.filename}: data ends after {got} of {len(view)} bytes")
                got += n
            if m.read(1):  # reading to the end also checks the CRC
                raise BadFormat(f"{info.filename}: trailing data")
    except BadFormat:
        raise
    except Exception as err:  # BadZipFile (CRC), zlib.error, EOFError, OSError...
        raise BadFormat(f"{info.filename}: {type(err).__name__}: {err}") from None
    arr.flags.writeable = False  # owned by the loaded graph alone: frozen (leaf.is_frozen)
    return arr


def load_document(path: str | os.PathLike, fused_check: Callable | None = None) -> Loaded:
    """Read and validate a saved graph or plan; GraphFormatError on anything malformed.

    ``fused_check(step)`` may refuse FUSED program steps that the backends cannot compile
    (the runtime passes the fusion pass's own rule)."""
    path = os.fspath(path)
    doc = read_json(path)
    try:
        entries = _parse_entries(doc["nodes"])
        by_id = {e.id: e for e in entries}
        outputs = _id_list(doc["outputs"], by_id, "outputs", allow_empty=False)
        inputs = _id_list(doc["inputs"], by_id, "inputs") if doc["kind"] == "plan" else []
        for i in inputs:
            if by_id[i].op is not Op.PLACEHOLDER:
                raise BadFormat(f"input {i} is a {by_id[i].op.value} node, not a placeholder")
        consts = {e.data: e for e in entries if e.op is Op.CONST}
        if doc["constants"] is None and consts:
            raise BadFormat("constant nodes but no constants file ('constants' is null)")
        real = _npz_path(path, doc["constants"]) if doc["constants"] is not None else None
        # Validate the whole graph on zero-stride stand-ins before reading any array.
        stand_ins = {k: np.broadcast_to(np.zeros((), e.dtype), e.shape) for k, e in consts.items()}
        renamed: dict[tuple, tuple] = {}
        nodes = _build(entries, stand_ins, fused_check, renamed)
        if real is not None:
            arrays = _read_constants(real, consts)
            nodes = _build(entries, arrays, fused_check, renamed)
        if doc["kind"] == "plan":
            phs = {id(n) for n in toposort([nodes[i] for i in outputs]) if n.op is Op.PLACEHOLDER}
            missing = phs - {id(nodes[i]) for i in inputs}
            if missing:
                raise BadFormat(
                    "the plan's outputs read placeholders that are not among its inputs"
                )
            options = _named_values(doc["options"], "options")
            if type(doc["stats"]) is not dict:
                raise BadFormat("'stats' must be a JSON object")
            stats = {k: _named_values(v, f"stats of {k!r}") for k, v in doc["stats"].items()}
            return Loaded(
                "plan",
                tuple(nodes[i] for i in outputs),
                tuple(nodes[i] for i in inputs),
                options,
                stats,
            )
        return Loaded("graph", tuple(nodes[i] for i in outputs))
    except BadFormat as e:
        raise GraphFormatError(f"{path}: {e}") from None
    except MemoryLimitError as e:
        raise MemoryLimitError(f"{path}: {e}") from None


def _named_values(x: Any, what: str) -> dict[str, Any]:
    """A JSON object of tagged values (``options``, ``stats``) with string keys, decoded."""
    if type(x) is not dict:
        raise BadFormat(f"'{what}' must be a JSON object")
    try:
        return {k: decode_value(v) for k, v in x.items()}
    except BadFormat as e:
        raise BadFormat(f"'{what}': {e}") from None


def _id_list(x: Any, by_id: dict, what: str, allow_empty: bool = True) -> list[int]:
    if type(x) is not list or (not x and not allow_empty):
        raise BadFormat(
            f"'{what}' must be a{'' if allow_empty else ' non-empty'} array of node ids"
        )
    for i in x:
        if type(i) is not int or i not in by_id:
            raise BadFormat(f"'{what}' names node {short(i)}, which does not exist")
    return x


def save_document(
    path: str | os.PathLike,
    outputs: Sequence[Node],
    kind: str = "graph",
    inputs: Sequence[Node] = (),
    options: dict | None = None,
    stats: dict | None = None,
) -> None:
    """Write the graph of ``outputs`` (for a plan also its inputs, options and stats)."""
    entries, out_ids, arrays, ids = graph_document(outputs, inputs)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "nodes": entries,
        "outputs": out_ids,
    }
    if kind == "plan":
        doc["inputs"] = [ids[id(n)] for n in inputs]
        doc["options"] = {str(k): encode_value(v) for k, v in (options or {}).items()}
        doc["stats"] = {
            str(name): {str(k): encode_value(v) for k, v in values.items()}
            for name, values in (stats or {}).items()
        }
    write_document(path, doc, arrays)


__all__ = [
    "FORMAT",
    "VERSION",
    "Loaded",
    "SaveTypeError",
    "decode_value",
    "encode_value",
    "load_document",
    "npz_name",
    "save_document",
]
