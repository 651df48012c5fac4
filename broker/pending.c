/* The broker's table of requests in flight: a dense array of entries and
 * the open-addressing index over it (see pending.h). */
#include "broker/pending.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

#define S_EMPTY     UINT32_MAX /* an index slot that holds no entry */
#define S_MIN_CAP   16
#define S_MAX_CAP   ZF_PENDING_MAX
#define S_MIN_SLOTS 32

typedef struct s_entry {
    zf_pending_req_t req;
    uint64_t hash;
    uint32_t slot; /* where the index points at it */
} s_entry_t;

struct zf_pending {
    s_entry_t *entries; /* n of cap in use */
    int n, cap;
    uint32_t *slots; /* entry positions, S_EMPTY where free; a power of two, >= 2 * cap */
    uint32_t mask;   /* number of slots - 1 */
};

static uint64_t s_hash(const zf_pending_req_t *req)
{
    uint8_t key[sizeof req->client + sizeof req->request_id];
    memcpy(key, &req->client, sizeof req->client);
    memcpy(key + sizeof req->client, &req->request_id, sizeof req->request_id);
    return zf_strmap_hash((const char *)key, sizeof key);
}

static bool s_same(const zf_pending_req_t *a, const zf_pending_req_t *b)
{
    return a->client == b->client && a->request_id == b->request_id && a->sched == b->sched;
}

/* Points a free slot on e's probe path at position pos. */
static void s_index(zf_pending_t *t, s_entry_t *e, int pos)
{
    uint32_t i = (uint32_t)e->hash & t->mask;
    while (t->slots[i] != S_EMPTY) i = (i + 1) & t->mask;
    t->slots[i] = (uint32_t)pos;
    e->slot = i;
}

/* Empties slot hole, moving later entries of its probe run back into it
 * so that every entry stays reachable from its home slot. */
static void s_unindex(zf_pending_t *t, uint32_t hole)
{
    for (uint32_t j = (hole + 1) & t->mask; t->slots[j] != S_EMPTY; j = (j + 1) & t->mask) {
        s_entry_t *e = &t->entries[t->slots[j]];
        uint32_t home = (uint32_t)e->hash & t->mask;
        /* e may move to the hole when the hole lies between home and j. */
        if (((j - home) & t->mask) >= ((j - hole) & t->mask)) {
            t->slots[hole] = t->slots[j];
            e->slot = hole;
            hole = j;
        }
    }
    t->slots[hole] = S_EMPTY;
}

zf_status_t zf_pending_new(zf_pending_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? ZF_STATUS_OK : zf_out_of_memory("the broker's table of requests in flight");
}

void zf_pending_destroy(zf_pending_t **t_p)
{
    if (!t_p || !*t_p) return;
    free((*t_p)->entries);
    free((*t_p)->slots);
    free(*t_p);
    *t_p = NULL;
}

int zf_pending_size(const zf_pending_t *t)
{
    return t->n;
}

zf_status_t zf_pending_reserve(zf_pending_t *t, int n)
{
    if (n <= t->cap) return ZF_STATUS_OK;
    if (n > S_MAX_CAP)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "the broker holds at most %d requests in flight, not %d", S_MAX_CAP,
                             n);
    int cap = t->cap < S_MIN_CAP ? S_MIN_CAP : t->cap;
    while (cap < n) cap = cap > S_MAX_CAP / 2 ? S_MAX_CAP : 2 * cap;
    uint32_t n_slots = S_MIN_SLOTS;
    while (n_slots < 2 * (uint32_t)cap) n_slots *= 2;
    uint32_t *slots = malloc(n_slots * sizeof *slots);
    s_entry_t *entries = slots ? realloc(t->entries, (size_t)cap * sizeof *entries) : NULL;
    if (!entries) {
        free(slots);
        return zf_out_of_memory("the broker's table of requests in flight");
    }
    memset(slots, 0xff, n_slots * sizeof *slots); /* S_EMPTY */
    free(t->slots);
    t->entries = entries;
    t->cap = cap;
    t->slots = slots;
    t->mask = n_slots - 1;
    for (int k = 0; k < t->n; k++) s_index(t, &t->entries[k], k);
    return ZF_STATUS_OK;
}

void zf_pending_add(zf_pending_t *t, const zf_pending_req_t *req)
{
    assert(t->n < t->cap && "zf_pending_add without room reserved");
    s_entry_t *e = &t->entries[t->n];
    e->req = *req;
    e->hash = s_hash(req);
    s_index(t, e, t->n);
    t->n++;
}

int zf_pending_find(const zf_pending_t *t, const zf_pending_req_t *key)
{
    if (t->n == 0) return -1;
    uint64_t h = s_hash(key);
    for (uint32_t i = (uint32_t)h & t->mask; t->slots[i] != S_EMPTY; i = (i + 1) & t->mask) {
        const s_entry_t *e = &t->entries[t->slots[i]];
        if (e->hash == h && s_same(&e->req, key)) return (int)t->slots[i];
    }
    return -1;
}

const zf_pending_req_t *zf_pending_at(const zf_pending_t *t, int pos)
{
    assert(pos >= 0 && pos < t->n);
    return &t->entries[pos].req;
}

void zf_pending_remove_at(zf_pending_t *t, int pos)
{
    assert(pos >= 0 && pos < t->n);
    s_unindex(t, t->entries[pos].slot);
    int last = --t->n;
    if (pos == last) return;
    t->entries[pos] = t->entries[last];
    t->slots[t->entries[pos].slot] = (uint32_t)pos;
}
