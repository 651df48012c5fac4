"""One client connection to a zflow service: a ZeroMQ DEALER to the broker
and one to each scheduler reached directly, speaking zflow.Envelope frames
(docs/service.md) exactly as libzflow-client does: protocol version 1,
request ids echoed by replies, pings while a reply is awaited (silence for
3 s is UNAVAILABLE, a timeout while the peer answers DEADLINE_EXCEEDED).

A Channel is used by one thread at a time (ZeroMQ sockets are not
thread-safe); sessions and jobs keep a pool of them."""
import time

import zmq

from . import errors
from ._proto import service_pb2

PROTOCOL_VERSION = service_pb2.PROTOCOL_VERSION_1
DEFAULT_TIMEOUT_MS = 30000  # as ZF_CLIENT_DEFAULT_TIMEOUT_MS
_PING_MS = 1000
_SILENCE_MS = 3000
_REACH_MS = 1000  # how long a new scheduler endpoint has to answer
_PING_BIT = 1 << 63  # marks the request ids of pings

# Envelope body field -> the message name used in errors ("RunStep").
_BODY_NAMES = {
    f.name: f.message_type.name
    for f in service_pb2.Envelope.DESCRIPTOR.oneofs_by_name["body"].fields
}


def _now_ms():
    return time.monotonic() * 1000.0


def _context():
    return zmq.Context.instance()


class _Peer:
    __slots__ = ("sock", "endpoint", "kind", "heard", "pinged", "unreachable")

    def __init__(self, endpoint, kind):
        self.sock = _context().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
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
        self._poller = zmq.Poller()
        self._poller.register(self.broker.sock, zmq.POLLIN)
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
            self._poller.register(p.sock, zmq.POLLIN)
            self._by_sock[p.sock] = p
            t0 = _now_ms()
            self._ping(p, t0)
            while p.heard == 0.0:
                left = t0 + _REACH_MS - _now_ms()
                if left <= 0:
                    break
                self._receive(None, left)
            p.unreachable = p.heard == 0.0
        return self.broker if p.unreachable else p

    # ---- requests ------------------------------------------------------------

    def envelope(self):
        """A new request envelope; fill its body, then call()."""
        return service_pb2.Envelope(version=PROTOCOL_VERSION)

    def send(self, peer, env):
        """Sends env to peer with a fresh request id; returns the id."""
        rid = self._next_id
        self._next_id += 1
        env.version = PROTOCOL_VERSION
        env.request_id = rid
        data = env.SerializeToString()
        try:
            peer.sock.send(data, copy=len(data) < 65536)
        except zmq.ZMQError as e:
            raise errors.UnavailableError(
                "sending to the %s at %s: %s" % (peer.kind, peer.endpoint, e)) from None
        return rid

    def call(self, peer, env, want, timeout_ms=DEFAULT_TIMEOUT_MS):
        """Sends env to peer and returns the body of its reply, of kind want
        (an Envelope body field name). A StatusReply with an error raises it;
        timeout_ms None waits as long as the peer answers pings."""
        body = env.WhichOneof("body")
        rid = self.send(peer, env)
        return self.finish(peer, rid, body, want, timeout_ms)

    def finish(self, peer, rid, body, want, timeout_ms):
        reply = self._await(peer, rid, body, timeout_ms)
        kind = reply.WhichOneof("body")
        if kind == "status_reply":
            st = reply.status_reply.status
            if st.code != 0:
                raise errors.from_status(st.code, st.message)
            if want != "status_reply":
                raise errors.InternalError("the service answered with an OK status but no result")
            return reply.status_reply
        if kind != want:
            raise errors.InternalError(
                "the service answered with a message of the wrong kind (%s)" % kind)
        return getattr(reply, kind)

    def _ping(self, peer, now):
        peer.pinged = now
        env = service_pb2.Envelope(version=PROTOCOL_VERSION,
                                   request_id=_PING_BIT | self._next_id)
        self._next_id += 1
        env.ping.SetInParent()
        try:
            peer.sock.send(env.SerializeToString(), zmq.NOBLOCK)
        except zmq.ZMQError:
            pass  # a full queue means no answer: silence decides

    def _receive(self, rid, wait_ms):
        """Reads what is ready on every peer; returns the reply to rid, if
        it came. Anything else counts as life of its sender and is
        dropped (a late reply to a request given up on, a ping's answer)."""
        found = None
        events = self._poller.poll(max(0, int(wait_ms + 0.999)))
        for sock, _ in events:
            peer = self._by_sock[sock]
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                peer.heard = _now_ms()
                env = service_pb2.Envelope()
                try:
                    env.ParseFromString(frames[-1].buffer)
                except Exception:  # a malformed reply proves life; it answers nothing
                    continue
                if env.version != PROTOCOL_VERSION:
                    continue
                if rid is not None and env.request_id == rid and found is None:
                    found = env
        return found

    def _await(self, peer, rid, body, timeout_ms):
        name = _BODY_NAMES.get(body, "the request")
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
            reply = self._receive(rid, max(wait, 1))
            if reply is not None:
                return reply
