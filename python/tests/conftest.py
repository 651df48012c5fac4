"""Fixtures: a local zflow cluster (`zflow up`, found through $ZFLOW_BIN or
PATH) shared by the tests, and helpers that read graphs independently of
the client (straight from the protobuf text)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest
from google.protobuf import text_format

import zflow
from zflow._proto import graph_pb2

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def zflow_bin():
    return zflow.find_zflow()


@pytest.fixture(scope="session")
def cluster(zflow_bin):
    with zflow.LocalCluster(cpu=2, zflow_bin=zflow_bin) as c:
        yield c


def parse_graph(text):
    return text_format.Parse(text, graph_pb2.GraphDef())


def consts(path):
    """name -> value of every float/int32 Const in a .pbtxt, decoded here
    from the text (float_val/int_val, the last value repeated)."""
    gd = text_format.Parse(pathlib.Path(path).read_text(), graph_pb2.GraphDef())
    out = {}
    for node in gd.node:
        if node.op != "Const":
            continue
        t = node.attr["value"].tensor
        shape = [d.size for d in t.tensor_shape.dim]
        n = int(np.prod(shape)) if shape else 1
        vals = list(t.float_val) if t.dtype == 1 else list(t.int_val)
        vals = vals + [vals[-1]] * (n - len(vals))
        out[node.name] = np.array(vals, np.float32 if t.dtype == 1 else np.int32).reshape(shape)
    return out


class ExtraExecutor:
    """A zflow-executor of our own joined to a cluster's broker, so that a
    test can kill it without stopping the cluster."""

    def __init__(self, bin_dir, target, name, threads=1):
        self.name = name
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "zflow-executor"), "--broker", target, "--device", "CPU:0",
             "--name", name, "--threads", str(threads)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("zflow-executor " + name), line

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
