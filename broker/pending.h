/* The broker's table of client requests in flight: each request handed to
 * a scheduler and not answered yet, found in O(1) when its reply comes and
 * listed for the scans a disconnect needs.
 *
 * Design notes
 * - Entries sit in a dense array, positions 0 .. zf_pending_size() - 1, so
 *   a scan touches only live requests. Removing one moves the last entry
 *   into its place.
 * - An open-addressing index (linear probing, at most half full, removal
 *   by backward shift so no tombstones pile up) maps the hash of
 *   (client, request id) to positions. The hash is the process-seeded
 *   zf_strmap_hash, so request ids a client picks cannot be made to
 *   collide on purpose.
 * - A client may reuse a request id while the first is still in flight,
 *   so one key may be present more than once; a lookup finds one of them
 *   and removing it leaves the others.
 *
 * Thread-safety: none inside; one thread (the broker's) uses a table. */
#ifndef ZF_BROKER_PENDING_H
#define ZF_BROKER_PENDING_H

#include <stdint.h>

#include "common/status.h"

/* One request in flight. The table only compares the fields. */
typedef struct zf_pending_req {
    uintptr_t client;    /* the client it came from: a token, e.g. its record's address */
    uint64_t sched;      /* the scheduler it went to: a token, e.g. a serial number */
    uint64_t request_id; /* the client's own id for it */
} zf_pending_req_t;

typedef struct zf_pending zf_pending_t;

/* The most requests a table holds (its index stays below 2^31 slots). */
#define ZF_PENDING_MAX (1 << 28)

/* An empty table. Caller owns *out (zf_pending_destroy). Errors:
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_pending_new(zf_pending_t **out);

/* Frees the table; NULL-safe; sets *t_p to NULL. */
void zf_pending_destroy(zf_pending_t **t_p);

/* Requests in the table. */
int zf_pending_size(const zf_pending_t *t);

/* Makes room for n requests in all, so that adding up to that many cannot
 * fail. Errors: RESOURCE_EXHAUSTED (the table is unchanged). */
zf_status_t zf_pending_reserve(zf_pending_t *t, int n);

/* Adds req at position zf_pending_size() - 1 afterwards. The caller has
 * made room for it with zf_pending_reserve (asserted). */
void zf_pending_add(zf_pending_t *t, const zf_pending_req_t *req);

/* The position of a request with all of key's fields, or -1. */
int zf_pending_find(const zf_pending_t *t, const zf_pending_req_t *key);

/* The request at pos (0 <= pos < size). Borrowed, until the table changes. */
const zf_pending_req_t *zf_pending_at(const zf_pending_t *t, int pos);

/* Removes the request at pos; the last one moves to pos. */
void zf_pending_remove_at(zf_pending_t *t, int pos);

#endif
