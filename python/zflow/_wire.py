"""The step's hot path in protobuf wire format, written and read by hand:
a RunStep envelope (session, feeds as NamedTensors with tensor_content or
string_val, fetches, targets, timeout) and a RunStepReply. Building these
through the generated classes costs more per small step than the service
itself, and copies a large feed three times; here a feed's bytes are
copied once, into the frame. The bytes are exactly what the generated
classes produce (python/tests/test_wire.py checks that); everything else
uses the generated classes."""
import numpy as np

from . import dtypes


_SMALL = [bytes((i,)) for i in range(0x80)]


def varint(n):
    """Protobuf's base-128 varint; negative int64 as 10 bytes."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(tag, s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return tag + varint(len(b)) + b


_T_ENV_RUN_STEP = varint(32 << 3 | 2)


def _shape_field(shape):
    if not shape:
        return b"\x12\x00"
    dims = b"".join((b"\x12\x02\x08" + _SMALL[n]) if 0 < n < 0x80 else
                    (b"\x12\x00" if n == 0 else
                     b"\x12" + varint(len(varint(n)) + 1) + b"\x08" + varint(n))
                    for n in shape)
    return b"\x12" + varint(len(dims)) + dims


def tensor_parts(arr, dt):
    """The TensorProto of arr (from _tensor.to_numpy): its fields before
    the content as bytes, and the content (tensor_content, a view of arr's
    memory that is copied only when the frame is joined; or None)."""
    head = b"\x08" + varint(dt) + _shape_field(arr.shape)
    if dt == dtypes.DT_STRING:
        return head + b"".join(b"\x42" + varint(len(v)) + v for v in arr.reshape(-1)), None
    if not arr.size:
        return head, None
    if dt == dtypes.DT_BOOL:
        arr = arr.astype(np.uint8, copy=False)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    data = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
    return head + b"\x22" + varint(len(data)), data


def run_step_body(session, feeds, fetches, targets, timeout_ms, tail=None):
    """The Envelope's run_step field (tag included) as byte parts.
    feeds: (name, array, DataType) triples. tail: the encoded fetches,
    targets and timeout (run_step_tail), when the caller keeps them."""
    if tail is None:
        tail = run_step_tail(fetches, targets, timeout_ms)
    parts = [_string(b"\x0a", session)]
    size = len(parts[0]) + len(tail)
    for name, arr, dt in feeds:
        head, data = tensor_parts(arr, dt)
        tsize = len(head) + (len(data) if data is not None else 0)
        nt = _string(b"\x0a", name) + b"\x12" + varint(tsize) + head
        isize = len(nt) + (len(data) if data is not None else 0)
        nt = b"\x12" + varint(isize) + nt
        parts.append(nt)
        size += len(nt)
        if data is not None:
            parts.append(data)
            size += len(data)
    parts.append(tail)
    return [_T_ENV_RUN_STEP + varint(size)] + parts


def run_step_tail(fetches, targets, timeout_ms):
    """RunStep's fetches, targets and timeout fields, encoded."""
    out = b"".join(_string(b"\x1a", f) for f in fetches) + \
        b"".join(_string(b"\x22", t) for t in targets)
    if timeout_ms:
        out += b"\x28" + varint(timeout_ms)
    return out


def envelope(request_id, body_parts):
    """The whole frame: version 1, request id, then the body's parts."""
    return b"".join([b"\x08\x01\x10" + varint(request_id)] + body_parts)


# ---- reading --------------------------------------------------------------------


def _read_varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("a varint is too long")


def fields(buf, start=0, end=None):
    """(field number, wire type, value) of each field in buf[start:end]: an
    int for varints and fixed ints, a (start, end) span for length-delimited
    fields. ValueError for malformed input."""
    pos = start
    end = len(buf) if end is None else end
    out = []
    try:
        while pos < end:
            key = buf[pos]
            pos += 1
            if key >= 0x80:
                key, pos = _read_varint(buf, pos - 1)
            wt = key & 7
            if wt == 0:
                v = buf[pos]
                pos += 1
                if v >= 0x80:
                    v, pos = _read_varint(buf, pos - 1)
            elif wt == 2:
                n = buf[pos]
                pos += 1
                if n >= 0x80:
                    n, pos = _read_varint(buf, pos - 1)
                v = (pos, pos + n)
                pos += n
            elif wt == 1:
                v = int.from_bytes(buf[pos:pos + 8], "little")
                pos += 8
            elif wt == 5:
                v = int.from_bytes(buf[pos:pos + 4], "little")
                pos += 4
            else:
                raise ValueError("wire type %d" % wt)
            if pos > end:
                raise ValueError("a field runs past its message")
            out.append((key >> 3, wt, v))
    except IndexError:
        raise ValueError("truncated message") from None
    return out


def envelope_header(buf):
    """(version, request_id, body field number, body span) of an Envelope."""
    version = rid = 0
    body = None
    span = (0, 0)
    for num, wt, v in fields(buf):
        if num == 1 and wt == 0:
            version = v
        elif num == 2 and wt == 0:
            rid = v
        elif num >= 10 and wt == 2:
            body, span = num, v
    return version, rid, body, span


def run_step_reply(buf, span):
    """A RunStepReply in buf[span]: (status code, message, [(name, tensor
    span)], step_id, unfinished)."""
    code, message, fetches, step_id, unfinished = 0, "", [], 0, False
    for num, wt, v in fields(buf, *span):
        if num == 1 and wt == 2:
            for n2, w2, v2 in fields(buf, *v):
                if n2 == 1 and w2 == 0:
                    code = v2 - (1 << 64) if v2 >= 1 << 63 else v2
                    code &= 0xFFFFFFFF
                    code = code - (1 << 32) if code >= 1 << 31 else code
                elif n2 == 2 and w2 == 2:
                    message = bytes(buf[v2[0]:v2[1]]).decode("utf-8", "replace")
        elif num == 2 and wt == 2:
            name, tspan = "", (0, 0)
            for n2, w2, v2 in fields(buf, *v):
                if n2 == 1 and w2 == 2:
                    name = bytes(buf[v2[0]:v2[1]]).decode("utf-8", "replace")
                elif n2 == 2 and w2 == 2:
                    tspan = v2
            fetches.append((name, tspan))
        elif num == 3 and wt == 0:
            step_id = v
        elif num == 4 and wt == 0:
            unfinished = bool(v)
    return code, message, fetches, step_id, unfinished


def tensor(buf, span):
    """The ndarray of the TensorProto in buf[span]: dtype, shape and
    tensor_content read here (the content copied once, into the array);
    any other encoding goes through the generated TensorProto."""
    dt = 0
    dims = []
    content = None
    for num, wt, v in fields(buf, *span):
        if num == 1 and wt == 0:
            dt = v
        elif num == 2 and wt == 2:
            for n2, w2, v2 in fields(buf, *v):
                if n2 == 3 and w2 == 0 and v2:
                    raise ValueError("a fetched tensor has an unknown rank")
                if n2 == 2 and w2 == 2:
                    a, b = v2
                    if b - a == 2 and buf[a] == 0x08 and buf[a + 1] < 0x80:
                        dims.append(buf[a + 1])  # the usual small dim
                        continue
                    size = 0
                    for n3, w3, v3 in fields(buf, a, b):
                        if n3 == 1 and w3 == 0:
                            size = v3 - (1 << 64) if v3 >= 1 << 63 else v3
                    dims.append(size)
        elif num == 4 and wt == 2:
            content = v
        elif num == 3:
            continue
        else:
            content = None
            break
    else:
        if content is not None and content[1] > content[0] and dt != dtypes.DT_STRING:
            np_dtype = dtypes.as_numpy_dtype(dt)
            if any(d < 0 for d in dims):
                raise ValueError("a fetched tensor has a shape that is not fully defined: %s"
                                 % (dims,))
            n = 1
            for d in dims:
                n *= d
            if content[1] - content[0] != n * np_dtype.itemsize:
                raise ValueError("tensor_content has %d bytes but %s %s needs %d"
                                 % (content[1] - content[0], dtypes.name(dt), dims,
                                    n * np_dtype.itemsize))
            # a writable array of its own (one copy), as TensorFlow returns
            return np.frombuffer(buf, np_dtype, n, content[0]).reshape(dims).copy()
    from . import _tensor
    from ._proto import tensor_pb2
    return _tensor.from_proto(tensor_pb2.TensorProto.FromString(bytes(buf[span[0]:span[1]])))
