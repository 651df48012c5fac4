/* Tensor frames: the data plane (docs/service.md, "Data plane"). A tensor
 * travels as one two-frame ZeroMQ message:
 *
 *   frame 1  a msgpack map {"v": 1, "key": str, "step": int, "dtype": int,
 *            "shape": [int, ...], "dead": bool, "len": int}
 *   frame 2  the payload, exactly "len" bytes
 *
 * Payload encodings
 * - Fixed-size dtypes: the tensor's bytes in host (little-endian) order,
 *   sent without copying (zmq_msg_init_data; ZeroMQ holds a tensor
 *   reference until it has written them) and received without copying (the
 *   received zmq_msg_t backs the tensor's buffer).
 * - STRING and RESOURCE (a resource is carried as its handle string): for
 *   each element in order, its length as a 64-bit little-endian integer,
 *   then that many bytes. These are always copied on both sides.
 * - A dead tensor: an empty payload, "len" 0; "dtype" and "shape" describe
 *   the tensor when the sender had one, else dtype 0 (INVALID) and shape [].
 *
 * When the receiver copies a fixed-size payload: only when its bytes are
 * not aligned for the dtype. ZeroMQ (4.3) decodes tcp and ipc frames into
 * an 8 KiB receive batch and gives a frame that does not fit in what is
 * left of it a heap block of its own, 8-byte aligned (enough for every
 * dtype): tensors over 8 KiB are never copied, while smaller ones may sit
 * at any offset inside the batch (or, up to 33 bytes, inside the zmq_msg_t
 * itself) and are copied when misaligned. Over inproc the payload is the
 * sender's own memory. zf_tensor_frame_t.zero_copy says which happened.
 *
 * Validation: every header field is checked before anything is allocated
 * for it (version, key length 1..ZF_TENSOR_FRAME_MAX_KEY, rank <=
 * ZF_MAX_RANK, dims >= 0, dtype a value type, "len" equal to what dtype and
 * shape need, without overflow, and to the payload frame's size); unknown
 * map keys are ignored so later versions can add fields. Any violation is
 * INVALID_ARGUMENT naming the field, and the whole message is drained.
 *
 * CUDA IPC offers (same-host GPU to GPU). Instead of the bytes, a header
 * may carry "ipc": a map {"handle": bin 64, "offset": int, "nbytes": int,
 * "device": int, "id": int, "host": str} naming the sender's device memory
 * (executor/devices/gpu.h, zf_gpu_ipc_handle_t), the offer's id and the sender's
 * host id. Such a tensor is live, of a fixed-size dtype, "len" is 0 (the
 * payload frame is empty) and "nbytes" is exactly what dtype and shape
 * need. The receiver answers on its own push socket with a reply message,
 * a map {"v": 1, "reply": id, "step": int, "accepted": bool, "why": str}
 * and an empty payload frame: accepted once it has copied the memory and
 * closed its mapping (the sender may then drop the tensor), refused (the
 * sender sends the bytes instead) when it cannot open the handle.
 *
 * Shared-memory offers (same-host host memory). A header may carry "shm"
 * instead: a map {"name": str, "offset": int, "nbytes": int, "id": int,
 * "host": str, "rel": int} naming a POSIX shared memory segment of the
 * sender (its arena, executor/rendezvous/remote.h), where the tensor's
 * bytes lie at offset, the offer's id, the sender's host id and,
 * optionally ("rel", 8-byte aligned, absent or 0: none), the offset of the
 * block's release word. As for "ipc": a live tensor of a fixed-size dtype,
 * "len" 0, an empty payload frame, "nbytes" exactly what dtype and shape
 * need; at most one of "ipc" and "shm". The receiver answers a refusal
 * (it cannot map the segment; the sender then sends the bytes) with the
 * same reply message; an acceptance, once it has dropped the mapped
 * tensor, it answers by storing the offer's id into the release word
 * (release order) when the offer names one, else with an accepting reply
 * message. Whether the name, offset, size and release word make sense for
 * a segment is the receiver's check, not the codec's.
 *
 * Chunks (large tensors over an encrypting socket). CurveZMQ encrypts
 * and decrypts each frame whole, on the sender's and the receiver's I/O
 * thread in turn, so one 64 MiB frame is encrypted entirely before its
 * first byte leaves and decrypted only once its last has arrived. Over a
 * socket with CurveZMQ keys (zf_socket_encrypts()) a live tensor of a
 * fixed-size dtype whose payload is larger than ZF_TENSOR_FRAME_CURVE_CHUNK
 * is sent as one message of 1 + N frames instead: frame 1 is the header
 * above with "chunk": C (bytes, ZF_TENSOR_FRAME_MIN_CHUNK <= C < "len"),
 * frames 2..N+1 the payload in order, N = ceil(len / C), each exactly C
 * bytes but the last, which holds the rest (1 to C bytes). The sender
 * makes every frame before it sends the first, so a failure (out of
 * memory) leaves nothing of the message on the socket. The chunks are
 * encrypted, sent and decrypted one after another, so the three overlap.
 * The receiver takes every frame and checks the count and each size
 * before it allocates the tensor, then copies the chunks into it (the one
 * copy of this path: CurveZMQ gives each decrypted frame a buffer of its
 * own); a message that does not match its header exactly is refused whole
 * ("chunk I of N has B bytes; expected C", "the payload comes in M
 * chunks; ..."). A receiver without chunks refuses such a message by its
 * frame count. "chunk" is never in a batch entry nor with "ipc" or "shm".
 *
 * Batches (small tensors sent together, executor/rendezvous/remote.h). One
 * message of one frame carries several tensors, in a compact binary layout
 * (every integer little-endian) rather than msgpack: what each entry costs
 * to write and read is what bounds the rate of small tensors, and one
 * frame moves through ZeroMQ faster than two.
 *
 *   entries  the ZF_TENSOR_FRAME_BATCH_PREFIX bytes c1 'Z' 'B' 03 (0xc1 is
 *            a byte msgpack never uses, so no single tensor's header starts
 *            so; 03 is the batch layout's version), the entry count n
 *            (u32, 1 to ZF_TENSOR_FRAME_MAX_BATCH), the byte where the
 *            entries end (u32, from the frame's start) and a zero u32; then
 *            n entries, each
 *              flags  u8   bit 0: dead; bit 1: the key's first "plen" bytes
 *                          become the batch's next key prefix; no other bit
 *              dtype  u8   as "dtype" above
 *              rank   u8   0 to ZF_MAX_RANK
 *              prefix u8   0: none; i: the key starts with prefix i (the
 *                          i-th defined, in order; never with bit 1)
 *              klen   u16  the key bytes this entry holds
 *              plen   u16  with bit 1: 1 to klen; else 0
 *              step   i64
 *              len    u64  its payload's bytes, as "len" above
 *              dims   rank i64
 *              key    klen bytes: the key is prefix i's bytes then these
 *            ending exactly where the prefix says. A batch defines at most
 *            ZF_TENSOR_FRAME_BATCH_PREFIXES prefixes. A sender shares the
 *            "src;incarnation;dst;" start of rendezvous keys this way, so
 *            a key costs its edge name and frame only.
 *   payloads the frame ends with the entries when every payload is empty;
 *            else zero bytes up to the next multiple of
 *            ZF_TENSOR_FRAME_BATCH_ALIGN, then the payloads in the entries'
 *            order, each exactly its "len" bytes, the first at offset 0 of
 *            this part and each other at the first multiple of
 *            ZF_TENSOR_FRAME_BATCH_ALIGN at or after the end of the one
 *            before (zero bytes between), the frame ending with the last.
 *
 * The receiver's tensors of fixed-size dtypes are views of the frame (all
 * of it stays while any of them does; strings are copied). The message as
 * a whole must be sound: one frame, the entries at most
 * ZF_TENSOR_FRAME_MAX_BATCH_HEADER bytes, the count in range, every entry
 * within them and the last ending where the prefix says, the payloads at
 * most ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD bytes, so laid out that they end
 * exactly where the frame does (else no payload could be located with
 * certainty), and the keys, prefixes included, taking at most
 * ZF_TENSOR_FRAME_MAX_BATCH_HEADER bytes in all; or the whole message is
 * refused. Batches of the earlier layouts (1: msgpack headers; 2: the
 * same entries in one frame and the payloads in a second) are refused by
 * name. An entry that fails its own checks
 * (flags, a prefix used before it is defined, and every check of a single
 * header's key, dtype, shape and "len", the string encoding of its
 * payload) is refused alone, with the reason, its step and its key when
 * that could be read; the others are delivered. */
#ifndef ZF_TENSOR_FRAME_H
#define ZF_TENSOR_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"
#include "common/transport.h"

#define ZF_TENSOR_FRAME_VERSION 1
#define ZF_TENSOR_FRAME_MAX_KEY 4096
/* A larger header frame is rejected before it is parsed (a valid one is
 * under 4.5 KiB; the rest leaves room for fields added later). */
#define ZF_TENSOR_FRAME_MAX_HEADER   65536
#define ZF_TENSOR_FRAME_IPC_HANDLE   64
#define ZF_TENSOR_FRAME_MAX_HOST     320 /* "hostname:boot id" */
#define ZF_TENSOR_FRAME_MAX_WHY      512
#define ZF_TENSOR_FRAME_MAX_SHM_NAME 63 /* a POSIX shared memory name */
/* A batch message (see below): at most this many entries, this many
 * bytes of entries, this many in any one entry of it (as a single
 * header), and this many of payloads. */
#define ZF_TENSOR_FRAME_MAX_BATCH         4096
#define ZF_TENSOR_FRAME_MAX_BATCH_HEADER  (4 << 20)
#define ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD (4 << 20)
/* A batch's frame: its magic and layout version (see below), the bytes
 * before its entries, and the key prefixes it may define. */
#define ZF_TENSOR_FRAME_BATCH_VERSION  3
#define ZF_TENSOR_FRAME_BATCH_PREFIX   16
#define ZF_TENSOR_FRAME_BATCH_PREFIXES 255
/* Chunked payloads (see "Chunks" above): the smallest chunk a receiver
 * takes, and the chunk a sender uses on an encrypting (CurveZMQ) socket
 * for any fixed-size payload larger than it. */
#define ZF_TENSOR_FRAME_MIN_CHUNK   (64 << 10)
#define ZF_TENSOR_FRAME_CURVE_CHUNK (1 << 20)
/* A batch's payloads start on multiples of this (every dtype's alignment). */
#define ZF_TENSOR_FRAME_BATCH_ALIGN 8
/* Room for any encoded header: the map, seven names, a 4096-byte key in a
 * str32, sixteen dims and the integers at 9 bytes each, the "ipc" map with
 * its host, and spare. Replies are far smaller. */
#define ZF_TENSOR_FRAME_HEADER_MAX_ENCODED 5120

/* The "ipc" field: a device tensor offered by CUDA IPC handle. */
typedef struct zf_tensor_frame_ipc {
    uint8_t handle[ZF_TENSOR_FRAME_IPC_HANDLE]; /* cudaIpcMemHandle_t */
    uint64_t offset;                            /* of the tensor in the exported allocation */
    uint64_t nbytes;                            /* exactly what dtype and shape need, > 0 */
    int32_t device;                             /* the sender's CUDA ordinal, >= 0 */
    uint64_t id;                                /* the sender's offer id, > 0 */
    char host[ZF_TENSOR_FRAME_MAX_HOST + 1];    /* the sender's host id, non-empty */
} zf_tensor_frame_ipc_t;

/* The "shm" field: a host tensor offered in a shared memory segment. */
typedef struct zf_tensor_frame_shm {
    char name[ZF_TENSOR_FRAME_MAX_SHM_NAME + 1]; /* the segment's name, non-empty */
    uint64_t offset;                             /* of the tensor in the segment */
    uint64_t nbytes;                             /* exactly what dtype and shape need, > 0 */
    uint64_t id;                                 /* the sender's offer id, > 0 */
    char host[ZF_TENSOR_FRAME_MAX_HOST + 1];     /* the sender's host id, non-empty */
    uint64_t rel; /* the release word's offset in the segment, 8-aligned; 0: none */
} zf_tensor_frame_shm_t;

/* The answer to an IPC or shared-memory offer. */
typedef struct zf_tensor_frame_reply {
    uint64_t id; /* the offer's, > 0 */
    int64_t step_id;
    bool accepted;                         /* false: refused, send the bytes instead */
    char why[ZF_TENSOR_FRAME_MAX_WHY + 1]; /* a refusal's reason; may be empty */
} zf_tensor_frame_reply_t;

/* Frame 1, decoded. A value type (about 4.3 KiB: it holds the key). */
typedef struct zf_tensor_frame_header {
    char key[ZF_TENSOR_FRAME_MAX_KEY + 1]; /* NUL-terminated, no NUL inside */
    int64_t step_id;
    zf_dtype_t dtype; /* ZF_INVALID only for a dead tensor sent without one */
    zf_shape_t shape; /* fully defined */
    bool is_dead;
    uint64_t len;   /* payload bytes */
    uint64_t chunk; /* sent in chunks of this many bytes ("chunk"); 0: one payload frame */
    bool has_ipc;   /* an IPC offer: ipc is set and len is 0 */
    zf_tensor_frame_ipc_t ipc;
    bool has_shm; /* a shared-memory offer: shm is set and len is 0 */
    zf_tensor_frame_shm_t shm;
} zf_tensor_frame_header_t;

/* A received offer: the tensor it describes and the IPC handle, or (is_shm)
 * the shared memory segment. */
typedef struct zf_tensor_frame_offer {
    zf_dtype_t dtype;
    zf_shape_t shape;
    zf_tensor_frame_ipc_t ipc;
    bool is_shm;
    zf_tensor_frame_shm_t shm;
} zf_tensor_frame_offer_t;

/* One entry of a received batch. */
typedef struct zf_tensor_frame_entry {
    char *key;       /* NULL when a refused entry's key could not be read */
    size_t key_len;  /* strlen(key) */
    int64_t step_id; /* when has_step */
    bool has_step;   /* false only for a refused entry whose step could not be read */
    bool is_dead;
    zf_tensor_t *tensor; /* NULL when dead (and sent without one) or refused */
    zf_status_t error;   /* OK, or why the entry is refused (INVALID_ARGUMENT) */
} zf_tensor_frame_entry_t;

/* A received batch: n entries (>= 1), in the order they were sent. */
typedef struct zf_tensor_frame_batch {
    size_t n;
    zf_tensor_frame_entry_t *entries;
    char *keys; /* one block holding every entry's key */
} zf_tensor_frame_batch_t;

/* Frees the entries (their keys, tensor references and errors) and zeroes
 * *b. NULL-safe. */
void zf_tensor_frame_batch_clear(zf_tensor_frame_batch_t *b);

/* A received message. key, the reference in tensor, offer, reply and batch
 * are owned; release them with zf_tensor_frame_clear(). */
typedef struct zf_tensor_frame {
    char *key;
    int64_t step_id;
    bool is_dead;
    zf_tensor_t *tensor;            /* NULL when is_dead, or for an offer or a reply */
    bool zero_copy;                 /* tensor's buffer is the received ZeroMQ message */
    zf_tensor_frame_offer_t *offer; /* an IPC offer, which has no tensor; else NULL */
    zf_tensor_frame_reply_t *reply; /* a reply message (key NULL, nothing else set); else NULL */
    zf_tensor_frame_batch_t *batch; /* a batch message (nothing else set); else NULL */
} zf_tensor_frame_t;

/* Frees the key, offer, reply and batch, drops the tensor reference and
 * zeroes *f. NULL-safe. */
void zf_tensor_frame_clear(zf_tensor_frame_t *f);

/* A batch being built on the sending side: entries encoded as they are
 * added (the payload bytes copied), then sent as one message. Zero it
 * (= {0}) to start; zf_tensor_frame_batch_out_send() or _clear() empties
 * it again. */
typedef struct zf_tensor_frame_batch_out {
    uint8_t *head; /* ZF_TENSOR_FRAME_BATCH_PREFIX bytes left free, then the entries */
    size_t head_len, head_cap;
    uint8_t *payload;
    size_t payload_len, payload_cap;
    uint32_t n;
    unsigned prefixes;            /* key prefixes defined */
    size_t prefix_at, prefix_len; /* the last one, in head */
    size_t keys_len;              /* the keys' bytes once read, each NUL-terminated */
} zf_tensor_frame_batch_out_t;

/* Appends t (borrowed: its bytes are copied now; may be NULL when is_dead)
 * under key for step_id when its payload is at most max_payload bytes and
 * the batch stays within what a receiver takes (its payloads within
 * ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD, its entries and the keys once read
 * within ZF_TENSOR_FRAME_MAX_BATCH_HEADER each); *added says whether it was (if
 * not, send it alone, or send the batch and add it again). Errors: those
 * of zf_tensor_frame_send (for a bad key, a device tensor, VARIANT),
 * RESOURCE_EXHAUSTED past ZF_TENSOR_FRAME_MAX_BATCH entries (the caller
 * sends the batch before); nothing was added then. */
zf_status_t zf_tensor_frame_batch_out_add(zf_tensor_frame_batch_out_t *b, const char *key,
                                          int64_t step_id, const zf_tensor_t *t, bool is_dead,
                                          uint64_t max_payload, bool *added);

/* Sends b's entries (at least one) as one batch message, and empties b,
 * sent or not: the entries go on where they are, the payloads are copied
 * after them once, into the one frame (zf__tensor_frame_batch_out_seal()).
 * Blocks as zf_tensor_frame_send.
 * Errors: INVALID_ARGUMENT for an empty batch, those of zf_tensor_frame_send
 * (nothing was sent then). */
zf_status_t zf_tensor_frame_batch_out_send(zf_socket_t *s, zf_tensor_frame_batch_out_t *b);

/* Frees b's buffers and zeroes it. */
void zf_tensor_frame_batch_out_clear(zf_tensor_frame_batch_out_t *b);

/* Sends t under key for step_id as one two-frame message (PUSH, DEALER or
 * PAIR sockets). t is borrowed; for a fixed-size dtype the send takes its
 * own reference, which ZeroMQ drops (from its I/O thread) once the bytes
 * are written or discarded, so the caller may drop its reference at once
 * but must not modify the tensor afterwards. t may be NULL when is_dead.
 * Blocks while the send queue is full, up to the socket's send timeout.
 * Errors: INVALID_ARGUMENT for a bad key or a missing live tensor;
 * FAILED_PRECONDITION for a live tensor in device memory; UNIMPLEMENTED for
 * VARIANT; DEADLINE_EXCEEDED when the send timed out; CANCELLED when the
 * context is terminating; RESOURCE_EXHAUSTED. On error nothing was sent and
 * the send's tensor reference is already dropped. */
zf_status_t zf_tensor_frame_send(zf_socket_t *s, const char *key, int64_t step_id, zf_tensor_t *t,
                                 bool is_dead);

/* Test hook: the next send in chunks fails as if out of memory when it
 * makes chunk `at` (1-based; 0: none), after the chunks before it were
 * made and before any frame was sent, as every failure of that step is:
 * RESOURCE_EXHAUSTED "sending tensor '<key>' (step N): out of memory
 * making chunk I of M; nothing was sent". */
void zf__tensor_frame_fail_chunk(int at);

/* Sends an IPC offer (h->has_ipc set, h->len 0) and its empty payload
 * frame. The sender must keep the offered memory alive until the reply,
 * or until the step ends. Errors as zf_tensor_frame_send. */
zf_status_t zf_tensor_frame_send_ipc(zf_socket_t *s, const zf_tensor_frame_header_t *h);

/* Sends a shared-memory offer (h->has_shm set, h->len 0) and its empty
 * payload frame. The sender keeps the segment's bytes until the reply, or
 * until the step ends. Errors as zf_tensor_frame_send. */
zf_status_t zf_tensor_frame_send_shm(zf_socket_t *s, const zf_tensor_frame_header_t *h);

/* Sends a reply message. Errors: INVALID_ARGUMENT for id 0 or a why that
 * is too long, and those of zf_tensor_frame_send. */
zf_status_t zf_tensor_frame_send_reply(zf_socket_t *s, const zf_tensor_frame_reply_t *r);

/* Receives one message, tensor, IPC offer, reply or batch, waiting up to
 * timeout_ms (< 0: no limit). A batch whose entries are refused one by
 * one is still OK: see each entry's error.
 * On OK *frame is filled and owned by the caller. On error *frame is empty
 * and the whole message has been drained, so the socket is ready for the
 * next one: DEADLINE_EXCEEDED when nothing arrived, INVALID_ARGUMENT naming
 * the bad frame count or header field, CANCELLED when the context is
 * terminating, RESOURCE_EXHAUSTED. */
zf_status_t zf_tensor_frame_recv(zf_socket_t *s, int timeout_ms, zf_tensor_frame_t *frame);

/* ---- pure functions on buffers (the parser, fuzzable without sockets) ---- */

/* Fills *out for sending t (see zf_tensor_frame_send for the arguments and
 * errors); "len" is the size of the payload encoding above. */
zf_status_t zf_tensor_frame_header_from_tensor(const char *key, int64_t step_id,
                                               const zf_tensor_t *t, bool is_dead,
                                               zf_tensor_frame_header_t *out);

/* As zf_tensor_frame_header_from_tensor(), setting only the fields that
 * encoding and the checks read (for tensor_frame.c, which reuses *out). */
zf_status_t zf__tensor_frame_header_fill(const char *key, int64_t step_id, const zf_tensor_t *t,
                                         bool is_dead, zf_tensor_frame_header_t *out);

/* For the codec's own files: whether dtype's payload is the string
 * encoding; the key check (INVALID_ARGUMENT when len is 0, or more than
 * ZF_TENSOR_FRAME_MAX_KEY, key then not read, or key holds a zero byte),
 * its length part alone, and a C string key's length checked alike (and
 * missing when NULL);
 * the checks of zf_tensor_frame_check_header() but the key's; writes the
 * string encoding of t into out (the header's "len" bytes). */
bool zf__tensor_frame_holds_strings(zf_dtype_t dtype);
zf_status_t zf__tensor_frame_check_key(const char *key, size_t len);
zf_status_t zf__tensor_frame_check_key_len(size_t len);
zf_status_t zf__tensor_frame_key_len(const char *key, size_t *len);
zf_status_t zf__tensor_frame_check_fields(const zf_tensor_frame_header_t *h);
void zf__tensor_frame_write_strings(const zf_tensor_t *t, uint8_t *out);
/* As zf__tensor_frame_header_fill() without the key (named in errors
 * only, neither checked nor copied): for a batch, which writes the key
 * itself. */
zf_status_t zf__tensor_frame_fill_fields(const char *key, int64_t step_id, const zf_tensor_t *t,
                                         bool is_dead, zf_tensor_frame_header_t *out);
/* b's entries and payloads as the one frame of a batch message, handed
 * over in *frame (*len bytes; the caller frees it) and b emptied. Errors:
 * RESOURCE_EXHAUSTED (b emptied too). */
zf_status_t zf__tensor_frame_batch_out_seal(zf_tensor_frame_batch_out_t *b, uint8_t **frame,
                                            size_t *len);

/* Fills *out for an IPC offer of a dtype/shape tensor described by ipc
 * (copied) and checks it. Errors: INVALID_ARGUMENT naming the field. */
zf_status_t zf_tensor_frame_header_for_ipc(const char *key, int64_t step_id, zf_dtype_t dtype,
                                           const zf_shape_t *shape,
                                           const zf_tensor_frame_ipc_t *ipc,
                                           zf_tensor_frame_header_t *out);

/* Fills *out for a shared-memory offer of a dtype/shape tensor described
 * by shm (copied) and checks it. Errors: INVALID_ARGUMENT naming the
 * field. */
zf_status_t zf_tensor_frame_header_for_shm(const char *key, int64_t step_id, zf_dtype_t dtype,
                                           const zf_shape_t *shape,
                                           const zf_tensor_frame_shm_t *shm,
                                           zf_tensor_frame_header_t *out);

/* The checks every header passes on both sides: key, dtype, shape, "len",
 * "ipc" and "shm" as described above. Errors: INVALID_ARGUMENT naming the
 * field. */
zf_status_t zf_tensor_frame_check_header(const zf_tensor_frame_header_t *h);

/* Encodes frame 1 into buf (cap bytes; ZF_TENSOR_FRAME_HEADER_MAX_ENCODED
 * always suffices) and sets *len. Errors: INVALID_ARGUMENT from
 * zf_tensor_frame_check_header, or when cap is too small. */
zf_status_t zf_tensor_frame_encode_header(const zf_tensor_frame_header_t *h, uint8_t *buf,
                                          size_t cap, size_t *len);

/* Decodes and checks frame 1 (len bytes at bytes). Allocates nothing that
 * outlives the call and at most a few times len while parsing. Errors:
 * INVALID_ARGUMENT "tensor frame header: ..." naming what is wrong (a
 * reply message is "tensor frame header: a reply, not a tensor"). */
zf_status_t zf_tensor_frame_decode_header(const void *bytes, size_t len,
                                          zf_tensor_frame_header_t *out);

/* Frame 1 of a reply message: checked (id > 0, why at most
 * ZF_TENSOR_FRAME_MAX_WHY bytes without a zero byte), encoded, decoded.
 * Errors: INVALID_ARGUMENT naming the field ("tensor frame reply: ..."
 * when decoding; a tensor header is "... a tensor, not a reply"). */
zf_status_t zf_tensor_frame_encode_reply(const zf_tensor_frame_reply_t *r, uint8_t *buf, size_t cap,
                                         size_t *len);
zf_status_t zf_tensor_frame_decode_reply(const void *bytes, size_t len,
                                         zf_tensor_frame_reply_t *out);

/* Decodes frame 1 as whichever it is: *is_reply tells which of *h and *r
 * was filled (*h is zeroed for a reply; *r is untouched for a tensor, so
 * the common case costs nothing more; both are zeroed on error). Errors
 * as the two above. */
zf_status_t zf_tensor_frame_decode_any(const void *bytes, size_t len, zf_tensor_frame_header_t *h,
                                       zf_tensor_frame_reply_t *r, bool *is_reply);

/* Whether len bytes at bytes begin a batch (its magic; a batch of an
 * earlier layout too, which decoding refuses by name). */
bool zf_tensor_frame_is_batch(const void *bytes, size_t len);

/* Writes the ZF_TENSOR_FRAME_BATCH_PREFIX bytes of a batch of n entries
 * that end at byte entries_len. */
void zf_tensor_frame_batch_prefix(uint32_t n, uint32_t entries_len, uint8_t *out);

/* Where a received batch frame of len bytes divides: its entries are its
 * first *entries_len bytes, its payloads start at *payload_at (len when
 * there are none). Errors: INVALID_ARGUMENT "tensor frame batch: ..." for
 * an earlier layout (by name), a frame that does not start as a batch, an
 * end of the entries outside the frame, padding that is not zero or is
 * cut short. */
zf_status_t zf_tensor_frame_batch_split(const void *frame, size_t len, size_t *entries_len,
                                        size_t *payload_at);

/* Where a batch's payload that follows one ending at byte end starts. */
size_t zf_tensor_frame_batch_offset(size_t end);

/* Decodes a batch message's two parts (zf_tensor_frame_batch_split()):
 * its entries (head, head_len bytes, the prefix first) and its payloads
 * (payload, borrowed; NULL when empty). On OK *out holds every entry, each
 * decoded or refused with its reason ("entry I of N: ..."); tensors of
 * fixed-size dtypes are views of payload (of a copy when payload is not
 * ZF_TENSOR_FRAME_BATCH_ALIGN-aligned), so each keeps it alive, made
 * together in one block (zf_tensor_views_new) that each keeps alive too. Errors
 * (nothing in *out): INVALID_ARGUMENT "tensor frame batch: ..." when the
 * message as a whole is unsound (see above); RESOURCE_EXHAUSTED. */
zf_status_t zf_tensor_frame_decode_batch(const void *head, size_t head_len, zf_buffer_t *payload,
                                         zf_tensor_frame_batch_t *out);

/* Builds a tensor from a payload by copying it: fixed-size bytes, or the
 * string encoding above parsed element by element. *out is NULL for a dead
 * tensor; otherwise the caller owns the reference. Errors: INVALID_ARGUMENT
 * when len differs from h->len, the string encoding is malformed (named by
 * element) or h is an IPC offer; RESOURCE_EXHAUSTED. */
zf_status_t zf_tensor_frame_decode_payload(const zf_tensor_frame_header_t *h, const void *bytes,
                                           size_t len, zf_tensor_t **out);

#endif
