"""zflow's dtypes (TensorFlow's DataType enum) and their NumPy equivalents.

=============  ==============  ===============================================
DataType       NumPy           notes
=============  ==============  ===============================================
DT_BOOL        bool_
DT_INT8..64    int8..int64
DT_UINT8..64   uint8..uint64
DT_HALF        float16
DT_FLOAT       float32
DT_DOUBLE      float64
DT_COMPLEX64   complex64
DT_COMPLEX128  complex128
DT_STRING      object          each element a ``bytes`` (``str`` feeds are
                               encoded as UTF-8)
DT_BFLOAT16    ml_dtypes.bfloat16 when the ``ml_dtypes`` module is installed;
                               otherwise unsupported (NumPy has no bfloat16):
                               feeding or fetching one raises TypeError
DT_QINT8 ...   int8 ...        quantized types come back as their integer
                               type; they cannot be fed
=============  ==============  ===============================================
"""
import numpy as np

DT_INVALID = 0
DT_FLOAT = 1
DT_DOUBLE = 2
DT_INT32 = 3
DT_UINT8 = 4
DT_INT16 = 5
DT_INT8 = 6
DT_STRING = 7
DT_COMPLEX64 = 8
DT_INT64 = 9
DT_BOOL = 10
DT_QINT8 = 11
DT_QUINT8 = 12
DT_QINT32 = 13
DT_BFLOAT16 = 14
DT_QINT16 = 15
DT_QUINT16 = 16
DT_UINT16 = 17
DT_COMPLEX128 = 18
DT_HALF = 19
DT_RESOURCE = 20
DT_VARIANT = 21
DT_UINT32 = 22
DT_UINT64 = 23

NAMES = {
    DT_FLOAT: "float32", DT_DOUBLE: "float64", DT_INT32: "int32", DT_UINT8: "uint8",
    DT_INT16: "int16", DT_INT8: "int8", DT_STRING: "string", DT_COMPLEX64: "complex64",
    DT_INT64: "int64", DT_BOOL: "bool", DT_QINT8: "qint8", DT_QUINT8: "quint8",
    DT_QINT32: "qint32", DT_BFLOAT16: "bfloat16", DT_QINT16: "qint16", DT_QUINT16: "quint16",
    DT_UINT16: "uint16", DT_COMPLEX128: "complex128", DT_HALF: "float16",
    DT_RESOURCE: "resource", DT_VARIANT: "variant", DT_UINT32: "uint32", DT_UINT64: "uint64",
}

try:  # NumPy has no bfloat16; ml_dtypes (used by JAX and TensorFlow) adds one
    import ml_dtypes as _ml_dtypes

    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the installation
    BFLOAT16 = None

# DataType -> NumPy dtype (little-endian, as tensor_content is).
_TO_NUMPY = {
    DT_FLOAT: np.dtype("<f4"), DT_DOUBLE: np.dtype("<f8"), DT_HALF: np.dtype("<f2"),
    DT_INT8: np.dtype("i1"), DT_INT16: np.dtype("<i2"), DT_INT32: np.dtype("<i4"),
    DT_INT64: np.dtype("<i8"), DT_UINT8: np.dtype("u1"), DT_UINT16: np.dtype("<u2"),
    DT_UINT32: np.dtype("<u4"), DT_UINT64: np.dtype("<u8"), DT_BOOL: np.dtype("?"),
    DT_COMPLEX64: np.dtype("<c8"), DT_COMPLEX128: np.dtype("<c16"),
    DT_STRING: np.dtype(object),
    DT_QINT8: np.dtype("i1"), DT_QUINT8: np.dtype("u1"), DT_QINT16: np.dtype("<i2"),
    DT_QUINT16: np.dtype("<u2"), DT_QINT32: np.dtype("<i4"),
}
if BFLOAT16 is not None:
    _TO_NUMPY[DT_BFLOAT16] = BFLOAT16

# NumPy kind+itemsize -> DataType, for feeds.
_FROM_NUMPY = {
    ("f", 4): DT_FLOAT, ("f", 8): DT_DOUBLE, ("f", 2): DT_HALF,
    ("i", 1): DT_INT8, ("i", 2): DT_INT16, ("i", 4): DT_INT32, ("i", 8): DT_INT64,
    ("u", 1): DT_UINT8, ("u", 2): DT_UINT16, ("u", 4): DT_UINT32, ("u", 8): DT_UINT64,
    ("b", 1): DT_BOOL, ("c", 8): DT_COMPLEX64, ("c", 16): DT_COMPLEX128,
}


def name(dtype):
    """'float32' for DT_FLOAT; 'DataType N' for codes zflow does not know."""
    return NAMES.get(dtype, "DataType %d" % dtype)


def as_numpy_dtype(dtype):
    """The NumPy dtype for a DataType. TypeError for those NumPy cannot hold
    (bfloat16 without ml_dtypes, resource, variant, unknown codes)."""
    np_dtype = _TO_NUMPY.get(dtype)
    if np_dtype is None:
        if dtype == DT_BFLOAT16:
            raise TypeError("bfloat16 tensors need the ml_dtypes module: NumPy has no bfloat16")
        raise TypeError("%s tensors have no NumPy equivalent" % name(dtype))
    return np_dtype


_from_numpy_cache = {}


def from_numpy(np_dtype):
    """The DataType for a NumPy dtype; TypeError when there is none."""
    dt = _from_numpy_cache.get(np_dtype)
    if dt is None:
        dt = _from_numpy(np_dtype)
        if isinstance(np_dtype, np.dtype):
            _from_numpy_cache[np_dtype] = dt
    return dt


def _from_numpy(np_dtype):
    np_dtype = np.dtype(np_dtype)
    if BFLOAT16 is not None and np_dtype == BFLOAT16:
        return DT_BFLOAT16
    if np_dtype.kind in ("O", "S", "U"):
        return DT_STRING
    dt = _FROM_NUMPY.get((np_dtype.kind, np_dtype.itemsize))
    if dt is None or np_dtype.fields is not None:
        raise TypeError("NumPy dtype %s has no zflow equivalent" % np_dtype)
    return dt
