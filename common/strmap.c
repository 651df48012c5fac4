/* String hash map: a power-of-two table of (key, length, hash, value) slots
 * with linear probing and backward-shift deletion; owns its key copies. */
#include "common/strmap.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

typedef struct s_slot {
    const char *key; /* NULL: empty slot */
    uint32_t len;
    uint32_t hash; /* low 32 bits of zf_strmap_hash() */
    uintptr_t value;
} s_slot_t;

/* Storage for copied keys: a list of chunks carved front to back. */
typedef struct s_chunk {
    struct s_chunk *next;
    size_t used, cap;
    char data[];
} s_chunk_t;

#define S_MIN_CAP    8u
#define S_CHUNK_SIZE ((size_t)64 << 10)

struct zf_strmap {
    s_slot_t *slots;
    size_t cap; /* power of two */
    size_t size;
    unsigned flags;
    s_chunk_t *chunks;
};

static inline uint64_t s_load64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

static inline uint32_t s_load32(const char *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* The last 1..7 bytes as one word, without a variable-length copy: two
 * overlapping 4-byte loads, or three single bytes. */
static inline uint64_t s_tail(const char *p, size_t n)
{
    if (n >= 4) return (uint64_t)s_load32(p) << 32 | s_load32(p + n - 4);
    return (uint64_t)(unsigned char)p[0] << 16 | (uint64_t)(unsigned char)p[n / 2] << 8 |
           (unsigned char)p[n - 1];
}

/* The 128-bit product of a and b folded to 64 bits. */
static inline uint64_t s_fold(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Per-process random secrets, so nobody can prepare a set of keys that all
 * collide (which would make every operation linear): the seed and two
 * words drawn from it that the key's words are mixed with before each
 * product (a word that made a factor zero would otherwise wipe the state,
 * and a known constant would let a key choose to). */
static uint64_t s_secret[3];
static atomic_bool s_seeded;
static pthread_once_t s_seed_once = PTHREAD_ONCE_INIT;

static void s_seed_init(void)
{
    uint64_t seed[3] = {0, 0, 0};
    if (getrandom(seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t =
            (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32 ^ (uint64_t)(uintptr_t)&s_secret;
        for (int i = 0; i < 3; i++) seed[i] = s_fold(t + (uint64_t)i, 0x9e3779b97f4a7c15ULL);
    }
    /* odd and with set high bits, so that no secret is a weak factor */
    for (int i = 0; i < 3; i++) s_secret[i] = seed[i] | 0x8000000000000001ULL;
    atomic_store_explicit(&s_seeded, true, memory_order_release);
}

static inline const uint64_t *s_get_secret(void)
{
    if (!atomic_load_explicit(&s_seeded, memory_order_acquire))
        pthread_once(&s_seed_once, s_seed_init);
    return s_secret;
}

uint64_t zf_strmap_hash(const char *key, size_t len)
{
    /* Two independent lanes take 16 bytes each a round, each folding a
     * product of two words mixed with a secret and the lane's state, so
     * a long key costs about half the rounds of one lane. */
    const uint64_t *k = s_get_secret();
    uint64_t a = k[0] ^ (uint64_t)len * 0xa0761d6478bd642fULL, b = k[0] ^ k[2];
    size_t n = len;
    const char *p = key;
    for (; n >= 32; p += 32, n -= 32) {
        a = s_fold(s_load64(p) ^ k[1], s_load64(p + 8) ^ a);
        b = s_fold(s_load64(p + 16) ^ k[2], s_load64(p + 24) ^ b);
    }
    a ^= b;
    if (n >= 16) {
        a = s_fold(s_load64(p) ^ k[1], s_load64(p + 8) ^ a);
        p += 16;
        n -= 16;
    }
    uint64_t x = 0, y = 0;
    if (n >= 8) { /* 8 to 15 bytes: two overlapping words */
        x = s_load64(p);
        y = s_load64(p + n - 8);
    } else if (n > 0) {
        x = s_tail(p, n);
    }
    a = s_fold(x ^ k[1], y ^ a);
    return s_fold(a ^ k[2], (uint64_t)len ^ k[1]);
}

/* Smallest power-of-two capacity holding expected keys at load <= 3/4. */
static size_t s_cap_for(size_t expected)
{
    size_t cap = S_MIN_CAP;
    while (cap - cap / 4 < expected) {
        if (cap > SIZE_MAX / 2 / sizeof(s_slot_t)) return 0;
        cap *= 2;
    }
    return cap;
}

zf_strmap_t *zf_strmap_new(size_t expected, unsigned flags)
{
    size_t cap = s_cap_for(expected);
    if (cap == 0) return NULL;
    zf_strmap_t *map = calloc(1, sizeof *map);
    if (!map) return NULL;
    map->slots = calloc(cap, sizeof *map->slots);
    if (!map->slots) {
        free(map);
        return NULL;
    }
    map->cap = cap;
    map->flags = flags;
    return map;
}

void zf_strmap_destroy(zf_strmap_t **map_p)
{
    if (!map_p || !*map_p) return;
    zf_strmap_t *map = *map_p;
    for (size_t i = 0; (map->flags & ZF_STRMAP_OWN_KEYS) && i < map->cap; i++)
        free((void *)map->slots[i].key);
    s_chunk_t *c = map->chunks;
    while (c) {
        s_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    free(map->slots);
    free(map);
    *map_p = NULL;
}

size_t zf_strmap_size(const zf_strmap_t *map)
{
    return map->size;
}

/* Index of key's slot, or of the empty slot where it would go. */
static inline size_t s_probe(const zf_strmap_t *map, const char *key, size_t len, uint32_t hash)
{
    size_t mask = map->cap - 1;
    size_t i = hash & mask;
    for (;;) {
        const s_slot_t *s = &map->slots[i];
        if (!s->key) return i;
        /* the stored key itself (a caller holding it) needs no compare */
        if (s->hash == hash && s->len == len && (s->key == key || memcmp(s->key, key, len) == 0))
            return i;
        i = (i + 1) & mask;
    }
}

static int s_rehash(zf_strmap_t *map, size_t cap)
{
    s_slot_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -ENOMEM;
    size_t mask = cap - 1;
    for (size_t k = 0; k < map->cap; k++) {
        const s_slot_t *s = &map->slots[k];
        if (!s->key) continue;
        size_t i = s->hash & mask;
        while (slots[i].key) i = (i + 1) & mask;
        slots[i] = *s;
    }
    free(map->slots);
    map->slots = slots;
    map->cap = cap;
    return 0;
}

zf_strmap_t *zf_strmap_clone(const zf_strmap_t *map, size_t extra)
{
    if (map->flags != 0 || extra > SIZE_MAX - map->size) return NULL;
    size_t cap = s_cap_for(map->size + extra);
    if (cap == 0) return NULL;
    zf_strmap_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slots = malloc(map->cap * sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    memcpy(c->slots, map->slots, map->cap * sizeof *c->slots);
    c->cap = map->cap;
    c->size = map->size;
    if (cap > c->cap && s_rehash(c, cap) != 0) {
        free(c->slots);
        free(c);
        return NULL;
    }
    return c;
}

int zf_strmap_reserve(zf_strmap_t *map, size_t expected)
{
    size_t cap = s_cap_for(expected);
    if (cap == 0) return -ENOMEM;
    if (cap <= map->cap) return 0;
    return s_rehash(map, cap);
}

/* Copies len bytes of key (plus a NUL) into the map's key storage. */
static const char *s_copy_key(zf_strmap_t *map, const char *key, size_t len)
{
    s_chunk_t *c = map->chunks;
    if (!c || c->cap - c->used < len + 1) {
        size_t cap = len + 1 > S_CHUNK_SIZE ? len + 1 : S_CHUNK_SIZE;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        /* A dedicated chunk for a big key goes behind the current one so the
         * current one keeps being filled. */
        if (map->chunks && cap > S_CHUNK_SIZE) {
            c->next = map->chunks->next;
            map->chunks->next = c;
        } else {
            c->next = map->chunks;
            map->chunks = c;
        }
    }
    char *dst = c->data + c->used;
    memcpy(dst, key, len);
    dst[len] = '\0';
    c->used += len + 1;
    return dst;
}

/* Finds key's slot, growing first so an insertion fits. Sets *found. */
static int s_slot_for_insert(zf_strmap_t *map, const char *key, size_t len, uint32_t hash,
                             size_t *slot, bool *found)
{
    size_t i = s_probe(map, key, len, hash);
    if (map->slots[i].key) {
        *found = true;
        *slot = i;
        return 0;
    }
    if (map->size + 1 > map->cap - map->cap / 4) {
        if (map->cap > SIZE_MAX / 2 / sizeof(s_slot_t)) return -ENOMEM;
        int rc = s_rehash(map, map->cap * 2);
        if (rc != 0) return rc;
        i = s_probe(map, key, len, hash);
    }
    *found = false;
    *slot = i;
    return 0;
}

static int s_fill_slot(zf_strmap_t *map, size_t i, const char *key, size_t len, uint32_t hash,
                       uintptr_t value)
{
    if (map->flags & ZF_STRMAP_OWN_KEYS) {
        char *own = malloc(len + 1);
        if (!own) return -ENOMEM;
        memcpy(own, key, len);
        own[len] = '\0';
        key = own;
    } else if (map->flags & ZF_STRMAP_COPY_KEYS) {
        key = s_copy_key(map, key, len);
        if (!key) return -ENOMEM;
    }
    s_slot_t *s = &map->slots[i];
    s->key = key;
    s->len = (uint32_t)len;
    s->hash = hash;
    s->value = value;
    map->size++;
    return 0;
}

int zf_strmap_insert_hashed(zf_strmap_t *map, const char *key, size_t len, uint64_t hash,
                            uintptr_t value, uintptr_t *existing)
{
    assert(map && key);
    if (len > ZF_STRMAP_MAX_KEY_LEN) return -E2BIG;
    size_t i;
    bool found;
    int rc = s_slot_for_insert(map, key, len, (uint32_t)hash, &i, &found);
    if (rc != 0) return rc;
    if (found) {
        if (existing) *existing = map->slots[i].value;
        return -EEXIST;
    }
    return s_fill_slot(map, i, key, len, (uint32_t)hash, value);
}

int zf_strmap_insert_n(zf_strmap_t *map, const char *key, size_t len, uintptr_t value,
                       uintptr_t *existing)
{
    return zf_strmap_insert_hashed(map, key, len, zf_strmap_hash(key, len), value, existing);
}

int zf_strmap_put_n(zf_strmap_t *map, const char *key, size_t len, uintptr_t value)
{
    assert(map && key);
    if (len > ZF_STRMAP_MAX_KEY_LEN) return -E2BIG;
    uint32_t hash = (uint32_t)zf_strmap_hash(key, len);
    size_t i;
    bool found;
    int rc = s_slot_for_insert(map, key, len, hash, &i, &found);
    if (rc != 0) return rc;
    if (found) {
        map->slots[i].value = value;
        return 0;
    }
    return s_fill_slot(map, i, key, len, hash, value);
}

bool zf_strmap_get_hashed(const zf_strmap_t *map, const char *key, size_t len, uint64_t hash,
                          uintptr_t *value)
{
    assert(map && key);
    if (len > ZF_STRMAP_MAX_KEY_LEN) return false;
    const s_slot_t *s = &map->slots[s_probe(map, key, len, (uint32_t)hash)];
    if (!s->key) return false;
    if (value) *value = s->value;
    return true;
}

bool zf_strmap_get_n(const zf_strmap_t *map, const char *key, size_t len, uintptr_t *value)
{
    return zf_strmap_get_hashed(map, key, len, zf_strmap_hash(key, len), value);
}

void zf_strmap_prefetch(const zf_strmap_t *map, uint64_t hash)
{
#if defined(__GNUC__)
    __builtin_prefetch(&map->slots[(uint32_t)hash & (map->cap - 1)]);
#else
    (void)map;
    (void)hash;
#endif
}

void zf_strmap_prefetch_key(const zf_strmap_t *map, uint64_t hash)
{
#if defined(__GNUC__)
    const char *key = map->slots[(uint32_t)hash & (map->cap - 1)].key;
    if (key) __builtin_prefetch(key);
#else
    (void)map;
    (void)hash;
#endif
}

/* True when an entry whose home slot is home may move from slot j back to
 * the hole at slot hole (its home is not cyclically within (hole, j]). */
static inline bool s_can_fill_hole(size_t hole, size_t j, size_t home)
{
    if (hole <= j) return home <= hole || home > j;
    return home <= hole && home > j;
}

bool zf_strmap_remove_n(zf_strmap_t *map, const char *key, size_t len, uintptr_t *value)
{
    return zf_strmap_remove_hashed(map, key, len, zf_strmap_hash(key, len), value);
}

bool zf_strmap_remove_hashed(zf_strmap_t *map, const char *key, size_t len, uint64_t hash,
                             uintptr_t *value)
{
    assert(map && key);
    if (len > ZF_STRMAP_MAX_KEY_LEN) return false;
    size_t hole = s_probe(map, key, len, (uint32_t)hash);
    if (!map->slots[hole].key) return false;
    if (value) *value = map->slots[hole].value;
    if (map->flags & ZF_STRMAP_OWN_KEYS) free((void *)map->slots[hole].key);
    size_t mask = map->cap - 1;
    for (size_t j = (hole + 1) & mask; map->slots[j].key; j = (j + 1) & mask) {
        if (s_can_fill_hole(hole, j, map->slots[j].hash & mask)) {
            map->slots[hole] = map->slots[j];
            hole = j;
        }
    }
    memset(&map->slots[hole], 0, sizeof map->slots[hole]);
    map->size--;
    return true;
}

bool zf_strmap_next(const zf_strmap_t *map, size_t *iter, const char **key, size_t *len,
                    uintptr_t *value)
{
    for (size_t i = *iter; i < map->cap; i++) {
        const s_slot_t *s = &map->slots[i];
        if (!s->key) continue;
        if (key) *key = s->key;
        if (len) *len = s->len;
        if (value) *value = s->value;
        *iter = i + 1;
        return true;
    }
    *iter = map->cap;
    return false;
}
