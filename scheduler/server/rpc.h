/* The scheduler's connections to executors: the master's transport
 * (scheduler/master/master.h) over one DEALER socket per executor control
 * endpoint, served by one I/O thread of its own or polled by the caller's
 * loop (zf_sched_rpc_new_polled).
 *
 * Design note. zf_master_transport_t.send() may be called from any thread
 * (with the master's lock held), but ZeroMQ sockets belong to one thread:
 * send() packs the envelope, queues it and wakes the I/O thread through a
 * pipe; the thread connects a DEALER to the endpoint on first use, sends,
 * and hands every reply it receives to the reply callback. A message that
 * cannot be queued on its socket (the peer's queue is full) is answered at
 * once with a synthesised StatusReply UNAVAILABLE echoing its request id,
 * so its caller does not wait for nothing. Malformed replies are logged and
 * dropped.
 *
 * Forgetting. Executors come and go, each restart on a new ephemeral
 * endpoint, so a socket lives only while its executor does:
 * zf_sched_rpc_forget() (the master's forget hook) queues a forget behind
 * the messages already queued; the socket owner then closes that
 * endpoint's DEALER and answers every request sent on it and not yet
 * answered with a StatusReply UNAVAILABLE naming the endpoint. A later send
 * to the same endpoint connects afresh. At most ZF_SCHED_RPC_MAX_PEERS
 * endpoints are connected at once. */
#ifndef ZF_SCHED_RPC_H
#define ZF_SCHED_RPC_H

#include <zmq.h>

#include "common/status.h"
#include "common/transport.h"
#include "scheduler/master/master.h"

typedef struct zf_sched_rpc zf_sched_rpc_t;

/* Endpoints connected at once, at most; sending to one more is answered
 * RESOURCE_EXHAUSTED. A polled rpc needs this many items plus one. */
#define ZF_SCHED_RPC_MAX_PEERS 1024

/* Called on the I/O thread with each reply; owns *reply (and may take it,
 * setting *reply to NULL; a reply left there is freed). */
typedef void (*zf_sched_rpc_reply_fn)(void *arg, Zflow__Envelope **reply);

/* Starts the I/O thread in ctx (borrowed; outlives the rpc). on_reply and
 * arg are kept. Caller owns *out. Errors: RESOURCE_EXHAUSTED, or the
 * system's error when no pipe or thread can be made (INTERNAL). */
zf_status_t zf_sched_rpc_new(zf_zctx_t *ctx, zf_sched_rpc_reply_fn on_reply, void *arg,
                             zf_sched_rpc_t **out);

/* The same without a thread: the sockets belong to the thread that polls
 * them with zf_sched_rpc_items() and zf_sched_rpc_serve(); the transport's
 * send() on that thread sends at once when nothing queued waits (an error
 * from it then means nothing left), otherwise it queues as above. */
zf_status_t zf_sched_rpc_new_polled(zf_zctx_t *ctx, zf_sched_rpc_reply_fn on_reply, void *arg,
                                    zf_sched_rpc_t **out);

/* Fills items[0..max) with what a polled rpc waits on (its wake pipe, then
 * one socket per executor) and returns how many; the caller becomes the
 * sockets' owner. zf_sched_rpc_serve() then handles what is ready (replies
 * go to on_reply on this thread; queued messages are sent). Neither blocks. */
int zf_sched_rpc_items(zf_sched_rpc_t *rpc, zmq_pollitem_t *items, int max);
void zf_sched_rpc_serve(zf_sched_rpc_t *rpc, const zmq_pollitem_t *items, int n);

/* Closes endpoint's connection (no-op when there is none) once what was
 * queued before this call has been sent, and answers the requests still
 * waiting for its replies with UNAVAILABLE "no reply from <endpoint> ...",
 * through the reply callback, on the socket owner's thread (never inside
 * this call, so it may be called with the caller's locks held). Any
 * thread. Errors: INVALID_ARGUMENT for a NULL endpoint, RESOURCE_EXHAUSTED
 * (nothing changes). */
zf_status_t zf_sched_rpc_forget(zf_sched_rpc_t *rpc, const char *endpoint);

/* zf_sched_rpc_forget() as the master's forget hook
 * (zf_master_options_t.forget, with the transport's arg, the rpc); a
 * failure is logged. */
void zf_sched_rpc_forget_hook(void *rpc, const char *endpoint);

/* Stops the thread and closes every socket (unsent messages are dropped,
 * requests waiting for replies are not answered). NULL-safe, sets *rpc_p
 * to NULL. */
void zf_sched_rpc_destroy(zf_sched_rpc_t **rpc_p);

/* The master transport over rpc (valid while rpc lives). */
zf_master_transport_t zf_sched_rpc_transport(zf_sched_rpc_t *rpc);

#endif
