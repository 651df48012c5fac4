/* Membership: an executor process's link to the broker (docs/service.md,
 * "Membership and failures") — registration, heartbeats, and the peers'
 * rendezvous endpoints from the broker's listing.
 *
 * Design note. One DEALER socket to the broker, used by one thread (the
 * process's main loop calls zf_exec_member_poll()). RegisterExecutor
 * carries the device's attributes (name, possibly empty so that the broker
 * picks one; type; incarnation; memory limit), the host id (hostname and
 * boot id) and the service's control and rendezvous endpoints. A heartbeat
 * goes out every period with the service's load; a HeartbeatReply of
 * NOT_FOUND (the broker restarted or declared this executor dead) makes it
 * register again, asking for the name it has. ListExecutors goes out with
 * each heartbeat and whenever a step waits for an unknown peer or for a
 * restarted one's new incarnation; every executor listed becomes a peer of
 * the service, with its incarnation, and a peer listed with another
 * incarnation or endpoint than before is reconnected.
 *
 * Thread-safety: one thread at a time. */
#ifndef ZF_EXEC_MEMBER_H
#define ZF_EXEC_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "executor/worker/service.h"

typedef struct zf_exec_member zf_exec_member_t;

typedef struct zf_exec_member_config {
    const char *broker; /* the broker's endpoint */
    bool broker_names;  /* register with an empty name: the broker picks one */
    int heartbeat_ms;   /* 0: the period the broker asks for */
} zf_exec_member_config_t;

/* Connects a DEALER to cfg->broker (nothing is sent yet). ctx, svc and
 * device are borrowed and outlive the member. Errors: INVALID_ARGUMENT for
 * a missing or malformed endpoint, RESOURCE_EXHAUSTED. Caller owns *out. */
zf_status_t zf_exec_member_new(zf_zctx_t *ctx, zf_exec_service_t *svc, zf_device_t *device,
                               const zf_exec_member_config_t *cfg, zf_exec_member_t **out);

/* Closes the socket and frees the member; NULL-safe, sets *m_p to NULL. */
void zf_exec_member_destroy(zf_exec_member_t **m_p);

/* Registers and waits up to timeout_ms (< 0: no limit) for the broker's
 * answer, serving other replies meanwhile. On OK the device carries the
 * name the broker confirmed (zf_exec_service_rename()). Errors: the
 * broker's refusal, DEADLINE_EXCEEDED "the broker at <ep> did not answer
 * within N ms", CANCELLED when the context terminates. */
zf_status_t zf_exec_member_register(zf_exec_member_t *m, int timeout_ms);

/* Leaves the broker's registry (a clean stop: the name is free for a
 * restart at once) and waits up to timeout_ms for the broker to confirm.
 * OK at once when not registered. Errors: the broker's (NOT_FOUND when it
 * had already forgotten this incarnation), DEADLINE_EXCEEDED. */
zf_status_t zf_exec_member_deregister(zf_exec_member_t *m, int timeout_ms);

/* One round of the membership loop: sends what is due (heartbeat,
 * listing, registration again), then waits up to timeout_ms for the
 * broker and handles what arrived. Errors only for the member's own
 * failures (CANCELLED when the context terminates); the broker's errors
 * are logged. */
zf_status_t zf_exec_member_poll(zf_exec_member_t *m, int timeout_ms);

/* The name the broker confirmed ("" before). Borrowed. */
const char *zf_exec_member_device_name(const zf_exec_member_t *m);

/* Registrations the broker accepted (re-registrations included) and
 * heartbeats sent, for tests and logs. */
int zf_exec_member_registrations(const zf_exec_member_t *m);
int zf_exec_member_heartbeats(const zf_exec_member_t *m);

#endif
