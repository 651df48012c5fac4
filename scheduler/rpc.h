/* The scheduler's connections to executors: the master's transport
 * (scheduler/master.h) over one DEALER socket per executor control
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
 * dropped. */
#ifndef ZF_SCHED_RPC_H
#define ZF_SCHED_RPC_H

#include <zmq.h>

#include "common/status.h"
#include "common/transport.h"
#include "scheduler/master.h"

typedef struct zf_sched_rpc zf_sched_rpc_t;

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
 * send() on that thread sends at once (an error from it means nothing left),
 * on any other thread it queues as above. */
zf_status_t zf_sched_rpc_new_polled(zf_zctx_t *ctx, zf_sched_rpc_reply_fn on_reply, void *arg,
                                    zf_sched_rpc_t **out);

/* Fills items[0..max) with what a polled rpc waits on (its wake pipe, then
 * one socket per executor) and returns how many; the caller becomes the
 * sockets' owner. zf_sched_rpc_serve() then handles what is ready (replies
 * go to on_reply on this thread; queued messages are sent). Neither blocks. */
int zf_sched_rpc_items(zf_sched_rpc_t *rpc, zmq_pollitem_t *items, int max);
void zf_sched_rpc_serve(zf_sched_rpc_t *rpc, const zmq_pollitem_t *items, int n);

/* Stops the thread and closes every socket (unsent messages are dropped).
 * NULL-safe, sets *rpc_p to NULL. */
void zf_sched_rpc_destroy(zf_sched_rpc_t **rpc_p);

/* The master transport over rpc (valid while rpc lives). */
zf_master_transport_t zf_sched_rpc_transport(zf_sched_rpc_t *rpc);

#endif
