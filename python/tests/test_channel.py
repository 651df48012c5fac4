"""The client's connection against a peer played by the test."""
import pytest
import zmq

from zflow import _channel, errors
from zflow._proto import service_pb2


def test_a_frame_past_the_limit_never_reaches_the_client(monkeypatch):
    monkeypatch.setattr(_channel, "_MAX_FRAME_BYTES", 1000)
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    ch = _channel.Channel("tcp://127.0.0.1:%d" % port)
    try:
        for size, fits in ((100, True), (5000, False)):
            rid = ch.send(ch.broker, service_pb2.Envelope(ping=service_pb2.Ping()))
            route, frame = router.recv_multipart()
            assert service_pb2.Envelope.FromString(frame).request_id == rid
            reply = service_pb2.Envelope(version=1, request_id=rid)
            reply.status_reply.status.message = "x" * size
            router.send_multipart([route, reply.SerializeToString()])
            if fits:
                got = ch.finish(ch.broker, rid, "Ping", "status_reply", 2000)
                assert got.status.message == "x" * size
            else:
                with pytest.raises(errors.UnavailableError):
                    ch.finish(ch.broker, rid, "Ping", "status_reply", 500)
    finally:
        ch.close()
        router.close(0)
