"""Jobs: submit, poll and collect, also from another process."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import zflow
from zflow import errors
from conftest import EXAMPLES, REPO

COUNTER = REPO / "tests" / "data" / "counter.pbtxt"
MLP = EXAMPLES / "mlp.pbtxt"


def test_a_job_runs_its_steps_and_returns_its_fetch_structure(cluster):
    x = np.array([[1, 2, 3, 4], [-1, 0.5, 2, -3]], np.float32)
    job = zflow.submit(MLP, {"p": "probs:0", "h": ["layer1/relu:0"]}, {"x:0": x},
                       target=cluster.target)
    assert re.fullmatch(r"job-\d+-[0-9a-f]+", job.id), job.id  # the broker's id
    out = job.result(timeout=60)
    np.testing.assert_allclose(out["p"], [[0.1978161, 0.8021839], [0.4837557, 0.5162443]],
                               atol=1e-6)
    assert isinstance(out["h"], list) and out["h"][0].shape == (2, 3)
    assert job.result() is out  # kept here once collected
    with pytest.raises(errors.NotFoundError) as e:
        job.poll()  # the service handed it out
    assert e.value.message.startswith("job '%s' not found: it is unknown here, its result was "
                                      "already collected, or it expired" % job.id)


def test_a_job_with_init_and_many_steps(cluster):
    job = zflow.submit(COUNTER, "count:0", steps=400, init="init", target=cluster.target)
    p = job.poll()
    assert p.state in ("QUEUED", "RUNNING", "DONE") and p.steps_total == 400
    assert 0 <= p.steps_done <= 400
    assert float(job.result(timeout=120)) == 400.0
    # a job's own failure is raised by result()
    bad = zflow.submit(MLP, "probs:0", target=cluster.target)
    with pytest.raises(errors.InvalidArgumentError) as e:
        bad.result(timeout=60)
    assert "You must feed a value for placeholder tensor 'x'" in e.value.message
    with pytest.raises(errors.InvalidArgumentError):
        bad.result()  # the same error again, from this object


def test_result_timeout_leaves_the_job_running(cluster):
    job = zflow.submit(COUNTER, "count:0", steps=20000, init="init", target=cluster.target)
    with pytest.raises(errors.DeadlineExceededError) as e:
        job.result(timeout=0.05)
    assert e.value.message == "job %s has not finished within 50 ms; it goes on, and a later " \
                              "wait can collect its result" % job.id
    p = job.poll()
    assert p.steps_total == 20000 and p.state in ("QUEUED", "RUNNING")
    assert float(job.result(timeout=300)) == 20000.0


def test_job_errors(cluster):
    with pytest.raises(errors.InvalidArgumentError) as e:
        zflow.submit(COUNTER, "count:0", steps=2000000, target=cluster.target)
    assert e.value.message == "SubmitJob asks for 2000000 steps; this broker accepts at most " \
                              "1000000 per job (--max-job-steps)"
    with pytest.raises(errors.NotFoundError) as e:
        zflow.Job("nosuch", target=cluster.target).poll()
    assert e.value.message.startswith("job 'nosuch' not found")
    with pytest.raises(errors.NotFoundError) as e:
        zflow.Job("deadbeef/job-1-1", target=cluster.target).result(timeout=5)
    assert e.value.message.startswith("job 'deadbeef/job-1-1' not found")
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        zflow.submit(COUNTER, "count:0", steps=0, target=cluster.target)
    with pytest.raises(ValueError, match="a job id must be a non-empty string"):
        zflow.Job("", target=cluster.target)


SUBMIT = """
import sys, zflow
job = zflow.submit(sys.argv[2], "count:0", steps=int(sys.argv[3]), init="init", target=sys.argv[1])
print(job.id)
"""

COLLECT = """
import json, sys, zflow
job = zflow.Job(sys.argv[2], target=sys.argv[1])
p = job.poll()
r = job.result(timeout=120)
print(json.dumps({"state": p.state, "total": p.steps_total,
                  "result": {k: v.tolist() for k, v in r.items()},
                  "dtype": {k: str(v.dtype) for k, v in r.items()}}))
"""


def test_submit_in_one_process_and_collect_in_another(cluster):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    sub = subprocess.run([sys.executable, "-c", SUBMIT, cluster.target, str(COUNTER), "300"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip()
    assert re.fullmatch(r"job-\d+-[0-9a-f]+", job_id), sub.stdout
    col = subprocess.run([sys.executable, "-c", COLLECT, cluster.target, job_id],
                         env=env, capture_output=True, text=True, timeout=180)
    assert col.returncode == 0, col.stderr
    out = json.loads(col.stdout)
    assert out["total"] == 300 and out["state"] in ("QUEUED", "RUNNING", "DONE")
    assert out["result"] == {"count:0": 300.0} and out["dtype"] == {"count:0": "float32"}
    # collected over there: gone here
    with pytest.raises(errors.NotFoundError):
        zflow.Job(job_id, target=cluster.target).poll()


def test_jobs_pass_between_the_c_cli_and_python(cluster, zflow_bin):
    """The same wire protocol: a job the C client submits is collected here,
    and one submitted here is collected by `zflow wait`."""
    sub = subprocess.run([zflow_bin, "submit", str(COUNTER), "--broker", cluster.target,
                          "--init", "init", "--fetch", "count", "--steps", "7"],
                         capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    out = zflow.Job(sub.stdout.strip(), target=cluster.target).result(timeout=60)
    assert list(out) == ["count"] and out["count"].dtype == np.float32
    assert float(out["count"]) == 7.0
    job = zflow.submit(COUNTER, ["count:0"], init="init", steps=5, target=cluster.target)
    wait = subprocess.run([zflow_bin, "wait", job.id, "--broker", cluster.target],
                          capture_output=True, text=True, timeout=60)
    assert wait.returncode == 0, wait.stderr
    assert wait.stdout == "count:0 =\n5.0\n"


def test_cancel_stops_a_running_job(cluster):
    job = zflow.submit(COUNTER, "count:0", steps=1000000, init="init", target=cluster.target)
    for _ in range(2000):
        if job.poll().state == "RUNNING":
            break
    job.cancel()
    with pytest.raises(errors.CancelledError) as e:
        job.result(timeout=60)
    assert e.value.message == "job %s cancelled: its client cancelled it" % job.id
    finished = zflow.submit(COUNTER, "count:0", steps=3, init="init", target=cluster.target)
    while not finished.done():
        pass
    with pytest.raises(errors.FailedPreconditionError):
        finished.cancel()
    assert float(finished.result(timeout=60)) == 3.0


def test_cancel_reaches_a_job_another_thread_waits_for(cluster):
    import threading
    job = zflow.submit(COUNTER, "count:0", steps=1000000, init="init", target=cluster.target)
    while job.poll().state != "RUNNING":
        pass
    got = []
    waiter = threading.Thread(target=lambda: got.append(_outcome(job)))
    waiter.start()
    while not job._lock.locked():  # result() is waiting, with no timeout
        pass
    job.cancel()
    waiter.join(timeout=120)
    assert not waiter.is_alive()
    assert isinstance(got[0], errors.CancelledError)


def _outcome(job):
    try:
        return job.result()
    except errors.OpError as e:
        return e


def test_a_job_resumes_from_its_checkpoint(cluster, tmp_path):
    first = zflow.submit(COUNTER, "count:0", steps=7, init="init", target=cluster.target,
                         checkpoint_every=2, checkpoint_dir=tmp_path)
    assert float(first.result(timeout=60)) == 7.0
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == ["ckpt-a.index",
                                                                      "ckpt-b.index"]
    # again on the same directory: the counter of step 6, then step 7 alone
    again = zflow.submit(COUNTER, "count:0", steps=7, init="init", target=cluster.target,
                         checkpoint_every=2, checkpoint_dir=tmp_path)
    assert float(again.result(timeout=60)) == 7.0
    assert first.resumed_from_step == 0 and again.resumed_from_step == 6
    with pytest.raises(ValueError):
        zflow.submit(COUNTER, "count:0", steps=2, target=cluster.target, checkpoint_every=1)
