/* Transport: zflow's wrappers over ZeroMQ (a context and sockets that are
 * created and destroyed in pairs) and the control-plane codec that carries
 * protobuf zflow.Envelope messages (docs/service.md, "Control plane").
 *
 * Design notes
 * - A control-plane message is multipart: zero or more routing frames (the
 *   identities a ROUTER prepends, at most ZF_ROUTE_MAX_FRAMES of at most
 *   ZF_ROUTE_MAX_FRAME_BYTES each) and then one Envelope frame.
 * - Every received frame is checked before use: the wire format
 *   (zf_proto_check_wire), then protobuf-c's unpack, then the protocol
 *   version and the presence of a body. A message that fails any check is
 *   drained completely, so the next receive starts on a message boundary;
 *   its route is kept so the caller can answer the sender.
 * - ZMQ_MAXMSGSIZE is enforced by ZeroMQ per frame: a peer that sends a
 *   larger frame is disconnected (it reconnects on its own) and the frame
 *   never reaches the application.
 *
 * Thread-safety: a context may be shared by all threads; a socket must be
 * used by one thread at a time (ZeroMQ sockets are not thread-safe). */
#ifndef ZF_TRANSPORT_H
#define ZF_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/keys.h"
#include "common/status.h"
#include "proto/service.pb-c.h"

/* ---- contexts ------------------------------------------------------------ */

typedef struct zf_zctx zf_zctx_t;

/* A new ZeroMQ context with one I/O thread. Caller owns *out.
 * Errors: RESOURCE_EXHAUSTED when ZeroMQ cannot create it. */
zf_status_t zf_zctx_new(zf_zctx_t **out);

/* Terminates the context and sets *ctx_p to NULL; NULL-safe. Every socket
 * made from it must have been destroyed first: termination waits for them. */
void zf_zctx_destroy(zf_zctx_t **ctx_p);

/* The libzmq context, for code that talks to libzmq directly (benchmarks).
 * Borrowed. */
void *zf_zctx_handle(const zf_zctx_t *ctx);

/* Makes ctx secure (docs/service.md, "Security"): loads the keys of a
 * process of role from dir (zf_keys_load) and starts the context's ZAP
 * handler, a thread that admits a CURVE peer only when its public key is
 * trusted and of a role its socket accepts, and names it "<role>:<name>"
 * (the ZAP User-Id, which every message from it carries). Call it once,
 * before making sockets; zf_zctx_destroy stops the handler. Refused keys
 * are logged (warn) with their Z85 text and address.
 * Errors: as zf_keys_load; FAILED_PRECONDITION when ctx already has keys;
 * RESOURCE_EXHAUSTED or INTERNAL when the handler cannot start. */
zf_status_t zf_zctx_set_keys(zf_zctx_t *ctx, const char *dir, zf_role_t role);

/* The context's keys; NULL in plain mode. Borrowed. */
const zf_keys_t *zf_zctx_keys(const zf_zctx_t *ctx);

/* ---- sockets ------------------------------------------------------------- */

typedef enum zf_socket_type {
    ZF_SOCKET_PAIR = 0,
    ZF_SOCKET_REQ,
    ZF_SOCKET_REP,
    ZF_SOCKET_DEALER,
    ZF_SOCKET_ROUTER,
    ZF_SOCKET_PUSH,
    ZF_SOCKET_PULL,
} zf_socket_type_t;

typedef struct zf_socket zf_socket_t;

/* A new socket of type in ctx. Caller owns *out; destroy it before the
 * context. Errors: INVALID_ARGUMENT for an unknown type, CANCELLED when
 * the context is terminating, RESOURCE_EXHAUSTED past ZeroMQ's socket
 * limit. */
zf_status_t zf_socket_new(zf_zctx_t *ctx, zf_socket_type_t type, zf_socket_t **out);

/* Closes the socket with linger 0 (unsent messages are dropped, and their
 * free callbacks run) and sets *s_p to NULL; NULL-safe. */
void zf_socket_destroy(zf_socket_t **s_p);

/* Binds to endpoint: "tcp://127.0.0.1:*" (an ephemeral port), "ipc://"
 * followed by "*" (a fresh path), or "inproc://name".
 * When bound is not NULL, *bound receives the endpoint ZeroMQ actually
 * bound (ZMQ_LAST_ENDPOINT: the real port for "*"), borrowed from the socket
 * until its next bind or its destruction.
 * Errors: INVALID_ARGUMENT for a malformed endpoint or unknown transport,
 * UNAVAILABLE when the address cannot be bound (in use, not local). */
zf_status_t zf_socket_bind(zf_socket_t *s, const char *endpoint, const char **bound);

/* Connects to endpoint; ZeroMQ connects (and reconnects) in the background,
 * so an absent peer is not an error. Errors: INVALID_ARGUMENT for a
 * malformed endpoint or unknown transport. */
zf_status_t zf_socket_connect(zf_socket_t *s, const char *endpoint);

/* The endpoint of the last successful bind; "" if none. Borrowed. */
const char *zf_socket_endpoint(const zf_socket_t *s);

/* Options. Set them before bind/connect: ZeroMQ copies most options into a
 * connection when it is made. Errors: INVALID_ARGUMENT for a value ZeroMQ
 * refuses. */

/* Largest frame accepted from a peer (ZMQ_MAXMSGSIZE), or -1 for none. */
zf_status_t zf_socket_set_max_frame_size(zf_socket_t *s, int64_t bytes);
/* High-water marks in messages (ZMQ_SNDHWM, ZMQ_RCVHWM); 0 means none. */
zf_status_t zf_socket_set_hwm(zf_socket_t *s, int send_hwm, int recv_hwm);
/* How long a send may block on a full queue (ZMQ_SNDTIMEO); -1 forever,
 * 0 never. The receive functions below take their own timeouts. */
zf_status_t zf_socket_set_send_timeout(zf_socket_t *s, int ms);
/* The identity a DEALER presents to a ROUTER (ZMQ_ROUTING_ID), 1..255
 * bytes not starting with a zero byte. */
zf_status_t zf_socket_set_routing_id(zf_socket_t *s, const void *id, size_t len);
/* ROUTER only: make sends to an unknown identity fail with UNAVAILABLE
 * instead of being dropped silently (ZMQ_ROUTER_MANDATORY). */
zf_status_t zf_socket_set_router_mandatory(zf_socket_t *s, bool on);

/* Security, set before bind/connect; both are no-ops on a plain context.
 * zf_socket_secure_server: the socket is a CURVE server with the process's
 * own key, and its ZAP domain admits trusted keys of the roles in the mask
 * roles (zf_role_t bits) only. zf_socket_secure_client: the socket is a
 * CURVE client of a server of server_role (whose key is DIR/<role>.pub),
 * presenting the process's own keypair. Errors: FAILED_PRECONDITION when
 * the key directory has no key for server_role (naming the file),
 * INVALID_ARGUMENT when ZeroMQ refuses an option. */
zf_status_t zf_socket_secure_server(zf_socket_t *s, unsigned roles);
zf_status_t zf_socket_secure_client(zf_socket_t *s, zf_role_t server_role);

/* Whether the socket is a CURVE server (zf_socket_secure_server on a secure
 * context). */
bool zf_socket_is_secure_server(const zf_socket_t *s);

/* Whether the socket encrypts what it sends and receives: a CURVE server
 * or client (zf_socket_secure_server or _client on a secure context). */
bool zf_socket_encrypts(const zf_socket_t *s);

/* Watches the socket's connections for failed handshakes (a socket monitor);
 * call before connect. zf_socket_handshake_failure then returns OK, or
 * UNAUTHENTICATED naming the endpoint and what failed when the last
 * handshake since the watch began failed and none has succeeded since.
 * Errors: as ZeroMQ's socket monitor. */
zf_status_t zf_socket_watch_handshakes(zf_socket_t *s);
zf_status_t zf_socket_handshake_failure(zf_socket_t *s);

/* The libzmq socket, for zmq_poll and for tests that send raw frames.
 * Borrowed; do not close it. */
void *zf_socket_handle(const zf_socket_t *s);

/* Waits until a message can be received: OK when one is ready,
 * DEADLINE_EXCEEDED after timeout_ms (< 0: no limit; 0: just look),
 * CANCELLED when the context is terminating. */
zf_status_t zf_socket_wait_readable(zf_socket_t *s, int timeout_ms);

/* Receives and discards the rest of a multipart message whose first frames
 * were already received. Returns how many frames it discarded. */
int zf_socket_drain(zf_socket_t *s);

/* ---- routes ---------------------------------------------------------------- */

#define ZF_ROUTE_MAX_FRAMES      8
#define ZF_ROUTE_MAX_FRAME_BYTES 256
#define ZF_PEER_ID_MAX           80

/* The routing frames in front of an envelope: a value type, cheap to copy
 * into a reply queue. request_id is the id of the envelope received with
 * this route when it could be read (also when a later check failed), so an
 * error reply can echo it; 0 otherwise. secure: the message came through a
 * CURVE server socket; peer: then the sender's identity "<role>:<name>"
 * (its ZAP User-Id), "" otherwise. */
typedef struct zf_route {
    int n;
    uint64_t request_id;
    bool secure;
    char peer[ZF_PEER_ID_MAX];
    size_t len[ZF_ROUTE_MAX_FRAMES];
    uint8_t frame[ZF_ROUTE_MAX_FRAMES][ZF_ROUTE_MAX_FRAME_BYTES];
} zf_route_t;

/* Empties *route (n = 0, request_id = 0). NULL-safe. */
void zf_route_clear(zf_route_t *route);

/* Appends a frame. Errors: INVALID_ARGUMENT past ZF_ROUTE_MAX_FRAMES or
 * for a frame longer than ZF_ROUTE_MAX_FRAME_BYTES. */
zf_status_t zf_route_push(zf_route_t *route, const void *frame, size_t len);

/* Whether the sender of a message received with route may send it: OK on a
 * plain socket, or when the sender's role is in roles (zf_role_t bits).
 * Otherwise PERMISSION_DENIED "<what> is not allowed for <peer> (only
 * <role> keys may send it)", also logged (warn) with the peer. */
zf_status_t zf_route_authorize(const zf_route_t *route, unsigned roles, const char *what);

/* Same frames (request_id ignored). */
bool zf_route_equal(const zf_route_t *a, const zf_route_t *b);

/* ---- envelopes --------------------------------------------------------------- */

/* Sends route's frames (route may be NULL or empty) and then env packed
 * into one frame. env is borrowed; a version left at 0 goes out as
 * PROTOCOL_VERSION_1. Blocks while the send queue is full, up to the
 * socket's send timeout. Errors: INVALID_ARGUMENT for an envelope without
 * a body, DEADLINE_EXCEEDED when the send timed out, UNAVAILABLE when a
 * ROUTER with router_mandatory has no such peer, CANCELLED when the context
 * is terminating, RESOURCE_EXHAUSTED. */
zf_status_t zf_envelope_send(zf_socket_t *s, const zf_route_t *route, const Zflow__Envelope *env);

/* Sends route's frames and then `frame`, an envelope already packed (a
 * received zmq_msg_t passed on without being decoded), sharing its bytes
 * (zmq_msg_copy: no copy of the data), so frame stays the caller's to send
 * again or close. Errors as zf_envelope_send, without the body check. */
struct zmq_msg_t;
zf_status_t zf_envelope_send_packed(zf_socket_t *s, const zf_route_t *route,
                                    struct zmq_msg_t *frame);

/* The most bytes zf_envelope_put_head writes. */
#define ZF_ENVELOPE_HEAD_MAX 32

/* Writes at head the top level of an Envelope{version 1, request_id, body
 * of len bytes} up to where the body's own bytes start (the version, the
 * request id, the body's key and length), so that bytes already packed as
 * that body (a stored request or result) go out behind it without being
 * unpacked and packed again. Returns the bytes written, at most
 * ZF_ENVELOPE_HEAD_MAX. */
size_t zf_envelope_put_head(uint8_t *head, uint64_t request_id, Zflow__Envelope__BodyCase body,
                            size_t len);

/* A new frame in out (initialised by the caller; its old content closed):
 * zf_envelope_put_head's header and then a copy of the len bytes at body,
 * a message already packed as that body. RESOURCE_EXHAUSTED when out of
 * memory (out is then empty). */
zf_status_t zf_envelope_frame(struct zmq_msg_t *out, uint64_t request_id,
                              Zflow__Envelope__BodyCase body, const void *bytes, size_t len);

/* Receives one message, waiting up to timeout_ms for it (< 0: no limit).
 * On OK, *route holds the routing frames and *env the envelope; the caller
 * owns *env (zflow__envelope__free_unpacked(env, NULL)) and clears *route
 * with zf_route_clear() when done. On error *env is NULL and the message
 * has been drained completely, so the socket is ready for the next one:
 * - DEADLINE_EXCEEDED: nothing arrived (route empty);
 * - INVALID_ARGUMENT naming what is wrong: too many or too long routing
 *   frames, a frame that is not a well-formed Envelope, no body. *route
 *   keeps the routing frames read before the fault (the sender's identity
 *   first), and route->request_id the envelope's id when it was readable;
 * - FAILED_PRECONDITION "protocol version N is not supported (this side
 *   speaks 1)", with the route and request id kept as above;
 * - CANCELLED when the context is terminating. */
zf_status_t zf_envelope_recv(zf_socket_t *s, int timeout_ms, zf_route_t *route,
                             Zflow__Envelope **env);

/* The envelope checks of zf_envelope_recv on one frame's bytes (wire check,
 * unpack, version, body), for the receive path and for fuzzing. On OK the
 * caller owns *out. *request_id (may be NULL) receives the envelope's id
 * when the frame unpacked, even if a later check failed, or else when its
 * top level could be read; 0 otherwise.
 * Errors as zf_envelope_recv. */
zf_status_t zf_envelope_decode(const void *data, size_t len, Zflow__Envelope **out,
                               uint64_t *request_id);

/* The name of env's body's message ("RunGraph"), or "a message without a
 * body". Borrowed from the protobuf descriptors. */
const char *zf_envelope_body_name(const Zflow__Envelope *env);
/* The same for a body case. */
const char *zf_envelope_case_name(Zflow__Envelope__BodyCase body);

/* A reply carrying only a status: StatusReply with code and message.
 * Caller owns *out (zflow__envelope__free_unpacked(out, NULL)).
 * Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_envelope_status_reply(uint64_t request_id, const zf_status_t *status,
                                     Zflow__Envelope **out);

/* Builds and sends a status reply to route in one step. */
zf_status_t zf_envelope_send_status(zf_socket_t *s, const zf_route_t *route, uint64_t request_id,
                                    const zf_status_t *status);

/* zf_status_t -> Status. Caller owns *out (zflow__status__free_unpacked).
 * Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_status_to_proto(const zf_status_t *status, Zflow__Status **out);

/* Status -> zf_status_t (a NULL proto is OK, as proto3 omits an OK
 * status). A code outside TensorFlow's canonical range becomes UNKNOWN with
 * the number in the message; an OK code drops any message. The caller owns
 * the result. */
zf_status_t zf_status_from_proto(const Zflow__Status *proto);

/* ---- internal, shared with common/tensor_frame.c ------------------------ */

/* The status for a failed libzmq call that set errno to err: CANCELLED for
 * ETERM, DEADLINE_EXCEEDED for EAGAIN, UNAVAILABLE for EHOSTUNREACH and
 * network errors, RESOURCE_EXHAUSTED for ENOMEM and EMFILE,
 * INVALID_ARGUMENT for EINVAL and unknown transports. Prefixed with what. */
zf_status_t zf__zmq_error(int err, const char *what);

/* Receives the first frame of the next message into msg (an initialised
 * zmq_msg_t), waiting up to timeout_ms in all (< 0: no limit). Errors:
 * DEADLINE_EXCEEDED "no message within N ms", CANCELLED. */
struct zmq_msg_t;
zf_status_t zf__socket_recv_first(zf_socket_t *s, int timeout_ms, struct zmq_msg_t *msg);

#endif
