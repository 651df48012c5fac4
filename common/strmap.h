/* String hash map: open addressing (linear probing) from string keys to a
 * uintptr_t value, sized for the graph loader's millions of node names.
 *
 * Keys are byte strings given as pointer + length, so a map can be searched
 * with a slice of a larger string ("node" out of "node:1") without copying.
 * By default keys are BORROWED: the map stores the caller's pointer and the
 * bytes must stay valid and unchanged while they are in the map. With
 * ZF_STRMAP_COPY_KEYS the map copies each inserted key (NUL-terminated) into
 * storage it owns until zf_strmap_destroy() (cheap, for maps built once);
 * with ZF_STRMAP_OWN_KEYS each copy is its own allocation, freed when its
 * entry is removed (for long-lived maps whose keys come and go, such as a
 * service's sessions, which would otherwise grow with every one).
 *
 * Values are uintptr_t: store an index, or a pointer cast with (uintptr_t).
 * The table grows geometrically (doubling, load factor at most 3/4); give an
 * expected size to zf_strmap_new() to avoid rehashing while filling.
 *
 * Thread-safety: none inside. Concurrent lookups (zf_strmap_get*,
 * zf_strmap_next) are safe while nobody modifies the map. */
#ifndef ZF_STRMAP_H
#define ZF_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct zf_strmap zf_strmap_t;

/* zf_strmap_new() flags. */
enum {
    ZF_STRMAP_COPY_KEYS = 1u << 0, /* the map owns copies of its keys */
    ZF_STRMAP_OWN_KEYS = 1u << 1,  /* ... each freed when its entry goes */
};

/* Keys are limited to this many bytes (inserting a longer key fails). */
#define ZF_STRMAP_MAX_KEY_LEN ((size_t)UINT32_MAX)

/* Creates an empty map with room for expected keys before it must grow
 * (0 is fine). Caller owns the result (zf_strmap_destroy()); NULL only when
 * out of memory. */
zf_strmap_t *zf_strmap_new(size_t expected, unsigned flags);

/* A copy of map (made without copying keys: flags 0), with room for extra
 * more keys before it must grow. Its keys are the same borrowed strings.
 * NULL when out of memory or when map copies its keys. Cost: a copy of
 * the table, or one pass over it at a larger size; no key is hashed. */
zf_strmap_t *zf_strmap_clone(const zf_strmap_t *map, size_t extra);

/* Frees the map (and its key copies); NULL-safe, sets *map_p to NULL. Borrowed
 * keys are not touched. */
void zf_strmap_destroy(zf_strmap_t **map_p);

/* Number of keys. */
size_t zf_strmap_size(const zf_strmap_t *map);

/* Inserts key -> value when key is absent. Returns 0 when inserted;
 * -EEXIST when the key is already present (the map is unchanged and, when
 * existing is non-NULL, *existing receives the value stored for it);
 * -ENOMEM when growing fails; -E2BIG when len > ZF_STRMAP_MAX_KEY_LEN. The
 * key need not be NUL-terminated. */
int zf_strmap_insert_n(zf_strmap_t *map, const char *key, size_t len, uintptr_t value,
                       uintptr_t *existing);
static inline int zf_strmap_insert(zf_strmap_t *map, const char *key, uintptr_t value,
                                   uintptr_t *existing)
{
    return zf_strmap_insert_n(map, key, strlen(key), value, existing);
}

/* Inserts or replaces. Returns 0, -ENOMEM or -E2BIG as above. A replaced
 * entry keeps its original key pointer. */
int zf_strmap_put_n(zf_strmap_t *map, const char *key, size_t len, uintptr_t value);
static inline int zf_strmap_put(zf_strmap_t *map, const char *key, uintptr_t value)
{
    return zf_strmap_put_n(map, key, strlen(key), value);
}

/* Looks up the len bytes at key. Returns true and sets *value (when value is
 * non-NULL) if present. */
bool zf_strmap_get_n(const zf_strmap_t *map, const char *key, size_t len, uintptr_t *value);
static inline bool zf_strmap_get(const zf_strmap_t *map, const char *key, uintptr_t *value)
{
    return zf_strmap_get_n(map, key, strlen(key), value);
}

/* Removes key. Returns true and sets *value (when non-NULL) if it was there.
 * A key copied under ZF_STRMAP_COPY_KEYS is reclaimed only by
 * zf_strmap_destroy(); one under ZF_STRMAP_OWN_KEYS is freed here. */
bool zf_strmap_remove_n(zf_strmap_t *map, const char *key, size_t len, uintptr_t *value);
static inline bool zf_strmap_remove(zf_strmap_t *map, const char *key, uintptr_t *value)
{
    return zf_strmap_remove_n(map, key, strlen(key), value);
}

/* Makes room for expected keys in total without further growth. Returns 0
 * or -ENOMEM (the map is unchanged on failure). */
int zf_strmap_reserve(zf_strmap_t *map, size_t expected);

/* Iterates in unspecified order: start with *iter = 0; each call that
 * returns true yields one entry (any out pointer may be NULL). The map must
 * not be modified during iteration. */
bool zf_strmap_next(const zf_strmap_t *map, size_t *iter, const char **key, size_t *len,
                    uintptr_t *value);

/* The hash the map uses: 64 bits, well mixed, seeded at random once per
 * process (so iteration order differs between runs and crafted colliding
 * keys cannot be prepared). In-memory use only. */
uint64_t zf_strmap_hash(const char *key, size_t len);

/* Hashed use. A loader that looks up millions of keys spends its time
 * waiting for memory; hashing keys ahead and prefetching their slots lets
 * the waits overlap. A caller that looks a key up and then removes it
 * hashes it once. hash must be zf_strmap_hash(key, len) (only its low 32
 * bits are used, so a stored uint32_t copy works). Results and errors are
 * as for the _n forms. */
int zf_strmap_insert_hashed(zf_strmap_t *map, const char *key, size_t len, uint64_t hash,
                            uintptr_t value, uintptr_t *existing);
bool zf_strmap_get_hashed(const zf_strmap_t *map, const char *key, size_t len, uint64_t hash,
                          uintptr_t *value);
bool zf_strmap_remove_hashed(zf_strmap_t *map, const char *key, size_t len, uint64_t hash,
                             uintptr_t *value);

/* Prefetch hints (no effect on contents): the slot where a key with this
 * hash starts probing, and — once that slot is likely cached — the key bytes
 * stored there. Call a few dozen lookups ahead. */
void zf_strmap_prefetch(const zf_strmap_t *map, uint64_t hash);
void zf_strmap_prefetch_key(const zf_strmap_t *map, uint64_t hash);

#endif
