/* The job store's large requests, kept and read on a thread of their own
 * (broker/job_blobs.h). */
#include "broker/job_blobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/job_store.h"
#include "common/graphdef_io.h"
#include "common/strmap.h"
#include "proto/service.pb-c.h"

#define S_SUBDIR "requests"
#define S_TMP    ".tmp"

/* A body held in memory: a share of the frame it came in. */
typedef struct {
    zmq_msg_t frame;
    size_t off, len;
} s_mem_t;

struct zf_job_blobs {
    zf_socket_t *loop;   /* the loop's end */
    zf_socket_t *worker; /* the thread's end */
    pthread_t thread;
    bool running;
    bool memory;
    zf_strmap_t *mem; /* memory: id -> s_mem_t *; the thread's alone */
    char dir[PATH_MAX];
};

/* ---- tasks -------------------------------------------------------------------------- */

zf_job_blob_task_t *zf_job_blob_task_new(zf_job_blob_op_t op, const char *id)
{
    zf_job_blob_task_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->op = op;
    snprintf(t->id, sizeof t->id, "%s", id);
    zmq_msg_init(&t->bytes);
    return t;
}

void zf_job_blob_task_free(zf_job_blob_task_t **t_p)
{
    if (!t_p || !*t_p) return;
    zf_job_blob_task_t *t = *t_p;
    *t_p = NULL;
    zmq_msg_close(&t->bytes);
    zf_status_clear(&t->status);
    free(t);
}

bool zf_job_blobs_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n < 1 || n > 63) return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* ---- files -------------------------------------------------------------------------- */

static zf_status_t s_io_error(int err, const char *doing, const char *path)
{
    zf_code_t code = err == ENOSPC || err == EDQUOT ? ZF_RESOURCE_EXHAUSTED
                     : err == ENOENT                ? ZF_NOT_FOUND
                                                    : ZF_FAILED_PRECONDITION;
    return zf_status_new(code, "job store: %s %s: %s", doing, path, strerror(err));
}

static zf_status_t s_write_all(int fd, const uint8_t *p, size_t len, const char *path)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return s_io_error(errno, "writing", path);
        p += n;
        len -= (size_t)n;
    }
    return ZF_STATUS_OK;
}

/* Syncs directory dir, so that a name made or changed in it lasts. */
static zf_status_t s_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return s_io_error(errno, "opening", dir);
    int rc = fsync(fd), err = errno;
    close(fd);
    return rc == 0 ? ZF_STATUS_OK : s_io_error(err, "syncing", dir);
}

/* Writes p as file id of dir, durably: a temporary file synced, then
 * renamed, then the directory synced. */
static zf_status_t s_write_file(const char *dir, const char *id, const uint8_t *p, size_t len)
{
    char tmp[PATH_MAX + 80], path[PATH_MAX + 80];
    snprintf(tmp, sizeof tmp, "%s/%s" S_TMP, dir, id);
    snprintf(path, sizeof path, "%s/%s", dir, id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return s_io_error(errno, "making", tmp);
    zf_status_t st = s_write_all(fd, p, len, tmp);
    if (zf_ok(st) && fdatasync(fd) != 0) st = s_io_error(errno, "syncing", tmp);
    if (close(fd) != 0 && zf_ok(st)) st = s_io_error(errno, "closing", tmp);
    if (zf_ok(st) && rename(tmp, path) != 0) st = s_io_error(errno, "renaming", tmp);
    if (!zf_ok(st)) {
        unlink(tmp);
        return st;
    }
    return s_sync_dir(dir);
}

static void s_free_buf(void *data, void *hint)
{
    (void)data;
    free(hint);
}

/* A buffer of ZF_ENVELOPE_HEAD_MAX + len bytes whose body (at ZF_ENVELOPE_HEAD_MAX) the caller
 * fills; NULL when out of memory. */
static uint8_t *s_frame_buf(size_t len)
{
    return len <= SIZE_MAX - ZF_ENVELOPE_HEAD_MAX ? malloc(ZF_ENVELOPE_HEAD_MAX + len) : NULL;
}

/* Makes buf (from s_frame_buf, its body filled) into msg: the envelope
 * header written just before the body; msg owns buf. */
static zf_status_t s_frame_take(zmq_msg_t *msg, uint8_t *buf, size_t len, uint64_t request_id)
{
    uint8_t h[ZF_ENVELOPE_HEAD_MAX];
    size_t n = zf_envelope_put_head(h, request_id, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, len);
    uint8_t *start = buf + ZF_ENVELOPE_HEAD_MAX - n;
    memcpy(start, h, n);
    zmq_msg_close(msg);
    if (zmq_msg_init_data(msg, start, n + len, s_free_buf, buf) != 0) {
        free(buf);
        zmq_msg_init(msg);
        return zf_out_of_memory("job store: a request's frame");
    }
    return ZF_STATUS_OK;
}

/* Reads file id of dir into a new envelope frame in msg. */
static zf_status_t s_read_file(const char *dir, const char *id, uint64_t request_id, zmq_msg_t *msg)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s", dir, id);
    /* O_NONBLOCK: a FIFO put in its place must not hang this thread */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return s_io_error(errno, "opening", path);
    struct stat sb;
    zf_status_t st = fstat(fd, &sb) == 0 ? ZF_STATUS_OK : s_io_error(errno, "reading", path);
    if (zf_ok(st) && (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > ZF_BROKER_MAX_FRAME))
        st = zf_status_new(ZF_DATA_LOSS,
                           "job store: %s is not a stored request (not a regular file of at "
                           "most %zu bytes)",
                           path, ZF_BROKER_MAX_FRAME);
    size_t len = zf_ok(st) ? (size_t)sb.st_size : 0, got = 0;
    uint8_t *buf = zf_ok(st) ? s_frame_buf(len) : NULL;
    if (zf_ok(st) && !buf)
        st = zf_status_new(ZF_RESOURCE_EXHAUSTED,
                           "job store: out of memory for the %zu bytes of %s", len, path);
    while (zf_ok(st) && got < len) {
        ssize_t n = pread(fd, buf + ZF_ENVELOPE_HEAD_MAX + got, len - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) st = s_io_error(errno, "reading", path);
        if (n == 0) st = zf_status_new(ZF_DATA_LOSS, "job store: %s ended early", path);
        if (n > 0) got += (size_t)n;
    }
    close(fd);
    if (zf_ok(st)) return s_frame_take(msg, buf, len, request_id);
    free(buf);
    return st;
}

/* ---- the thread ----------------------------------------------------------------------- */

static void s_mem_free(s_mem_t *m)
{
    if (!m) return;
    zmq_msg_close(&m->frame);
    free(m);
}

static zf_status_t s_put(zf_job_blobs_t *bl, zf_job_blob_task_t *t)
{
    if (!zf_job_blobs_id_ok(t->id))
        return zf_internal("job store: '%s' cannot name a request", t->id);
    if (t->off > zmq_msg_size(&t->bytes) || t->len > zmq_msg_size(&t->bytes) - t->off)
        return zf_internal("job store: a request of %zu bytes at %zu lies outside its frame of %zu",
                           t->len, t->off, zmq_msg_size(&t->bytes));
    if (t->check) {
        zf_status_t st = zf_proto_check_wire(
            t->check, (const uint8_t *)zmq_msg_data(&t->bytes) + t->off, t->len);
        if (!zf_ok(st))
            return zf_status_prefix(st,
                                    "malformed %s (%zu bytes; byte offsets count from its "
                                    "start)",
                                    t->check->name, t->len);
    }
    if (!bl->memory)
        return s_write_file(bl->dir, t->id, (const uint8_t *)zmq_msg_data(&t->bytes) + t->off,
                            t->len);
    s_mem_t *m = calloc(1, sizeof *m);
    if (!m) return zf_out_of_memory("job store: a request");
    zmq_msg_init(&m->frame);
    zmq_msg_move(&m->frame, &t->bytes);
    m->off = t->off;
    m->len = t->len;
    uintptr_t old = 0;
    if (zf_strmap_remove(bl->mem, t->id, &old)) s_mem_free((s_mem_t *)old);
    if (zf_strmap_insert(bl->mem, t->id, (uintptr_t)m, NULL) != 0) {
        s_mem_free(m);
        return zf_out_of_memory("job store: the requests in memory");
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_load(zf_job_blobs_t *bl, zf_job_blob_task_t *t)
{
    if (!zf_job_blobs_id_ok(t->id))
        return zf_invalid_argument("job store: '%s' cannot name a request", t->id);
    if (!bl->memory) return s_read_file(bl->dir, t->id, t->request_id, &t->bytes);
    uintptr_t v = 0;
    if (!zf_strmap_get(bl->mem, t->id, &v))
        return zf_not_found("job store: job '%s' has no request in memory", t->id);
    const s_mem_t *m = (const s_mem_t *)v;
    uint8_t *buf = s_frame_buf(m->len);
    if (!buf)
        return zf_status_new(
            ZF_RESOURCE_EXHAUSTED,
            "job store: out of memory for the %zu bytes of the request of job '%s'", m->len, t->id);
    memcpy(buf + ZF_ENVELOPE_HEAD_MAX,
           (const uint8_t *)zmq_msg_data((zmq_msg_t *)&m->frame) + m->off, m->len);
    return s_frame_take(&t->bytes, buf, m->len, t->request_id);
}

static zf_status_t s_delete(zf_job_blobs_t *bl, zf_job_blob_task_t *t)
{
    if (!zf_job_blobs_id_ok(t->id)) return ZF_STATUS_OK; /* none was kept */
    if (bl->memory) {
        uintptr_t v = 0;
        if (zf_strmap_remove(bl->mem, t->id, &v)) s_mem_free((s_mem_t *)v);
        return ZF_STATUS_OK;
    }
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s", bl->dir, t->id);
    if (unlink(path) != 0 && errno != ENOENT) return s_io_error(errno, "removing", path);
    return ZF_STATUS_OK;
}

static zf_job_blob_task_t *s_recv_task(zf_socket_t *s, int flags)
{
    zf_job_blob_task_t *t = NULL;
    zmq_msg_t m;
    zmq_msg_init(&m);
    int rc;
    do {
        rc = zmq_msg_recv(&m, zf_socket_handle(s), flags);
    } while (rc < 0 && zmq_errno() == EINTR);
    if (rc == (int)sizeof t) memcpy(&t, zmq_msg_data(&m), sizeof t);
    zmq_msg_close(&m);
    return t;
}

static bool s_send_task(zf_socket_t *s, zf_job_blob_task_t *t)
{
    int rc;
    do {
        rc = zmq_send(zf_socket_handle(s), &t, sizeof t, 0);
    } while (rc < 0 && zmq_errno() == EINTR);
    return rc == (int)sizeof t;
}

/* Does each task given and sends it back, until a NULL one. */
static void *s_main(void *arg)
{
    zf_job_blobs_t *bl = arg;
    for (zf_job_blob_task_t *t; (t = s_recv_task(bl->worker, 0));) {
        zf_status_clear(&t->status);
        t->status = t->op == ZF_JOB_BLOB_PUT    ? s_put(bl, t)
                    : t->op == ZF_JOB_BLOB_LOAD ? s_load(bl, t)
                                                : s_delete(bl, t);
        if (t->op == ZF_JOB_BLOB_PUT) { /* its frame is kept, or no longer needed */
            zmq_msg_close(&t->bytes);
            zmq_msg_init(&t->bytes);
        }
        if (!s_send_task(bl->worker, t)) zf_job_blob_task_free(&t); /* the loop is gone */
    }
    return NULL;
}

/* ---- the loop's side ------------------------------------------------------------------ */

static zf_status_t s_open(zf_job_blobs_t *bl, zf_zctx_t *ctx)
{
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://zflow-job-blobs-%p", (void *)bl);
    ZF_TRY(zf_socket_new(ctx, ZF_SOCKET_PAIR, &bl->loop));
    ZF_TRY(zf_socket_new(ctx, ZF_SOCKET_PAIR, &bl->worker));
    int unlimited = 0; /* tasks are bounded by the jobs the broker keeps */
    void *ends[2] = {zf_socket_handle(bl->loop), zf_socket_handle(bl->worker)};
    for (int i = 0; i < 2; i++)
        if (zmq_setsockopt(ends[i], ZMQ_SNDHWM, &unlimited, sizeof unlimited) != 0 ||
            zmq_setsockopt(ends[i], ZMQ_RCVHWM, &unlimited, sizeof unlimited) != 0)
            return zf_internal("job store: %s", zmq_strerror(zmq_errno()));
    ZF_TRY(zf_socket_bind(bl->loop, addr, NULL));
    ZF_TRY(zf_socket_connect(bl->worker, addr));
    if (pthread_create(&bl->thread, NULL, s_main, bl) != 0)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "job store: cannot start its thread");
    bl->running = true;
    return ZF_STATUS_OK;
}

zf_status_t zf_job_blobs_new(zf_zctx_t *ctx, const char *dir, zf_job_blobs_t **out)
{
    *out = NULL;
    zf_job_blobs_t *bl = calloc(1, sizeof *bl);
    if (!bl) return zf_out_of_memory("job store: its requests");
    bl->memory = !dir;
    zf_status_t st = ZF_STATUS_OK;
    if (dir && snprintf(bl->dir, sizeof bl->dir, "%s/" S_SUBDIR, dir) >= (int)sizeof bl->dir)
        st = zf_invalid_argument("state directory '%.64s...' is too long", dir);
    if (zf_ok(st) && dir) st = zf_job_store_make_dir(bl->dir);
    if (zf_ok(st) && bl->memory && !(bl->mem = zf_strmap_new(0, ZF_STRMAP_COPY_KEYS)))
        st = zf_out_of_memory("job store: its requests");
    if (zf_ok(st)) st = s_open(bl, ctx);
    if (!zf_ok(st)) {
        zf_job_blobs_destroy(&bl);
        return st;
    }
    *out = bl;
    return ZF_STATUS_OK;
}

void zf_job_blobs_stop(zf_job_blobs_t *bl)
{
    if (bl->running && s_send_task(bl->loop, NULL)) pthread_join(bl->thread, NULL);
    bl->running = false;
}

void zf_job_blobs_destroy(zf_job_blobs_t **bl_p)
{
    if (!bl_p || !*bl_p) return;
    zf_job_blobs_t *bl = *bl_p;
    *bl_p = NULL;
    zf_job_blobs_stop(bl);
    for (zf_job_blob_task_t *t; bl->loop && (t = s_recv_task(bl->loop, ZMQ_DONTWAIT));)
        zf_job_blob_task_free(&t);
    size_t iter = 0;
    uintptr_t v = 0;
    while (bl->mem && zf_strmap_next(bl->mem, &iter, NULL, NULL, &v)) s_mem_free((s_mem_t *)v);
    zf_strmap_destroy(&bl->mem);
    zf_socket_destroy(&bl->worker);
    zf_socket_destroy(&bl->loop);
    free(bl);
}

zf_status_t zf_job_blobs_submit(zf_job_blobs_t *bl, zf_job_blob_task_t **task)
{
    if (zmq_send(zf_socket_handle(bl->loop), task, sizeof *task, ZMQ_DONTWAIT) != (int)sizeof *task)
        return zf_status_new(ZF_UNAVAILABLE, "job store: its thread takes no task: %s",
                             zmq_strerror(zmq_errno()));
    *task = NULL;
    return ZF_STATUS_OK;
}

zf_job_blob_task_t *zf_job_blobs_next(zf_job_blobs_t *bl)
{
    return s_recv_task(bl->loop, ZMQ_DONTWAIT);
}

void *zf_job_blobs_socket(const zf_job_blobs_t *bl)
{
    return zf_socket_handle(bl->loop);
}

size_t zf_job_blobs_sweep(const char *dir, bool (*keep)(void *arg, const char *id), void *arg)
{
    char sub[PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s/" S_SUBDIR, dir) >= (int)sizeof sub) return 0;
    DIR *d = opendir(sub);
    if (!d) return 0;
    size_t gone = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char id[64];
        size_t n = strlen(e->d_name), t = strlen(S_TMP);
        bool tmp = n > t && strcmp(e->d_name + n - t, S_TMP) == 0;
        if (n - (tmp ? t : 0) >= sizeof id) continue;
        snprintf(id, sizeof id, "%.*s", (int)(n - (tmp ? t : 0)), e->d_name);
        if (!zf_job_blobs_id_ok(id) || (!tmp && keep(arg, id))) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) gone++;
    }
    closedir(d);
    return gone;
}
