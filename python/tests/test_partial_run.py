"""Session.partial_run_setup and Session.partial_run: one step fed and
fetched in pieces, its partitions on both executors of the cluster staying
live between the calls (tests/data/partial_run.pbtxt: r1 = a + b on CPU:0,
r2 = r1 * c on CPU:1)."""
import numpy as np
import pytest

import zflow
from conftest import REPO

GRAPH = REPO / "tests" / "data" / "partial_run.pbtxt"


def test_partial_run_as_tensorflows(cluster):
    with zflow.Session(cluster.target, graph=GRAPH) as sess:
        h = sess.partial_run_setup(["r1:0", "r2:0"], ["a:0", "b:0", "c:0"])
        res = sess.partial_run(h, "r1:0", feed_dict={"a:0": 1.0, "b:0": 2.0})
        assert res == np.float32(3.0)
        temp = float(res) * 17  # a Python value takes the graph's dtype
        res = sess.partial_run(h, "r2:0", feed_dict={"c:0": temp})
        assert res == np.float32(3.0 * 51.0)
        # nested fetch structures, as run() takes them
        h = sess.partial_run_setup({"sum": "r1:0", "prod": "r2:0"}, ["a:0", "b:0", "c:0"])
        sess.partial_run(h, [], feed_dict={"a:0": 5.0, "b:0": 6.0})
        got = sess.partial_run(h, {"sum": "r1:0", "prod": "r2:0"}, feed_dict={"c:0": 2.0})
        assert got == {"sum": np.float32(11.0), "prod": np.float32(22.0)}


def test_partial_run_errors_in_tensorflows_words(cluster):
    with zflow.Session(cluster.target, graph=GRAPH) as sess:
        h = sess.partial_run_setup(["r1:0"], ["a:0", "b:0"])
        with pytest.raises(zflow.errors.InvalidArgumentError,
                           match="was not specified in partial_run_setup.$"):
            sess.partial_run(h, "r1:0", feed_dict={"a:0": 1.0, "b:0": 2.0, "c:0": 3.0})
        with pytest.raises(zflow.errors.InvalidArgumentError,
                           match="can't be computed from the feeds that have been fed so far"):
            sess.partial_run(h, "r1:0", feed_dict={"a:0": 1.0})
        sess.partial_run(h, [], feed_dict={"a:0": 1.0})
        with pytest.raises(zflow.errors.InvalidArgumentError, match="has already been fed."):
            sess.partial_run(h, [], feed_dict={"a:0": 1.0})
        assert sess.partial_run(h, "r1:0", feed_dict={"b:0": 4.0}) == np.float32(5.0)
        with pytest.raises(zflow.errors.FailedPreconditionError, match="has completed"):
            sess.partial_run(h, "r1:0")
        with pytest.raises(zflow.errors.InvalidArgumentError,
                           match="Must run PartialRunSetup before performing partial runs"):
            sess.partial_run("prun-0000000000000002", "r1:0")
