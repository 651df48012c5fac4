"""One-shot jobs (SubmitJob, PollJob, WaitJob) and the executor listing."""
import collections
import os
import threading
import time

from . import _fetch, _graph, errors
from ._channel import DEFAULT_TIMEOUT_MS, Channel
from ._proto import service_pb2
from .session import DEFAULT_TARGET, feeds_to_proto, fetches_from_proto, session_options

_WAIT_SLICE_MS = 30000  # one WaitJob's own timeout while result() waits
_WAIT_MARGIN_MS = 3000  # a WaitJob's own timeout answers before ours

JobProgress = collections.namedtuple(
    "JobProgress", ["state", "steps_done", "steps_total", "partitions_running",
                    "partitions_total", "elapsed_ms", "attempts"])
JobProgress.__doc__ = """What PollJob reports: state ("QUEUED", "RUNNING" or "DONE": finished or
failed, its result waiting to be collected), steps done and in all, the
partitions of the current step still running and of the plan (0 before
the first step), ms since it started running (frozen once done), and the
times the broker handed it to a scheduler (more than 1: one was lost)."""

_STATES = {service_pb2.JOB_STATE_QUEUED: "QUEUED", service_pb2.JOB_STATE_RUNNING: "RUNNING",
           service_pb2.JOB_STATE_DONE: "DONE"}


class Job:
    """A job on a zflow service, by id. Job(id, target=...) reattaches to a
    job submitted elsewhere (another process); its result() is then a dict
    of fetched tensor names to arrays, as the service names them.
    """

    def __init__(self, id, target=DEFAULT_TARGET, _plan=None):
        if not isinstance(id, str) or not id:
            raise ValueError("a job id must be a non-empty string, not %r" % (id,))
        self._id = id
        self._target = target
        self._plan = _plan
        self._lock = threading.Lock()
        self._channel = None
        self._done = False
        self._result = None
        self._resumed = 0

    @property
    def id(self):
        return self._id

    @property
    def target(self):
        return self._target

    @property
    def resumed_from_step(self):
        """Once result() has returned: the step of the checkpoint the job
        restored (submit's checkpoint_every), 0 when none."""
        return self._resumed

    def __repr__(self):
        return "zflow.Job(%r, target=%r)" % (self._id, self._target)

    def _call(self, env, want, timeout_ms):
        if self._channel is None:
            self._channel = Channel(self._target)
        ch = self._channel
        try:
            return ch.call(ch.broker, env, want, timeout_ms)
        except errors.OpError:
            # The reply may still come on this connection: start afresh.
            self._channel = None
            ch.close()
            raise

    def poll(self):
        """The job's progress (JobProgress); does not collect its result.
        NotFoundError once the result is collected or expired."""
        with self._lock:
            env = service_pb2.Envelope()
            env.poll_job.job_id = self._id
            r = self._call(env, "poll_job_reply", DEFAULT_TIMEOUT_MS)
            if r.status.code != 0:
                raise errors.from_status(r.status.code, r.status.message)
            state = _STATES.get(r.state)
            if state is None:
                raise errors.InternalError("the service answered PollJob with job state %d"
                                           % r.state)
            return JobProgress(state, r.steps_done, r.steps_total, r.partitions_running,
                               r.partitions_total, r.elapsed_ms, r.attempts)

    def cancel(self):
        """Cancels the job (CancelJob): a queued job never runs, a running one
        stops in its current step on every executor and runs no further
        step. result() then raises CancelledError. FailedPreconditionError
        for a job that has finished (its result stays), NotFoundError for
        one collected or unknown. Another thread's result() may be waiting:
        the cancel goes on a connection of its own, without its lock."""
        env = service_pb2.Envelope()
        env.cancel_job.job_id = self._id
        ch = Channel(self._target)
        try:
            ch.call(ch.broker, env, "status_reply", DEFAULT_TIMEOUT_MS)
        finally:
            ch.close()

    def done(self):
        """True once the job has finished (or failed)."""
        if self._done:
            return True
        return self.poll().state == "DONE"

    def result(self, timeout=None):
        """Waits for the job and returns its fetches (the same structure as
        submitted, or a dict by name for a reattached job); raises the job's
        error. timeout (seconds; None: as long as it runs) passing first
        raises DeadlineExceededError and the job goes on: a later result()
        collects it. The service hands a result out once; this object keeps
        it for further calls."""
        with self._lock:
            if self._done:
                if isinstance(self._result, BaseException):
                    raise self._result
                return self._result
            start = time.monotonic()
            total_ms = None if timeout is None else max(1, int(timeout * 1000))
            while True:
                if total_ms is None:
                    slice_ms = _WAIT_SLICE_MS
                else:
                    left = total_ms - (time.monotonic() - start) * 1000
                    slice_ms = int(min(max(left, 1), _WAIT_SLICE_MS))
                env = service_pb2.Envelope()
                env.wait_job.job_id = self._id
                env.wait_job.timeout_ms = slice_ms
                r = self._call(env, "run_step_reply", slice_ms + _WAIT_MARGIN_MS)
                if not r.unfinished:
                    break
                if total_ms is not None and (time.monotonic() - start) * 1000 >= total_ms:
                    raise errors.DeadlineExceededError(
                        "job %s has not finished within %d ms; it goes on, and a later wait "
                        "can collect its result" % (self._id, total_ms))
            self._done = True
            self._resumed = r.resumed_from_step
            if r.status.code != 0:
                self._result = errors.from_status(r.status.code, r.status.message)
                raise self._result
            if self._plan is not None:
                self._result = self._plan.build(fetches_from_proto(r.fetches, self._plan.tensors))
            else:
                names = [nt.name for nt in r.fetches]
                self._result = dict(zip(names, fetches_from_proto(r.fetches, names)))
            return self._result

    def close(self):
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = None

    def __del__(self):
        try:
            if self._channel is not None:
                self._channel.close()
        except Exception:
            pass


def submit(graph, fetches, feed_dict=None, steps=1, init=None, target=DEFAULT_TARGET,
           config=None, checkpoint_every=0, checkpoint_dir=None):
    """Submits a one-shot job and returns its Job at once: a session for
    graph, the operations in init (a name or list of names; variable
    initializers) run once, then the step (feed_dict, fetches as in
    Session.run) run `steps` times on that session (variables carry over;
    the fetches are the last run's), and the session closed. The result
    stays with the service until collected (Job.result), from this process
    or another (Job(id, target)).

    checkpoint_every N > 0 saves the job's variables every N steps into
    checkpoint_dir (TensorFlow's checkpoint format, on the executors' file
    system); a job that starts where a checkpoint is (run again after its
    scheduler was lost, or submitted again) restores it and goes on after
    its step."""
    gd = _graph.load_graph(graph)
    plan = _fetch.FetchPlan(fetches)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError("steps must be a positive integer, not %r" % (steps,))
    if init is None:
        init = []
    elif isinstance(init, str) or not isinstance(init, (list, tuple)):
        init = [init]
    init_names = []
    for x in init:
        n = _fetch._name_of(x)
        init_names.append(n[1:] if n.startswith("^") else n)
    env = service_pb2.Envelope()
    sj = env.submit_job
    sj.session.graph.CopyFrom(gd)
    sj.session.options.CopyFrom(session_options(config))
    feeds_to_proto(feed_dict, _graph.feed_dtypes(gd), sj.step.feeds)
    sj.step.fetches.extend(plan.tensors)
    sj.step.targets.extend(plan.targets)
    sj.steps = steps
    sj.init_targets.extend(init_names)
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) \
            or checkpoint_every < 0:
        raise ValueError("checkpoint_every must be 0 or a positive integer, not %r"
                         % (checkpoint_every,))
    if checkpoint_every and not checkpoint_dir:
        raise ValueError("checkpoint_every needs a checkpoint_dir")
    sj.checkpoint_every = checkpoint_every
    sj.checkpoint_dir = os.fspath(checkpoint_dir) if checkpoint_dir else ""
    ch = Channel(target)
    try:
        r = ch.call(ch.broker, env, "submit_job_reply", DEFAULT_TIMEOUT_MS)
    finally:
        ch.close()
    if r.status.code != 0:
        raise errors.from_status(r.status.code, r.status.message)
    return Job(r.job_id, target=target, _plan=plan)


Executor = collections.namedtuple(
    "Executor", ["name", "device_type", "incarnation", "memory_limit", "host_id",
                 "control_endpoint", "rendezvous_endpoint", "load", "ms_since_heartbeat"])
Executor.__doc__ = "A live executor (one device) as the broker lists it."


def executors(target=DEFAULT_TARGET):
    """The live executors (devices) registered with the broker at target."""
    ch = Channel(target)
    try:
        env = service_pb2.Envelope()
        env.list_executors.SetInParent()
        r = ch.call(ch.broker, env, "list_executors_reply", DEFAULT_TIMEOUT_MS)
    finally:
        ch.close()
    if r.status.code != 0:
        raise errors.from_status(r.status.code, r.status.message)
    return [Executor(e.device.name, e.device.device_type, e.device.incarnation,
                     e.device.memory_limit, e.host_id, e.control_endpoint,
                     e.rendezvous_endpoint, e.load, e.ms_since_heartbeat)
            for e in r.executors]
