/* A partial run's bookkeeping and TensorFlow's checks of its calls. See
 * partial_run.h. */
#include "scheduler/graph/partial_run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct zf_partial_run {
    char **feeds, **fetches; /* declared, sorted */
    int n_feeds, n_fetches;
    bool *fed, *fetched;
    int pending; /* feeds and fetches not given yet */
    /* per fetch k: the feeds it needs are needs[needs_at[k] ..
     * needs_at[k + 1]) */
    int *needs, *needs_at;
};

static int s_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Index of name in the sorted v[0..n), or -1. */
static int s_index(char *const *v, int n, const char *name)
{
    char *const *hit = bsearch(&name, v, (size_t)n, sizeof *v, s_cmp);
    return hit ? (int)(hit - v) : -1;
}

static char **s_copy(const char *const *v, int n)
{
    char **c = calloc((size_t)n + 1, sizeof *c);
    for (int i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            for (int j = 0; j < i; j++) free(c[j]);
            free(c);
            return NULL;
        }
    return c;
}

static void s_free_names(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

void zf_partial_run_free(zf_partial_run_t **pr_p)
{
    if (!pr_p || !*pr_p) return;
    zf_partial_run_t *pr = *pr_p;
    *pr_p = NULL;
    s_free_names(pr->feeds, pr->n_feeds);
    s_free_names(pr->fetches, pr->n_fetches);
    free(pr->fed);
    free(pr->fetched);
    free(pr->needs);
    free(pr->needs_at);
    free(pr);
}

/* The declared feed that is node:port, or -1: the feeds on each node are
 * linked from first[node] through next[], so a lookup costs the feeds on
 * that node, and a node no feed is on is answered at once. */
static int s_feed_at(const int *first, const int *next, const int *fport, int node, int port)
{
    for (int i = first[node]; i >= 0; i = next[i])
        if (fport[i] == port) return i;
    return -1;
}

/* Adds feed k to the needs being built; false when out of memory. */
static bool s_need(zf_partial_run_t *pr, size_t *used, size_t *cap, int k)
{
    if (*used == *cap) {
        int *grown = realloc(pr->needs, 2 * *cap * sizeof *grown);
        if (!grown) return false;
        pr->needs = grown;
        *cap *= 2;
    }
    pr->needs[(*used)++] = k;
    return true;
}

/* What each declared fetch needs (see the design note in the header):
 * one walk per fetch, at most ZF_PARTIAL_RUN_MAX_VISITS edges for them all
 * and ZF_PARTIAL_RUN_MAX_NEEDS (fetch, feed) pairs, so a setup of many
 * fetches over a large graph costs the master a bounded amount. */
static zf_status_t s_needs(const zf_graph_t *g, zf_partial_run_t *pr)
{
    int n = zf_graph_num_nodes(g), nf = pr->n_feeds, nx = pr->n_fetches;
    int *fport = malloc(((size_t)nf + 1) * sizeof *fport);
    int *next = malloc(((size_t)nf + 1) * sizeof *next);  /* the next feed on its node */
    int *first = malloc(((size_t)n + 1) * sizeof *first); /* each node's first feed, or -1 */
    int *seen = calloc((size_t)n + 1, sizeof *seen);      /* the fetch + 1 that saw the node */
    int *stack = malloc(((size_t)n + 1) * sizeof *stack);
    bool *hit = calloc((size_t)nf + 1, sizeof *hit); /* the feeds this fetch needs */
    size_t cap = 16, used = 0;
    uint64_t visits = 0;
    pr->needs = malloc(cap * sizeof *pr->needs);
    pr->needs_at = calloc((size_t)nx + 1, sizeof *pr->needs_at);
    zf_status_t st = fport && next && first && seen && stack && hit && pr->needs && pr->needs_at
                         ? ZF_STATUS_OK
                         : zf_out_of_memory("a partial run");
    for (int v = 0; zf_ok(st) && v < n; v++) first[v] = -1;
    for (int k = nf - 1; zf_ok(st) && k >= 0; k--) { /* each node's feeds in ascending order */
        int node = zf_graph_find_tensor(g, pr->feeds[k], &fport[k]);
        if (node < 0) continue;
        next[k] = first[node];
        first[node] = k;
    }
    for (int f = 0; zf_ok(st) && f < nx; f++) {
        pr->needs_at[f] = (int)used;
        int port = 0, start = zf_graph_find_tensor(g, pr->fetches[f], &port);
        if (start < 0) continue;
        if (s_feed_at(first, next, fport, start, port) >= 0) { /* as the plan refuses it */
            st = zf_invalid_argument("%s is both fed and fetched.", pr->fetches[f]);
            break;
        }
        int top = 0;
        stack[top++] = start;
        seen[start] = f + 1;
        while (top > 0 && zf_ok(st)) {
            const zf_edge_t *in = NULL;
            int v = stack[--top], ne = zf_graph_in_edges(g, v, &in);
            visits += (uint64_t)ne;
            if (visits > ZF_PARTIAL_RUN_MAX_VISITS) {
                st = zf_status_new(ZF_RESOURCE_EXHAUSTED,
                                   "PartialRunSetup: finding the feeds its %d fetches need walks "
                                   "more than %llu edges of the graph; declare fewer fetches",
                                   nx, (unsigned long long)ZF_PARTIAL_RUN_MAX_VISITS);
                break;
            }
            for (int i = 0; i < ne && zf_ok(st); i++) {
                int src = in[i].src;
                int k = zf_edge_is_control(&in[i])
                            ? -1
                            : s_feed_at(first, next, fport, src, in[i].src_port);
                if (k < 0 && seen[src] != f + 1) {
                    seen[src] = f + 1;
                    stack[top++] = src;
                } else if (k >= 0 && !hit[k]) {
                    hit[k] = true;
                    if (used >= ZF_PARTIAL_RUN_MAX_NEEDS)
                        st = zf_status_new(ZF_RESOURCE_EXHAUSTED,
                                           "PartialRunSetup: its %d fetches need more than %d "
                                           "feeds between them; declare fewer fetches",
                                           nx, ZF_PARTIAL_RUN_MAX_NEEDS);
                    else if (!s_need(pr, &used, &cap, k))
                        st = zf_out_of_memory("a partial run");
                }
            }
        }
        /* clear only what this fetch set, so the clearing costs its needs */
        for (size_t j = (size_t)pr->needs_at[f]; j < used; j++) hit[pr->needs[j]] = false;
    }
    if (zf_ok(st)) pr->needs_at[nx] = (int)used;
    free(fport);
    free(next);
    free(first);
    free(seen);
    free(stack);
    free(hit);
    return st;
}

zf_status_t zf_partial_run_new(const zf_graph_t *g, const char *const *feeds, int n_feeds,
                               const char *const *fetches, int n_fetches, zf_partial_run_t **out)
{
    *out = NULL;
    zf_partial_run_t *pr = calloc(1, sizeof *pr);
    if (!pr) return zf_out_of_memory("a partial run");
    pr->n_feeds = n_feeds;
    pr->n_fetches = n_fetches;
    pr->feeds = s_copy(feeds, n_feeds);
    pr->fetches = s_copy(fetches, n_fetches);
    pr->fed = calloc((size_t)n_feeds + 1, sizeof *pr->fed);
    pr->fetched = calloc((size_t)n_fetches + 1, sizeof *pr->fetched);
    pr->pending = n_feeds + n_fetches;
    zf_status_t st = pr->feeds && pr->fetches && pr->fed && pr->fetched
                         ? s_needs(g, pr)
                         : zf_out_of_memory("a partial run");
    if (!zf_ok(st)) {
        if (!pr->feeds) pr->n_feeds = 0;
        if (!pr->fetches) pr->n_fetches = 0;
        zf_partial_run_free(&pr);
        return st;
    }
    *out = pr;
    return ZF_STATUS_OK;
}

zf_status_t zf_partial_run_clone(const zf_partial_run_t *pr, zf_partial_run_t **out)
{
    *out = NULL;
    zf_partial_run_t *c = calloc(1, sizeof *c);
    if (!c) return zf_out_of_memory("a partial run");
    size_t n_needs = (size_t)pr->needs_at[pr->n_fetches];
    c->n_feeds = pr->n_feeds;
    c->n_fetches = pr->n_fetches;
    c->feeds = s_copy((const char *const *)pr->feeds, pr->n_feeds);
    c->fetches = s_copy((const char *const *)pr->fetches, pr->n_fetches);
    c->fed = calloc((size_t)pr->n_feeds + 1, sizeof *c->fed);
    c->fetched = calloc((size_t)pr->n_fetches + 1, sizeof *c->fetched);
    c->needs = malloc((n_needs + 1) * sizeof *c->needs);
    c->needs_at = malloc(((size_t)pr->n_fetches + 1) * sizeof *c->needs_at);
    c->pending = pr->n_feeds + pr->n_fetches;
    if (!c->feeds) c->n_feeds = 0;
    if (!c->fetches) c->n_fetches = 0;
    if (!c->feeds || !c->fetches || !c->fed || !c->fetched || !c->needs || !c->needs_at) {
        zf_partial_run_free(&c);
        return zf_out_of_memory("a partial run");
    }
    memcpy(c->needs, pr->needs, n_needs * sizeof *c->needs);
    memcpy(c->needs_at, pr->needs_at, ((size_t)pr->n_fetches + 1) * sizeof *c->needs_at);
    *out = c;
    return ZF_STATUS_OK;
}

zf_status_t zf_partial_run_for(zf_partial_run_t **cache, pthread_mutex_t *mu,
                               pthread_mutex_t *walk_mu, const zf_graph_t *g,
                               const char *const *feeds, int n_feeds, const char *const *fetches,
                               int n_fetches, zf_partial_run_t **out)
{
    pthread_mutex_lock(mu);
    const zf_partial_run_t *kept = *cache;
    pthread_mutex_unlock(mu);
    if (kept) return zf_partial_run_clone(kept, out);
    if (walk_mu) pthread_mutex_lock(walk_mu);
    zf_status_t st = zf_partial_run_new(g, feeds, n_feeds, fetches, n_fetches, out);
    if (walk_mu) pthread_mutex_unlock(walk_mu);
    zf_partial_run_t *copy = NULL; /* nothing given in it yet */
    zf_status_t cs = zf_ok(st) ? zf_partial_run_clone(*out, &copy) : ZF_STATUS_OK;
    zf_status_clear(&cs);
    pthread_mutex_lock(mu);
    if (copy && !*cache) {
        *cache = copy;
        copy = NULL;
    }
    pthread_mutex_unlock(mu);
    zf_partial_run_free(&copy); /* another setup kept its own first */
    return st;
}

/* Whether feed k is given by an earlier call or by this one's feeds (now[k]). */
static bool s_given(const zf_partial_run_t *pr, const bool *now, int k)
{
    return pr->fed[k] || now[k];
}

zf_status_t zf_partial_run_check(const zf_partial_run_t *pr, const char *const *feeds, int n_feeds,
                                 const char *const *fetches, int n_fetches)
{
    bool *now = calloc((size_t)pr->n_feeds + 1, sizeof *now); /* this call's feeds */
    if (!now) return zf_out_of_memory("a partial run's call check");
    zf_status_t st = ZF_STATUS_OK;
    for (int i = 0; zf_ok(st) && i < n_feeds; i++) {
        int k = s_index(pr->feeds, pr->n_feeds, feeds[i]);
        if (k < 0)
            st = zf_invalid_argument("The feed %s was not specified in partial_run_setup.",
                                     feeds[i]);
        else if (pr->fed[k])
            st = zf_invalid_argument("The feed %s has already been fed.", feeds[i]);
        else
            now[k] = true;
    }
    for (int i = 0; zf_ok(st) && i < n_fetches; i++) {
        int k = s_index(pr->fetches, pr->n_fetches, fetches[i]);
        if (k < 0)
            st = zf_invalid_argument("The fetch %s was not specified in partial_run_setup.",
                                     fetches[i]);
        else if (pr->fetched[k])
            st = zf_invalid_argument("The fetch %s has already been fetched.", fetches[i]);
    }
    /* TensorFlow's CheckFetches: a fetch that needs a feed still to come
     * would wait for it forever */
    for (int i = 0; zf_ok(st) && i < n_fetches; i++) {
        int f = s_index(pr->fetches, pr->n_fetches, fetches[i]);
        for (int j = pr->needs_at[f]; zf_ok(st) && j < pr->needs_at[f + 1]; j++)
            if (!s_given(pr, now, pr->needs[j]))
                st = zf_invalid_argument("Fetch %s can't be computed from the feeds that have "
                                         "been fed so far: it needs feed %s",
                                         fetches[i], pr->feeds[pr->needs[j]]);
    }
    free(now);
    return st;
}

bool zf_partial_run_mark(zf_partial_run_t *pr, const char *const *feeds, int n_feeds,
                         const char *const *fetches, int n_fetches)
{
    for (int i = 0; i < n_feeds; i++) {
        int k = s_index(pr->feeds, pr->n_feeds, feeds[i]);
        if (k >= 0 && !pr->fed[k]) {
            pr->fed[k] = true;
            pr->pending--;
        }
    }
    for (int i = 0; i < n_fetches; i++) { /* a fetch named twice counts once */
        int k = s_index(pr->fetches, pr->n_fetches, fetches[i]);
        if (k >= 0 && !pr->fetched[k]) {
            pr->fetched[k] = true;
            pr->pending--;
        }
    }
    return pr->pending == 0;
}

/* ---- a session's open partial runs ------------------------------------------------------ */

typedef struct s_entry {
    struct s_entry *next; /* the one opened before */
    void *item;
    bool busy;
    char handle[]; /* NUL-terminated */
} s_entry_t;

struct zf_partial_run_table {
    s_entry_t *open; /* the latest opened first */
    int n_open, max_open;
    char **ended; /* a ring of n_ended "handle\0why" (NULL: empty slot) */
    int n_ended, next_ended;
    char owner[]; /* names the session in the room's error */
};

zf_status_t zf_partial_run_table_new(int max_open, int n_ended, const char *owner,
                                     zf_partial_run_table_t **out)
{
    *out = NULL;
    if (max_open < 0 || n_ended < 0 || !owner)
        return zf_invalid_argument("partial run table: max_open %d and n_ended %d must not be "
                                   "negative, and an owner must be named",
                                   max_open, n_ended);
    size_t ol = strlen(owner);
    zf_partial_run_table_t *t = calloc(1, sizeof *t + ol + 1);
    if (t) t->ended = calloc((size_t)n_ended + 1, sizeof *t->ended);
    if (!t || !t->ended) {
        free(t);
        return zf_out_of_memory("a partial run table");
    }
    t->max_open = max_open;
    t->n_ended = n_ended;
    memcpy(t->owner, owner, ol + 1);
    *out = t;
    return ZF_STATUS_OK;
}

void zf_partial_run_table_free(zf_partial_run_table_t **t_p)
{
    if (!t_p || !*t_p) return;
    zf_partial_run_table_t *t = *t_p;
    *t_p = NULL;
    for (s_entry_t *e = t->open, *next = NULL; e; e = next) {
        next = e->next;
        free(e);
    }
    for (int i = 0; i < t->n_ended; i++) free(t->ended[i]);
    free(t->ended);
    free(t);
}

int zf_partial_run_table_count(const zf_partial_run_table_t *t)
{
    return t->n_open;
}

zf_status_t zf_partial_run_table_room(const zf_partial_run_table_t *t)
{
    if (t->n_open < t->max_open) return ZF_STATUS_OK;
    return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                         "%s has %d partial runs open already (the most it keeps): finish or "
                         "abandon one first",
                         t->owner, t->n_open);
}

/* The link to handle's open entry (by handle when not NULL, else by item),
 * or NULL. */
static s_entry_t **s_link(zf_partial_run_table_t *t, const char *handle, const void *item)
{
    for (s_entry_t **pp = &t->open; *pp; pp = &(*pp)->next)
        if (handle ? strcmp((*pp)->handle, handle) == 0 : (*pp)->item == item) return pp;
    return NULL;
}

zf_status_t zf_partial_run_table_add(zf_partial_run_table_t *t, const char *handle, void *item,
                                     bool busy)
{
    ZF_TRY(zf_partial_run_table_room(t));
    if (s_link(t, handle, NULL))
        return zf_status_new(ZF_ALREADY_EXISTS, "partial run '%s' is open already", handle);
    size_t hl = strlen(handle);
    s_entry_t *e = malloc(sizeof *e + hl + 1);
    if (!e) return zf_out_of_memory("a partial run table");
    e->item = item;
    e->busy = busy;
    memcpy(e->handle, handle, hl + 1);
    e->next = t->open;
    t->open = e;
    t->n_open++;
    return ZF_STATUS_OK;
}

zf_status_t zf_partial_run_table_take(zf_partial_run_table_t *t, const char *handle, void **item)
{
    *item = NULL;
    s_entry_t **pp = s_link(t, handle, NULL);
    if (pp && (*pp)->busy)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "partial run '%s' has a call running: its calls run one at a time",
                             handle);
    if (pp) {
        (*pp)->busy = true;
        *item = (*pp)->item;
        return ZF_STATUS_OK;
    }
    for (int i = 0; i < t->n_ended; i++) {
        const char *g = t->ended[i];
        if (g && strcmp(g, handle) == 0)
            return zf_status_new(ZF_FAILED_PRECONDITION, "partial run '%s' %s", handle,
                                 g + strlen(g) + 1);
    }
    return zf_invalid_argument("Must run PartialRunSetup before performing partial runs "
                               "(handle '%s' is not known in this session)",
                               handle);
}

void zf_partial_run_table_release(zf_partial_run_table_t *t, const void *item)
{
    s_entry_t **pp = s_link(t, NULL, item);
    if (pp) (*pp)->busy = false;
}

/* Takes *pp's entry off t, remembering why its handle ended (when why is
 * not NULL); returns its item. */
static void *s_unlink(zf_partial_run_table_t *t, s_entry_t **pp, const char *why)
{
    s_entry_t *e = *pp;
    void *item = e->item;
    *pp = e->next;
    t->n_open--;
    size_t hl = strlen(e->handle), wl = why ? strlen(why) : 0;
    char *g = why && t->n_ended > 0 ? malloc(hl + wl + 2) : NULL;
    if (g) { /* out of memory, the handle is then unknown: still refused */
        memcpy(g, e->handle, hl + 1);
        memcpy(g + hl + 1, why, wl + 1);
        free(t->ended[t->next_ended]);
        t->ended[t->next_ended] = g;
        t->next_ended = (t->next_ended + 1) % t->n_ended;
    }
    free(e);
    return item;
}

void zf_partial_run_table_remove(zf_partial_run_table_t *t, const void *item, const char *why)
{
    s_entry_t **pp = s_link(t, NULL, item);
    if (pp) s_unlink(t, pp, why);
}

void *zf_partial_run_table_drain(zf_partial_run_table_t *t, bool with_busy, const char *why)
{
    for (s_entry_t **pp = &t->open; *pp; pp = &(*pp)->next)
        if (with_busy || !(*pp)->busy) return s_unlink(t, pp, why);
    return NULL;
}
