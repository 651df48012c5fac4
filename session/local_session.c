/* The in-process session: owns its devices, resource store, placement and
 * the cache of callables (partitions + engines) keyed by run signature. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/device_name.h"
#include "common/graph.h"
#include "common/strmap.h"
#include "executor/devices/device.h"
#include "executor/engine/engine.h"
#include "executor/engine/graph_optimizer.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/kernels_sendrecv.h"
#include "executor/devices/gpu.h"
#include "session/local_session.h"
#include "executor/rendezvous/rendezvous.h"
#include "executor/kernels/resource.h"
#include "common/thread_pool.h"
#include "scheduler/graph/functions.h"
#include "scheduler/graph/partial_run.h"
#include "scheduler/graph/partition.h"
#include "scheduler/graph/placer.h"

/* One cached signature: canonical sorted names, the partitions and their
 * executors, and where each feed goes and each fetch comes from. */
typedef struct {
    char **feeds; /* "node:port", sorted, unique */
    int n_feeds;
    char **fetches; /* "node:port", sorted, unique */
    int n_fetches;
    zf_partition_set_t *set;
    zf_engine_t **executors; /* one per partition */
    const char **fetch_keys; /* per fetch; borrowed from set */
    int *send_feed;          /* per partition feed endpoint: index into feeds */
    const char **send_key;   /* ... and its key (borrowed from set) */
    int n_sends;
    zf_partial_run_t *prun; /* a partial run's needs, nothing given: NULL until a setup; under mu */
} s_callable_t;

struct zf_local_session {
    zf_graph_t *graph;
    zf_device_t **devices;
    int n_devices;
    int *assignment; /* per node: index into devices */
    zf_resource_mgr_t *resources;
    int64_t timeout_ms;
    int opt_level;
    bool bfloat16_sendrecv;
    bool recv_scheduling;
    atomic_int_fast64_t next_step;
    pthread_mutex_t mu;     /* guards callables and last_parts */
    zf_strmap_t *callables; /* signature -> s_callable_t *, keys copied */
    int last_parts;
    const zf_partition_set_t *last_set; /* the last successful run's (a cached callable's) */
    /* open partial runs (struct s_prun), and the handles of the last that
     * ended with why; under mu */
    zf_partial_run_table_t *pruns;
};

/* ---- names ------------------------------------------------------------------ */

/* "x" -> "x:0"; INVALID_ARGUMENT naming what for malformed names. */
static zf_status_t s_canonical(const char *what, const char *name, char **out)
{
    const char *node = NULL;
    size_t len = 0;
    int port = 0;
    zf_status_t s = zf_tensor_name_parse(name, &node, &len, &port);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s '%s'", what, name);
    if (port < 0) return zf_invalid_argument("%s '%s' names a control input", what, name);
    size_t cap = len + 16;
    *out = malloc(cap);
    if (!*out) return zf_out_of_memory("session");
    snprintf(*out, cap, "%.*s:%d", (int)len, node, port);
    return ZF_STATUS_OK;
}

static int s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void s_free_names(char **names, int n)
{
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

/* Canonical copies of names[0..n), sorted; duplicates are an error when
 * unique_required (feeds), dropped otherwise (fetches). */
static zf_status_t s_sorted_names(const char *what, const char *const *names, int n, bool canonical,
                                  bool unique_required, char ***out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    char **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return zf_out_of_memory("session");
    zf_status_t s = ZF_STATUS_OK;
    for (int i = 0; i < n && zf_ok(s); i++) {
        if (canonical)
            s = s_canonical(what, names[i], &v[i]);
        else if (!(v[i] = strdup(names[i])))
            s = zf_out_of_memory("session");
    }
    if (!zf_ok(s)) {
        s_free_names(v, n);
        return s;
    }
    qsort(v, (size_t)n, sizeof *v, s_cmp_str);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && strcmp(v[m - 1], v[i]) == 0) {
            if (unique_required && zf_ok(s))
                s = zf_invalid_argument("%s '%s' is given more than once", what, v[i]);
            free(v[i]);
            continue;
        }
        v[m++] = v[i];
    }
    if (!zf_ok(s)) {
        s_free_names(v, m);
        return s;
    }
    *out = v;
    *n_out = m;
    return ZF_STATUS_OK;
}

static int s_find_name(char **sorted, int n, const char *name)
{
    char *const *hit = bsearch(&name, sorted, (size_t)n, sizeof *sorted, s_cmp_str);
    return hit ? (int)(hit - sorted) : -1;
}

/* ---- callables ------------------------------------------------------------------ */

static void s_callable_destroy(s_callable_t **p_p)
{
    s_callable_t *p = *p_p;
    *p_p = NULL;
    if (!p) return;
    for (int i = 0; p->set && p->executors && i < p->set->n_parts; i++)
        zf_engine_destroy(&p->executors[i]);
    free(p->executors);
    zf_partition_set_destroy(&p->set);
    s_free_names(p->feeds, p->n_feeds);
    s_free_names(p->fetches, p->n_fetches);
    free(p->fetch_keys);
    free(p->send_feed);
    free(p->send_key);
    zf_partial_run_free(&p->prun);
    free(p);
}

/* Maps the partitions' client endpoints onto the callable's feeds and fetches. */
static zf_status_t s_callable_endpoints(s_callable_t *p)
{
    int total = 0;
    for (int i = 0; i < p->set->n_parts; i++) total += p->set->parts[i].n_feeds;
    p->send_feed = calloc((size_t)total + 1, sizeof *p->send_feed);
    p->send_key = calloc((size_t)total + 1, sizeof *p->send_key);
    p->fetch_keys = calloc((size_t)p->n_fetches + 1, sizeof *p->fetch_keys);
    if (!p->send_feed || !p->send_key || !p->fetch_keys) return zf_out_of_memory("session");
    for (int i = 0; i < p->set->n_parts; i++) {
        const zf_partition_t *part = &p->set->parts[i];
        for (int k = 0; k < part->n_feeds; k++) {
            int f = s_find_name(p->feeds, p->n_feeds, part->feeds[k].tensor_name);
            if (f < 0)
                return zf_internal("partition %s receives feed '%s' that was not asked for",
                                   part->device, part->feeds[k].tensor_name);
            p->send_feed[p->n_sends] = f;
            p->send_key[p->n_sends++] = part->feeds[k].key;
        }
        for (int k = 0; k < part->n_fetches; k++) {
            int f = s_find_name(p->fetches, p->n_fetches, part->fetches[k].tensor_name);
            if (f >= 0) p->fetch_keys[f] = part->fetches[k].key;
        }
    }
    for (int f = 0; f < p->n_fetches; f++)
        if (!p->fetch_keys[f]) return zf_internal("no partition sends fetch '%s'", p->fetches[f]);
    return ZF_STATUS_OK;
}

static zf_status_t s_callable_partition(zf_local_session_t *s, s_callable_t *p, char **targets,
                                        int n_targets)
{
    zf_partition_device_t *devs = calloc((size_t)s->n_devices, sizeof *devs);
    if (!devs) return zf_out_of_memory("session");
    for (int d = 0; d < s->n_devices; d++)
        devs[d] = (zf_partition_device_t){s->devices[d]->name, s->devices[d]->incarnation};
    zf_partition_options_t opts = {
        .feeds = (const char *const *)p->feeds,
        .n_feeds = p->n_feeds,
        .fetches = (const char *const *)p->fetches,
        .n_fetches = p->n_fetches,
        .targets = (const char *const *)targets,
        .n_targets = n_targets,
        .by = ZF_PARTITION_BY_DEVICE,
        .bfloat16_sendrecv = s->bfloat16_sendrecv,
        .recv_scheduling = s->recv_scheduling,
    };
    zf_status_t st =
        zf_partition_graph(s->graph, devs, s->n_devices, s->assignment, &opts, &p->set);
    free(devs);
    return st;
}

static zf_status_t s_callable_executors(zf_local_session_t *s, s_callable_t *p)
{
    p->executors = calloc((size_t)p->set->n_parts + 1, sizeof *p->executors);
    if (!p->executors) return zf_out_of_memory("session");
    for (int i = 0; i < p->set->n_parts; i++) {
        const zf_partition_t *part = &p->set->parts[i];
        if (part->device_index < 0 || part->device_index >= s->n_devices)
            return zf_internal("partition %s has no device", part->device);
        zf_engine_params_t params = {s->devices[part->device_index], s->resources};
        zf_optimizer_options_t oo = {s->opt_level, 0};
        ZF_TRY(zf_optimize_graph(part->graph, &oo, NULL));
        ZF_TRY(zf_engine_new(part->graph, &params, &p->executors[i]));
    }
    return ZF_STATUS_OK;
}

/* Builds the callable for canonical feeds and fetches (taken over) and
 * targets (borrowed). */
static zf_status_t s_callable_new(zf_local_session_t *s, char ***feeds, int n_feeds,
                                  char ***fetches, int n_fetches, char **targets, int n_targets,
                                  s_callable_t **out)
{
    *out = NULL;
    s_callable_t *p = calloc(1, sizeof *p);
    if (!p) return zf_out_of_memory("session");
    p->feeds = *feeds;
    p->n_feeds = n_feeds;
    p->fetches = *fetches;
    p->n_fetches = n_fetches;
    *feeds = *fetches = NULL;
    zf_status_t st = s_callable_partition(s, p, targets, n_targets);
    if (zf_ok(st)) st = s_callable_executors(s, p);
    if (zf_ok(st)) st = s_callable_endpoints(p);
    if (!zf_ok(st)) {
        s_callable_destroy(&p);
        return st;
    }
    *out = p;
    return ZF_STATUS_OK;
}

/* "feeds\x1ffetches\x1ftargets", each list joined by '\x1e'. */
static char *s_signature(char **feeds, int nf, char **fetches, int nt, char **targets, int ng)
{
    size_t len = 4;
    for (int i = 0; i < nf; i++) len += strlen(feeds[i]) + 1;
    for (int i = 0; i < nt; i++) len += strlen(fetches[i]) + 1;
    for (int i = 0; i < ng; i++) len += strlen(targets[i]) + 1;
    char *sig = malloc(len), *p = sig;
    if (!sig) return NULL;
    char **lists[3] = {feeds, fetches, targets};
    int counts[3] = {nf, nt, ng};
    for (int l = 0; l < 3; l++) {
        for (int i = 0; i < counts[l]; i++) p += sprintf(p, "%s\x1e", lists[l][i]);
        *p++ = '\x1f';
    }
    *p = '\0';
    return sig;
}

/* The cached callable for the run's names, built on first use. */
static zf_status_t s_callable_get(zf_local_session_t *s, char ***feeds, int nf, char ***fetches,
                                  int nt, char **targets, int ng, s_callable_t **out)
{
    char *sig = s_signature(*feeds, nf, *fetches, nt, targets, ng);
    if (!sig) return zf_out_of_memory("session");
    pthread_mutex_lock(&s->mu);
    uintptr_t v = 0;
    zf_status_t st = ZF_STATUS_OK;
    if (zf_strmap_get(s->callables, sig, &v)) {
        *out = (s_callable_t *)v;
    } else {
        st = s_callable_new(s, feeds, nf, fetches, nt, targets, ng, out);
        if (zf_ok(st) && zf_strmap_insert(s->callables, sig, (uintptr_t)*out, NULL) != 0) {
            s_callable_destroy(out);
            st = zf_out_of_memory("session");
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(sig);
    return st;
}

/* ---- a step -------------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int remaining;
    zf_rendezvous_t *r;
} s_wait_t;

typedef struct {
    zf_engine_t *ex;
    zf_engine_args_t args;
    s_wait_t *wait;
} s_start_t;

static void s_partition_done(zf_status_t status, void *arg)
{
    s_wait_t *w = arg;
    /* A failing executor has aborted the rendezvous already (a no-op then);
     * this covers one that failed before it could start. */
    if (!zf_ok(status)) zf_rendezvous_start_abort(w->r, &status);
    zf_status_clear(&status); /* the rendezvous keeps the root cause */
    pthread_mutex_lock(&w->mu);
    if (--w->remaining == 0) pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void s_start_partition(void *arg)
{
    s_start_t *st = arg;
    zf_engine_run_async(st->ex, &st->args, s_partition_done, st->wait);
}

/* Waits for every partition; aborts the step once the deadline passes. */
static void s_wait_partitions(s_wait_t *w, zf_rendezvous_t *r, int64_t timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    bool timed_out = false;
    while (w->remaining > 0 && !timed_out) {
        int rc = timeout_ms > 0 ? pthread_cond_timedwait(&w->cv, &w->mu, &deadline)
                                : pthread_cond_wait(&w->cv, &w->mu);
        timed_out = rc == ETIMEDOUT && w->remaining > 0;
    }
    pthread_mutex_unlock(&w->mu);
    if (!timed_out) return;
    zf_status_t s = zf_status_new(ZF_DEADLINE_EXCEEDED, "step %lld did not finish within %lld ms",
                                  (long long)zf_rendezvous_step_id(r), (long long)timeout_ms);
    zf_rendezvous_start_abort(r, &s);
    zf_status_clear(&s);
    pthread_mutex_lock(&w->mu);
    while (w->remaining > 0) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* Starts every partition of p on rendezvous r, each on its device's pool
 * (the last one here), counting them in w (initialised); returns the start
 * records, which must outlive the partitions (NULL when out of memory:
 * they were run one after another). */
static s_start_t *s_start_partitions(zf_local_session_t *s, const s_callable_t *p,
                                     zf_rendezvous_t *r, zf_step_trace_t *trace, s_wait_t *w)
{
    int n = p->set->n_parts;
    *w = (s_wait_t){.remaining = n, .r = r};
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    s_start_t *starts = calloc((size_t)n + 1, sizeof *starts);
    for (int i = 0; i < n; i++) {
        zf_engine_args_t args = {zf_rendezvous_step_id(r), r, trace};
        if (!starts) { /* no memory to hand off: run them one after another */
            zf_engine_run_async(p->executors[i], &args, s_partition_done, w);
            continue;
        }
        starts[i] = (s_start_t){p->executors[i], args, w};
        zf_thread_pool_t *pool = s->devices[p->set->parts[i].device_index]->pool;
        bool handed_off = false;
        if (i + 1 < n && pool) {
            zf_status_t st = zf_thread_pool_submit(pool, s_start_partition, &starts[i]);
            handed_off = zf_ok(st);
            zf_status_clear(&st);
        }
        if (!handed_off) s_start_partition(&starts[i]);
    }
    return starts;
}

static void s_wait_destroy(s_wait_t *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* Starts every partition and waits for all of them. */
static void s_run_partitions(zf_local_session_t *s, const s_callable_t *p, zf_rendezvous_t *r,
                             zf_step_trace_t *trace)
{
    s_wait_t w;
    s_start_t *starts = s_start_partitions(s, p, r, trace, &w);
    s_wait_partitions(&w, r, s->timeout_ms);
    free(starts);
    s_wait_destroy(&w);
}

/* TensorFlow's feed checks: the graph's dtype, and a Placeholder's shape. */
static zf_status_t s_check_feed(const zf_local_session_t *s, const char *name, const zf_tensor_t *t)
{
    return zf_graph_check_feed(s->graph, name, zf_tensor_dtype(t), zf_tensor_shape(t));
}

/* Sends the client's feeds into the step's rendezvous. */
static zf_status_t s_send_feeds(const s_callable_t *p, char **user_feeds,
                                zf_tensor_t *const *values, int n, zf_rendezvous_t *r)
{
    for (int k = 0; k < p->n_sends; k++) {
        const char *name = p->feeds[p->send_feed[k]];
        int i = 0;
        while (i < n && strcmp(user_feeds[i], name) != 0) i++;
        if (i == n) return zf_internal("feed '%s' has no value", name);
        ZF_TRY(zf_rendezvous_send(r, p->send_key[k], values[i], false));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_collect_fetches(const s_callable_t *p, char **user_fetches, int n,
                                     zf_rendezvous_t *r, zf_tensor_t **out)
{
    zf_tensor_t **got = calloc((size_t)p->n_fetches + 1, sizeof *got);
    if (!got) return zf_out_of_memory("session");
    zf_status_t st = ZF_STATUS_OK;
    for (int f = 0; f < p->n_fetches && zf_ok(st); f++) {
        bool dead = false;
        st = zf_rendezvous_recv(r, p->fetch_keys[f], 0, &got[f], &dead);
        if (zf_ok(st) && dead)
            st = zf_invalid_argument("fetched tensor '%s' is dead (not computed on the path "
                                     "control flow took)",
                                     p->fetches[f]);
    }
    for (int j = 0; j < n && zf_ok(st); j++)
        out[j] = zf_tensor_ref(got[s_find_name(p->fetches, p->n_fetches, user_fetches[j])]);
    for (int f = 0; f < p->n_fetches; f++) zf_tensor_unref(&got[f]);
    free(got);
    return st;
}

/* Runs one step of callable p; the root cause wins over what followed from it. */
static zf_status_t s_step(zf_local_session_t *s, const s_callable_t *p, char **user_feeds,
                          zf_tensor_t *const *values, int n_feeds, char **user_fetches,
                          int n_fetches, zf_tensor_t **out, zf_step_trace_t *trace)
{
    zf_rendezvous_t *r = NULL;
    ZF_TRY(zf_rendezvous_new(atomic_fetch_add(&s->next_step, 1), &r));
    zf_status_t st = s_send_feeds(p, user_feeds, values, n_feeds, r);
    if (zf_ok(st)) {
        s_run_partitions(s, p, r, trace);
        st = zf_rendezvous_status(r);
    }
    if (zf_ok(st)) st = s_collect_fetches(p, user_fetches, n_fetches, r, out);
    zf_rendezvous_unref(&r);
    return st;
}

/* Canonical feed and fetch names in the caller's order (for mapping
 * results), plus sorted unique copies (the signature). */
typedef struct {
    char **feeds, **fetches; /* caller's order, canonical */
    char **sorted_feeds, **sorted_fetches, **sorted_targets;
    int n_feeds, n_fetches, n_targets, ns_feeds, ns_fetches, ns_targets;
} s_names_t;

static void s_names_free(s_names_t *nm)
{
    s_free_names(nm->feeds, nm->n_feeds);
    s_free_names(nm->fetches, nm->n_fetches);
    s_free_names(nm->sorted_feeds, nm->ns_feeds);
    s_free_names(nm->sorted_fetches, nm->ns_fetches);
    s_free_names(nm->sorted_targets, nm->ns_targets);
}

static zf_status_t s_list(const char *what, const char *const *names, int n, char ***out)
{
    *out = calloc((size_t)n + 1, sizeof **out);
    if (!*out) return zf_out_of_memory("session");
    for (int i = 0; i < n; i++) ZF_TRY(s_canonical(what, names[i], &(*out)[i]));
    return ZF_STATUS_OK;
}

static zf_status_t s_names(s_names_t *nm, const char *const *feeds, int nf,
                           const char *const *fetches, int nt, const char *const *targets, int ng)
{
    nm->n_feeds = nf;
    nm->n_fetches = nt;
    ZF_TRY(s_list("feed", feeds, nf, &nm->feeds));
    ZF_TRY(s_list("fetch", fetches, nt, &nm->fetches));
    ZF_TRY(s_sorted_names("feed", feeds, nf, true, true, &nm->sorted_feeds, &nm->ns_feeds));
    ZF_TRY(s_sorted_names("fetch", fetches, nt, true, false, &nm->sorted_fetches, &nm->ns_fetches));
    return s_sorted_names("target", targets, ng, false, false, &nm->sorted_targets,
                          &nm->ns_targets);
}

zf_status_t zf_local_session_run(zf_local_session_t *s, const char *const *feed_names,
                                 zf_tensor_t *const *feed_values, int n_feeds,
                                 const char *const *fetches, int n_fetches,
                                 const char *const *targets, int n_targets, zf_tensor_t **fetch_out)
{
    return zf_local_session_run_traced(s, feed_names, feed_values, n_feeds, fetches, n_fetches,
                                       targets, n_targets, fetch_out, NULL);
}

zf_status_t zf_local_session_run_traced(zf_local_session_t *s, const char *const *feed_names,
                                        zf_tensor_t *const *feed_values, int n_feeds,
                                        const char *const *fetches, int n_fetches,
                                        const char *const *targets, int n_targets,
                                        zf_tensor_t **fetch_out, zf_step_trace_t *trace)
{
    for (int j = 0; j < n_fetches; j++) fetch_out[j] = NULL;
    if (n_feeds < 0 || n_fetches < 0 || n_targets < 0)
        return zf_invalid_argument("negative feed, fetch or target count");
    s_names_t nm = {0};
    zf_status_t st = s_names(&nm, feed_names, n_feeds, fetches, n_fetches, targets, n_targets);
    for (int i = 0; i < n_feeds && zf_ok(st); i++)
        st = feed_values[i] ? s_check_feed(s, nm.feeds[i], feed_values[i])
                            : zf_invalid_argument("feed '%s' has no value", nm.feeds[i]);
    /* The caller may have written a feed's bytes since a run that fed it:
     * what a kernel derived from them and keyed on the buffer (Conv2D's
     * filter reordered for oneDNN) is stale. */
    for (int i = 0; i < n_feeds && zf_ok(st); i++)
        if (zf_tensor_buffer(feed_values[i]))
            zf_buffer_bump_version(zf_tensor_buffer(feed_values[i]));
    s_callable_t *p = NULL;
    if (zf_ok(st))
        st = s_callable_get(s, &nm.sorted_feeds, nm.ns_feeds, &nm.sorted_fetches, nm.ns_fetches,
                            nm.sorted_targets, nm.ns_targets, &p);
    if (zf_ok(st))
        st = s_step(s, p, nm.feeds, feed_values, n_feeds, nm.fetches, n_fetches, fetch_out, trace);
    if (zf_ok(st)) {
        pthread_mutex_lock(&s->mu);
        s->last_parts = p->set->n_parts;
        s->last_set = p->set;
        pthread_mutex_unlock(&s->mu);
    }
    s_names_free(&nm);
    return st;
}

/* ---- partial runs ------------------------------------------------------------- */

/* One open partial run: its step's rendezvous and partitions, started at
 * setup and running between calls, their _Recv nodes waiting for feeds. */
typedef struct s_prun {
    char handle[32];
    const s_callable_t *p; /* the session's, cached */
    zf_rendezvous_t *r;
    s_wait_t wait;
    s_start_t *starts;
    zf_partial_run_t *given;
} s_prun_t;

/* Ends pr's step: aborted with *why unless it ended (NULL), its partitions
 * waited for, everything freed. Not under s->mu. */
static void s_prun_end(s_prun_t *pr, const zf_status_t *why)
{
    if (why) zf_rendezvous_start_abort(pr->r, why);
    pthread_mutex_lock(&pr->wait.mu);
    while (pr->wait.remaining > 0) pthread_cond_wait(&pr->wait.cv, &pr->wait.mu);
    pthread_mutex_unlock(&pr->wait.mu);
    s_wait_destroy(&pr->wait);
    free(pr->starts);
    zf_rendezvous_unref(&pr->r);
    zf_partial_run_free(&pr->given);
    free(pr);
}

zf_status_t zf_local_session_partial_run_setup(zf_local_session_t *s, const char *const *feeds,
                                               int n_feeds, const char *const *fetches,
                                               int n_fetches, const char *const *targets,
                                               int n_targets, char **handle)
{
    *handle = NULL;
    if (n_feeds < 0 || n_fetches < 0 || n_targets < 0)
        return zf_invalid_argument("negative feed, fetch or target count");
    s_names_t nm = {0};
    zf_status_t st = s_names(&nm, feeds, n_feeds, fetches, n_fetches, targets, n_targets);
    s_callable_t *p = NULL;
    if (zf_ok(st))
        st = s_callable_get(s, &nm.sorted_feeds, nm.ns_feeds, &nm.sorted_fetches, nm.ns_fetches,
                            nm.sorted_targets, nm.ns_targets, &p);
    s_names_free(&nm);
    s_prun_t *pr = zf_ok(st) ? calloc(1, sizeof *pr) : NULL;
    if (zf_ok(st) && !pr) st = zf_out_of_memory("session");
    if (zf_ok(st)) { /* refused before the walk when full; checked again below, as counted */
        pthread_mutex_lock(&s->mu);
        st = zf_partial_run_table_room(s->pruns);
        pthread_mutex_unlock(&s->mu);
    }
    if (zf_ok(st)) { /* the signature's needs, walked once */
        pr->p = p;
        st = zf_partial_run_for(&p->prun, &s->mu, NULL, s->graph, (const char *const *)p->feeds,
                                p->n_feeds, (const char *const *)p->fetches, p->n_fetches,
                                &pr->given);
    }
    int64_t step = atomic_fetch_add(&s->next_step, 1);
    if (zf_ok(st)) st = zf_rendezvous_new(step, &pr->r);
    if (zf_ok(st)) {
        snprintf(pr->handle, sizeof pr->handle, "prun-%lld", (long long)step);
        if (!(*handle = strdup(pr->handle))) st = zf_out_of_memory("session");
    }
    if (zf_ok(st)) { /* busy until its partitions have started: no call takes it before */
        pthread_mutex_lock(&s->mu);
        st = zf_partial_run_table_add(s->pruns, pr->handle, pr, true);
        pthread_mutex_unlock(&s->mu);
    }
    if (!zf_ok(st)) {
        free(*handle);
        *handle = NULL;
        if (pr) {
            zf_rendezvous_unref(&pr->r);
            zf_partial_run_free(&pr->given);
            free(pr);
        }
        return st;
    }
    pr->starts = s_start_partitions(s, p, pr->r, NULL, &pr->wait);
    pthread_mutex_lock(&s->mu);
    zf_partial_run_table_release(s->pruns, pr);
    pthread_mutex_unlock(&s->mu);
    return ZF_STATUS_OK;
}

/* Sends the call's feeds to the partitions that receive them. */
static zf_status_t s_prun_send(const s_prun_t *pr, char **feeds, zf_tensor_t *const *values,
                               int n_feeds)
{
    const s_callable_t *p = pr->p;
    for (int i = 0; i < n_feeds; i++) {
        /* the caller may have written its bytes since a run that fed it */
        if (zf_tensor_buffer(values[i])) zf_buffer_bump_version(zf_tensor_buffer(values[i]));
        int f = s_find_name(p->feeds, p->n_feeds, feeds[i]);
        for (int k = 0; k < p->n_sends; k++)
            if (p->send_feed[k] == f)
                ZF_TRY(zf_rendezvous_send(pr->r, p->send_key[k], values[i], false));
    }
    return ZF_STATUS_OK;
}

/* Receives the call's fetches as their partitions produce them. */
static zf_status_t s_prun_fetch(const zf_local_session_t *s, const s_prun_t *pr, char **fetches,
                                int n_fetches, zf_tensor_t **out)
{
    const s_callable_t *p = pr->p;
    for (int j = 0; j < n_fetches; j++) {
        int k = 0; /* a name fetched twice in one call is received once */
        while (k < j && strcmp(fetches[k], fetches[j]) != 0) k++;
        if (k < j) {
            out[j] = out[k] ? zf_tensor_ref(out[k]) : NULL;
            continue;
        }
        int f = s_find_name(p->fetches, p->n_fetches, fetches[j]);
        bool dead = false;
        ZF_TRY(zf_rendezvous_recv(pr->r, p->fetch_keys[f], s->timeout_ms > 0 ? s->timeout_ms : -1,
                                  &out[j], &dead));
        if (dead)
            return zf_invalid_argument("fetched tensor '%s' is dead (not computed on the path "
                                       "control flow took)",
                                       fetches[j]);
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_local_session_partial_run(zf_local_session_t *s, const char *handle,
                                         const char *const *feed_names,
                                         zf_tensor_t *const *feed_values, int n_feeds,
                                         const char *const *fetches, int n_fetches,
                                         zf_tensor_t **fetch_out)
{
    for (int j = 0; j < n_fetches; j++) fetch_out[j] = NULL;
    if (n_feeds < 0 || n_fetches < 0) return zf_invalid_argument("negative feed or fetch count");
    if (!handle) return zf_invalid_argument("a partial run's call names no handle");
    s_names_t nm = {0};
    zf_status_t st = s_names(&nm, feed_names, n_feeds, fetches, n_fetches, NULL, 0);
    for (int i = 0; i < n_feeds && zf_ok(st); i++)
        st = feed_values[i] ? s_check_feed(s, nm.feeds[i], feed_values[i])
                            : zf_invalid_argument("feed '%s' has no value", nm.feeds[i]);
    void *taken = NULL; /* busy: its call runs */
    pthread_mutex_lock(&s->mu);
    if (zf_ok(st)) st = zf_partial_run_table_take(s->pruns, handle, &taken);
    s_prun_t *pr = taken;
    const char *const *cf = (const char *const *)nm.feeds, *const *cx =
                                                               (const char *const *)nm.fetches;
    if (pr) st = zf_partial_run_check(pr->given, cf, n_feeds, cx, n_fetches);
    bool last = pr && zf_ok(st) && zf_partial_run_mark(pr->given, cf, n_feeds, cx, n_fetches);
    if (pr && !zf_ok(st)) /* a refused call leaves the partial run as it was */
        zf_partial_run_table_release(s->pruns, pr);
    pthread_mutex_unlock(&s->mu);
    if (!pr || !zf_ok(st)) {
        s_names_free(&nm);
        return st;
    }
    st = s_prun_send(pr, nm.feeds, feed_values, n_feeds);
    if (zf_ok(st)) st = s_prun_fetch(s, pr, nm.fetches, n_fetches, fetch_out);
    if (zf_ok(st) && last) {
        s_wait_partitions(&pr->wait, pr->r, s->timeout_ms);
        st = zf_rendezvous_status(pr->r);
    }
    if (!zf_ok(st)) { /* the root cause, where a partition failed first */
        zf_status_t root = zf_rendezvous_status(pr->r);
        if (!zf_ok(root)) {
            zf_status_clear(&st);
            st = root;
        } else {
            zf_status_clear(&root);
        }
    }
    pthread_mutex_lock(&s->mu);
    if (!zf_ok(st) || last) {
        char why[256];
        if (zf_ok(st))
            snprintf(why, sizeof why, "has completed: every feed and fetch of it was given");
        else
            snprintf(why, sizeof why, "failed: %s", zf_status_msg(&st));
        zf_partial_run_table_remove(s->pruns, pr, why);
    } else {
        zf_partial_run_table_release(s->pruns, pr);
    }
    pthread_mutex_unlock(&s->mu);
    if (!zf_ok(st) || last) s_prun_end(pr, zf_ok(st) ? NULL : &st);
    if (!zf_ok(st))
        for (int j = 0; j < n_fetches; j++) zf_tensor_unref(&fetch_out[j]);
    s_names_free(&nm);
    return st;
}

/* ---- the session ---------------------------------------------------------------- */

static zf_status_t s_make_devices(zf_local_session_t *s, const char *list, int threads)
{
    zf_device_name_t *names = NULL;
    int n = 0;
    ZF_TRY(zf_device_list_parse(list, &names, &n));
    s->devices = calloc((size_t)n, sizeof *s->devices);
    zf_status_t st = s->devices ? ZF_STATUS_OK : zf_out_of_memory("session");
    for (int i = 0; i < n && zf_ok(st); i++) {
        char name[ZF_DEVICE_NAME_MAX];
        zf_device_name_format(&names[i], name, sizeof name);
        if (strcmp(names[i].type, ZF_DEVICE_TYPE_GPU) == 0)
            st = zf_device_gpu_new(name, names[i].id, &s->devices[i]);
        else if (strcmp(names[i].type, ZF_DEVICE_TYPE_CPU) == 0)
            st = zf_device_cpu_new(name, threads, &s->devices[i]);
        else
            st = zf_unimplemented("device %s: zflow runs %s devices on CPU and GPU only", name,
                                  names[i].type);
        if (zf_ok(st)) s->n_devices++;
    }
    free(names);
    return st;
}

const char *zf_local_session_default_devices(char *buf, size_t n)
{
    int gpus = 0;
    zf_status_t st = zf_gpu_device_count(&gpus);
    zf_status_clear(&st); /* no GPU visible, or built without CUDA: CPU only */
    if (gpus > 0)
        snprintf(buf, n, "cpu:1,gpu:%d", gpus);
    else
        snprintf(buf, n, "cpu:1");
    return buf;
}

static zf_status_t s_place(zf_local_session_t *s, const zf_local_session_options_t *o)
{
    int n = zf_graph_num_nodes(s->graph);
    s->assignment = calloc((size_t)n + 1, sizeof *s->assignment);
    zf_placer_device_t *devs = calloc((size_t)s->n_devices, sizeof *devs);
    zf_status_t st = s->assignment && devs ? ZF_STATUS_OK : zf_out_of_memory("session");
    for (int d = 0; d < s->n_devices; d++) devs[d] = (zf_placer_device_t){s->devices[d]->name, 0};
    zf_placer_options_t popts = ZF_PLACER_OPTIONS_DEFAULT;
    popts.allow_soft_placement = o->allow_soft_placement;
    popts.mode = o->balanced_placement ? ZF_PLACE_BALANCED : ZF_PLACE_FIRST;
    popts.log_placement = o->log_placement;
    if (zf_ok(st)) st = zf_placer_run(s->graph, devs, s->n_devices, &popts, s->assignment);
    free(devs);
    return st;
}

zf_status_t zf_local_session_new(Tensorflow__GraphDef *gd, const zf_local_session_options_t *opts,
                                 zf_local_session_t **out)
{
    *out = NULL;
    zf_local_session_options_t o = opts ? *opts : ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    zf_kernels_register_builtin(true);
    zf_kernels_register_sendrecv();
    zf_local_session_t *s = calloc(1, sizeof *s);
    if (!s) return zf_out_of_memory("session");
    pthread_mutex_init(&s->mu, NULL);
    s->timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : 0;
    s->opt_level = o.opt_level;
    s->bfloat16_sendrecv = o.bfloat16_sendrecv;
    s->recv_scheduling = o.recv_scheduling;
    atomic_init(&s->next_step, 1);
    zf_status_t st = (s->callables = zf_strmap_new(8, ZF_STRMAP_COPY_KEYS))
                         ? ZF_STATUS_OK
                         : zf_out_of_memory("session");
    if (zf_ok(st)) st = zf_resource_mgr_new(&s->resources);
    if (zf_ok(st))
        st = zf_partial_run_table_new(ZF_LOCAL_SESSION_PRUNS_MAX, ZF_LOCAL_SESSION_PRUN_GONE,
                                      "the session", &s->pruns);
    char default_devices[32];
    if (zf_ok(st))
        st = s_make_devices(
            s,
            o.devices ? o.devices
                      : zf_local_session_default_devices(default_devices, sizeof default_devices),
            o.threads_per_device);
    Tensorflow__GraphDef *lowered = NULL; /* functions inlined, control flow lowered */
    if (zf_ok(st)) st = zf_functions_lower(gd, &lowered);
    if (zf_ok(st)) st = zf_graph_new_from_graphdef(lowered ? lowered : gd, &s->graph);
    if (zf_ok(st) && lowered) zf_graph_adopt_graphdef(s->graph, &lowered);
    if (lowered) protobuf_c_message_free_unpacked(&lowered->base, NULL);
    if (zf_ok(st)) st = s_place(s, &o);
    if (!zf_ok(st)) {
        zf_local_session_destroy(&s);
        return st;
    }
    *out = s;
    return ZF_STATUS_OK;
}

void zf_local_session_destroy(zf_local_session_t **s_p)
{
    if (!s_p || !*s_p) return;
    zf_local_session_t *s = *s_p;
    *s_p = NULL;
    zf_status_t closed = zf_status_new(ZF_CANCELLED, "the session was closed");
    s_prun_t *pr = NULL;
    while (s->pruns && (pr = zf_partial_run_table_drain(s->pruns, true, NULL)))
        s_prun_end(pr, &closed);
    zf_partial_run_table_free(&s->pruns);
    zf_status_clear(&closed);
    size_t iter = 0;
    uintptr_t v = 0;
    while (s->callables && zf_strmap_next(s->callables, &iter, NULL, NULL, &v)) {
        s_callable_t *p = (s_callable_t *)v;
        s_callable_destroy(&p);
    }
    zf_strmap_destroy(&s->callables);
    zf_graph_destroy(&s->graph);
    free(s->assignment);
    zf_resource_mgr_destroy(&s->resources);
    for (int i = 0; i < s->n_devices; i++) zf_device_destroy(&s->devices[i]);
    free(s->devices);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int zf_local_session_num_devices(const zf_local_session_t *s)
{
    return s->n_devices;
}

const char *zf_local_session_device_name(const zf_local_session_t *s, int i)
{
    return i >= 0 && i < s->n_devices ? s->devices[i]->name_str : "";
}

zf_status_t zf_local_session_tensor_dtype(const zf_local_session_t *s, const char *name,
                                          zf_dtype_t *out)
{
    *out = ZF_INVALID;
    const char *node = NULL;
    size_t len = 0;
    int port = 0;
    ZF_TRY(zf_tensor_name_parse(name, &node, &len, &port));
    int id = zf_graph_find_node_n(s->graph, node, len);
    if (id < 0) return zf_not_found("no node named '%.*s' in the graph", (int)len, node);
    if (port < 0) return zf_invalid_argument("'%s' names a control input, not a tensor", name);
    zf_dtype_t t = ZF_INVALID;
    ZF_TRY(zf_graph_output_type(s->graph, id, port, &t));
    *out = zf_dtype_base(t);
    return ZF_STATUS_OK;
}

const char *zf_local_session_node_device(const zf_local_session_t *s, const char *name)
{
    int id = zf_graph_find_node(s->graph, name);
    return id < 0 ? "" : s->devices[s->assignment[id]]->name_str;
}

const zf_partition_set_t *zf_local_session_last_partitions(zf_local_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    const zf_partition_set_t *set = s->last_set;
    pthread_mutex_unlock(&s->mu);
    return set;
}

int zf_local_session_last_num_partitions(zf_local_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->last_parts;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int zf_local_session_num_callables(zf_local_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    int n = (int)zf_strmap_size(s->callables);
    pthread_mutex_unlock(&s->mu);
    return n;
}
