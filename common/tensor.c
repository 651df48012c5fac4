/* Tensors: shapes, reference-counted buffers with free callbacks, typed
 * tensors over them, and 16-bit float conversions. */
#include "common/tensor.h"

#include "common/host_memory.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes ------------------------------------------------------------- */

static bool s_shape_args_valid(int rank, const int64_t *dims)
{
    if (rank == -1) return true;
    if (rank < 0 || rank > ZF_MAX_RANK || (rank > 0 && !dims)) return false;
    for (int i = 0; i < rank; i++)
        if (dims[i] < -1) return false;
    return true;
}

zf_status_t zf_shape_make(int rank, const int64_t *dims, zf_shape_t *out)
{
    if (rank > ZF_MAX_RANK)
        return zf_invalid_argument("rank %d exceeds the maximum rank %d", rank, ZF_MAX_RANK);
    if (rank < -1) return zf_invalid_argument("rank %d is negative", rank);
    if (rank > 0 && !dims) return zf_invalid_argument("rank %d shape has no dims", rank);
    for (int i = 0; i < rank; i++)
        if (dims[i] < -1)
            return zf_invalid_argument(
                "dim %d of the shape is %" PRId64 " (must be >= 0, or -1 for unknown)", i, dims[i]);
    *out = zf_shape_of(rank, dims);
    return ZF_STATUS_OK;
}

zf_shape_t zf_shape_of(int rank, const int64_t *dims)
{
    if (!s_shape_args_valid(rank, dims)) { /* a programmer error: abort even without asserts */
        fprintf(stderr, "zf_shape_of: invalid shape of rank %d\n", rank);
        abort();
    }
    zf_shape_t s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    return s;
}

zf_shape_t zf_shape_scalar(void)
{
    return zf_shape_of(0, NULL);
}

zf_shape_t zf_shape_unknown(void)
{
    return zf_shape_of(-1, NULL);
}

bool zf_shape_is_fully_defined(const zf_shape_t *s)
{
    if (s->rank < 0 || s->rank > ZF_MAX_RANK) return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0) return false;
    return true;
}

zf_status_t zf_shape_num_elements(const zf_shape_t *s, int64_t *out)
{
    char buf[ZF_SHAPE_STRING_MAX];
    if (!zf_shape_is_fully_defined(s))
        return zf_invalid_argument("shape %s is not fully defined",
                                   zf_shape_to_string(s, buf, sizeof buf));
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] == 0) {
            *out = 0;
            return ZF_STATUS_OK;
        }
        if (!overflow && n > INT64_MAX / s->dims[i]) overflow = true;
        if (!overflow) n *= s->dims[i];
    }
    if (overflow)
        return zf_invalid_argument("shape %s has more than 2^63-1 elements",
                                   zf_shape_to_string(s, buf, sizeof buf));
    *out = n;
    return ZF_STATUS_OK;
}

bool zf_shape_equal(const zf_shape_t *a, const zf_shape_t *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

char *zf_shape_to_string(const zf_shape_t *s, char *buf, size_t cap)
{
    if (cap == 0) return buf;
    if (s->rank < 0 || s->rank > ZF_MAX_RANK) {
        snprintf(buf, cap, "<unknown>");
        return buf;
    }
    size_t at = 0;
    int n = snprintf(buf, cap, "[");
    at = (size_t)n < cap ? (size_t)n : cap - 1;
    for (int i = 0; i < s->rank && at + 1 < cap; i++) {
        const char *sep = i ? "," : "";
        if (s->dims[i] < 0)
            n = snprintf(buf + at, cap - at, "%s?", sep);
        else
            n = snprintf(buf + at, cap - at, "%s%" PRId64, sep, s->dims[i]);
        if (n < 0) break;
        at += (size_t)n < cap - at ? (size_t)n : cap - at - 1;
    }
    if (at + 1 < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

zf_status_t zf_shape_from_proto(const Tensorflow__TensorShapeProto *proto, zf_shape_t *out)
{
    if (!proto) {
        *out = zf_shape_scalar();
        return ZF_STATUS_OK;
    }
    if (proto->unknown_rank) {
        *out = zf_shape_unknown();
        return ZF_STATUS_OK;
    }
    if (proto->n_dim > ZF_MAX_RANK)
        return zf_invalid_argument("shape rank %zu exceeds the maximum rank %d", proto->n_dim,
                                   ZF_MAX_RANK);
    int64_t dims[ZF_MAX_RANK];
    for (size_t i = 0; i < proto->n_dim; i++) {
        if (!proto->dim[i]) return zf_invalid_argument("shape dim %zu is missing", i);
        dims[i] = proto->dim[i]->size;
    }
    return zf_shape_make((int)proto->n_dim, dims, out);
}

zf_status_t zf_shape_to_proto(const zf_shape_t *s, Tensorflow__TensorShapeProto **out)
{
    Tensorflow__TensorShapeProto *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("a TensorShapeProto");
    tensorflow__tensor_shape_proto__init(p);
    if (s->rank < 0) {
        p->unknown_rank = 1;
        *out = p;
        return ZF_STATUS_OK;
    }
    if (s->rank > 0) {
        p->dim = calloc((size_t)s->rank, sizeof *p->dim);
        if (!p->dim) goto oom;
        for (int i = 0; i < s->rank; i++) {
            Tensorflow__TensorShapeProto__Dim *d = malloc(sizeof *d);
            if (!d) goto oom;
            tensorflow__tensor_shape_proto__dim__init(d);
            d->size = s->dims[i];
            p->dim[i] = d;
            p->n_dim = (size_t)i + 1;
        }
    }
    *out = p;
    return ZF_STATUS_OK;
oom:
    protobuf_c_message_free_unpacked(&p->base, NULL);
    return zf_out_of_memory("a TensorShapeProto");
}

/* ---- buffers ------------------------------------------------------------ */

struct zf_buffer {
    atomic_int refs;
    void *data;
    size_t size;
    zf_free_fn free_fn;
    void *hint;
    zf_memory_kind_t kind;
    int device_id;
    bool holds_strings; /* data is an array of zf_tstring_t whose bytes we own */
    atomic_uint_fast64_t version;
};

static atomic_size_t s_alloc_limit;   /* 0: the default */
static atomic_size_t s_default_limit; /* physical memory, computed once */

static size_t s_default_alloc_limit(void)
{
    size_t cached = atomic_load_explicit(&s_default_limit, memory_order_relaxed);
    if (cached) return cached;
    uint64_t bytes = (uint64_t)1 << 40;
    size_t physical = zf_physical_memory();
    if (physical > 0 && (uint64_t)physical < bytes) bytes = (uint64_t)physical;
    atomic_store_explicit(&s_default_limit, (size_t)bytes, memory_order_relaxed);
    return (size_t)bytes;
}

size_t zf_buffer_alloc_limit(void)
{
    size_t limit = atomic_load_explicit(&s_alloc_limit, memory_order_relaxed);
    return limit ? limit : s_default_alloc_limit();
}

void zf_buffer_set_alloc_limit(size_t bytes)
{
    atomic_store(&s_alloc_limit, bytes);
}

static void s_free_host(void *data, void *hint)
{
    (void)data;
    zf_host_memory_free(hint);
}

/* From host_memory: large blocks come from a cache of mapped blocks, or
 * fresh from the kernel (zero without a memset pass). */
static zf_status_t s_buffer_alloc(size_t size, bool holds_strings, bool zeroed, zf_buffer_t **out)
{
    size_t limit = zf_buffer_alloc_limit();
    if (size > limit)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "allocation of %zu bytes exceeds the limit of %zu bytes", size, limit);
    void *hint = NULL;
    void *p = zf_host_memory_alloc(size, ZF_BUFFER_ALIGN, zeroed || holds_strings, &hint);
    if (!p) return zf_status_new(ZF_RESOURCE_EXHAUSTED, "out of memory allocating %zu bytes", size);
    zf_status_t s = zf_buffer_wrap(p, size, s_free_host, hint, out);
    if (!zf_ok(s)) {
        zf_host_memory_free(hint);
        return s;
    }
    (*out)->holds_strings = holds_strings;
    return ZF_STATUS_OK;
}

zf_status_t zf_buffer_new(size_t size, zf_buffer_t **out)
{
    return s_buffer_alloc(size, false, true, out);
}

zf_status_t zf_buffer_new_uninit(size_t size, zf_buffer_t **out)
{
    return s_buffer_alloc(size, false, false, out);
}

zf_status_t zf_buffer_wrap(void *data, size_t size, zf_free_fn free_fn, void *hint,
                           zf_buffer_t **out)
{
    return zf_buffer_wrap_memory(data, size, ZF_MEMORY_HOST, 0, free_fn, hint, out);
}

zf_status_t zf_buffer_wrap_memory(void *data, size_t size, zf_memory_kind_t kind, int device_id,
                                  zf_free_fn free_fn, void *hint, zf_buffer_t **out)
{
    if (!data && size > 0) return zf_invalid_argument("buffer of %zu bytes has no data", size);
    if (kind != ZF_MEMORY_HOST && kind != ZF_MEMORY_HOST_PINNED && kind != ZF_MEMORY_DEVICE)
        return zf_invalid_argument("unknown memory kind %d", (int)kind);
    zf_buffer_t *b = malloc(sizeof *b);
    if (!b) return zf_out_of_memory("a buffer");
    atomic_init(&b->refs, 1);
    atomic_init(&b->version, 0);
    b->data = data;
    b->size = size;
    b->free_fn = free_fn;
    b->hint = hint;
    b->kind = kind;
    b->device_id = kind == ZF_MEMORY_DEVICE ? device_id : 0;
    b->holds_strings = false;
    *out = b;
    return ZF_STATUS_OK;
}

zf_buffer_t *zf_buffer_ref(zf_buffer_t *buf)
{
    assert(buf);
    int before = atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
    assert(before > 0);
    (void)before;
    return buf;
}

void zf_buffer_unref(zf_buffer_t **buf_p)
{
    if (!buf_p || !*buf_p) return;
    zf_buffer_t *b = *buf_p;
    *buf_p = NULL;
    int before = atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel);
    assert(before > 0);
    if (before != 1) return;
    if (b->holds_strings) {
        zf_tstring_t *strs = b->data;
        size_t n = b->size / sizeof(zf_tstring_t);
        for (size_t i = 0; i < n; i++) free(strs[i].data);
    }
    if (b->free_fn) b->free_fn(b->data, b->hint);
    free(b);
}

void *zf_buffer_data(const zf_buffer_t *buf)
{
    return buf->data;
}

size_t zf_buffer_size(const zf_buffer_t *buf)
{
    return buf->size;
}

zf_memory_kind_t zf_buffer_memory_kind(const zf_buffer_t *buf)
{
    return buf->kind;
}

int zf_buffer_device_id(const zf_buffer_t *buf)
{
    return buf->device_id;
}

int zf_buffer_refcount(const zf_buffer_t *buf)
{
    return atomic_load(&buf->refs);
}

uint64_t zf_buffer_version(const zf_buffer_t *buf)
{
    return atomic_load(&buf->version);
}

void zf_buffer_bump_version(zf_buffer_t *buf)
{
    atomic_fetch_add(&buf->version, 1);
}

/* ---- tensors ------------------------------------------------------------ */

struct zf_tensor {
    atomic_int refs;
    zf_dtype_t dtype;
    zf_shape_t shape;
    int64_t num_elements;
    size_t nbytes;
    zf_buffer_t *buf;
    size_t offset;
    zf_tensor_views_t *block; /* the block it was made in; NULL: allocated alone */
};

/* Holds one count for the maker and one for each view it may make until
 * the maker releases it, when the counts of the views not made go too;
 * then one for each view made in it still alive. (No count is taken per
 * view: one made and dropped at once leaves the others.) */
struct zf_tensor_views {
    atomic_size_t holds;
    size_t n, used;
    zf_buffer_t *buf; /* the first view's buffer: one reference for every view of it */
    zf_tensor_t views[];
};

/* RESOURCE tensors hold resource handles, stored like strings (one
 * zf_tstring_t per element naming the resource). */
static bool s_holds_strings(zf_dtype_t dtype)
{
    return dtype == ZF_STRING || dtype == ZF_RESOURCE;
}

static size_t s_element_size(zf_dtype_t dtype)
{
    return s_holds_strings(dtype) ? sizeof(zf_tstring_t) : zf_dtype_size(dtype);
}

/* Validates dtype and shape and computes the element count and byte size. */
static zf_status_t s_tensor_size(zf_dtype_t dtype, const zf_shape_t *shape, int64_t *n_out,
                                 size_t *bytes_out)
{
    if (dtype == ZF_VARIANT)
        return zf_unimplemented("%s tensors are not supported", zf_dtype_name(dtype));
    if (!zf_dtype_valid((int)dtype))
        return zf_invalid_argument("invalid tensor dtype %d", (int)dtype);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (!zf_shape_is_fully_defined(shape))
        return zf_invalid_argument("%s tensor shape %s is not fully defined", zf_dtype_name(dtype),
                                   zf_shape_to_string(shape, sbuf, sizeof sbuf));
    int64_t n = 0;
    ZF_TRY(zf_shape_num_elements(shape, &n));
    size_t elem = s_element_size(dtype);
    if ((uint64_t)n > SIZE_MAX / elem)
        return zf_invalid_argument("%s tensor of shape %s is too large to address",
                                   zf_dtype_name(dtype),
                                   zf_shape_to_string(shape, sbuf, sizeof sbuf));
    *n_out = n;
    *bytes_out = (size_t)n * elem;
    return ZF_STATUS_OK;
}

/* Fills t, a new tensor of one reference over buf (made in block, or
 * NULL), whose reference for t the caller has taken (or the block holds). */
static void s_tensor_init(zf_tensor_t *t, zf_dtype_t dtype, const zf_shape_t *shape, int64_t n,
                          size_t nbytes, zf_buffer_t *buf, size_t offset, zf_tensor_views_t *block)
{
    atomic_init(&t->refs, 1);
    t->dtype = dtype;
    t->shape = *shape;
    t->num_elements = n;
    t->nbytes = nbytes;
    t->buf = buf;
    t->offset = offset;
    t->block = block;
}

static zf_status_t s_tensor_wrap(zf_dtype_t dtype, const zf_shape_t *shape, int64_t n,
                                 size_t nbytes, zf_buffer_t *buf, size_t offset, zf_tensor_t **out)
{
    zf_tensor_t *t = malloc(sizeof *t);
    if (!t) return zf_out_of_memory("a tensor");
    s_tensor_init(t, dtype, shape, n, nbytes, zf_buffer_ref(buf), offset, NULL);
    *out = t;
    return ZF_STATUS_OK;
}

static zf_status_t s_tensor_new(zf_dtype_t dtype, const zf_shape_t *shape, bool zeroed,
                                zf_tensor_t **out)
{
    int64_t n = 0;
    size_t nbytes = 0;
    ZF_TRY(s_tensor_size(dtype, shape, &n, &nbytes));
    zf_buffer_t *buf;
    zf_status_t s = s_buffer_alloc(nbytes, s_holds_strings(dtype), zeroed, &buf);
    if (!zf_ok(s)) {
        char sbuf[ZF_SHAPE_STRING_MAX];
        return zf_status_prefix(s, "%s tensor of shape %s", zf_dtype_name(dtype),
                                zf_shape_to_string(shape, sbuf, sizeof sbuf));
    }
    s = s_tensor_wrap(dtype, shape, n, nbytes, buf, 0, out);
    zf_buffer_unref(&buf);
    return s;
}

zf_status_t zf_tensor_new(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out)
{
    return s_tensor_new(dtype, shape, true, out);
}

zf_status_t zf_tensor_new_uninit(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out)
{
    return s_tensor_new(dtype, shape, false, out);
}

zf_status_t zf_tensor_new_from_bytes(zf_dtype_t dtype, const zf_shape_t *shape, const void *bytes,
                                     size_t len, zf_tensor_t **out)
{
    if (s_holds_strings(dtype))
        return zf_invalid_argument("%s tensors cannot be built from raw bytes",
                                   zf_dtype_name(dtype));
    int64_t n = 0;
    size_t nbytes = 0;
    ZF_TRY(s_tensor_size(dtype, shape, &n, &nbytes));
    if (len != nbytes) {
        char sbuf[ZF_SHAPE_STRING_MAX];
        return zf_invalid_argument("%zu bytes given but %s %s needs %zu", len, zf_dtype_name(dtype),
                                   zf_shape_to_string(shape, sbuf, sizeof sbuf), nbytes);
    }
    ZF_TRY(zf_tensor_new_uninit(dtype, shape, out));
    if (len) memcpy(zf_tensor_data(*out), bytes, len);
    return ZF_STATUS_OK;
}

static size_t s_alignment(zf_dtype_t dtype)
{
    size_t size = zf_dtype_size(dtype);
    if (dtype == ZF_COMPLEX64 || dtype == ZF_COMPLEX128) size /= 2;
    if (s_holds_strings(dtype)) size = _Alignof(zf_tstring_t);
    return size ? size : 1;
}

/* INVALID_ARGUMENT unless dtype's data at offset of buf is aligned as
 * dtype needs (device memory is not checked). */
static zf_status_t s_check_aligned(zf_dtype_t dtype, const zf_buffer_t *buf, size_t offset)
{
    if (buf->kind == ZF_MEMORY_DEVICE || ((uintptr_t)buf->data + offset) % s_alignment(dtype) == 0)
        return ZF_STATUS_OK;
    return zf_invalid_argument("%s tensor data at offset %zu is not %zu-byte aligned",
                               zf_dtype_name(dtype), offset, s_alignment(dtype));
}

/* What zf_tensor_from_buffer checks: a view of buf from offset as dtype
 * and shape, of n elements and nbytes bytes. */
static zf_status_t s_view_check(zf_dtype_t dtype, const zf_shape_t *shape, const zf_buffer_t *buf,
                                size_t offset, int64_t *n_out, size_t *nbytes_out)
{
    int64_t n = 0;
    size_t nbytes = 0;
    ZF_TRY(s_tensor_size(dtype, shape, &n, &nbytes));
    char sbuf[ZF_SHAPE_STRING_MAX];
    const char *name = zf_dtype_name(dtype);
    if (offset > buf->size || buf->size - offset < nbytes)
        return zf_invalid_argument("%s %s needs %zu bytes but the buffer has %zu after offset %zu",
                                   name, zf_shape_to_string(shape, sbuf, sizeof sbuf), nbytes,
                                   offset > buf->size ? 0 : buf->size - offset, offset);
    if (s_holds_strings(dtype) != buf->holds_strings)
        return zf_invalid_argument(s_holds_strings(dtype)
                                       ? "a string tensor needs a string tensor's buffer"
                                       : "a %s tensor cannot view a string tensor's buffer",
                                   name);
    ZF_TRY(s_check_aligned(dtype, buf, offset));
    *n_out = n;
    *nbytes_out = nbytes;
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_from_buffer(zf_dtype_t dtype, const zf_shape_t *shape, zf_buffer_t *buf,
                                  size_t offset, zf_tensor_t **out)
{
    int64_t n = 0;
    size_t nbytes = 0;
    ZF_TRY(s_view_check(dtype, shape, buf, offset, &n, &nbytes));
    return s_tensor_wrap(dtype, shape, n, nbytes, buf, offset, out);
}

zf_status_t zf_tensor_views_new(size_t n, zf_tensor_views_t **out)
{
    *out = NULL;
    if (n == 0 || n > (SIZE_MAX - sizeof **out) / sizeof(zf_tensor_t))
        return zf_invalid_argument("a block of %zu tensor views", n);
    zf_tensor_views_t *v = malloc(sizeof *v + n * sizeof(zf_tensor_t));
    if (!v) return zf_out_of_memory("a block of tensor views");
    atomic_init(&v->holds, n + 1);
    v->n = n;
    v->used = 0;
    v->buf = NULL;
    *out = v;
    return ZF_STATUS_OK;
}

/* The next view of v (room checked), on buf at offset: a view of the
 * block's buffer takes no reference of its own. */
static zf_tensor_t *s_view_make(zf_tensor_views_t *v, zf_dtype_t dtype, const zf_shape_t *shape,
                                int64_t n, size_t nbytes, zf_buffer_t *buf, size_t offset)
{
    zf_tensor_t *t = &v->views[v->used++];
    if (!v->buf) v->buf = zf_buffer_ref(buf);
    s_tensor_init(t, dtype, shape, n, nbytes, buf == v->buf ? buf : zf_buffer_ref(buf), offset, v);
    return t;
}

zf_status_t zf_tensor_views_add(zf_tensor_views_t *v, zf_dtype_t dtype, const zf_shape_t *shape,
                                zf_buffer_t *buf, size_t offset, zf_tensor_t **out)
{
    if (v->used == v->n)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "all %zu tensor views of the block are made",
                             v->n);
    int64_t n = 0;
    size_t nbytes = 0;
    ZF_TRY(s_view_check(dtype, shape, buf, offset, &n, &nbytes));
    *out = s_view_make(v, dtype, shape, n, nbytes, buf, offset);
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_views_add_like(zf_tensor_views_t *v, const zf_tensor_t *like, size_t offset,
                                     zf_tensor_t **out)
{
    if (v->used == v->n)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "all %zu tensor views of the block are made",
                             v->n);
    const zf_buffer_t *buf = like->buf;
    if (offset > buf->size || buf->size - offset < like->nbytes)
        return zf_invalid_argument("a view of %zu bytes at offset %zu runs past the buffer's %zu",
                                   like->nbytes, offset, buf->size);
    ZF_TRY(s_check_aligned(like->dtype, buf, offset));
    *out = s_view_make(v, like->dtype, &like->shape, like->num_elements, like->nbytes, like->buf,
                       offset);
    return ZF_STATUS_OK;
}

/* Drops count holds of v, freeing it with the last. */
static void s_views_drop(zf_tensor_views_t *v, size_t count)
{
    if (atomic_fetch_sub_explicit(&v->holds, count, memory_order_acq_rel) != count) return;
    zf_buffer_unref(&v->buf);
    free(v);
}

void zf_tensor_views_release(zf_tensor_views_t **v_p)
{
    if (!v_p || !*v_p) return;
    zf_tensor_views_t *v = *v_p;
    *v_p = NULL;
    s_views_drop(v, v->n - v->used + 1); /* the maker's and the views' never made */
}

zf_status_t zf_tensor_reshape(const zf_tensor_t *t, const zf_shape_t *shape, zf_tensor_t **out)
{
    int64_t n = 0;
    size_t nbytes = 0;
    ZF_TRY(s_tensor_size(t->dtype, shape, &n, &nbytes));
    if (n != t->num_elements) {
        char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
        return zf_invalid_argument("cannot reshape a tensor of shape %s (%" PRId64
                                   " elements) to %s (%" PRId64 " elements)",
                                   zf_shape_to_string(&t->shape, a, sizeof a), t->num_elements,
                                   zf_shape_to_string(shape, b, sizeof b), n);
    }
    return s_tensor_wrap(t->dtype, shape, n, nbytes, t->buf, t->offset, out);
}

static bool s_is_host(const zf_tensor_t *t)
{
    return t->buf->kind != ZF_MEMORY_DEVICE;
}

zf_status_t zf_tensor_copy(const zf_tensor_t *t, zf_tensor_t **out)
{
    if (!s_is_host(t))
        return zf_status_new(ZF_FAILED_PRECONDITION, "cannot copy a tensor in device memory");
    zf_tensor_t *c;
    ZF_TRY(zf_tensor_new_uninit(t->dtype, &t->shape, &c)); /* strings start empty */
    if (!s_holds_strings(t->dtype)) {
        if (t->nbytes) memcpy(zf_tensor_data(c), zf_tensor_data(t), t->nbytes);
    } else {
        const zf_tstring_t *src = zf_tensor_data(t);
        for (int64_t i = 0; i < t->num_elements; i++) {
            zf_status_t s = zf_tensor_set_string(c, i, src[i].data, src[i].len);
            if (!zf_ok(s)) {
                zf_tensor_unref(&c);
                return s;
            }
        }
    }
    *out = c;
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_new_scalar(zf_dtype_t dtype, const void *value, zf_tensor_t **out)
{
    zf_shape_t scalar = zf_shape_scalar();
    return zf_tensor_new_from_bytes(dtype, &scalar, value, zf_dtype_size(dtype), out);
}

zf_status_t zf_tensor_new_scalar_float(float v, zf_tensor_t **out)
{
    return zf_tensor_new_scalar(ZF_FLOAT, &v, out);
}

zf_status_t zf_tensor_new_scalar_double(double v, zf_tensor_t **out)
{
    return zf_tensor_new_scalar(ZF_DOUBLE, &v, out);
}

zf_status_t zf_tensor_new_scalar_int32(int32_t v, zf_tensor_t **out)
{
    return zf_tensor_new_scalar(ZF_INT32, &v, out);
}

zf_status_t zf_tensor_new_scalar_int64(int64_t v, zf_tensor_t **out)
{
    return zf_tensor_new_scalar(ZF_INT64, &v, out);
}

zf_status_t zf_tensor_new_scalar_bool(bool v, zf_tensor_t **out)
{
    uint8_t b = v ? 1 : 0;
    return zf_tensor_new_scalar(ZF_BOOL, &b, out);
}

zf_status_t zf_tensor_new_scalar_string(const void *bytes, size_t len, zf_tensor_t **out)
{
    zf_shape_t scalar = zf_shape_scalar();
    zf_tensor_t *t;
    ZF_TRY(zf_tensor_new(ZF_STRING, &scalar, &t));
    zf_status_t s = zf_tensor_set_string(t, 0, bytes, len);
    if (!zf_ok(s)) {
        zf_tensor_unref(&t);
        return s;
    }
    *out = t;
    return ZF_STATUS_OK;
}

zf_tensor_t *zf_tensor_ref(zf_tensor_t *t)
{
    assert(t);
    int before = atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    assert(before > 0);
    (void)before;
    return t;
}

void zf_tensor_unref(zf_tensor_t **t_p)
{
    if (!t_p || !*t_p) return;
    zf_tensor_t *t = *t_p;
    *t_p = NULL;
    int before = atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel);
    assert(before > 0);
    if (before != 1) return;
    if (t->block) {
        if (t->buf != t->block->buf) zf_buffer_unref(&t->buf); /* else the block's */
        s_views_drop(t->block, 1);
    } else {
        zf_buffer_unref(&t->buf);
        free(t);
    }
}

void *zf_tensor_data(const zf_tensor_t *t)
{
    return (char *)t->buf->data + t->offset;
}

size_t zf_tensor_nbytes(const zf_tensor_t *t)
{
    return t->nbytes;
}

int64_t zf_tensor_num_elements(const zf_tensor_t *t)
{
    return t->num_elements;
}

zf_dtype_t zf_tensor_dtype(const zf_tensor_t *t)
{
    return t->dtype;
}

const zf_shape_t *zf_tensor_shape(const zf_tensor_t *t)
{
    return &t->shape;
}

zf_buffer_t *zf_tensor_buffer(const zf_tensor_t *t)
{
    return t->buf;
}

size_t zf_tensor_offset(const zf_tensor_t *t)
{
    return t->offset;
}

zf_memory_kind_t zf_tensor_memory_kind(const zf_tensor_t *t)
{
    return t->buf->kind;
}

int zf_tensor_refcount(const zf_tensor_t *t)
{
    return atomic_load(&t->refs);
}

bool zf_tensor_equal(const zf_tensor_t *a, const zf_tensor_t *b)
{
    if (a->dtype != b->dtype || !zf_shape_equal(&a->shape, &b->shape)) return false;
    if (!s_is_host(a) || !s_is_host(b)) return false;
    if (!s_holds_strings(a->dtype))
        return a->nbytes == 0 || memcmp(zf_tensor_data(a), zf_tensor_data(b), a->nbytes) == 0;
    const zf_tstring_t *x = zf_tensor_data(a), *y = zf_tensor_data(b);
    for (int64_t i = 0; i < a->num_elements; i++) {
        if (x[i].len != y[i].len) return false;
        if (x[i].len && memcmp(x[i].data, y[i].data, x[i].len) != 0) return false;
    }
    return true;
}

zf_status_t zf_tensor_set_string(zf_tensor_t *t, int64_t i, const void *bytes, size_t len)
{
    if (!s_holds_strings(t->dtype))
        return zf_invalid_argument("set_string on a %s tensor", zf_dtype_name(t->dtype));
    if (i < 0 || i >= t->num_elements)
        return zf_status_new(ZF_OUT_OF_RANGE,
                             "string index %" PRId64 " out of range [0, %" PRId64 ")", i,
                             t->num_elements);
    char *copy = NULL;
    if (len > 0) {
        if (len == SIZE_MAX) return zf_out_of_memory("a string element");
        copy = malloc(len + 1);
        if (!copy) return zf_out_of_memory("a string element");
        memcpy(copy, bytes, len);
        copy[len] = '\0';
    }
    zf_tstring_t *elem = (zf_tstring_t *)zf_tensor_data(t) + i;
    free(elem->data);
    elem->data = copy;
    elem->len = len;
    return ZF_STATUS_OK;
}

const zf_tstring_t *zf_tensor_string(const zf_tensor_t *t, int64_t i)
{
    if (!s_holds_strings(t->dtype) || i < 0 || i >= t->num_elements) return NULL;
    return (const zf_tstring_t *)zf_tensor_data(t) + i;
}

/* ---- 16-bit floats ------------------------------------------------------ */

static uint32_t s_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float s_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t zf_float_to_half(float f)
{
    uint32_t x = s_float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keeping the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to infinity (and infinity) */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* a normal half: rebias and round to nearest even */
        uint32_t odd = (ax >> 13) & 1u;
        ax += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
        return (uint16_t)(sign | (ax >> 13));
    }
    /* Subnormal or zero: adding 0.5 puts the half's subnormal step (2^-24)
     * at the float's last mantissa bit, so the FPU rounds to nearest even. */
    float r = s_bits_float(ax) + 0.5f;
    return (uint16_t)(sign | (s_float_bits(r) - 0x3f000000u));
}

float zf_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float mag = (float)mant * 0x1p-24f;
        return s_bits_float(sign | s_float_bits(mag));
    }
    if (exp == 31) return s_bits_float(sign | 0x7f800000u | (mant << 13));
    return s_bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t zf_float_to_bfloat16(float f)
{
    uint32_t x = s_float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

uint16_t zf_float_to_bfloat16_truncate(float f)
{
    uint32_t x = s_float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)(x >> 16);
}

float zf_bfloat16_to_float(uint16_t b)
{
    return s_bits_float((uint32_t)b << 16);
}
