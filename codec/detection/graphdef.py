"""Read a TensorFlow frozen graph (``GraphDef`` protobuf) without TensorFlow.

The few message types a frozen graph needs (``GraphDef``, ``NodeDef``, ``AttrValue``,
``TensorProto``, ``TensorShapeProto``, ``VersionDef`` and the ``DataType`` enum) are declared
here as a ``FileDescriptorProto`` built in Python, with the field numbers of TensorFlow's
``tensorflow/core/framework/*.proto`` files, and turned into message classes by
``google.protobuf.message_factory`` in a private descriptor pool (so nothing clashes with a
TensorFlow installed beside it). Fields not declared here (``device``, function libraries,
debug info, ...) are skipped by protobuf as unknown fields.

Public API: :func:`load_graphdef` / :func:`parse_graphdef` give a :class:`FrozenGraph` (the
node list and every ``Const`` node as a numpy array); :func:`tensor_to_array` and
:func:`array_to_tensor` convert single ``TensorProto`` messages; :func:`messages` returns the
message classes (e.g. to build a small graph in a test).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

_PACKAGE = "tensorflow"
_F = descriptor_pb2.FieldDescriptorProto

#: TensorFlow ``DataType`` enum values (types.proto) used here, by name.
DATA_TYPES: dict[str, int] = {
    "DT_INVALID": 0, "DT_FLOAT": 1, "DT_DOUBLE": 2, "DT_INT32": 3, "DT_UINT8": 4,
    "DT_INT16": 5, "DT_INT8": 6, "DT_STRING": 7, "DT_COMPLEX64": 8, "DT_INT64": 9,
    "DT_BOOL": 10, "DT_QINT8": 11, "DT_QUINT8": 12, "DT_QINT32": 13, "DT_BFLOAT16": 14,
    "DT_QINT16": 15, "DT_QUINT16": 16, "DT_UINT16": 17, "DT_COMPLEX128": 18, "DT_HALF": 19,
    "DT_RESOURCE": 20, "DT_VARIANT": 21, "DT_UINT32": 22, "DT_UINT64": 23,
}  # fmt: skip

#: numpy dtype of each numeric ``DataType`` and the ``TensorProto`` field of its values.
_NUMERIC: dict[int, tuple[np.dtype, str]] = {
    1: (np.dtype(np.float32), "float_val"),
    2: (np.dtype(np.float64), "double_val"),
    3: (np.dtype(np.int32), "int_val"),
    4: (np.dtype(np.uint8), "int_val"),
    5: (np.dtype(np.int16), "int_val"),
    6: (np.dtype(np.int8), "int_val"),
    9: (np.dtype(np.int64), "int64_val"),
    10: (np.dtype(np.bool_), "bool_val"),
    17: (np.dtype(np.uint16), "int_val"),
    19: (np.dtype(np.float16), "half_val"),
    22: (np.dtype(np.uint32), "uint32_val"),
    23: (np.dtype(np.uint64), "uint64_val"),
}


class GraphDefError(ValueError):
    """The bytes are not a GraphDef, or a tensor in it cannot be read."""


# ---------------------------------------------------------------------------------------------
# message classes from a Python-built file descriptor


def _field(
    name: str, number: int, kind: int, label: int = _F.LABEL_OPTIONAL, type_name: str = "",
    oneof: int | None = None,
) -> _F:  # fmt: skip
    proto = _F(name=name, number=number, type=kind, label=label)
    if type_name:
        proto.type_name = f".{_PACKAGE}.{type_name}"
    if oneof is not None:
        proto.oneof_index = oneof
    return proto


def _repeated(name: str, number: int, kind: int, type_name: str = "") -> _F:
    return _field(name, number, kind, _F.LABEL_REPEATED, type_name)


def _map_entry(name: str, value_type: str) -> descriptor_pb2.DescriptorProto:
    """The nested ``XxxEntry`` message protobuf uses for ``map<string, value_type>``."""
    entry = descriptor_pb2.DescriptorProto(name=name)
    entry.field.append(_field("key", 1, _F.TYPE_STRING))
    entry.field.append(_field("value", 2, _F.TYPE_MESSAGE, type_name=value_type))
    entry.options.map_entry = True
    return entry


def _message(name: str, *fields: _F) -> descriptor_pb2.DescriptorProto:
    return descriptor_pb2.DescriptorProto(name=name, field=list(fields))


def _tensor_shape() -> descriptor_pb2.DescriptorProto:
    shape = _message(
        "TensorShapeProto",
        _repeated("dim", 2, _F.TYPE_MESSAGE, "TensorShapeProto.Dim"),
        _field("unknown_rank", 3, _F.TYPE_BOOL),
    )
    shape.nested_type.append(
        _message("Dim", _field("size", 1, _F.TYPE_INT64), _field("name", 2, _F.TYPE_STRING))
    )
    return shape


def _tensor() -> descriptor_pb2.DescriptorProto:
    return _message(
        "TensorProto",
        _field("dtype", 1, _F.TYPE_ENUM, type_name="DataType"),
        _field("tensor_shape", 2, _F.TYPE_MESSAGE, type_name="TensorShapeProto"),
        _field("version_number", 3, _F.TYPE_INT32),
        _field("tensor_content", 4, _F.TYPE_BYTES),
        _repeated("float_val", 5, _F.TYPE_FLOAT),
        _repeated("double_val", 6, _F.TYPE_DOUBLE),
        _repeated("int_val", 7, _F.TYPE_INT32),
        _repeated("string_val", 8, _F.TYPE_BYTES),
        _repeated("int64_val", 10, _F.TYPE_INT64),
        _repeated("bool_val", 11, _F.TYPE_BOOL),
        _repeated("half_val", 13, _F.TYPE_INT32),
        _repeated("uint32_val", 16, _F.TYPE_UINT32),
        _repeated("uint64_val", 17, _F.TYPE_UINT64),
    )


def _attr_value() -> descriptor_pb2.DescriptorProto:
    attr = _message(
        "AttrValue",
        _field("list", 1, _F.TYPE_MESSAGE, type_name="AttrValue.ListValue", oneof=0),
        _field("s", 2, _F.TYPE_BYTES, oneof=0),
        _field("i", 3, _F.TYPE_INT64, oneof=0),
        _field("f", 4, _F.TYPE_FLOAT, oneof=0),
        _field("b", 5, _F.TYPE_BOOL, oneof=0),
        _field("type", 6, _F.TYPE_ENUM, type_name="DataType", oneof=0),
        _field("shape", 7, _F.TYPE_MESSAGE, type_name="TensorShapeProto", oneof=0),
        _field("tensor", 8, _F.TYPE_MESSAGE, type_name="TensorProto", oneof=0),
        _field("placeholder", 9, _F.TYPE_STRING, oneof=0),
    )
    attr.oneof_decl.add(name="value")
    attr.nested_type.append(
        _message(
            "ListValue",
            _repeated("s", 2, _F.TYPE_BYTES),
            _repeated("i", 3, _F.TYPE_INT64),
            _repeated("f", 4, _F.TYPE_FLOAT),
            _repeated("b", 5, _F.TYPE_BOOL),
            _repeated("type", 6, _F.TYPE_ENUM, "DataType"),
            _repeated("shape", 7, _F.TYPE_MESSAGE, "TensorShapeProto"),
            _repeated("tensor", 8, _F.TYPE_MESSAGE, "TensorProto"),
        )
    )
    return attr


def _node() -> descriptor_pb2.DescriptorProto:
    node = _message(
        "NodeDef",
        _field("name", 1, _F.TYPE_STRING),
        _field("op", 2, _F.TYPE_STRING),
        _repeated("input", 3, _F.TYPE_STRING),
        _field("device", 4, _F.TYPE_STRING),
        _repeated("attr", 5, _F.TYPE_MESSAGE, "NodeDef.AttrEntry"),
    )
    node.nested_type.append(_map_entry("AttrEntry", "AttrValue"))
    return node


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """tensorflow/core/framework's GraphDef subset as one proto3 file descriptor."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="semcodec/tensorflow_graphdef_subset.proto", package=_PACKAGE, syntax="proto3"
    )
    enum = proto.enum_type.add(name="DataType")
    for name, number in DATA_TYPES.items():
        enum.value.add(name=name, number=number)
    versions = _message(
        "VersionDef",
        _field("producer", 1, _F.TYPE_INT32),
        _field("min_consumer", 2, _F.TYPE_INT32),
        _repeated("bad_consumers", 3, _F.TYPE_INT32),
    )
    graph = _message(
        "GraphDef",
        _repeated("node", 1, _F.TYPE_MESSAGE, "NodeDef"),
        _field("version", 3, _F.TYPE_INT32),
        _field("versions", 4, _F.TYPE_MESSAGE, type_name="VersionDef"),
    )
    proto.message_type.extend([_tensor_shape(), _tensor(), _attr_value(), _node(), versions, graph])
    return proto


@functools.cache
def messages() -> SimpleNamespace:
    """The message classes: ``GraphDef``, ``NodeDef``, ``AttrValue``, ``TensorProto``,
    ``TensorShapeProto`` and ``VersionDef`` (built once per process, in a private pool)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    names = ("GraphDef", "NodeDef", "AttrValue", "TensorProto", "TensorShapeProto", "VersionDef")
    return SimpleNamespace(
        **{
            n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{n}"))
            for n in names
        }
    )


# ---------------------------------------------------------------------------------------------
# tensors


def tensor_shape(proto: Any) -> tuple[int, ...]:
    """The dims of a ``TensorShapeProto`` (-1 for unknown sizes)."""
    return tuple(int(d.size) for d in proto.dim)


def tensor_to_array(tensor: Any) -> np.ndarray:
    """A ``TensorProto`` as a numpy array of its shape and dtype.

    Reads ``tensor_content`` (raw little-endian bytes) or the typed ``*_val`` field; as in
    TensorFlow, a ``*_val`` field shorter than the shape is padded with its last value
    (a single value fills the tensor), and an empty one means zeros. ``DT_STRING`` tensors
    become object arrays of ``bytes``.

    Raises:
        GraphDefError: unsupported dtype, or a value count that does not fit the shape.
    """
    shape = tensor_shape(tensor.tensor_shape)
    size = int(np.prod(shape, dtype=np.int64))
    if tensor.dtype == DATA_TYPES["DT_STRING"]:
        return _fill(np.array(list(tensor.string_val), dtype=object), shape, size)
    if tensor.dtype not in _NUMERIC:
        raise GraphDefError(f"unsupported tensor dtype {_dtype_name(tensor.dtype)}")
    dtype, value_field = _NUMERIC[tensor.dtype]
    if tensor.tensor_content:
        raw = np.frombuffer(tensor.tensor_content, dtype=dtype.newbyteorder("<"))
        if raw.size != size:
            raise GraphDefError(f"tensor_content has {raw.size} values for shape {shape}")
        return raw.astype(dtype).reshape(shape)
    values = list(getattr(tensor, value_field))
    if tensor.dtype == DATA_TYPES["DT_HALF"]:
        return _fill(np.array(values, np.uint16).view(np.float16), shape, size)
    return _fill(np.array(values, dtype=dtype), shape, size)


def _fill(values: np.ndarray, shape: tuple[int, ...], size: int) -> np.ndarray:
    if values.size == size:
        return values.reshape(shape)
    if values.size > size:
        raise GraphDefError(f"{values.size} values for shape {shape}")
    if values.size == 0:
        return np.zeros(shape, dtype=values.dtype)
    return np.concatenate([values, np.repeat(values[-1:], size - values.size)]).reshape(shape)


def _dtype_name(number: int) -> str:
    names = {v: k for k, v in DATA_TYPES.items()}
    return names.get(number, f"DataType({number})")


def array_to_tensor(array: np.ndarray, as_content: bool = True) -> Any:
    """A ``TensorProto`` holding ``array`` (numeric dtypes of :data:`DATA_TYPES`).

    Args:
        array: the values.
        as_content: store raw bytes in ``tensor_content`` (as TensorFlow does for large
            tensors); else the typed ``*_val`` field.
    """
    array = np.asarray(array)
    number = next((n for n, (dt, _) in _NUMERIC.items() if dt == array.dtype), None)
    if number is None:
        raise GraphDefError(f"no TensorFlow DataType for numpy dtype {array.dtype}")
    tensor = messages().TensorProto(dtype=number)
    for size in array.shape:
        tensor.tensor_shape.dim.add(size=size)
    if as_content:
        tensor.tensor_content = array.astype(array.dtype.newbyteorder("<")).tobytes()
    elif number == DATA_TYPES["DT_HALF"]:
        tensor.half_val.extend(array.reshape(-1).view(np.uint16).tolist())
    else:
        getattr(tensor, _NUMERIC[number][1]).extend(array.reshape(-1).tolist())
    return tensor


# ---------------------------------------------------------------------------------------------
# graphs


@dataclass(frozen=True)
class GraphNode:
    """One node of a graph.

    Attributes:
        name: unique node name (``"FeatureExtractor/MobilenetV2/Conv/Conv2D"``).
        op: operation type (``"Conv2D"``, ``"Const"``, ...).
        inputs: input tensor names (``"node"`` or ``"node:1"``; ``"^node"`` for control edges).
        attrs: attribute values as Python objects: ``bytes``, ``int``, ``float``, ``bool``,
            a ``DataType`` name such as ``"DT_FLOAT"``, a shape tuple, a numpy array (tensor)
            or a list of those (list attributes).
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FrozenGraph:
    """A parsed frozen graph.

    Attributes:
        nodes: every node, in file order.
        constants: the value of every ``Const`` node by node name.
    """

    nodes: tuple[GraphNode, ...]
    constants: Mapping[str, np.ndarray]

    def node(self, name: str) -> GraphNode:
        """The node called ``name`` (``KeyError`` if absent)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def ops(self) -> dict[str, int]:
        """Number of nodes per op type."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return counts


def attr_to_python(attr: Any) -> Any:
    """One ``AttrValue`` as a Python object (see :attr:`GraphNode.attrs`)."""
    kind = attr.WhichOneof("value")
    if kind is None:
        return None
    if kind == "list":
        return _list_to_python(attr.list)
    return _scalar_to_python(kind, getattr(attr, kind))


def _scalar_to_python(kind: str, value: Any) -> Any:
    if kind == "type":
        return _dtype_name(value)
    if kind == "shape":
        return tensor_shape(value)
    if kind == "tensor":
        return tensor_to_array(value)
    return value


def _list_to_python(values: Any) -> list[Any]:
    for kind in ("s", "i", "f", "b", "type", "shape", "tensor"):
        items = getattr(values, kind)
        if len(items):
            return [_scalar_to_python(kind, v) for v in items]
    return []


def _to_node(proto: Any) -> GraphNode:
    attrs = {key: attr_to_python(value) for key, value in sorted(proto.attr.items())}
    return GraphNode(proto.name, proto.op, tuple(proto.input), attrs)


def parse_graphdef(data: bytes) -> FrozenGraph:
    """Parses serialized ``GraphDef`` bytes.

    Raises:
        GraphDefError: the bytes do not parse, or a ``Const`` tensor cannot be read.
    """
    graph = messages().GraphDef()
    try:
        graph.ParseFromString(data)
    except DecodeError as exc:
        raise GraphDefError(f"not a TensorFlow GraphDef: {exc}") from exc
    nodes = tuple(_to_node(n) for n in graph.node)
    constants: dict[str, np.ndarray] = {}
    for node in nodes:
        if node.op == "Const":
            value = node.attrs.get("value")
            if not isinstance(value, np.ndarray):
                raise GraphDefError(f"Const node {node.name!r} has no tensor value")
            constants[node.name] = value
    return FrozenGraph(nodes, constants)


def load_graphdef(path: str | os.PathLike) -> FrozenGraph:
    """Reads and parses a frozen ``GraphDef`` file (``frozen_inference_graph.pb``)."""
    with open(path, "rb") as fh:
        return parse_graphdef(fh.read())
