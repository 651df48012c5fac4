/* A partial run's bookkeeping (TensorFlow's PartialRunSetup and
 * PartialRun): which of the step's declared feeds and fetches have been
 * given, and the checks TensorFlow's master and DirectSession make of
 * each call, in their words. Used by the scheduler's master and the
 * in-process session alike.
 *
 * Design note. What each declared fetch needs is worked out once, when the
 * partial run is made: the graph is walked back from the fetch, each walk
 * stopping at a declared feed (what computes a fed tensor does not run for
 * the step), and the feeds reached are what the fetch needs. A graph's existing nodes
 * never change (an extension only adds nodes), so this holds for the
 * partial run's life, and a call's check costs its feeds' and fetches'
 * lookups among the declared names plus its fetches' needs, each need
 * answered at once, not a walk of the graph. The walk finds the feed on an
 * edge through the feeds of the edge's source node only. */
#ifndef ZF_SCHEDULER_GRAPH_PARTIAL_RUN_H
#define ZF_SCHEDULER_GRAPH_PARTIAL_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/graph.h"
#include "common/status.h"

typedef struct zf_partial_run zf_partial_run_t;

/* The work a setup may cost: edges walked for all its fetches together,
 * and (fetch, needed feed) pairs kept. */
#define ZF_PARTIAL_RUN_MAX_VISITS ((uint64_t)1 << 28)
#define ZF_PARTIAL_RUN_MAX_NEEDS  (1 << 24)

/* The partial run of the declared feeds and fetches (canonical "node:port"
 * names, each list sorted and without repeats; copied) over g. Names not in
 * g need nothing (the caller's plan refuses them). Caller owns *out.
 * INVALID_ARGUMENT "x:0 is both fed and fetched." (as pruning says it);
 * RESOURCE_EXHAUSTED past ZF_PARTIAL_RUN_MAX_VISITS or
 * ZF_PARTIAL_RUN_MAX_NEEDS. */
zf_status_t zf_partial_run_new(const zf_graph_t *g, const char *const *feeds, int n_feeds,
                               const char *const *fetches, int n_fetches, zf_partial_run_t **out);

void zf_partial_run_free(zf_partial_run_t **pr);

/* Checks a call's feeds (no name twice) and fetches (a name may repeat),
 * canonical names in the caller's order, against the setup and what was
 * given before, as TensorFlow does: INVALID_ARGUMENT "The feed x:0 was not
 * specified in partial_run_setup.", "The feed x:0 has already been fed.",
 * the same two for fetches, and "Fetch y:0 can't be computed from the
 * feeds that have been fed so far: it needs feed x:0"; RESOURCE_EXHAUSTED
 * when out of memory. */
zf_status_t zf_partial_run_check(const zf_partial_run_t *pr, const char *const *feeds, int n_feeds,
                                 const char *const *fetches, int n_fetches);

/* Records a checked call's feeds and fetches as given; true when nothing
 * declared is left (the call is the step's last). */
bool zf_partial_run_mark(zf_partial_run_t *pr, const char *const *feeds, int n_feeds,
                         const char *const *fetches, int n_fetches);

#endif
