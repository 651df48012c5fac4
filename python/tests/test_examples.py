"""The examples' graphs on a real cluster, checked against NumPy."""
import numpy as np

import zflow
from conftest import EXAMPLES, consts

MLP = EXAMPLES / "mlp.pbtxt"
CNN = EXAMPLES / "cnn.pbtxt"


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def mlp_numpy(x):
    c = {k: v.astype(np.float64) for k, v in consts(MLP).items()}
    h = np.maximum(x @ c["layer1/weights"] + c["layer1/bias"], 0)
    return h, softmax(h @ c["layer2/weights"] + c["layer2/bias"])


def cnn_numpy(x):
    c = {k: v.astype(np.float64) for k, v in consts(CNN).items()}
    f, b = c["conv/filter"], c["conv/bias"]  # [3,3,2,4] HWIO
    n, h, w, _ = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))  # SAME for 3x3, stride 1
    conv = np.zeros((n, h, w, f.shape[3]))
    for i in range(h):
        for j in range(w):
            conv[:, i, j, :] = np.einsum("nabc,abcd->nd", xp[:, i:i + 3, j:j + 3, :], f)
    r = np.maximum(conv + b, 0)
    pool = r.reshape(n, h // 2, 2, w // 2, 2, -1).max(axis=(2, 4))
    return softmax(pool.reshape(n, 36) @ c["fc/weights"] + c["fc/bias"])


def test_mlp_matches_numpy(cluster):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    with zflow.Session(cluster.target, graph=str(MLP)) as sess:
        probs, hidden = sess.run(["probs:0", "layer1/relu:0"], feed_dict={"x:0": x})
    want_h, want_p = mlp_numpy(x.astype(np.float64))
    assert probs.dtype == np.float32 and probs.shape == (5, 2)
    np.testing.assert_allclose(hidden, want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs, want_p, rtol=1e-5, atol=1e-6)


def test_mlp_gives_the_clis_documented_values(cluster):
    # tests/unit/test_cli_run.c: the CLI prints these for this feed
    with zflow.Session(cluster.target, graph=MLP) as sess:
        probs = sess.run("probs:0", {"x": [[1, 2, 3, 4], [-1, 0.5, 2, -3]]})
    np.testing.assert_allclose(probs, [[0.1978161, 0.8021839], [0.4837557, 0.5162443]],
                               atol=1e-6)


def test_cnn_matches_numpy(cluster):
    # the feed tests/unit/test_cli_run.c uses, with its NumPy values
    x = np.array([((i * 3) % 17 - 8) / 8.0 for i in range(144)], np.float32).reshape(2, 6, 6, 2)
    with zflow.Session(cluster.target, graph=CNN) as sess:
        probs = sess.run("probs:0", {"x:0": x})
        rng = np.random.default_rng(3)
        y = rng.normal(size=(4, 6, 6, 2)).astype(np.float32)
        probs_y = sess.run("probs:0", {"x:0": y})
    assert probs.shape == (2, 3) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.reshape(-1), [0.1604607199, 0.2562552897, 0.5832839904,
                                                   0.1593153585, 0.5447138866, 0.2959707549],
                               atol=1e-5)
    np.testing.assert_allclose(probs, cnn_numpy(x.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(probs_y, cnn_numpy(y.astype(np.float64)), atol=1e-5)


def test_graph_arguments(cluster, tmp_path):
    """A path (str or Path), a .pb, bytes, a GraphDef and an object with
    as_graph_def() all name the same graph."""
    from zflow._proto import graph_pb2
    from google.protobuf import text_format
    gd = text_format.Parse(MLP.read_text(), graph_pb2.GraphDef())
    pb = tmp_path / "mlp.pb"
    pb.write_bytes(gd.SerializeToString())

    class HasGraphDef:
        def as_graph_def(self):
            return gd

    x = np.array([[1, 2, 3, 4]], np.float32)
    _, want = mlp_numpy(x.astype(np.float64))
    for g in (str(MLP), MLP, str(pb), gd.SerializeToString(), gd, HasGraphDef()):
        with zflow.Session(cluster.target, graph=g) as sess:
            np.testing.assert_allclose(sess.run("probs:0", {"x:0": x}), want, atol=1e-6)
