/* A bounded set of step ids that remembers the most recent ones: the
 * executor's record of steps it has closed, consulted for every tensor that
 * arrives and every RunGraph, so lookups must not scan.
 *
 * Holds at most the `cap` most recently added ids; adding one more forgets
 * the oldest. Lookups and additions are O(1) expected (open addressing,
 * linear probing, deletion by backward shift). Not thread-safe: the caller
 * serialises every call. */
#ifndef ZF_STEP_SET_H
#define ZF_STEP_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct zf_step_set zf_step_set_t;

/* A set remembering up to cap ids (1 <= cap <= 2^30). Caller owns *out.
 * Errors: INVALID_ARGUMENT for a cap out of range, RESOURCE_EXHAUSTED. */
zf_status_t zf_step_set_new(size_t cap, zf_step_set_t **out);

/* NULL-safe, sets *set_p to NULL. */
void zf_step_set_destroy(zf_step_set_t **set_p);

bool zf_step_set_has(const zf_step_set_t *set, int64_t id);

/* Adds id unless present (an id already there keeps its age); when the set
 * is full, the oldest id is forgotten first. */
void zf_step_set_add(zf_step_set_t *set, int64_t id);

size_t zf_step_set_size(const zf_step_set_t *set);

#endif
