"""Failures from real processes arrive as TensorFlow's exception classes
with the service's messages."""
import re
import threading

import numpy as np
import pytest

import zflow
from zflow import errors
from conftest import ExtraExecutor, parse_graph

SHAPED = parse_graph("""
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'shape' value { shape { dim { size: 2 } } } } }
node { name: 'y' op: 'Identity' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }
""")


def slow_graph(device):
    """Ten chained 2000x2000 MatMuls pinned to device: seconds of work on
    an executor with one thread, even on a fast core."""
    text = "node { name: 'a' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    prev = "a"
    for i in range(10):
        text += ("node { name: 'm%d' op: 'MatMul' input: '%s' input: 'a' device: '%s' "
                 "attr { key: 'T' value { type: DT_FLOAT } } }\n" % (i, prev, device))
        prev = "m%d" % i
    text += "node { name: 'out' op: 'Identity' input: '%s' " \
            "attr { key: 'T' value { type: DT_FLOAT } } }\n" % prev
    return parse_graph(text)


def test_the_error_classes_are_tensorflows():
    assert issubclass(errors.InvalidArgumentError, errors.OpError)
    for code, name in [(1, "CancelledError"), (2, "UnknownError"), (3, "InvalidArgumentError"),
                       (4, "DeadlineExceededError"), (5, "NotFoundError"),
                       (6, "AlreadyExistsError"), (7, "PermissionDeniedError"),
                       (8, "ResourceExhaustedError"), (9, "FailedPreconditionError"),
                       (10, "AbortedError"), (11, "OutOfRangeError"), (12, "UnimplementedError"),
                       (13, "InternalError"), (14, "UnavailableError"), (15, "DataLossError"),
                       (16, "UnauthenticatedError")]:
        cls = getattr(errors, name)
        assert cls.__name__ == name and cls.code == code
        e = errors.from_status(code, "the message")
        assert type(e) is cls and e.code == code and e.message == "the message"
        assert str(e) == "the message" and isinstance(e, errors.OpError)
    odd = errors.from_status(99, "?")
    assert type(odd) is errors.OpError and odd.code == 99


def test_bad_feeds_and_fetches(cluster):
    with zflow.Session(cluster.target, graph=SHAPED) as sess:
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("y:0", {"x:0": np.ones(3, np.float32)})
        assert e.value.message == "Cannot feed value of shape [3] for Tensor 'x:0', which has " \
                                  "shape [2]"
        assert e.value.code == errors.INVALID_ARGUMENT
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("y:0", {"x:0": np.ones((1, 2), np.float32)})
        assert e.value.message == "Cannot feed value of shape [1,2] for Tensor 'x:0', which " \
                                  "has shape [2]"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("y:0", {"x:0": np.ones(2, np.float64)})
        assert e.value.message == "Cannot feed value of dtype float64 for Tensor 'x:0', which " \
                                  "has dtype float32"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("nosuch:0", {"x:0": np.ones(2, np.float32)})
        assert e.value.message == "FetchOutputs node nosuch:0: not found"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("nosuch", {"x:0": np.ones(2, np.float32)})
        assert e.value.message == "PruneForTargets: Some target nodes not found: nosuch"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("y:3", {"x:0": np.ones(2, np.float32)})
        assert e.value.message == "FetchOutputs y:3: output index too large, must be < 1"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("y:0", {"nosuch:0": np.ones(2, np.float32)})
        assert e.value.message == "FeedInputs: unable to find feed output nosuch:0"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("y:0")
        assert re.fullmatch(r"/job:localhost/replica:0/task:0/device:CPU:[01]: x \(Placeholder\): "
                            r"You must feed a value for placeholder tensor 'x' with dtype float "
                            r"and shape \[2\]", e.value.message), e.value.message
        # after all that, the session still runs
        np.testing.assert_array_equal(sess.run("y:0", {"x:0": [4, -5]}), [4, -5])


def test_an_unknown_op_fails_the_step(cluster):
    g = parse_graph("""
node { name: 'c' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }
node { name: 'weird' op: 'FancyOp' input: 'c' }
""")
    with zflow.Session(cluster.target, graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run("c:0")
        assert "Op 'FancyOp' used by node weird" in e.value.message, e.value.message


def test_a_step_past_its_timeout_is_deadline_exceeded(cluster):
    name = "/job:slow/replica:0/task:0/device:CPU:0"
    ex = ExtraExecutor(cluster.bin_dir, cluster.target, name, threads=1)
    try:
        a = np.full((2000, 2000), 1e-3, np.float32)
        with zflow.Session(cluster.target, graph=slow_graph(name)) as sess:
            with pytest.raises(errors.DeadlineExceededError) as e:
                sess.run("out:0", {"a:0": a}, options={"timeout_in_ms": 300})
            assert re.fullmatch(r"step \d+ did not finish within 300 ms", e.value.message), \
                e.value.message
            # the session's own step timeout, from its config, too
        with zflow.Session(cluster.target, graph=slow_graph(name),
                           config={"step_timeout_ms": 200}) as sess:
            with pytest.raises(errors.DeadlineExceededError) as e:
                sess.run("out:0", {"a:0": a})
            assert re.fullmatch(r"step \d+ did not finish within 200 ms", e.value.message), \
                e.value.message
    finally:
        ex.kill()


def test_a_killed_executor_is_unavailable(cluster):
    name = "/job:doomed/replica:0/task:0/device:CPU:0"
    ex = ExtraExecutor(cluster.bin_dir, cluster.target, name, threads=1)
    a = np.full((2000, 2000), 1e-3, np.float32)
    try:
        with zflow.Session(cluster.target, graph=slow_graph(name)) as sess:
            timer = threading.Timer(0.3, ex.kill)
            timer.start()
            with pytest.raises(errors.UnavailableError) as e:
                sess.run("out:0", {"a:0": a})
            timer.join()
            # the kill lands in the step, or (on a slow machine) while its
            # partitions are still being registered
            assert re.match(r"(registering a partition: )?executor %s died: " % re.escape(name),
                            e.value.message), e.value.message
            # its device is gone: the graph pinned to it cannot be placed again
            with pytest.raises(errors.InvalidArgumentError) as e:
                sess.run("out:0", {"a:0": a})
            assert e.value.message.startswith(
                "Cannot assign a device for operation m0: Could not satisfy explicit device "
                "specification '%s' because no devices matching that specification are "
                "registered" % name), e.value.message
    finally:
        ex.kill()


def test_a_stopped_cluster_is_unavailable(zflow_bin):
    c = zflow.LocalCluster(cpu=1, zflow_bin=zflow_bin)
    try:
        sess = zflow.Session(c.target, graph=SHAPED)
        np.testing.assert_array_equal(sess.run("y:0", {"x:0": [1, 2]}), [1, 2])
    finally:
        assert c.close() == 0
    with pytest.raises(errors.UnavailableError) as e:
        sess.run("y:0", {"x:0": [1, 2]})
    assert re.fullmatch(r"no reply to RunStep: the scheduler at tcp://127\.0\.0\.1:\d+ does not "
                        r"answer \(silent for \d+ ms\)", e.value.message), e.value.message
    with pytest.raises(errors.UnavailableError):
        sess.close()
    with pytest.raises(errors.UnavailableError) as e:
        zflow.executors(c.target)
    assert re.fullmatch(r"no reply to ListExecutors: the broker at %s does not answer "
                        r"\(silent for \d+ ms\)" % re.escape(c.target), e.value.message)


def test_bad_arguments_fail_on_the_client(cluster, tmp_path):
    with pytest.raises(FileNotFoundError):
        zflow.Session(cluster.target, graph=str(tmp_path / "missing.pbtxt"))
    bad = tmp_path / "bad.pbtxt"
    bad.write_text("node { name: 'x' op: }")
    with pytest.raises(ValueError, match="bad.pbtxt: not a text GraphDef"):
        zflow.Session(cluster.target, graph=str(bad))
    with pytest.raises(ValueError, match="not a binary GraphDef"):
        zflow.Session(cluster.target, graph=b"\xff\xff\xff")
    with pytest.raises(TypeError, match="graph must be a GraphDef"):
        zflow.Session(cluster.target, graph=42)
    with pytest.raises(ValueError, match="a zflow Session needs a graph"):
        zflow.Session(cluster.target)
    with pytest.raises(ValueError, match="cannot connect to the broker at 'nonsense'"):
        zflow.Session("nonsense", graph=SHAPED)
    with pytest.raises(ValueError, match="unknown session config keys: bogus"):
        zflow.Session(cluster.target, graph=SHAPED, config={"bogus": 1})
    with pytest.raises(FileNotFoundError, match="not an executable zflow program"):
        zflow.LocalCluster(zflow_bin=str(tmp_path))


def test_another_protocol_version_is_failed_precondition(cluster):
    """A request in a version the service does not speak is refused, and the
    refusal arrives as FailedPreconditionError with the service's message."""
    from zflow import _channel
    from zflow._proto import service_pb2
    ch = _channel.Channel(cluster.target)
    try:
        env = service_pb2.Envelope(version=2, request_id=77)
        env.list_executors.SetInParent()
        ch._send_frame(ch.broker, env.SerializeToString())
        with pytest.raises(errors.FailedPreconditionError) as e:
            ch.finish(ch.broker, 77, "ListExecutors", "list_executors_reply", 5000)
        assert e.value.message == "protocol version 2 is not supported (this side speaks 1)"
        assert e.value.code == errors.FAILED_PRECONDITION
    finally:
        ch.close()
