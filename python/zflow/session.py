"""zflow.Session: TensorFlow's Session API over a zflow service."""
import threading

from . import _fetch, _graph, _tensor, _wire, dtypes, errors
from ._channel import DEFAULT_TIMEOUT_MS, Channel
from ._proto import service_pb2

DEFAULT_TARGET = "tcp://127.0.0.1:5555"
_STEP_MARGIN_MS = 3000  # the service's own step timeout answers before ours


def session_options(config):
    """A zflow.SessionOptions from config: None, a SessionOptions message,
    a dict or an object with allow_soft_placement, place_first,
    step_timeout_ms (TensorFlow's operation_timeout_in_ms is read as
    step_timeout_ms), and GraphOptions' enable_bfloat16_sendrecv,
    enable_recv_scheduling, build_cost_model and place_pruned_graph, and
    zflow's partition_by ("device", the default, or "task": the graph is
    cut between tasks first, then each task's part between its devices)."""
    if config is None:
        return service_pb2.SessionOptions()
    if isinstance(config, service_pb2.SessionOptions):
        return config
    get = config.get if isinstance(config, dict) else (lambda k, d=None: getattr(config, k, d))
    known = {"allow_soft_placement", "place_first", "step_timeout_ms", "operation_timeout_in_ms",
             "enable_bfloat16_sendrecv", "enable_recv_scheduling", "build_cost_model",
             "place_pruned_graph", "partition_by"}
    if isinstance(config, dict):
        unknown = set(config) - known
        if unknown:
            raise ValueError("unknown session config keys: %s (zflow takes %s)"
                             % (", ".join(sorted(unknown)), ", ".join(sorted(known))))
    opts = service_pb2.SessionOptions(
        allow_soft_placement=bool(get("allow_soft_placement", False)),
        place_first=bool(get("place_first", False)))
    timeout = get("step_timeout_ms", None) or get("operation_timeout_in_ms", None) or 0
    if int(timeout) < 0:
        raise ValueError("step_timeout_ms must be >= 0, not %r" % (timeout,))
    opts.step_timeout_ms = int(timeout)
    opts.bfloat16_sendrecv = bool(get("enable_bfloat16_sendrecv", False))
    opts.enable_recv_scheduling = bool(get("enable_recv_scheduling", False))
    opts.place_pruned_graph = bool(get("place_pruned_graph", False))
    by = get("partition_by", None) or "device"
    if by not in ("device", "task"):
        raise ValueError("partition_by must be 'device' or 'task', not %r" % (by,))
    opts.partition_by = by
    cost = int(get("build_cost_model", 0) or 0)
    if cost < 0:
        raise ValueError("build_cost_model must be >= 0, not %r" % (cost,))
    opts.build_cost_model = cost
    return opts


def _run_timeout_ms(options):
    """timeout_in_ms from RunOptions-like options (a dict or an object), or 0."""
    if options is None:
        return 0
    if isinstance(options, dict):
        unknown = set(options) - {"timeout_in_ms"}
        if unknown:
            raise ValueError("unknown run options: %s (zflow takes timeout_in_ms)"
                             % ", ".join(sorted(unknown)))
        t = options.get("timeout_in_ms", 0)
    else:
        t = getattr(options, "timeout_in_ms", 0)
    t = int(t or 0)
    if t < 0:
        raise ValueError("timeout_in_ms must be >= 0, not %d" % t)
    return t


def feed_arrays(feed_dict, dtype_table):
    """feed_dict as (tensor name, array, DataType) triples."""
    if not feed_dict:
        return []
    if not hasattr(feed_dict, "items"):
        raise TypeError("feed_dict must be a dict of tensor names to values, not %s"
                        % type(feed_dict).__name__)
    out = []
    for key, value in feed_dict.items():
        name = key if isinstance(key, str) else _fetch._name_of(key)
        try:
            arr = _tensor.to_numpy(value, _graph.dtype_of(dtype_table, name))
            dt = dtypes.from_numpy(arr.dtype)
        except (TypeError, ValueError) as e:
            raise TypeError("cannot feed %r as '%s': %s" % (type(value).__name__, name, e)) \
                from None
        out.append((name, arr, dt))
    return out


def feeds_to_proto(feed_dict, dtype_table, named_tensors):
    """Appends feed_dict's values, as NamedTensors, to named_tensors."""
    for name, arr, _ in feed_arrays(feed_dict, dtype_table):
        nt = named_tensors.add()
        nt.name = name
        _tensor.fill_proto(nt.tensor, arr)


def fetches_from_proto(named_tensors, names):
    """The values of a RunStepReply's fetches, in the order of names."""
    if len(named_tensors) != len(names):
        raise errors.InternalError("the service returned %d tensors for %d fetches"
                                   % (len(named_tensors), len(names)))
    out = []
    for nt, name in zip(named_tensors, names):
        try:
            out.append(_tensor.from_proto(nt.tensor))
        except ValueError as e:
            raise errors.InternalError("fetch '%s': %s" % (name, e)) from None
    return out


class Session:
    """A session on a zflow service, as TensorFlow's tf.compat.v1.Session.

    target: the broker's endpoint ("tcp://HOST:PORT"). graph: a GraphDef,
    its serialized bytes, a .pb/.pbtxt path or an object with
    as_graph_def(). config: see session_options(). timeout_ms: how long
    CreateSession and CloseSession wait (default 30 s). direct (default):
    steps go straight to the scheduler holding the session; False: through
    the broker, as every request without it.

    run() may be called from several threads at once: each call takes a
    connection of its own from a pool (ZeroMQ sockets are not thread-safe),
    so steps of one session run concurrently."""

    def __init__(self, target=DEFAULT_TARGET, graph=None, config=None, timeout_ms=None,
                 direct=True):
        if graph is None:
            raise ValueError("a zflow Session needs a graph")
        self._target = target
        self._graph = _graph.load_graph(graph)
        self._dtypes = _graph.feed_dtypes(self._graph)
        self._options = session_options(config)
        self._timeout_ms = timeout_ms or DEFAULT_TIMEOUT_MS
        self._lock = threading.Lock()
        self._idle = []
        self._all = []
        self._closed = False
        self._id = None
        ch = self._acquire()
        try:
            env = ch.envelope()
            cs = env.create_session
            cs.graph.CopyFrom(self._graph)
            cs.options.CopyFrom(self._options)
            reply = ch.call(ch.broker, env, "create_session_reply", self._timeout_ms)
            if reply.status.code != 0:
                raise errors.from_status(reply.status.code, reply.status.message)
            self._id = reply.session
            self._scheduler = reply.scheduler_endpoint if direct else ""
        except BaseException:
            self._release(ch)
            self._close_channels()
            raise
        self._release(ch)

    @property
    def target(self):
        return self._target

    @property
    def graph_def(self):
        return self._graph

    @property
    def session_id(self):
        """The service's id for this session ("<scheduler>/session-...")."""
        return self._id

    # ---- connections -----------------------------------------------------------

    def _acquire(self):
        with self._lock:
            if self._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            if self._idle:
                return self._idle.pop()
        ch = Channel(self._target)
        with self._lock:
            self._all.append(ch)
        return ch

    def _release(self, ch, broken=False):
        with self._lock:
            if broken or self._closed:
                # A connection that gave up on a reply may still get it: start afresh.
                if ch in self._all:
                    self._all.remove(ch)
                ch.close()
            else:
                self._idle.append(ch)

    def _close_channels(self):
        with self._lock:
            for ch in self._idle:
                ch.close()
                if ch in self._all:
                    self._all.remove(ch)
            self._idle = []

    # ---- running ---------------------------------------------------------------

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs one step: feeds feed_dict (tensor names -> NumPy arrays or
        Python values), fetches `fetches` (a tensor name "x:0", an operation
        name "x" run as a target, or nested lists/tuples/namedtuples/dicts of
        them) and returns the same structure of NumPy arrays (None for
        operations). options: timeout_in_ms (dict or RunOptions-like).
        run_metadata, when a dict or an object, gets step_id."""
        plan = _fetch.plan_for(fetches)
        timeout = _run_timeout_ms(options) if options is not None else 0
        if not plan.tensors and not plan.targets:
            return plan.build([])
        tail = plan.tails.get(timeout)
        if tail is None:
            tail = _wire.run_step_tail(plan.tensors, plan.targets, timeout)
            if len(plan.tails) < 8:
                plan.tails[timeout] = tail
        body = _wire.run_step_body(self._id, feed_arrays(feed_dict, self._dtypes),
                                   plan.tensors, plan.targets, timeout, tail)
        ch = self._acquire()
        broken = True
        try:
            peer = ch.scheduler(self._scheduler)
            rid = ch.send_parts(peer, body)
            del body  # a large feed's frame is sent; let it go
            wait = timeout + _STEP_MARGIN_MS if timeout > 0 else None
            buf, code, message, fetched, step_id, _ = ch.finish_run_step(peer, rid, wait)
            broken = False
        finally:
            self._release(ch, broken)
        if code != 0:
            raise errors.from_status(code, message)
        if len(fetched) != len(plan.tensors):
            raise errors.InternalError("the service returned %d tensors for %d fetches"
                                       % (len(fetched), len(plan.tensors)))
        values = []
        for name, span in fetched:
            try:
                values.append(_wire.tensor(buf, span))
            except ValueError as e:
                raise errors.InternalError("fetch '%s': %s" % (name, e)) from None
        if run_metadata is not None:
            if isinstance(run_metadata, dict):
                run_metadata["step_id"] = step_id
            else:
                try:
                    run_metadata.step_id = step_id
                except (AttributeError, TypeError):
                    pass
        return plan.build(values)

    # ---- partial runs ------------------------------------------------------------

    def _run_step_call(self, env):
        """Sends a RunStep envelope (no wait limit while the scheduler answers
        pings) and returns its RunStepReply, raising its error."""
        ch = self._acquire()
        broken = True
        try:
            reply = ch.call(ch.scheduler(self._scheduler), env, "run_step_reply", None)
            broken = False
        finally:
            self._release(ch, broken)
        if reply.status.code != 0:
            raise errors.from_status(reply.status.code, reply.status.message)
        return reply

    def partial_run_setup(self, fetches, feeds=None):
        """TensorFlow's Session.partial_run_setup: declares one step's fetches
        (a structure as run() takes; operation names are run as targets) and
        feeds (a list of tensor names) and returns the handle its
        partial_run() calls name. Nothing runs yet."""
        plan = _fetch.plan_for(fetches)
        env = service_pb2.Envelope(version=service_pb2.PROTOCOL_VERSION_1)
        rs = env.run_step
        rs.session = self._id
        for f in feeds or []:
            rs.feeds.add().name = f if isinstance(f, str) else _fetch._name_of(f)
        rs.fetches.extend(plan.tensors)
        rs.targets.extend(plan.targets)
        rs.partial_run_setup = True
        return self._run_step_call(env).partial_run_handle

    def partial_run(self, handle, fetches, feed_dict=None):
        """TensorFlow's Session.partial_run: the next piece of the step set up
        with handle. Feeds feed_dict (some of the declared feeds) and returns
        fetches (some of the declared fetches, tensors only) in their
        structure. The step's partitions stay live between calls; the call
        that gives the last declared feed and fetch ends the step. Errors as
        TensorFlow's (InvalidArgumentError for a feed or fetch not declared,
        given twice, or a fetch that needs a feed still to come)."""
        plan = _fetch.plan_for(fetches)
        if plan.targets:
            raise errors.InvalidArgumentError(
                "partial_run fetches tensors only; operation %r belongs to "
                "partial_run_setup's fetches" % plan.targets[0])
        env = service_pb2.Envelope(version=service_pb2.PROTOCOL_VERSION_1)
        rs = env.run_step
        rs.session = self._id
        rs.partial_run_handle = handle
        feeds_to_proto(feed_dict, self._dtypes, rs.feeds)
        rs.fetches.extend(plan.tensors)
        reply = self._run_step_call(env)
        return plan.build(fetches_from_proto(reply.fetches, plan.tensors))

    def close(self):
        """Closes the session on the service (idempotent). Errors closing
        it (the service gone) are raised once the connections are closed."""
        with self._lock:
            if self._closed:
                return
        err = None
        if self._id is not None:
            ch = self._acquire()
            try:
                env = ch.envelope()
                env.close_session.session = self._id
                ch.call(ch.scheduler(self._scheduler), env, "status_reply", self._timeout_ms)
            except errors.NotFoundError:
                pass
            except errors.OpError as e:
                err = e
            finally:
                self._release(ch)
        with self._lock:
            self._closed = True
            for ch in self._all:
                ch.close()
            self._all = []
            self._idle = []
        if err is not None:
            raise err

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.close()
        except errors.OpError:
            if exc[0] is None:
                raise
        return False

    def __del__(self):
        try:
            if not self._closed:
                with self._lock:
                    for ch in self._all:
                        ch.close()
        except Exception:
            pass
