"""One client connection to a zflow service: a ZeroMQ DEALER to the broker
and one to each scheduler reached directly, speaking zflow.Envelope frames
(docs/service.md) exactly as libzflow-client does: protocol version 1,
request ids echoed by replies, pings while a reply is awaited (silence for
3 s is UNAVAILABLE, a timeout while the peer answers DEADLINE_EXCEEDED).

A Channel is used by one thread at a time (ZeroMQ sockets are not
thread-safe); sessions and jobs keep a pool of them."""
import time

import zmq

from . import _wire, errors
from ._proto import service_pb2

PROTOCOL_VERSION = service_pb2.PROTOCOL_VERSION_1
DEFAULT_TIMEOUT_MS = 30000  # as ZF_CLIENT_DEFAULT_TIMEOUT_MS
_PING_MS = 1000
_SILENCE_MS = 3000
_REACH_MS = 1000  # how long a new scheduler endpoint has to answer
_PING_BIT = 1 << 63  # marks the request ids of pings
_MAX_FRAME_BYTES = 2 << 30  # as ZF_GRAPHDEF_MAX_BYTES: larger frames drop the peer

# Envelope body field -> the message name used in errors ("RunStep").
_BODY_NAMES = {
    f.name: f.message_type.name
    for f in service_pb2.Envelope.DESCRIPTOR.oneofs_by_name["body"].fields
}


_RUN_STEP_REPLY = service_pb2.Envelope.DESCRIPTOR.fields_by_name["run_step_reply"].number
_PING_BODY = _wire.varint(service_pb2.Envelope.DESCRIPTOR.fields_by_name["ping"].number << 3 | 2) \
    + b"\x00"


def _now_ms():
    return time.monotonic() * 1000.0


def _context():
    return zmq.Context.instance()


class _Peer:
    __slots__ = ("sock", "endpoint", "kind", "heard", "pinged", "unreachable", "rcvtimeo")

    def __init__(self, endpoint, kind):
        self.sock = _context().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, _MAX_FRAME_BYTES)
        try:
            self.sock.connect(endpoint)
        except zmq.ZMQError as e:
            self.sock.close(0)
            raise ValueError("cannot connect to the %s at %r: %s" % (kind, endpoint, e)) from None
        self.endpoint = endpoint
        self.kind = kind
        self.heard = 0.0
        self.pinged = 0.0
        self.unreachable = False
        self.rcvtimeo = -1

    def close(self):
        self.sock.close(0)


class Channel:
    """Sockets to one broker and the schedulers its sessions name."""

    def __init__(self, broker_endpoint):
        if not isinstance(broker_endpoint, str) or not broker_endpoint:
            raise ValueError("a zflow target must be an endpoint such as "
                             "'tcp://127.0.0.1:5555', not %r" % (broker_endpoint,))
        self.broker = _Peer(broker_endpoint, "broker")
        self._schedulers = {}
        self._next_id = 1
        self._by_sock = {self.broker.sock: self.broker}

    def close(self):
        for p in list(self._by_sock.values()):
            p.close()
        self._by_sock.clear()
        self._schedulers.clear()

    # ---- peers ---------------------------------------------------------------

    def scheduler(self, endpoint):
        """The peer for a session's scheduler at endpoint, opened and pinged
        on first use; the broker when it cannot be reached from here (it
        advertises an address this host cannot use), as libzflow-client."""
        if not endpoint:
            return self.broker
        p = self._schedulers.get(endpoint)
        if p is None:
            try:
                p = _Peer(endpoint, "scheduler")
            except ValueError:
                return self.broker
            self._schedulers[endpoint] = p
            self._by_sock[p.sock] = p
            t0 = _now_ms()
            self._ping(p, t0)
            while p.heard == 0.0:
                left = t0 + _REACH_MS - _now_ms()
                if left <= 0:
                    break
                self._receive(p, None, left)
            p.unreachable = p.heard == 0.0
        return self.broker if p.unreachable else p

    # ---- requests ------------------------------------------------------------

    def envelope(self):
        """A new request envelope; fill its body, then call()."""
        return service_pb2.Envelope(version=PROTOCOL_VERSION)

    def _new_id(self):
        rid = self._next_id
        self._next_id += 1
        return rid

    def _send_frame(self, peer, data):
        try:
            peer.sock.send(data, copy=len(data) < 65536)
        except zmq.ZMQError as e:
            raise errors.UnavailableError(
                "sending to the %s at %s: %s" % (peer.kind, peer.endpoint, e)) from None

    def send(self, peer, env):
        """Sends env to peer with a fresh request id; returns the id."""
        rid = self._new_id()
        env.version = PROTOCOL_VERSION
        env.request_id = rid
        self._send_frame(peer, env.SerializeToString())
        return rid

    def send_parts(self, peer, body_parts):
        """Sends an envelope whose body is already encoded (_wire); returns
        its request id."""
        rid = self._new_id()
        self._send_frame(peer, _wire.envelope(rid, body_parts))
        return rid

    def call(self, peer, env, want, timeout_ms=DEFAULT_TIMEOUT_MS):
        """Sends env to peer and returns the body of its reply, of kind want
        (an Envelope body field name). A StatusReply with an error raises it;
        timeout_ms None waits as long as the peer answers pings."""
        body = env.WhichOneof("body")
        rid = self.send(peer, env)
        return self.finish(peer, rid, _BODY_NAMES.get(body, "the request"), want, timeout_ms)

    def finish(self, peer, rid, name, want, timeout_ms):
        buf, _, _ = self._await(peer, rid, name, timeout_ms)
        reply = service_pb2.Envelope.FromString(bytes(buf))
        kind = reply.WhichOneof("body")
        if kind == "status_reply":
            self._raise_status(reply.status_reply.status.code,
                               reply.status_reply.status.message, want)
            return reply.status_reply
        if kind != want:
            raise errors.InternalError(
                "the service answered with a message of the wrong kind (%s)" % kind)
        return getattr(reply, kind)

    def finish_run_step(self, peer, rid, timeout_ms, name="RunStep"):
        """The RunStepReply to rid, read by _wire: (buf, status code,
        message, [(name, tensor span)], step_id, unfinished)."""
        buf, body, span = self._await(peer, rid, name, timeout_ms)
        if body == _RUN_STEP_REPLY:
            return (buf,) + _wire.run_step_reply(buf, span)
        reply = service_pb2.Envelope.FromString(bytes(buf))
        kind = reply.WhichOneof("body")
        if kind == "status_reply":
            self._raise_status(reply.status_reply.status.code,
                               reply.status_reply.status.message, "run_step_reply")
        raise errors.InternalError(
            "the service answered with a message of the wrong kind (%s)" % kind)

    @staticmethod
    def _raise_status(code, message, want):
        if code != 0:
            raise errors.from_status(code, message)
        if want != "status_reply":
            raise errors.InternalError("the service answered with an OK status but no result")

    def _ping(self, peer, now):
        peer.pinged = now
        rid = _PING_BIT | self._new_id()
        try:
            peer.sock.send(_wire.envelope(rid, [_PING_BODY]), zmq.NOBLOCK)
        except zmq.ZMQError:
            pass  # a full queue means no answer: silence decides

    def _receive(self, peer, rid, wait_ms):
        """Reads what peer sent, waiting up to wait_ms for the first
        message; returns (frame, body field, body span) of the reply to rid
        if it came. Anything else counts as life of the peer and is dropped
        (a late reply to a request given up on, a ping's answer, a
        malformed frame)."""
        sock = peer.sock
        timeout = max(0, int(wait_ms + 0.999))
        if peer.rcvtimeo != timeout:  # one blocking recv instead of poll + recv
            sock.setsockopt(zmq.RCVTIMEO, timeout)
            peer.rcvtimeo = timeout
        found = None
        flags = 0
        while True:
            try:
                frame = sock.recv(flags, copy=False)
            except zmq.Again:
                break
            flags = zmq.NOBLOCK
            peer.heard = _now_ms()
            while frame.more:  # the envelope is the last frame
                frame = sock.recv(copy=False)
            buf = frame.bytes if len(frame) < 65536 else frame.buffer
            try:
                version, got, body, span = _wire.envelope_header(buf)
            except ValueError:
                continue
            if version != PROTOCOL_VERSION or body is None:
                continue
            if got == rid and rid is not None and found is None:
                found = (buf, body, span)
                break
        return found

    def _await(self, peer, rid, name, timeout_ms):
        start = _now_ms()
        deadline = None if timeout_ms is None else start + timeout_ms
        ping_ms = _PING_MS if timeout_ms is None else min(timeout_ms / 2, _PING_MS)
        while True:
            now = _now_ms()
            quiet = max(peer.heard, start)
            heard = peer.heard > start
            if now - quiet >= _SILENCE_MS:
                raise errors.UnavailableError(
                    "no reply to %s: the %s at %s does not answer (silent for %d ms)"
                    % (name, peer.kind, peer.endpoint, now - quiet))
            if deadline is not None and now >= deadline:
                if heard:
                    raise errors.DeadlineExceededError(
                        "no reply to %s within %d ms; the %s answers"
                        % (name, timeout_ms, peer.kind))
                raise errors.UnavailableError(
                    "no reply to %s within %d ms: the %s at %s does not answer"
                    % (name, timeout_ms, peer.kind, peer.endpoint))
            if now - quiet >= ping_ms and now - peer.pinged >= ping_ms:
                self._ping(peer, now)
            nxt = max(peer.pinged, quiet) + ping_ms - now
            wait = nxt if nxt > 0 else ping_ms
            if deadline is not None:
                wait = min(wait, deadline - now)
            reply = self._receive(peer, rid, max(wait, 1))
            if reply is not None:
                return reply
