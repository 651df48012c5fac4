/* Shared memory for the executor's data plane (executor/rendezvous/remote.c;
 * the design note is in remote.h): the sender's arena, one POSIX shared
 * memory segment carved into blocks; the offers it sends, held like CUDA
 * IPC offers (remote_ipc.c) until their receiver answers; the segments a
 * receiver maps and the tensors it makes over them; and the sweep of the
 * segments of dead processes. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/device_name.h"
#include "common/log.h"
#include "common/tensor_frame.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/remote_internal.h"

#define S_BLOCK_ALIGN 4096 /* blocks start on pages, which suits every dtype */
/* A block's release word follows the tensor's bytes on a cache line of its
 * own (the receiver writes it while the sender may be reading others). */
#define S_REL_ALIGN 64
/* The arena's pages are reserved (and mapped in) this much at a time. */
#define S_RESERVE_STEP ((size_t)4 << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* ---- the arena -------------------------------------------------------------- */

/* A free extent of the arena, in a list sorted by offset. */
typedef struct s_extent {
    struct s_extent *next;
    size_t off, len;
} s_extent_t;

/* How many freed blocks the arena keeps apart for reuse as they are. */
#define S_HOT_BLOCKS 8

/* The sender's segment. The transport holds a reference and so does each
 * block; the last one unmaps it. */
struct zf__remote_arena {
    atomic_int refs;
    pthread_mutex_t mu; /* guards free, hot, n_hot, in_use and reserved */
    char name[ZF_TENSOR_FRAME_MAX_SHM_NAME + 1];
    int fd;
    uint8_t *base;
    size_t size;
    s_extent_t *free;
    /* The blocks freed last, most recent last, not yet merged into free: a
     * block of the same size is taken from here first, as its lines are
     * the likeliest to be in the caches still (first-fit from free would
     * cycle through every block in turn, each long out of the caches). */
    struct {
        size_t off, len;
    } hot[S_HOT_BLOCKS];
    int n_hot;
    size_t in_use;   /* bytes in blocks */
    size_t reserved; /* pages below this are allocated in the segment */
    bool unlinked;
};

/* A block handed out, the hint of the tensor that wraps it. */
typedef struct {
    zf__remote_arena_t *arena;
    size_t off, len;
} s_block_t;

static void s_arena_unref(zf__remote_arena_t **a_p)
{
    zf__remote_arena_t *a = *a_p;
    *a_p = NULL;
    if (!a || atomic_fetch_sub(&a->refs, 1) > 1) return;
    if (!a->unlinked) shm_unlink(a->name);
    if (a->base) munmap(a->base, a->size);
    if (a->fd >= 0) close(a->fd);
    while (a->free) {
        s_extent_t *e = a->free;
        a->free = e->next;
        free(e);
    }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* An unguessable name under the prefix, with this process's pid. */
static bool s_arena_name(char *out, size_t cap)
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) return false;
    int n = snprintf(out, cap, ZF_REMOTE_SHM_PREFIX "%ld-%016" PRIx64, (long)getpid(), rnd);
    return n > 0 && (size_t)n < cap;
}

static zf_status_t s_arena_new(size_t size, zf__remote_arena_t **out)
{
    *out = NULL;
    zf__remote_arena_t *a = calloc(1, sizeof *a);
    s_extent_t *all = calloc(1, sizeof *all);
    if (!a || !all) {
        free(a);
        free(all);
        return zf_out_of_memory("the shared-memory arena");
    }
    atomic_init(&a->refs, 1);
    pthread_mutex_init(&a->mu, NULL);
    a->fd = -1;
    a->unlinked = true;
    a->size = size;
    all->len = size;
    a->free = all;
    zf_status_t s = ZF_STATUS_OK;
    if (!s_arena_name(a->name, sizeof a->name))
        s = zf_status_new(ZF_UNAVAILABLE, "no random bytes for a shared memory name");
    if (zf_ok(s)) {
        a->fd = shm_open(a->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (a->fd < 0)
            s = zf_status_new(ZF_UNAVAILABLE, "shm_open %s: %s", a->name, strerror(errno));
    }
    if (zf_ok(s)) {
        a->unlinked = false;
        if (ftruncate(a->fd, (off_t)size) != 0)
            s = zf_status_new(ZF_UNAVAILABLE, "sizing %s to %zu bytes: %s", a->name, size,
                              strerror(errno));
    }
    if (zf_ok(s)) {
        void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
        if (base == MAP_FAILED)
            s = zf_status_new(ZF_UNAVAILABLE, "mapping %s: %s", a->name, strerror(errno));
        else
            a->base = base;
    }
    if (!zf_ok(s)) {
        s_arena_unref(&a);
        return s;
    }
    *out = a;
    return ZF_STATUS_OK;
}

static void s_arena_give_locked(zf__remote_arena_t *a, size_t off, size_t len);

/* Takes len bytes (a multiple of S_BLOCK_ALIGN): the most recently freed
 * block of that size, else from the first extent that has them (after
 * merging the hot blocks back when none has); false when none has. Caller
 * holds a->mu. */
static bool s_arena_take_locked(zf__remote_arena_t *a, size_t len, size_t *off)
{
    for (int i = a->n_hot - 1; i >= 0; i--) {
        if (a->hot[i].len != len) continue;
        *off = a->hot[i].off;
        memmove(&a->hot[i], &a->hot[i + 1], (size_t)(a->n_hot - i - 1) * sizeof a->hot[0]);
        a->n_hot--;
        return true;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (s_extent_t **at = &a->free; *at; at = &(*at)->next) {
            s_extent_t *e = *at;
            if (e->len < len) continue;
            *off = e->off;
            e->off += len;
            e->len -= len;
            if (e->len == 0) {
                *at = e->next;
                free(e);
            }
            return true;
        }
        if (a->n_hot == 0) break;
        for (int i = 0; i < a->n_hot; i++) s_arena_give_locked(a, a->hot[i].off, a->hot[i].len);
        a->n_hot = 0;
    }
    return false;
}

/* Keeps the freed block [off, off + len) apart for reuse (the oldest kept
 * one goes back to the extents to make room). Caller holds a->mu. */
static void s_arena_keep_hot_locked(zf__remote_arena_t *a, size_t off, size_t len)
{
    if (a->n_hot == S_HOT_BLOCKS) {
        s_arena_give_locked(a, a->hot[0].off, a->hot[0].len);
        memmove(&a->hot[0], &a->hot[1], (S_HOT_BLOCKS - 1) * sizeof a->hot[0]);
        a->n_hot--;
    }
    a->hot[a->n_hot].off = off;
    a->hot[a->n_hot].len = len;
    a->n_hot++;
}

/* Gives [off, off + len) back, merged with its neighbours. Caller holds
 * a->mu. A failed allocation of a new extent loses the bytes (logged). */
static void s_arena_give_locked(zf__remote_arena_t *a, size_t off, size_t len)
{
    s_extent_t *prev = NULL, *next = a->free;
    while (next && next->off < off) {
        prev = next;
        next = next->next;
    }
    bool join_prev = prev && prev->off + prev->len == off;
    bool join_next = next && off + len == next->off;
    if (join_prev && join_next) {
        prev->len += len + next->len;
        prev->next = next->next;
        free(next);
    } else if (join_prev) {
        prev->len += len;
    } else if (join_next) {
        next->off = off;
        next->len += len;
    } else {
        s_extent_t *e = malloc(sizeof *e);
        if (!e) {
            zf_log_error("remote", "out of memory: %zu bytes of %s are lost", len, a->name);
            return;
        }
        *e = (s_extent_t){.next = next, .off = off, .len = len};
        if (prev)
            prev->next = e;
        else
            a->free = e;
    }
}

/* Allocates the segment's pages up to end (rounded up to S_RESERVE_STEP),
 * so that touching them can never raise SIGBUS on a full /dev/shm, and
 * maps them in here at once: one call instead of a page fault per page of
 * the first copies into them. Caller holds a->mu. */
static bool s_arena_reserve_locked(zf__remote_arena_t *a, size_t end)
{
    if (end <= a->reserved) return true;
    size_t want = (end + S_RESERVE_STEP - 1) / S_RESERVE_STEP * S_RESERVE_STEP;
    if (want > a->size) want = a->size;
    int rc = posix_fallocate(a->fd, (off_t)a->reserved, (off_t)(want - a->reserved));
    if (rc != 0 && want > end) { /* /dev/shm may have room for this block only */
        want = end;
        rc = posix_fallocate(a->fd, (off_t)a->reserved, (off_t)(want - a->reserved));
    }
    if (rc != 0) {
        zf_log_warn("remote", "cannot reserve %zu bytes of %s: %s", end - a->reserved, a->name,
                    strerror(rc));
        return false;
    }
    /* Only a hint: older kernels refuse it, and the pages fault in instead. */
    (void)madvise(a->base + a->reserved, want - a->reserved, MADV_POPULATE_WRITE);
    a->reserved = want;
    return true;
}

static void s_block_release(void *data, void *hint)
{
    (void)data;
    s_block_t *b = hint;
    pthread_mutex_lock(&b->arena->mu);
    s_arena_keep_hot_locked(b->arena, b->off, b->len);
    b->arena->in_use -= b->len;
    pthread_mutex_unlock(&b->arena->mu);
    s_arena_unref(&b->arena);
    free(b);
}

/* A tensor of t's dtype and shape in a new arena block holding a copy of
 * t's bytes, at *off, followed by its release word (zeroed) at *rel; *out
 * NULL when the arena has no room. */
static zf_status_t s_arena_copy(zf__remote_arena_t *a, const zf_tensor_t *t, zf_tensor_t **out,
                                size_t *off, size_t *rel)
{
    *out = NULL;
    size_t nbytes = zf_tensor_nbytes(t);
    size_t rel_at = (nbytes + S_REL_ALIGN - 1) / S_REL_ALIGN * S_REL_ALIGN;
    size_t len = (rel_at + S_REL_ALIGN + S_BLOCK_ALIGN - 1) / S_BLOCK_ALIGN * S_BLOCK_ALIGN;
    s_block_t *b = malloc(sizeof *b);
    if (!b) return zf_out_of_memory("a shared-memory block");
    pthread_mutex_lock(&a->mu);
    bool got = len <= a->size && s_arena_take_locked(a, len, off);
    if (got && !s_arena_reserve_locked(a, *off + len)) {
        s_arena_give_locked(a, *off, len);
        got = false;
    }
    if (got) a->in_use += len;
    pthread_mutex_unlock(&a->mu);
    if (!got) {
        free(b);
        return ZF_STATUS_OK;
    }
    atomic_fetch_add(&a->refs, 1);
    *b = (s_block_t){.arena = a, .off = *off, .len = len};
    *rel = *off + rel_at;
    atomic_store_explicit((_Atomic uint64_t *)(a->base + *rel), 0, memory_order_relaxed);
    memcpy(a->base + *off, zf_tensor_data(t), nbytes);
    zf_buffer_t *buf = NULL;
    zf_status_t s = zf_buffer_wrap(a->base + *off, nbytes, s_block_release, b, &buf);
    if (!zf_ok(s)) {
        s_block_release(NULL, b);
        return s;
    }
    s = zf_tensor_from_buffer(zf_tensor_dtype(t), zf_tensor_shape(t), buf, 0, out);
    zf_buffer_unref(&buf); /* on error this frees the block */
    return s;
}

/* ---- the sweep ------------------------------------------------------------------ */

/* The pid in a segment's name ("zflow-<pid>-<hex>", without the '/'), or
 * 0 when the name is not one of ours. */
static long s_name_pid(const char *name)
{
    const char *prefix = &ZF_REMOTE_SHM_PREFIX[1];
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0) return 0;
    const char *p = name + plen;
    long pid = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++) pid = pid * 10 + (*p - '0');
    if (digits == 0 || *p != '-' || pid <= 0) return 0;
    for (p++; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return pid;
}

int zf_remote_shm_sweep(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    char path[ZF_TENSOR_FRAME_MAX_SHM_NAME + 2];
    for (struct dirent *e; (e = readdir(d));) {
        long pid = s_name_pid(e->d_name);
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* running (or not ours) */
        if ((size_t)snprintf(path, sizeof path, "/%s", e->d_name) >= sizeof path) continue;
        if (shm_unlink(path) == 0) {
            n++;
            zf_log_info("remote", "removed %s, left by process %ld", path, pid);
        }
    }
    closedir(d);
    return n;
}

static bool s_mapped_here(const char *name);

/* Whether process pid maps the segment name ("/zflow-..."). */
static bool s_pid_maps(long pid, const char *name)
{
    char path[64], want[ZF_TENSOR_FRAME_MAX_SHM_NAME + 16];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    snprintf(want, sizeof want, "/dev/shm%s", name);
    size_t want_len = strlen(want);
    FILE *f = fopen(path, "r");
    if (!f) return false; /* gone, or not ours to read */
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    ssize_t n;
    while (!found && (n = getline(&line, &cap, f)) > 0) {
        const char *at = strstr(line, want);
        /* the name ends the line (or " (deleted)" follows it) */
        found = at && (at[want_len] == '\n' || at[want_len] == ' ' || at[want_len] == '\0');
    }
    free(line);
    fclose(f);
    return found;
}

bool zf__remote_shm_mapped_elsewhere(zf_remote_t *r, long *pid)
{
    char name[ZF_TENSOR_FRAME_MAX_SHM_NAME + 1];
    pthread_mutex_lock(&r->shm_mu);
    snprintf(name, sizeof name, "%s", r->arena ? r->arena->name : "");
    pthread_mutex_unlock(&r->shm_mu);
    long self = (long)getpid();
    *pid = name[0] && s_mapped_here(name) ? self : 0; /* another transport here */
    DIR *d = name[0] && !*pid ? opendir("/proc") : NULL;
    if (!d) return *pid != 0;
    for (struct dirent *e; *pid == 0 && (e = readdir(d));) {
        char *end = NULL;
        long p = strtol(e->d_name, &end, 10);
        if (p <= 0 || *end != '\0' || p == self) continue;
        if (s_pid_maps(p, name)) *pid = p;
    }
    closedir(d);
    return *pid != 0;
}

/* ---- lifecycle ------------------------------------------------------------------ */

void zf__remote_shm_init(zf_remote_t *r)
{
    pthread_mutex_init(&r->shm_mu, NULL);
    r->shm_arena_bytes = (size_t)ZF_REMOTE_SHM_MIB << 20;
    atomic_init(&r->shm_min_bytes, ZF_REMOTE_SHM_MIN_BYTES);
    zf_remote_shm_sweep();
}

/* A receiver's mapping of a sender's segment: the cache holds a reference
 * and so does each tensor over it; the last one unmaps it. */
struct zf__remote_shm_map {
    atomic_int refs;
    char name[ZF_TENSOR_FRAME_MAX_SHM_NAME + 1];
    uint8_t *base;
    size_t size;
    struct zf__remote_shm_map *next_live; /* guarded by s_live_mu */
};

/* Every mapping of this process's transports, so that a sender sees the
 * receivers in its own process too (zf__remote_shm_mapped_elsewhere()). */
static pthread_mutex_t s_live_mu = PTHREAD_MUTEX_INITIALIZER;
static zf__remote_shm_map_t *s_live;

static void s_map_unref(zf__remote_shm_map_t **m_p)
{
    zf__remote_shm_map_t *m = *m_p;
    *m_p = NULL;
    if (!m || atomic_fetch_sub(&m->refs, 1) > 1) return;
    pthread_mutex_lock(&s_live_mu);
    zf__remote_shm_map_t **at = &s_live;
    while (*at && *at != m) at = &(*at)->next_live;
    if (*at) *at = m->next_live;
    pthread_mutex_unlock(&s_live_mu);
    if (m->base) munmap(m->base, m->size);
    free(m);
}

/* Whether a transport of this process maps the segment name. */
static bool s_mapped_here(const char *name)
{
    pthread_mutex_lock(&s_live_mu);
    bool found = false;
    for (const zf__remote_shm_map_t *m = s_live; m && !found; m = m->next_live)
        found = strcmp(m->name, name) == 0;
    pthread_mutex_unlock(&s_live_mu);
    return found;
}

void zf__remote_shm_destroy(zf_remote_t *r)
{
    if (r->arena) { /* blocks still out (queued bytes, tensors) keep the mapping */
        shm_unlink(r->arena->name);
        r->arena->unlinked = true;
    }
    s_arena_unref(&r->arena);
    for (int i = 0; i < ZF__REMOTE_SHM_MAPS; i++) s_map_unref(&r->maps[i]);
    pthread_mutex_destroy(&r->shm_mu);
}

void zf_remote_set_shm(zf_remote_t *r, size_t arena_bytes, size_t min_bytes)
{
    pthread_mutex_lock(&r->shm_mu);
    r->shm_arena_bytes = (arena_bytes + S_BLOCK_ALIGN - 1) / S_BLOCK_ALIGN * S_BLOCK_ALIGN;
    atomic_store(&r->shm_min_bytes, min_bytes ? min_bytes : ZF_REMOTE_SHM_MIN_BYTES);
    pthread_mutex_unlock(&r->shm_mu);
}

const char *zf_remote_shm_name(zf_remote_t *r)
{
    pthread_mutex_lock(&r->shm_mu);
    const char *name = r->arena ? r->arena->name : "";
    pthread_mutex_unlock(&r->shm_mu);
    return name;
}

void zf_remote_set_peer_host(zf_remote_t *r, const char *device, const char *host_id)
{
    zf__remote_peer_t *p = zf__remote_peer_find(r, device);
    if (!p) return;
    int host = !host_id || !*host_id              ? ZF__REMOTE_HOST_UNKNOWN
               : strcmp(host_id, r->host_id) == 0 ? ZF__REMOTE_HOST_SAME
                                                  : ZF__REMOTE_HOST_OTHER;
    atomic_store(&p->host, host);
    zf__remote_peer_release(r, &p);
}

zf_remote_shm_stats_t zf_remote_shm_stats(zf_remote_t *r)
{
    zf__remote_shm_reap(r); /* so that released blocks count as such */
    zf_remote_shm_stats_t st = {
        .bytes_sent = atomic_load(&r->bytes_sent),
        .shm_offered = atomic_load(&r->shm_offered),
        .shm_released = atomic_load(&r->shm_released),
        .shm_refused = atomic_load(&r->shm_refused),
        .shm_received = atomic_load(&r->shm_received),
        .shm_rejected = atomic_load(&r->shm_rejected),
        .shm_expired = atomic_load(&r->shm_expired),
        .shm_fallbacks = atomic_load(&r->shm_fallbacks),
    };
    pthread_mutex_lock(&r->shm_mu);
    if (r->arena) {
        pthread_mutex_lock(&r->arena->mu);
        st.shm_bytes_in_use = r->arena->in_use;
        pthread_mutex_unlock(&r->arena->mu);
        st.shm_segments = 1;
    }
    pthread_mutex_unlock(&r->shm_mu);
    return st;
}

/* ---- sending ---------------------------------------------------------------------- */

/* The arena with a new reference, made on first use; NULL when there is
 * none (disabled, or it could not be made: logged once). */
static zf__remote_arena_t *s_arena_get(zf_remote_t *r)
{
    pthread_mutex_lock(&r->shm_mu);
    if (!r->arena && !r->shm_broken && r->shm_arena_bytes > 0) {
        zf_status_t s = s_arena_new(r->shm_arena_bytes, &r->arena);
        if (!zf_ok(s)) {
            r->shm_broken = true;
            zf_log_warn("remote", "no shared-memory arena (%s); same-host tensors go as bytes",
                        zf_status_msg(&s));
        } else {
            zf_log_info("remote", "shared-memory arena %s, %zu MiB", r->arena->name,
                        r->shm_arena_bytes >> 20);
        }
        zf_status_clear(&s);
    }
    zf__remote_arena_t *a = r->arena;
    if (a) atomic_fetch_add(&a->refs, 1);
    pthread_mutex_unlock(&r->shm_mu);
    return a;
}

bool zf__remote_shm_qualifies(zf_remote_t *r, zf__remote_peer_t *p, const zf_tensor_t *tensor)
{
    if (atomic_load(&p->shm_refused) || atomic_load(&p->host) == ZF__REMOTE_HOST_OTHER)
        return false;
    size_t nbytes = zf_tensor_nbytes(tensor);
    /* the size first: most tensors are too small, and that needs no lock */
    if (nbytes == 0 || nbytes < atomic_load_explicit(&r->shm_min_bytes, memory_order_relaxed))
        return false;
    zf_memory_kind_t kind = zf_tensor_memory_kind(tensor);
    zf_dtype_t dtype = zf_tensor_dtype(tensor);
    if (kind == ZF_MEMORY_DEVICE || zf_dtype_size(dtype) == 0 || dtype == ZF_STRING ||
        dtype == ZF_RESOURCE || dtype == ZF_VARIANT)
        return false;
    pthread_mutex_lock(&r->shm_mu);
    bool on = r->shm_arena_bytes > 0 && !r->shm_broken;
    pthread_mutex_unlock(&r->shm_mu);
    return on;
}

int zf__remote_shm_reap(zf_remote_t *r)
{
    zf__remote_held_t *done = NULL;
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (zf__remote_held_t **at = &r->held; *at && r->n_held_rel > 0;) {
        zf__remote_held_t *h = *at;
        if (!h->rel || atomic_load_explicit(h->rel, memory_order_acquire) != h->id) {
            at = &h->next;
            continue;
        }
        zf__remote_held_unlink_locked(r, at);
        h->next = done;
        done = h;
        n++;
    }
    pthread_mutex_unlock(&r->mu);
    if (n) atomic_fetch_add(&r->shm_released, (uint_fast64_t)n);
    zf__remote_held_free_all(&done); /* the blocks go back to the arena */
    return n;
}

zf_status_t zf__remote_shm_send(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                const char *key, int64_t step_id, zf_tensor_t *tensor, bool *sent)
{
    *sent = false;
    if (!zf__remote_shm_qualifies(r, p, tensor)) return ZF_STATUS_OK;
    zf__remote_arena_t *a = s_arena_get(r);
    if (!a) {
        atomic_fetch_add(&r->shm_fallbacks, 1);
        return ZF_STATUS_OK;
    }
    /* The blocks receivers let go of since the last send are free again,
     * and the most recently used are still in the caches. */
    zf__remote_shm_reap(r);
    zf_tensor_t *copy = NULL;
    size_t off = 0, rel = 0;
    zf_status_t s = s_arena_copy(a, tensor, &copy, &off, &rel);
    zf_tensor_frame_shm_t shm = {.offset = off, .nbytes = zf_tensor_nbytes(tensor), .rel = rel};
    _Atomic uint64_t *rel_word = copy ? (_Atomic uint64_t *)(a->base + rel) : NULL;
    snprintf(shm.name, sizeof shm.name, "%s", a->name);
    s_arena_unref(&a);        /* the block (copy) keeps the mapping */
    if (!zf_ok(s) || !copy) { /* full: the bytes go instead */
        if (zf_ok(s)) atomic_fetch_add(&r->shm_fallbacks, 1);
        return s;
    }
    shm.id = atomic_fetch_add(&r->next_offer, 1) + 1;
    memcpy(shm.host, r->host_id, sizeof shm.host);
    zf_tensor_frame_header_t h;
    s = zf_tensor_frame_header_for_shm(key, step_id, zf_tensor_dtype(copy), zf_tensor_shape(copy),
                                       &shm, &h);
    /* Held before it leaves: the reply may come back at once. */
    if (zf_ok(s))
        s = zf__remote_held_add(r, shm.id, true, rel_word, device, key, step_id, copy,
                                zf_remote_now_ms());
    zf_tensor_unref(&copy); /* the held offer has it now */
    if (!zf_ok(s)) return s;
    ZF_TRY(zf__remote_send_held_offer(r, p, &h, shm.id));
    atomic_fetch_add(&r->shm_offered, 1);
    *sent = true;
    return ZF_STATUS_OK;
}

/* ---- receiving ------------------------------------------------------------------- */

/* Whether name is one an arena could have: the prefix, a pid, '-', hex. */
static bool s_name_ok(const char *name)
{
    return name[0] == '/' && s_name_pid(name + 1) > 0;
}

/* The mapping of the segment name with a new reference, from the cache or
 * mapped now (the cache's oldest entry makes room). Caller holds
 * r->shm_mu. */
static zf_status_t s_map_get_locked(zf_remote_t *r, const char *name, zf__remote_shm_map_t **out)
{
    *out = NULL;
    for (int i = 0; i < ZF__REMOTE_SHM_MAPS; i++)
        if (r->maps[i] && strcmp(r->maps[i]->name, name) == 0) {
            atomic_fetch_add(&r->maps[i]->refs, 1);
            *out = r->maps[i];
            return ZF_STATUS_OK;
        }
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return zf_status_new(ZF_UNAVAILABLE, "cannot open shared memory %s: %s", name,
                             strerror(errno));
    struct stat st;
    zf_status_t s = ZF_STATUS_OK;
    void *base = MAP_FAILED;
    if (fstat(fd, &st) != 0)
        s = zf_status_new(ZF_UNAVAILABLE, "fstat %s: %s", name, strerror(errno));
    else if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_uid != geteuid())
        s = zf_status_new(ZF_PERMISSION_DENIED, "shared memory %s is not a segment of this user",
                          name);
    if (zf_ok(s)) {
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            s = zf_status_new(ZF_UNAVAILABLE, "mapping %s: %s", name, strerror(errno));
    }
    close(fd);
    zf__remote_shm_map_t *m = zf_ok(s) ? calloc(1, sizeof *m) : NULL;
    if (zf_ok(s) && !m) {
        munmap(base, (size_t)st.st_size);
        s = zf_out_of_memory("a shared-memory mapping");
    }
    if (!zf_ok(s)) return s;
    atomic_init(&m->refs, 2); /* the cache's and the caller's */
    snprintf(m->name, sizeof m->name, "%s", name);
    m->base = base;
    m->size = (size_t)st.st_size;
    pthread_mutex_lock(&s_live_mu);
    m->next_live = s_live;
    s_live = m;
    pthread_mutex_unlock(&s_live_mu);
    unsigned slot = r->next_map++ % ZF__REMOTE_SHM_MAPS;
    s_map_unref(&r->maps[slot]);
    r->maps[slot] = m;
    *out = m;
    return ZF_STATUS_OK;
}

/* What a received tensor's release answers. */
typedef struct {
    zf__remote_shm_map_t *map;
    zf__remote_acker_t *acker;
    uint64_t id;
    int64_t step_id;
    uint64_t rel;  /* the block's release word in the segment; 0: answer by message */
    bool answered; /* refused already: the release says nothing */
    char src[ZF_DEVICE_NAME_MAX + 1];
} s_recv_t;

/* The last reference to a received tensor: the sender may reuse the block.
 * Said through the block's release word when the offer named one (no
 * message, and it works after this transport is gone: the mapping lives
 * until here), else by a reply message. */
static void s_recv_release(void *data, void *hint)
{
    (void)data;
    s_recv_t *o = hint;
    if (o->rel && !o->answered) {
        atomic_store_explicit((_Atomic uint64_t *)(o->map->base + o->rel), o->id,
                              memory_order_release);
        o->answered = true;
    }
    s_map_unref(&o->map);
    pthread_mutex_lock(&o->acker->mu);
    if (o->acker->r && !o->answered)
        zf__remote_reply(o->acker->r, o->src, o->id, o->step_id, true, "");
    pthread_mutex_unlock(&o->acker->mu);
    zf__remote_acker_unref(&o->acker);
    free(o);
}

static size_t s_alignment(zf_dtype_t dtype)
{
    size_t size = zf_dtype_size(dtype);
    return dtype == ZF_COMPLEX64 || dtype == ZF_COMPLEX128 ? size / 2 : size;
}

/* The tensor over the offered bytes, or why it cannot be made. */
static zf_status_t s_recv_tensor(zf_remote_t *r, const zf_tensor_frame_t *f, const char *src,
                                 zf_tensor_t **out)
{
    const zf_tensor_frame_offer_t *o = f->offer;
    const zf_tensor_frame_shm_t *shm = &o->shm;
    if (strcmp(shm->host, r->host_id) != 0)
        return zf_status_new(ZF_FAILED_PRECONDITION, "the sender's host '%s' is not this host '%s'",
                             shm->host, r->host_id);
    if (!s_name_ok(shm->name))
        return zf_invalid_argument("shared memory name '%s' is not a zflow segment (%s<pid>-<hex>)",
                                   shm->name, ZF_REMOTE_SHM_PREFIX);
    size_t align = s_alignment(o->dtype);
    if (align && shm->offset % align != 0)
        return zf_invalid_argument("offset %" PRIu64 " in %s is not aligned for %s", shm->offset,
                                   shm->name, zf_dtype_name(o->dtype));
    s_recv_t *rv = calloc(1, sizeof *rv);
    if (!rv) return zf_out_of_memory("a shared-memory offer");
    pthread_mutex_lock(&r->shm_mu);
    zf_status_t s = s_map_get_locked(r, shm->name, &rv->map);
    pthread_mutex_unlock(&r->shm_mu);
    if (zf_ok(s) && (shm->offset > rv->map->size || shm->nbytes > rv->map->size - shm->offset))
        s = zf_invalid_argument("bytes %" PRIu64 "..%" PRIu64 " are outside %s (%zu bytes)",
                                shm->offset, shm->offset + shm->nbytes, shm->name, rv->map->size);
    /* The release word: where a sender puts it (s_arena_copy), right after
     * the bytes, and inside the segment; a peer may not aim the store at
     * another block's bytes or word. */
    uint64_t rel_want = shm->offset + (shm->nbytes + S_REL_ALIGN - 1) / S_REL_ALIGN * S_REL_ALIGN;
    if (zf_ok(s) && shm->rel &&
        (shm->rel != rel_want || rv->map->size < 8 || shm->rel > rv->map->size - 8))
        s = zf_invalid_argument("release word %" PRIu64 " of %s (%zu bytes) is not the word "
                                "after bytes %" PRIu64 "..%" PRIu64 " (%" PRIu64 ")",
                                shm->rel, shm->name, rv->map->size, shm->offset,
                                shm->offset + shm->nbytes, rel_want);
    if (!zf_ok(s)) {
        s_map_unref(&rv->map);
        free(rv);
        return s;
    }
    rv->id = shm->id;
    rv->rel = shm->rel;
    rv->step_id = f->step_id;
    snprintf(rv->src, sizeof rv->src, "%s", src);
    atomic_fetch_add(&r->acker->refs, 1);
    rv->acker = r->acker;
    zf_buffer_t *buf = NULL;
    s = zf_buffer_wrap(rv->map->base + shm->offset, (size_t)shm->nbytes, s_recv_release, rv, &buf);
    if (!zf_ok(s)) {
        s_map_unref(&rv->map);
        zf__remote_acker_unref(&rv->acker);
        free(rv);
        return s;
    }
    s = zf_tensor_from_buffer(o->dtype, &o->shape, buf, 0, out);
    if (!zf_ok(s)) rv->answered = true; /* the caller refuses it */
    zf_buffer_unref(&buf);
    return s;
}

void zf__remote_shm_on_offer(zf_remote_t *r, zf_tensor_frame_t *f)
{
    char src[ZF_DEVICE_NAME_MAX + 1];
    if (!zf__remote_key_src(f->key, src, sizeof src)) {
        atomic_fetch_add(&r->malformed, 1);
        zf_log_warn("remote", "shared-memory offer '%s' names no sending device; nobody to answer",
                    f->key);
        return;
    }
    zf_status_t s = s_recv_tensor(r, f, src, &f->tensor);
    if (zf_ok(s)) {
        atomic_fetch_add(&r->shm_received, 1);
        zf__remote_deliver(r, f); /* the rendezvous holds it; f's reference goes with f */
        return;
    }
    atomic_fetch_add(&r->shm_rejected, 1);
    zf_log_warn("remote", "shared-memory offer '%s' refused: %s", f->key, zf_status_msg(&s));
    zf__remote_reply(r, src, f->offer->shm.id, f->step_id, false, zf_status_msg(&s));
    zf_status_clear(&s);
}
