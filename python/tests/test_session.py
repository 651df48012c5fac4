"""Session.run: fetch structures, feeds and dtypes, variables over many
runs, and several threads on one session."""
import collections
import threading

import numpy as np
import pytest

import zflow
from conftest import EXAMPLES, parse_graph

MLP = EXAMPLES / "mlp.pbtxt"

# Every dtype the service moves, through an Identity each.
DTYPES = ["DT_BOOL", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT8", "DT_UINT16",
          "DT_UINT32", "DT_UINT64", "DT_HALF", "DT_FLOAT", "DT_DOUBLE", "DT_COMPLEX64",
          "DT_COMPLEX128", "DT_STRING"]


def identity_graph():
    text = ""
    for i, dt in enumerate(DTYPES):
        text += ("node { name: 'in%d' op: 'Placeholder' attr { key: 'dtype' value { type: %s } } }\n"
                 "node { name: 'out%d' op: 'Identity' input: 'in%d' "
                 "attr { key: 'T' value { type: %s } } }\n" % (i, dt, i, i, dt))
    return parse_graph(text)


def test_every_dtype_round_trips(cluster):
    rng = np.random.default_rng(1)
    values = [
        np.array([[True, False, True]]),
        np.array([-128, 0, 127], np.int8),
        np.array([-32768, 5, 32767], np.int16),
        np.array([[-2**31, 7], [2**31 - 1, 0]], np.int32),
        np.array([-2**63, 2**63 - 1, 3], np.int64),
        np.array([0, 200, 255], np.uint8),
        np.array([0, 65535], np.uint16),
        np.array([0, 2**32 - 1], np.uint32),
        np.array([0, 2**64 - 1, 12345678901234567], np.uint64),
        np.array([1.5, -0.0009765625, 65504], np.float16),
        rng.normal(size=(2, 3, 4)).astype(np.float32),
        np.array([np.pi, -1e300, 5e-324]),
        np.array([1 + 2j, -3.5 - 0.25j], np.complex64),
        np.array([[1e200 + 1j, -1j]], np.complex128),
        np.array([[b"a", b""], [b"\x00\xffbytes", "unicode \u00e9".encode()]], dtype=object),
    ]
    feeds = {"in%d:0" % i: v for i, v in enumerate(values)}
    with zflow.Session(cluster.target, graph=identity_graph()) as sess:
        got = sess.run(["out%d:0" % i for i in range(len(DTYPES))], feeds)
        # scalars and empty tensors too
        scalar, empty, text = sess.run(["out3:0", "out10:0", "out14:0"],
                                       {"in3": np.int32(-9), "in10": np.zeros((0, 3), np.float32),
                                        "in14": "caf\u00e9"})
    for v, g in zip(values, got):
        assert g.dtype == v.dtype and g.shape == v.shape
        if v.dtype == object:
            assert g.tolist() == v.tolist()
            assert all(type(e) is bytes for e in g.reshape(-1))
        else:
            np.testing.assert_array_equal(g, v)
        assert g.flags.writeable
    assert scalar.shape == () and scalar == -9 and scalar.dtype == np.int32
    assert empty.shape == (0, 3) and empty.dtype == np.float32
    assert text.shape == () and text.item() == "caf\u00e9".encode()


def test_python_values_take_the_graphs_dtype(cluster):
    with zflow.Session(cluster.target, graph=identity_graph()) as sess:
        b, i8, f, c, u64 = sess.run(["out0:0", "out1:0", "out10:0", "out12:0", "out8:0"],
                                    {"in0": [True, False], "in1": [[1, -2]], "in10": 3,
                                     "in12": [1j], "in8": [2**64 - 1]})
    assert b.dtype == np.bool_ and b.tolist() == [True, False]
    assert i8.dtype == np.int8 and i8.tolist() == [[1, -2]]
    assert f.dtype == np.float32 and f.shape == () and f == 3.0
    assert c.dtype == np.complex64 and c.tolist() == [1j]
    assert u64.dtype == np.uint64 and u64.tolist() == [2**64 - 1]


Pair = collections.namedtuple("Pair", ["probs", "hidden"])


def test_nested_fetch_structures(cluster):
    x = np.array([[1, 2, 3, 4], [-1, 0.5, 2, -3]], np.float32)
    with zflow.Session(cluster.target, graph=MLP) as sess:
        probs, hidden = sess.run(["probs:0", "layer1/relu:0"], {"x:0": x})
        out = sess.run({"a": [("probs:0", "probs"), Pair("probs:0", "layer1/relu:0")],
                        "b": collections.OrderedDict([("z", "layer1/relu:0"), ("y", [])]),
                        "c": "^probs"}, {"x:0": x})
        single = sess.run("probs:0", {"x:0": x})
        target_only = sess.run("probs", {"x:0": x})
        tup = sess.run(("probs:0",), {"x:0": x})
        empty = sess.run([], {"x:0": x})
    assert set(out) == {"a", "b", "c"}
    first, pair = out["a"]
    assert isinstance(first, tuple) and first[1] is None
    np.testing.assert_array_equal(first[0], probs)
    assert type(pair) is Pair
    np.testing.assert_array_equal(pair.probs, probs)
    np.testing.assert_array_equal(pair.hidden, hidden)
    assert type(out["b"]) is collections.OrderedDict and list(out["b"]) == ["z", "y"]
    np.testing.assert_array_equal(out["b"]["z"], hidden)
    assert out["b"]["y"] == []
    assert out["c"] is None and target_only is None
    np.testing.assert_array_equal(single, probs)
    assert isinstance(tup, tuple) and len(tup) == 1
    assert empty == []


def test_bad_fetch_and_feed_arguments_fail_cleanly(cluster):
    with zflow.Session(cluster.target, graph=MLP) as sess:
        with pytest.raises(TypeError, match="Fetch argument 3 has invalid type int"):
            sess.run(["probs:0", 3], {"x:0": np.zeros((1, 4), np.float32)})
        with pytest.raises(TypeError, match="Fetch argument None has invalid type"):
            sess.run(None)
        with pytest.raises(TypeError, match="cannot feed 'list' as 'x:0'"):
            sess.run("probs:0", {"x:0": [[1, 2], [3]]})
        with pytest.raises(TypeError, match="feed_dict must be a dict"):
            sess.run("probs:0", [1, 2])
        with pytest.raises(ValueError, match="unknown run options: timeout"):
            sess.run("probs:0", {"x:0": np.zeros((1, 4), np.float32)}, options={"timeout": 1})
        # the session still works
        assert sess.run("probs:0", {"x:0": np.zeros((1, 4), np.float32)}).shape == (1, 2)
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run("probs:0", {"x:0": np.zeros((1, 4), np.float32)})
    sess.close()  # idempotent


TRAIN = """
node { name: 'w' op: 'VariableV2' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'shape' value { shape { dim { size: 3 } dim { size: 1 } } } } }
node { name: 'w0' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT
              tensor_shape { dim { size: 3 } dim { size: 1 } } float_val: 0.5 float_val: -0.25 float_val: 0 } } } }
node { name: 'init' op: 'Assign' input: 'w' input: 'w0' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'y' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'pred' op: 'MatMul' input: 'x' input: 'w' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'err' op: 'Sub' input: 'pred' input: 'y' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'xte' op: 'MatMul' input: 'x' input: 'err' attr { key: 'T' value { type: DT_FLOAT } }
       attr { key: 'transpose_a' value { b: true } } }
node { name: 'scale' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 0.25 } } } }
node { name: 'grad' op: 'Mul' input: 'xte' input: 'scale' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'lr' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 0.1 } } } }
node { name: 'train' op: 'ApplyGradientDescent' input: 'w' input: 'lr' input: 'grad'
       attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'sq' op: 'Square' input: 'err' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'axes' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }
       attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
              int_val: 0 int_val: 1 } } } }
node { name: 'loss' op: 'Mean' input: 'sq' input: 'axes' attr { key: 'T' value { type: DT_FLOAT } }
       attr { key: 'Tidx' value { type: DT_INT32 } } }
node { name: 'read' op: 'Identity' input: 'w' attr { key: 'T' value { type: DT_FLOAT } } }
"""


def test_a_variable_trains_over_many_runs(cluster):
    """Gradient descent on a linear model, one run per step (the variable
    lives on the service between runs), against the same updates in NumPy."""
    rng = np.random.default_rng(5)
    true_w = np.array([[1.5], [-2.0], [0.75]], np.float32)
    w = np.array([[0.5], [-0.25], [0.0]], np.float32)
    losses = []
    with zflow.Session(cluster.target, graph=parse_graph(TRAIN)) as sess:
        assert sess.run("init") is None
        np.testing.assert_array_equal(sess.run("read:0"), w)
        for step in range(60):
            x = rng.normal(size=(8, 3)).astype(np.float32)
            y = x @ true_w
            loss, _ = sess.run(["loss:0", "train"], {"x:0": x, "y:0": y})
            err = x @ w - y
            np.testing.assert_allclose(loss, np.mean(err * err), rtol=1e-4, atol=1e-6)
            w = w - np.float32(0.1) * ((x.T @ err) * np.float32(0.25))
            losses.append(float(loss))
        got = sess.run("read:0")
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, true_w, atol=1e-2)
    assert losses[-1] < losses[0] / 100


def test_eight_threads_share_a_session(cluster):
    from test_examples import mlp_numpy
    errors = []
    with zflow.Session(cluster.target, graph=MLP) as sess:
        def worker(k):
            try:
                rng = np.random.default_rng(100 + k)
                for _ in range(25):
                    x = rng.normal(size=(k + 1, 4)).astype(np.float32)
                    got = sess.run({"p": "probs:0"}, {"x:0": x})["p"]
                    np.testing.assert_allclose(got, mlp_numpy(x.astype(np.float64))[1],
                                               rtol=1e-5, atol=1e-6)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_run_metadata_gets_the_step_id(cluster):
    md = {}
    with zflow.Session(cluster.target, graph=MLP) as sess:
        sess.run("probs:0", {"x:0": np.zeros((1, 4), np.float32)}, run_metadata=md)
        first = md["step_id"]
        sess.run("probs:0", {"x:0": np.zeros((1, 4), np.float32)}, run_metadata=md)
    assert first > 0 and md["step_id"] != first


def test_executors_lists_the_clusters_devices(cluster):
    ex = zflow.executors(cluster.target)
    names = sorted(e.name for e in ex)
    assert names == ["/job:localhost/replica:0/task:0/device:CPU:0",
                     "/job:localhost/replica:0/task:0/device:CPU:1"]
    for e in ex:
        assert e.device_type == "CPU" and e.incarnation != 0
        assert e.control_endpoint.startswith("tcp://127.0.0.1:")
        assert e.rendezvous_endpoint.startswith("tcp://127.0.0.1:")


def test_large_strided_and_big_endian_feeds(cluster):
    rng = np.random.default_rng(9)
    big = rng.normal(size=(1024, 2048)).astype(np.float32)  # 8 MiB
    strided = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2].T  # not contiguous
    swapped = np.array([1.5, -2.25, 1e300], dtype=">f8")
    with zflow.Session(cluster.target, graph=identity_graph()) as sess:
        got_big, got_strided, got_swapped = sess.run(
            ["out10:0", "out3:0", "out11:0"],
            {"in10:0": big, "in3:0": strided, "in11:0": swapped})
    np.testing.assert_array_equal(got_big, big)
    np.testing.assert_array_equal(got_strided, strided)
    assert got_strided.shape == (3, 4)
    np.testing.assert_array_equal(got_swapped, swapped.astype("<f8"))


def test_values_that_cannot_be_tensors_fail_cleanly(cluster):
    with zflow.Session(cluster.target, graph=identity_graph()) as sess:
        with pytest.raises(TypeError, match="cannot feed 'dict' as 'in10:0'"):
            sess.run("out10:0", {"in10:0": {"a": 1}})
        with pytest.raises(TypeError, match="cannot feed 'ndarray' as 'in14:0'"):
            sess.run("out14:0", {"in14:0": np.array([1, object()], dtype=object)})
        with pytest.raises(TypeError, match="cannot feed 'ndarray' as 'in10:0'"):
            sess.run("out10:0", {"in10:0": np.zeros(2, dtype=[("a", "i4"), ("b", "f4")])})
        np.testing.assert_array_equal(sess.run("out10:0", {"in10:0": [1.5]}), [1.5])


def test_steps_through_the_broker_give_the_same_values(cluster):
    from test_examples import mlp_numpy
    x = np.random.default_rng(11).normal(size=(3, 4)).astype(np.float32)
    with zflow.Session(cluster.target, graph=MLP, direct=False) as sess:
        got = sess.run("probs:0", {"x:0": x})
        assert sess._all and all(not ch._schedulers for ch in sess._all)  # the broker only
    np.testing.assert_allclose(got, mlp_numpy(x.astype(np.float64))[1], rtol=1e-5, atol=1e-6)


def test_graph_options_in_the_config_keep_the_values(cluster):
    from test_examples import mlp_numpy
    x = np.random.default_rng(12).normal(size=(2, 4)).astype(np.float32)
    want = mlp_numpy(x.astype(np.float64))[1]
    config = {"enable_recv_scheduling": True, "build_cost_model": 2,
              "enable_bfloat16_sendrecv": False, "allow_soft_placement": True}
    with zflow.Session(cluster.target, graph=MLP, config=config) as sess:
        for _ in range(3):
            np.testing.assert_allclose(sess.run("probs:0", {"x:0": x}), want, rtol=1e-5,
                                       atol=1e-6)
    opts = zflow.session.session_options(config)
    assert opts.enable_recv_scheduling and opts.build_cost_model == 2
    with pytest.raises(ValueError):
        zflow.session.session_options({"build_cost_model": -1})
    with pytest.raises(ValueError):
        zflow.session.session_options({"enable_xla": True})
    assert zflow.session.session_options({"partition_by": "task"}).partition_by == "task"
    assert zflow.session.session_options({}).partition_by == "device"
    with pytest.raises(ValueError, match="'tasks'"):
        zflow.session.session_options({"partition_by": "tasks"})
    with zflow.Session(cluster.target, graph=MLP, config={"partition_by": "task"}) as sess:
        np.testing.assert_allclose(sess.run("probs:0", {"x:0": x}), want, rtol=1e-5, atol=1e-6)
