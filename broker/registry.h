/* The broker's executor registry: who is alive, under which device name and
 * incarnation, with which endpoints and load, and who missed heartbeats.
 *
 * Design notes
 * - An executor registers with a full device name or none; without one it is
 *   given /job:worker/replica:0/task:<n>/device:<TYPE>:0 with a task number
 *   no live executor uses. A partial name ("/device:GPU:1") is completed the
 *   same way, keeping the fields it sets.
 * - A name is unique among live executors. Registering a live name again is
 *   ALREADY_EXISTS unless the incarnation differs: then the executor was
 *   restarted, the old entry dies and the new one joins.
 * - Time comes from a clock function (milliseconds, monotonic) so tests can
 *   drive expiry; an executor not heard from for heartbeat_ms *
 *   heartbeat_misses is removed by zf_registry_expire().
 * - Joins and deaths are reported to one listener, synchronously, from
 *   inside register and expire; the listener must not call back into the
 *   registry.
 *
 * Thread-safety: none; one thread owns a registry. */
#ifndef ZF_BROKER_REGISTRY_H
#define ZF_BROKER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "proto/service.pb-c.h"

typedef struct zf_registry zf_registry_t;

/* Milliseconds on a monotonic clock. */
typedef int64_t (*zf_registry_clock_fn)(void *arg);

typedef enum zf_registry_event {
    ZF_REGISTRY_JOINED = 0,
    ZF_REGISTRY_DIED = 1,
} zf_registry_event_t;

/* Told about each join and death. info is borrowed for the call; reason is
 * "" for joins. */
typedef void (*zf_registry_listener_fn)(void *arg, zf_registry_event_t event,
                                        const Zflow__ExecutorInfo *info, const char *reason);

typedef struct zf_registry_config {
    int heartbeat_ms;         /* > 0 */
    int heartbeat_misses;     /* > 0 */
    zf_registry_clock_fn now; /* NULL: CLOCK_MONOTONIC */
    void *now_arg;
    /* Never replace a live executor: a name held by another incarnation is
     * ALREADY_EXISTS until that one leaves, its connection closes or it
     * misses its heartbeats (the broker's way). false: a new incarnation
     * replaces the old one at once. */
    bool keep_live;
} zf_registry_config_t;

/* A new empty registry. Caller owns *out. Errors: INVALID_ARGUMENT for a
 * period or miss count below 1, RESOURCE_EXHAUSTED. */
zf_status_t zf_registry_new(const zf_registry_config_t *config, zf_registry_t **out);

/* Frees the registry and every entry; sets *reg_p to NULL; NULL-safe. No
 * events are reported. */
void zf_registry_destroy(zf_registry_t **reg_p);

/* Sets the listener (NULL: none). */
void zf_registry_set_listener(zf_registry_t *reg, zf_registry_listener_fn fn, void *arg);

/* Registers info (copied; ms_since_heartbeat ignored) and writes the device
 * name it got to name (ZF_DEVICE_NAME_MAX bytes suffice). Reports DIED for
 * a replaced incarnation, then JOINED. Errors, with name set to "":
 * - INVALID_ARGUMENT naming the field: no device, a device type that is
 *   not [A-Za-z][A-Za-z0-9_]*, incarnation 0, an empty control or
 *   rendezvous endpoint, an endpoint or host id over 1024 characters, a
 *   malformed name or one whose type differs from device_type;
 * - ALREADY_EXISTS "device '<name>' is already registered by a live
 *   executor with the same incarnation";
 * - with keep_live, ALREADY_EXISTS "device '<name>' is held by a live
 *   executor (incarnation 0x<16 hex digits>); it can be registered again
 *   once that one has missed <N> heartbeats" for another incarnation;
 * - RESOURCE_EXHAUSTED. */
zf_status_t zf_registry_register(zf_registry_t *reg, const Zflow__ExecutorInfo *info, char *name,
                                 size_t name_size);

/* Records a heartbeat: last seen now, load updated. NOT_FOUND when name is
 * not registered or registered with another incarnation (the executor must
 * register again). */
zf_status_t zf_registry_heartbeat(zf_registry_t *reg, const char *name, uint64_t incarnation,
                                  int64_t load);

/* Removes the executor registered as name with incarnation (it stopped),
 * reporting DIED with reason "stopped". NOT_FOUND as for a heartbeat;
 * PERMISSION_DENIED when the request came over another connection than
 * the executor's own (conn, as zf_registry_set_conn). */
zf_status_t zf_registry_deregister(zf_registry_t *reg, const char *name, uint64_t incarnation,
                                   int conn);

/* Records that name last spoke on connection conn (the broker's socket's
 * file descriptor). */
void zf_registry_set_conn(zf_registry_t *reg, const char *name, int conn);

/* Removes every executor whose connection conn closed (a process that
 * died closes its connections at once), reporting DIED with reason "its
 * connection to the broker closed". Returns how many it removed. */
int zf_registry_drop_conn(zf_registry_t *reg, int conn);

/* Removes every executor silent for longer than heartbeat_ms *
 * heartbeat_misses, reporting DIED with reason "no heartbeat for N ms".
 * Returns how many it removed. */
int zf_registry_expire(zf_registry_t *reg);

/* Milliseconds until the next executor would expire (0 if one is due), or
 * -1 when none is registered. */
int64_t zf_registry_next_expiry_ms(const zf_registry_t *reg);

/* Live executors. */
int zf_registry_count(const zf_registry_t *reg);

/* The entry for name, or NULL. Borrowed until the registry changes. */
const Zflow__ExecutorInfo *zf_registry_find(const zf_registry_t *reg, const char *name);

/* Copies of the live executors in registration order, with
 * ms_since_heartbeat filled in. Caller owns *out and frees it with
 * zf_registry_list_free(). Errors: RESOURCE_EXHAUSTED (*out NULL, *n 0). */
zf_status_t zf_registry_list(const zf_registry_t *reg, Zflow__ExecutorInfo ***out, size_t *n);

/* Frees a list from zf_registry_list(); NULL-safe. */
void zf_registry_list_free(Zflow__ExecutorInfo **list, size_t n);

/* A deep copy of info that protobuf_c's free_unpacked frees. Caller owns
 * *out. Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_executor_info_copy(const Zflow__ExecutorInfo *info, Zflow__ExecutorInfo **out);

#endif
