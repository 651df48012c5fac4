"""zflow: a Python client for the zflow distributed dataflow-graph runtime.

    import numpy as np, zflow
    with zflow.LocalCluster(cpu=2) as cluster, \\
            zflow.Session(cluster.target, graph="examples/mlp.pbtxt") as sess:
        probs = sess.run("probs:0", feed_dict={"x:0": np.ones((1, 4), np.float32)})

It speaks the service's wire protocol (ZeroMQ DEALER sockets, protobuf
zflow.Envelope frames; docs/service.md) directly. Its protobuf modules
(zflow._proto) are generated from proto/*.proto by protoc when the project
is built.
"""
from . import dtypes, errors
from .cluster import LocalCluster, find_zflow
from .errors import OpError
from .jobs import Executor, Job, JobProgress, executors, submit
from .session import DEFAULT_TARGET, Session

__version__ = "0.1.0"

__all__ = ["Session", "submit", "Job", "JobProgress", "executors", "Executor", "LocalCluster",
           "find_zflow", "errors", "OpError", "dtypes", "DEFAULT_TARGET"]
