"""NumPy arrays <-> tensorflow.TensorProto, as common/tensor_proto.c reads
and writes them: numbers travel as little-endian ``tensor_content``, strings
as ``string_val``; replies may use either ``tensor_content`` (strings in
TensorFlow's varint-length encoding) or the typed ``*_val`` fields, whose
last value repeats to fill the shape."""
import sys

import numpy as np

from . import dtypes

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("zflow's tensor_content is little-endian; this host is not")

# As ZF_TENSOR_PROTO_MAX_FILL_BYTES (common/tensor_proto.h): the most a
# reply's repeated last value may be made to fill.
_MAX_FILL_BYTES = 256 << 20


def _as_bytes(v):
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview, np.bytes_)):
        return bytes(v)
    raise TypeError("a string tensor's elements must be bytes or str, not %s"
                    % type(v).__name__)


def to_numpy(value, dtype=None):
    """A feed value as an array. ndarrays and NumPy scalars keep their
    dtype; Python scalars and (nested) lists take dtype (a DataType, from
    the graph) when given, else NumPy's choice with TensorFlow's defaults
    (int32 for integers that fit, float32 for floats)."""
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, np.generic):
        arr = np.asarray(value)
    else:
        if dtype is not None and dtype != dtypes.DT_STRING and dtype in dtypes._TO_NUMPY:
            return np.asarray(value, dtype=dtypes.as_numpy_dtype(dtype))
        arr = np.asarray(value)
        if arr.dtype == np.int64:
            if arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31):
                arr = arr.astype(np.int32)
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype.kind == "O" and arr.size and isinstance(arr.flat[0], (int, float)):
            raise TypeError("cannot convert %r to a tensor" % (value,))
    if arr.dtype.kind in ("U", "S", "O"):
        out = np.empty(arr.shape, dtype=object)
        flat = out.reshape(-1)
        for i, v in enumerate(arr.reshape(-1)):
            flat[i] = _as_bytes(v)
        return out
    return arr


def fill_proto(proto, arr):
    """Writes arr (from to_numpy) into a TensorProto message."""
    dt = dtypes.from_numpy(arr.dtype)
    proto.dtype = dt
    shape = proto.tensor_shape
    shape.SetInParent()
    for d in arr.shape:
        shape.dim.add().size = d
    if dt == dtypes.DT_STRING:
        proto.string_val.extend(arr.reshape(-1).tolist())
    elif arr.size:
        if dt == dtypes.DT_BOOL:
            arr = arr.astype(np.uint8, copy=False)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        proto.tensor_content = np.ascontiguousarray(arr).tobytes()


def _shape(proto):
    ts = proto.tensor_shape
    if ts.unknown_rank:
        raise ValueError("a fetched tensor has an unknown rank")
    shape = tuple(d.size for d in ts.dim)
    if any(d < 0 for d in shape):
        raise ValueError("a fetched tensor has a shape that is not fully defined: %s" % (shape,))
    return shape


def _strings_from_content(content, n):
    out = []
    lens = []
    pos = 0
    for _ in range(n):
        length = shift = 0
        while True:
            if pos >= len(content) or shift > 28:
                raise ValueError("tensor_content has a bad string length")
            b = content[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        lens.append(length)
    if sum(lens) != len(content) - pos:
        raise ValueError("tensor_content's string lengths do not add up to its size")
    for length in lens:
        out.append(bytes(content[pos:pos + length]))
        pos += length
    return out


def _vals(proto, dt):
    if dt == dtypes.DT_FLOAT:
        return proto.float_val, np.float32
    if dt == dtypes.DT_DOUBLE:
        return proto.double_val, np.float64
    if dt in (dtypes.DT_INT32, dtypes.DT_INT16, dtypes.DT_INT8, dtypes.DT_UINT8,
              dtypes.DT_UINT16, dtypes.DT_QINT8, dtypes.DT_QUINT8, dtypes.DT_QINT16,
              dtypes.DT_QUINT16, dtypes.DT_QINT32):
        return proto.int_val, np.int64
    if dt == dtypes.DT_INT64:
        return proto.int64_val, np.int64
    if dt == dtypes.DT_BOOL:
        return proto.bool_val, np.bool_
    if dt in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        return proto.half_val, np.int64
    if dt == dtypes.DT_COMPLEX64:
        return proto.scomplex_val, np.float32
    if dt == dtypes.DT_COMPLEX128:
        return proto.dcomplex_val, np.float64
    if dt == dtypes.DT_UINT32:
        return proto.uint32_val, np.uint64
    if dt == dtypes.DT_UINT64:
        return proto.uint64_val, np.uint64
    if dt == dtypes.DT_STRING:
        return proto.string_val, object
    raise TypeError("%s tensors have no NumPy equivalent" % dtypes.name(dt))


def from_proto(proto):
    """A TensorProto as a new NumPy array (strings: an object array of
    bytes). ValueError for a malformed tensor, TypeError for a dtype NumPy
    cannot hold."""
    dt = proto.dtype
    np_dtype = dtypes.as_numpy_dtype(dt)
    shape = _shape(proto)
    n = 1
    for d in shape:
        n *= d
    content = proto.tensor_content
    if content:
        if dt == dtypes.DT_STRING:
            strings = _strings_from_content(content, n)  # bounded by the content
            arr = np.empty(n, dtype=object)
            arr[:] = strings
            return arr.reshape(shape)
        if len(content) != n * np_dtype.itemsize:
            raise ValueError("tensor_content has %d bytes but %s %s needs %d"
                             % (len(content), dtypes.name(dt), list(shape),
                                n * np_dtype.itemsize))
        # A writable array of its own, as TensorFlow returns.
        return np.frombuffer(content, dtype=np_dtype).reshape(shape).copy()
    vals, raw_dtype = _vals(proto, dt)
    count = len(vals)
    if dt in (dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128):
        if count % 2:
            raise ValueError("complex values are not (real, imag) pairs")
        count //= 2
    if count > n:
        raise ValueError("%d values for %s %s of %d elements"
                         % (count, dtypes.name(dt), list(shape), n))
    per = np_dtype.itemsize if dt != dtypes.DT_STRING else \
        np.dtype(object).itemsize + (len(vals[count - 1]) if count else 0)
    if (n - count) * per > _MAX_FILL_BYTES:
        raise ValueError("%d values for %s %s: repeating the last to fill the other %d "
                         "elements would take more than %d MiB"
                         % (count, dtypes.name(dt), list(shape), n - count,
                            _MAX_FILL_BYTES >> 20))
    if dt == dtypes.DT_STRING:
        arr = np.empty(n, dtype=object)
        if count:
            arr[:count] = list(vals)
            arr[count:] = vals[count - 1]
        else:
            arr[:] = b""
        return arr.reshape(shape)
    raw = np.array(vals, dtype=raw_dtype)
    if dt in (dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128):
        raw = raw.reshape(-1, 2)
        raw = raw[:, 0] + 1j * raw[:, 1]
    if dt in (dtypes.DT_HALF, dtypes.DT_BFLOAT16):
        raw = raw.astype(np.uint16).view(np_dtype)
    arr = np.zeros(n, dtype=np_dtype)
    if count:
        arr[:count] = raw
        arr[count:] = raw[-1]
    return arr.reshape(shape)
