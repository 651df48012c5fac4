#!/usr/bin/env python3
"""The Python client against the C client on the same local cluster:

- step latency: the MLP example ([2,4] feed, fetch probs:0) run many times
  on one session by each client, median per step;
- bandwidth: a 64 MiB float32 array fed and fetched back through an
  Identity, (64 MiB in + 64 MiB out) / median step time.

Prints each figure and the ratios (targets: Python latency <= 1.3x the C
client's, Python bandwidth >= 0.7x), and each client's own CPU time per
small step, which a loaded machine does not blur. Rounds alternate between
the clients so both see the same machine load.

    python3 python/bench/bench_client.py [--zflow BUILD/bin/zflow]
        [--client-step BUILD/python-bench/client_step] [--reps 2000] [--rounds 3]
"""
import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import zflow  # noqa: E402

MLP = HERE.parent.parent / "examples" / "mlp.pbtxt"
BIG = 16 * 1024 * 1024  # float32 elements: 64 MiB
COPY = """
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'y' op: 'Identity' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }
"""


def fill(n, seed=7):
    return np.random.default_rng(seed).uniform(-0.5, 0.5, n).astype(np.float32)


def python_steps(target, graph, feed, fetch, reps, warmup, cpu=None):
    times = []
    c0 = time.process_time()
    with zflow.Session(target, graph=graph) as sess:
        for i in range(warmup + reps):
            t0 = time.perf_counter()
            out = sess.run(fetch, {"x:0": feed})
            dt = time.perf_counter() - t0
            if i >= warmup:
                times.append(dt)
        assert out.shape == feed.shape or fetch == "probs:0"
    if cpu is not None:
        cpu.append((time.process_time() - c0) / (reps + warmup))
    return statistics.median(times)


def c_steps(client_step, target, graph, dims, fetch, reps, warmup, cpu=None):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([client_step, target, str(graph), "x:0", dims, fetch, str(reps),
                          str(warmup)], capture_output=True, text=True, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / (reps + warmup))
    fields = dict(kv.split("=") for kv in out.stdout.split())
    return float(fields["median_us"]) * 1e-6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zflow", help="the zflow program (default: $ZFLOW_BIN or PATH)")
    ap.add_argument("--client-step", help="the C client's bench program (default: "
                    "python-bench/client_step next to the zflow program's bin/)")
    ap.add_argument("--reps", type=int, default=2000, help="latency steps per round")
    ap.add_argument("--big-reps", type=int, default=10, help="64 MiB steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=2, help="CPU executors of the cluster")
    args = ap.parse_args()
    zbin = zflow.find_zflow(args.zflow)
    client_step = args.client_step or os.path.join(os.path.dirname(os.path.dirname(zbin)),
                                                   "python-bench", "client_step")
    if not os.access(client_step, os.X_OK):
        sys.exit("bench_client: cannot run %s (build the project first, or pass --client-step)"
                 % client_step)
    with tempfile.TemporaryDirectory() as tmp:
        copy_pb = pathlib.Path(tmp) / "copy.pbtxt"
        copy_pb.write_text(COPY)
        small = fill(8).reshape(2, 4)
        big = fill(BIG)
        lat_py, lat_c, bw_py, bw_c = [], [], [], []
        cpu_py, cpu_c = [], []
        with zflow.LocalCluster(cpu=args.cpu, zflow_bin=zbin) as cluster:
            t = cluster.target
            for r in range(args.rounds):
                lat_c.append(c_steps(client_step, t, MLP, "2,4", "probs:0", args.reps, 200,
                                     cpu_c))
                lat_py.append(python_steps(t, MLP, small, "probs:0", args.reps, 200, cpu_py))
                bw_c.append(c_steps(client_step, t, copy_pb, str(BIG), "y:0", args.big_reps, 2))
                bw_py.append(python_steps(t, str(copy_pb), big, "y:0", args.big_reps, 2))
                print("round %d: latency C %.0f us, Python %.0f us; 64 MiB step C %.1f ms, "
                      "Python %.1f ms" % (r + 1, lat_c[-1] * 1e6, lat_py[-1] * 1e6,
                                          bw_c[-1] * 1e3, bw_py[-1] * 1e3), flush=True)
    mib = 2 * BIG * 4 / 2**20  # fed and fetched
    print("client CPU per small step (user + system, the load-independent part): C client "
          "%.0f us, Python client %.0f us (medians over rounds)"
          % (statistics.median(cpu_c) * 1e6, statistics.median(cpu_py) * 1e6))
    lat_ratios = sorted(p / c for p, c in zip(lat_py, lat_c))
    bw_ratios = sorted(c / p for p, c in zip(bw_py, bw_c))
    print("step latency: C client %.0f us, Python client %.0f us (best rounds); Python/C per "
          "round %s, median %.2fx (target <= 1.3x)"
          % (min(lat_c) * 1e6, min(lat_py) * 1e6, " ".join("%.2f" % r for r in lat_ratios),
             statistics.median(lat_ratios)))
    print("64 MiB feed + fetch: C client %.0f MiB/s, Python client %.0f MiB/s (best rounds); "
          "Python/C per round %s, median %.2fx (target >= 0.7x)"
          % (mib / min(bw_c), mib / min(bw_py), " ".join("%.2f" % r for r in bw_ratios),
             statistics.median(bw_ratios)))


if __name__ == "__main__":
    main()
