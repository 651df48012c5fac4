/* The bounded set of recent step ids: a FIFO ring of the ids and an
 * open-addressing index into it. */
#include <stdlib.h>

#include "executor/rendezvous/step_set.h"

struct zf_step_set {
    int64_t *ring; /* ids in the order added; ring[next] is the oldest when full */
    size_t cap, n, next;
    uint32_t *slots; /* 0: empty; otherwise 1 + an index into ring */
    size_t mask;     /* slots has mask + 1 entries, at least 2 * cap */
};

static size_t s_home(const zf_step_set_t *s, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15u;
    return (size_t)(h ^ (h >> 29)) & s->mask;
}

/* The slot holding id, or the empty slot where it would go. */
static size_t s_find(const zf_step_set_t *s, int64_t id)
{
    size_t i = s_home(s, id);
    while (s->slots[i] && s->ring[s->slots[i] - 1] != id) i = (i + 1) & s->mask;
    return i;
}

/* True when k, an entry's home slot, lies cyclically in (i, j]: the entry
 * at j may not move back to i. */
static bool s_between(size_t i, size_t k, size_t j)
{
    return i <= j ? (i < k && k <= j) : (i < k || k <= j);
}

/* Empties slot i, moving later entries of its probe run back so that every
 * remaining id stays reachable from its home slot. */
static void s_erase(zf_step_set_t *s, size_t i)
{
    for (size_t j = (i + 1) & s->mask; s->slots[j]; j = (j + 1) & s->mask) {
        if (s_between(i, s_home(s, s->ring[s->slots[j] - 1]), j)) continue;
        s->slots[i] = s->slots[j];
        i = j;
    }
    s->slots[i] = 0;
}

zf_status_t zf_step_set_new(size_t cap, zf_step_set_t **out)
{
    *out = NULL;
    if (cap < 1 || cap > ((size_t)1 << 30))
        return zf_invalid_argument("a step set holds 1 to 2^30 ids, not %zu", cap);
    size_t size = 16;
    while (size < 2 * cap) size *= 2;
    zf_step_set_t *s = calloc(1, sizeof *s);
    if (s) s->ring = malloc(cap * sizeof *s->ring);
    if (s) s->slots = calloc(size, sizeof *s->slots);
    if (!s || !s->ring || !s->slots) {
        zf_step_set_destroy(&s);
        return zf_out_of_memory("step set");
    }
    s->cap = cap;
    s->mask = size - 1;
    *out = s;
    return ZF_STATUS_OK;
}

void zf_step_set_destroy(zf_step_set_t **set_p)
{
    if (!set_p || !*set_p) return;
    free((*set_p)->ring);
    free((*set_p)->slots);
    free(*set_p);
    *set_p = NULL;
}

bool zf_step_set_has(const zf_step_set_t *set, int64_t id)
{
    return set->slots[s_find(set, id)] != 0;
}

void zf_step_set_add(zf_step_set_t *set, int64_t id)
{
    if (zf_step_set_has(set, id)) return;
    if (set->n == set->cap)
        s_erase(set, s_find(set, set->ring[set->next]));
    else
        set->n++;
    set->ring[set->next] = id;
    set->slots[s_find(set, id)] = (uint32_t)(set->next + 1);
    set->next = (set->next + 1) % set->cap;
}

size_t zf_step_set_size(const zf_step_set_t *set)
{
    return set->n;
}
