/* The job store's large requests: the SubmitJob bodies of 1 MiB or more
 * that the broker records without decoding them (docs/service.md, "Durable
 * jobs"). They are kept beside the store's database, one file each
 * (DIR/requests/<job id>), or in memory for a store in memory, and are
 * written, read and removed on a thread of their own, so that the broker's
 * loop never waits for that I/O.
 *
 * Design notes
 * - The loop hands a task over (zf_job_blobs_submit) and takes it back done
 *   (zf_job_blobs_next) once the socket zf_job_blobs_socket() is readable;
 *   tasks are done in the order given. Both ends are one inproc PAIR each,
 *   carrying task pointers.
 * - A PUT may first check the body's wire format (task.check), so that a
 *   malformed one is refused before anything is written; this thread,
 *   not the loop, pays for that walk over its bytes.
 * - A body is written to "<id>.tmp", synced, renamed to "<id>" and the
 *   directory synced: once a PUT is done, the body survives the broker's
 *   death and the machine's. A file left by a broker that died before its
 *   job was recorded is removed at the next start (zf_job_blobs_sweep).
 * - A LOAD builds the frame to send, an Envelope{version 1, request_id,
 *   submit_job: the stored bytes}, in one allocation: the body is read (or
 *   copied, in memory) after a header written in place, never decoded.
 *
 * Thread-safety: one thread (the broker's loop) calls these functions. */
#ifndef ZF_BROKER_JOB_BLOBS_H
#define ZF_BROKER_JOB_BLOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>
#include <zmq.h>

#include "common/status.h"
#include "common/transport.h"

/* The largest frame the broker takes from a peer, and so the largest
 * request a job can have stored: a file past it is not one of ours. */
#define ZF_BROKER_MAX_FRAME ((size_t)256 << 20)

typedef struct zf_job_blobs zf_job_blobs_t;

typedef enum zf_job_blob_op {
    ZF_JOB_BLOB_PUT = 1, /* keep bytes[off, off + len) as id's body */
    ZF_JOB_BLOB_LOAD,    /* build id's envelope frame into bytes */
    ZF_JOB_BLOB_DELETE,  /* forget id's body (absent: not an error) */
} zf_job_blob_op_t;

typedef struct zf_job_blob_task {
    zf_job_blob_op_t op;
    char id[64];         /* the job's id: letters, digits, '-' and '_' */
    uint64_t request_id; /* LOAD: the envelope's request id */
    zmq_msg_t bytes;     /* PUT: a frame holding the body; LOAD done: the envelope */
    size_t off, len;     /* PUT: where the body lies in bytes */
    void *tag;           /* the caller's, untouched */
    zf_status_t status;  /* once done: OK, or why it failed */
    /* PUT: when set, the body must be well-formed wire bytes of this
     * message (zf_proto_check_wire) or it is refused, INVALID_ARGUMENT
     * naming what is wrong, and not kept */
    const ProtobufCMessageDescriptor *check;
} zf_job_blob_task_t;

/* A task of op for id (cut to fit), bytes empty; NULL when out of memory.
 * Caller owns it (zf_job_blob_task_free, or zf_job_blobs_submit). */
zf_job_blob_task_t *zf_job_blob_task_new(zf_job_blob_op_t op, const char *id);
/* Frees a task and what it holds; NULL-safe; sets *t_p to NULL. */
void zf_job_blob_task_free(zf_job_blob_task_t **t_p);

/* Starts the thread, for bodies in dir/requests (made when missing), or in
 * memory when dir is NULL; ctx carries its sockets. Caller owns *out.
 * FAILED_PRECONDITION naming the directory when it cannot be made. */
zf_status_t zf_job_blobs_new(zf_zctx_t *ctx, const char *dir, zf_job_blobs_t **out);
/* Does the tasks given so far and stops the thread; the tasks done can
 * still be taken back (zf_job_blobs_next). Idempotent. */
void zf_job_blobs_stop(zf_job_blobs_t *bl);
/* Stops it and frees the tasks done but not taken back (not their tags)
 * and the bodies held in memory; NULL-safe. */
void zf_job_blobs_destroy(zf_job_blobs_t **bl_p);

/* Hands *task over (*task becomes NULL); it comes back from
 * zf_job_blobs_next, done. UNAVAILABLE when the thread cannot take it
 * (then *task stays the caller's). A PUT done comes back INVALID_ARGUMENT
 * only when its body fails its check (task.check); a bad id or range is
 * INTERNAL, an I/O error as the file system says. */
zf_status_t zf_job_blobs_submit(zf_job_blobs_t *bl, zf_job_blob_task_t **task);
/* The next task done, or NULL when none is (does not block). Caller owns it. */
zf_job_blob_task_t *zf_job_blobs_next(zf_job_blobs_t *bl);
/* Readable (ZMQ_POLLIN) while a task done waits to be taken back. */
void *zf_job_blobs_socket(const zf_job_blobs_t *bl);

/* Whether id may name a body (and a file): 1 to 63 letters, digits, '-'
 * and '_'. */
bool zf_job_blobs_id_ok(const char *id);

/* Before zf_job_blobs_new on dir: removes every file of dir/requests whose
 * id keep(arg, id) does not want, and every unfinished write. Returns how
 * many went. */
size_t zf_job_blobs_sweep(const char *dir, bool (*keep)(void *arg, const char *id), void *arg);

#endif
