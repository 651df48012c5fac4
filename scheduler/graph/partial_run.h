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
 * edge through the feeds of the edge's source node only.
 *
 * Also here: a session's table of its open partial runs by handle
 * (zf_partial_run_table_t), which both sessions keep alike. */
#ifndef ZF_SCHEDULER_GRAPH_PARTIAL_RUN_H
#define ZF_SCHEDULER_GRAPH_PARTIAL_RUN_H

#include <pthread.h>
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

/* A new partial run with pr's feeds, fetches and needs, nothing given
 * yet: for a setup of a signature seen before, without walking the graph
 * again (a session keeps one untouched per signature; the needs of a
 * signature's fetches do not change when the graph grows, as an extension
 * adds nodes, never inputs to the nodes there). Errors:
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_partial_run_clone(const zf_partial_run_t *pr, zf_partial_run_t **out);

/* A setup's partial run for a signature whose needs *cache keeps (NULL
 * until the first setup; set once, read and set under mu, then never
 * changed, so it is copied after mu is let go, for as long as the cache's
 * owner lives): a copy of them, else zf_partial_run_new() (under walk_mu
 * when not NULL) with a copy kept in *cache for the next setup (none
 * without memory for it: that setup walks again). Errors: those of
 * zf_partial_run_new(), RESOURCE_EXHAUSTED. */
zf_status_t zf_partial_run_for(zf_partial_run_t **cache, pthread_mutex_t *mu,
                               pthread_mutex_t *walk_mu, const zf_graph_t *g,
                               const char *const *feeds, int n_feeds, const char *const *fetches,
                               int n_fetches, zf_partial_run_t **out);

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

/* ---- a session's open partial runs ------------------------------------------------------ */

/* A session's table of open partial runs, by handle, and of the handles of
 * the latest to end with why each ended, so that a call naming one is told
 * why it is refused: the in-process session's and the master's. Each entry
 * is a handle (copied) and the caller's item (not owned: the caller frees
 * it once it is off the table). An entry is busy while one call of it runs
 * (or, as a caller wishes, until its setup is done): a second call is
 * refused. Not locked: the caller holds its own lock around every use. */
typedef struct zf_partial_run_table zf_partial_run_table_t;

/* A table keeping at most max_open partial runs open and remembering the
 * latest n_ended handles to end; owner names the session in its errors
 * ("the session", "session s-1"; copied). Caller frees *out.
 * INVALID_ARGUMENT for a negative count or no owner; RESOURCE_EXHAUSTED
 * when out of memory. */
zf_status_t zf_partial_run_table_new(int max_open, int n_ended, const char *owner,
                                     zf_partial_run_table_t **out);

/* Frees the table and what it remembers, not its entries' items (take
 * them off first with zf_partial_run_table_drain()). */
void zf_partial_run_table_free(zf_partial_run_table_t **t);

/* The partial runs open in t. */
int zf_partial_run_table_count(const zf_partial_run_table_t *t);

/* OK while t has room for another open partial run, else
 * RESOURCE_EXHAUSTED "<owner> has N partial runs open already (the most it
 * keeps): finish or abandon one first". */
zf_status_t zf_partial_run_table_room(const zf_partial_run_table_t *t);

/* Opens item's partial run under handle, busy when busy (no call takes it
 * until zf_partial_run_table_release()). Errors: the room's, ALREADY_EXISTS
 * for a handle open already, RESOURCE_EXHAUSTED when out of memory. */
zf_status_t zf_partial_run_table_add(zf_partial_run_table_t *t, const char *handle, void *item,
                                     bool busy);

/* The item of handle's open partial run into *item, marked busy for the
 * caller's call; or *item NULL and why not: FAILED_PRECONDITION "partial
 * run 'h' has a call running: its calls run one at a time" when busy,
 * FAILED_PRECONDITION "partial run 'h' <why>" for one of the latest to end
 * (as zf_partial_run_table_remove() was told), else INVALID_ARGUMENT "Must
 * run PartialRunSetup before performing partial runs (handle 'h' is not
 * known in this session)". */
zf_status_t zf_partial_run_table_take(zf_partial_run_table_t *t, const char *handle, void **item);

/* Clears the busy mark of item's partial run (its call or setup is done). */
void zf_partial_run_table_release(zf_partial_run_table_t *t, const void *item);

/* Ends item's partial run: takes it off t and remembers its handle with
 * why ("has completed: ...", "failed: ..."; NULL: not remembered) among
 * the latest n_ended to end, the oldest forgotten (its handle then
 * unknown); out of memory, the handle is not remembered. Nothing for an
 * item not in t. */
void zf_partial_run_table_remove(zf_partial_run_table_t *t, const void *item, const char *why);

/* For a session's close: ends the latest opened partial run of t, an idle
 * one only unless with_busy, remembering why (when not NULL) as
 * zf_partial_run_table_remove() does, and returns its item; NULL when no
 * such partial run is open. Called until NULL, it takes them all off. */
void *zf_partial_run_table_drain(zf_partial_run_table_t *t, bool with_busy, const char *why);

#endif
