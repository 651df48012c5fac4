"""The hand-written step messages (zflow._wire) against the generated
protobuf classes: the same messages, both ways, for every dtype."""
import numpy as np
import pytest

from zflow import _tensor, _wire, dtypes
from zflow._proto import service_pb2, tensor_pb2
from zflow.session import feed_arrays

VALUES = [
    np.array([[True, False]]), np.array([-128, 127], np.int8), np.array([3], np.int16),
    np.array([[1, -2], [3, 4]], np.int32), np.array([-2**63], np.int64),
    np.array([255], np.uint8), np.array([65535], np.uint16), np.array([2**32 - 1], np.uint32),
    np.array([2**64 - 1], np.uint64), np.array([0.5], np.float16), np.float32(-1.25),
    np.zeros((0, 4), np.float64), np.array([1 - 2j], np.complex64),
    np.array([3j], np.complex128), np.array([b"x", b"", b"\xff" * 200], dtype=object),
    np.zeros((3, 0, 2), np.int32), np.arange(70000, dtype=np.float32).reshape(7, 10000),
]


def test_run_step_envelopes_match_the_generated_classes():
    feeds = feed_arrays({"in%d:0" % i: v for i, v in enumerate(VALUES)}, {})
    body = _wire.run_step_body("ab12cd34/session-1-\u00e9", feeds, ["a:0", "b:1"], ["t"], 1500)
    frame = _wire.envelope(2**63 + 5, body)
    want = service_pb2.Envelope(version=1, request_id=2**63 + 5)
    rs = want.run_step
    rs.session = "ab12cd34/session-1-\u00e9"
    for name, arr, _ in feeds:
        nt = rs.feeds.add()
        nt.name = name
        _tensor.fill_proto(nt.tensor, arr)
    rs.fetches.extend(["a:0", "b:1"])
    rs.targets.append("t")
    rs.timeout_ms = 1500
    assert service_pb2.Envelope.FromString(frame) == want
    assert frame == want.SerializeToString()


def test_run_step_replies_read_as_the_generated_classes_write_them():
    rep = service_pb2.Envelope(version=1, request_id=77)
    r = rep.run_step_reply
    r.status.code = 0
    r.step_id = 2**40 + 3
    for i, v in enumerate(VALUES):
        nt = r.fetches.add()
        nt.name = "f%d:0" % i
        _tensor.fill_proto(nt.tensor, _tensor.to_numpy(v))
    # typed *_val fields, as TensorFlow writes small constants
    nt = r.fetches.add()
    nt.name = "vals:0"
    nt.tensor.dtype = dtypes.DT_FLOAT
    nt.tensor.tensor_shape.dim.add().size = 3
    nt.tensor.float_val.extend([1.5, 2.5])
    buf = rep.SerializeToString()
    version, rid, body, span = _wire.envelope_header(buf)
    assert (version, rid, body) == (1, 77, 33)
    code, message, fetched, step_id, unfinished = _wire.run_step_reply(buf, span)
    assert (code, message, step_id, unfinished) == (0, "", 2**40 + 3, False)
    assert [n for n, _ in fetched] == ["f%d:0" % i for i in range(len(VALUES))] + ["vals:0"]
    for (name, tspan), v in zip(fetched, VALUES):
        got = _wire.tensor(buf, tspan)
        want = _tensor.to_numpy(v)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tolist() == want.tolist(), name
    np.testing.assert_array_equal(_wire.tensor(buf, fetched[-1][1]), [1.5, 2.5, 2.5])


def test_an_error_reply_and_malformed_input():
    rep = service_pb2.Envelope(version=1, request_id=1)
    rep.run_step_reply.status.code = 3
    rep.run_step_reply.status.message = "Cannot feed value of shape [3] \u00e9"
    rep.run_step_reply.unfinished = True
    buf = rep.SerializeToString()
    _, _, _, span = _wire.envelope_header(buf)
    assert _wire.run_step_reply(buf, span)[:2] == (3, "Cannot feed value of shape [3] \u00e9")
    assert _wire.run_step_reply(buf, span)[4] is True
    with pytest.raises(ValueError):
        _wire.envelope_header(buf[:-3])
    with pytest.raises(ValueError):
        _wire.envelope_header(b"\x0f\x01")  # wire type 7
    t = tensor_pb2.TensorProto(dtype=dtypes.DT_FLOAT, tensor_content=b"\x00" * 12)
    t.tensor_shape.dim.add().size = 4
    data = t.SerializeToString()
    with pytest.raises(ValueError, match="tensor_content has 12 bytes but float32 \\[4\\] "
                                         "needs 16"):
        _wire.tensor(data, (0, len(data)))


def test_bfloat16_needs_ml_dtypes():
    t = tensor_pb2.TensorProto(dtype=dtypes.DT_BFLOAT16, half_val=[0x3F80])
    data = t.SerializeToString()
    if dtypes.BFLOAT16 is None:
        with pytest.raises(TypeError, match="bfloat16 tensors need the ml_dtypes module"):
            _wire.tensor(data, (0, len(data)))
    else:
        assert float(_wire.tensor(data, (0, len(data)))) == 1.0


def test_a_reply_cannot_make_the_client_fill_a_huge_tensor():
    # one value repeated over 2**40 elements, or a string tensor_content
    # that claims 2**40 strings: refused before anything that size is made
    for t in (tensor_pb2.TensorProto(dtype=dtypes.DT_FLOAT, float_val=[1.0]),
              tensor_pb2.TensorProto(dtype=dtypes.DT_FLOAT),
              tensor_pb2.TensorProto(dtype=dtypes.DT_STRING, string_val=[b"x"])):
        t.tensor_shape.dim.add().size = 1 << 40
        data = t.SerializeToString()
        with pytest.raises(ValueError, match="would take more than 256 MiB"):
            _wire.tensor(data, (0, len(data)))
    t = tensor_pb2.TensorProto(dtype=dtypes.DT_STRING, tensor_content=b"\x01x")
    t.tensor_shape.dim.add().size = 1 << 40
    data = t.SerializeToString()
    with pytest.raises(ValueError, match="bad string length"):
        _wire.tensor(data, (0, len(data)))
    # a fill within the limit still works
    t = tensor_pb2.TensorProto(dtype=dtypes.DT_FLOAT, float_val=[2.0])
    t.tensor_shape.dim.add().size = 1000
    data = t.SerializeToString()
    np.testing.assert_array_equal(_wire.tensor(data, (0, len(data))), np.full(1000, 2.0))
