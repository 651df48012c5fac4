"""Reading the graph argument of Session and submit, and the dtypes of fed
tensors from it."""
import os

from google.protobuf import message as _message
from google.protobuf import text_format

from . import dtypes
from ._proto import graph_pb2


def load_graph(graph):
    """A zflow GraphDef from: a GraphDef message (ours or any protobuf
    message named tensorflow.GraphDef, e.g. TensorFlow's), its serialized
    bytes, a path to a binary .pb or a text .pbtxt (.pbtxt/.txt/.prototxt
    are read as text), or an object with as_graph_def()."""
    if isinstance(graph, graph_pb2.GraphDef):
        return graph
    if hasattr(graph, "as_graph_def") and callable(graph.as_graph_def):
        return load_graph(graph.as_graph_def())
    if isinstance(graph, _message.Message):
        if graph.DESCRIPTOR.full_name != "tensorflow.GraphDef":
            raise TypeError("graph must be a tensorflow.GraphDef, not a %s message"
                            % graph.DESCRIPTOR.full_name)
        return _parse_binary(graph.SerializeToString(), "the GraphDef message")
    if isinstance(graph, (bytes, bytearray, memoryview)):
        return _parse_binary(bytes(graph), "the serialized GraphDef")
    if isinstance(graph, (str, os.PathLike)):
        path = os.fspath(graph)
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith((".pbtxt", ".txt", ".prototxt")):
            gd = graph_pb2.GraphDef()
            try:
                text_format.Parse(data.decode("utf-8"), gd)
            except (text_format.ParseError, UnicodeDecodeError) as e:
                raise ValueError("%s: not a text GraphDef: %s" % (path, e)) from None
            return gd
        return _parse_binary(data, path)
    raise TypeError("graph must be a GraphDef, its serialized bytes, a .pb/.pbtxt path or "
                    "an object with as_graph_def(), not %s" % type(graph).__name__)


def _parse_binary(data, what):
    gd = graph_pb2.GraphDef()
    try:
        gd.ParseFromString(data)
    except _message.DecodeError as e:
        raise ValueError("%s: not a binary GraphDef: %s" % (what, e)) from None
    return gd


_DTYPE_ATTR_OPS = {"Placeholder", "PlaceholderWithDefault", "Const", "VariableV2", "Variable"}


def feed_dtypes(gd):
    """node name -> the DataType of its output 0 where the graph says it
    (the dtype attr of placeholders, constants and variables, else a T
    attr)."""
    out = {}
    for node in gd.node:
        attr = node.attr
        if node.op in _DTYPE_ATTR_OPS and "dtype" in attr:
            out[node.name] = attr["dtype"].type
        elif "T" in attr and attr["T"].WhichOneof("value") == "type":
            out[node.name] = attr["T"].type
    return out


def dtype_of(table, tensor_name):
    """The DataType the graph gives tensor_name ("x" or "x:0"), or None."""
    node, _, index = tensor_name.partition(":")
    if index not in ("", "0"):
        return None
    dt = table.get(node)
    return dt if dt not in (None, dtypes.DT_INVALID) else None
