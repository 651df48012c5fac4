/* Float convolutions and pools on oneDNN (its 2.x C API, as Debian ships).
 *
 * Primitives: each node keeps its own (zf__dnnl_cache_t, made by the
 * kernel's create()), keyed by geometry (input shape, window, strides,
 * dilations, padding, layout) and the thread count they were built for;
 * a step finds its primitive there and builds none after the first step of
 * a shape. Inputs and outputs stay in TensorFlow's layout (NHWC or NCHW);
 * the filter is reordered from HWIO (or depthwise HW C M) to the
 * primitive's preferred layout.
 *
 * Filters: the engine cannot tell a kernel that an input is constant, so a
 * reordered filter is cached on first use, keyed by the identity of the
 * filter's buffer (held by reference, so its address cannot be reused),
 * its offset and the buffer's write version (zf_buffer_version(), advanced
 * by in-place variable updates). A Const filter is therefore reordered once;
 * a variable's, once per update.
 *
 * Threads: Debian builds oneDNN on OpenMP. A primitive runs on the calling
 * thread (a device pool worker), which leads an OpenMP team of
 * pool size / (oneDNN calls in flight) threads, so that concurrent calls
 * share the device's cores instead of each taking all of them; without a
 * device it runs on the caller alone. The count is set on the calling
 * thread (omp_set_num_threads() is per thread) before building and before
 * running, as oneDNN sizes some kernels' work split when it builds them. */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/thread_pool.h"
#include "executor/kernels/kernels_conv.h"
#include "executor/kernels/kernels_util.h"

#if DNNL_CPU_RUNTIME != DNNL_RUNTIME_OMP
#error "kernels_dnnl.c sizes oneDNN's OpenMP teams; this oneDNN uses another CPU runtime"
#endif

/* Primitives kept per node; further shapes build one for the step. */
#define S_ENTRIES 8

/* ---- the engine and errors ----------------------------------------------------- */

static pthread_once_t s_engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t s_engine;
static dnnl_status_t s_engine_status;

static void s_engine_init(void)
{
    s_engine_status = dnnl_engine_create(&s_engine, dnnl_cpu, 0);
}

static zf_status_t s_error(const zf_kernel_ctx_t *ctx, dnnl_status_t st, const char *what)
{
    if (st == dnnl_out_of_memory)
        return zf_kernel_error(ctx, ZF_RESOURCE_EXHAUSTED, "oneDNN is out of memory (%s)", what);
    if (st == dnnl_unimplemented)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED, "oneDNN has no primitive for this %s", what);
    return zf_kernel_error(ctx, ZF_INTERNAL, "oneDNN failed (%s): %s", what, dnnl_status2str(st));
}

#define S_DNNL(ctx, call, what)                                                                    \
    do {                                                                                           \
        dnnl_status_t s_st_ = (call);                                                              \
        if (s_st_ != dnnl_success) return s_error((ctx), s_st_, (what));                           \
    } while (0)

/* ---- threads --------------------------------------------------------------------- */

static atomic_int s_in_flight; /* oneDNN calls running in this process */

/* Claims a share of the device's cores for one call; s_threads_end()
 * returns it. */
static int s_threads_begin(const zf_kernel_ctx_t *ctx)
{
    int cores = ctx->device && ctx->device->pool ? zf_thread_pool_size(ctx->device->pool) : 1;
    int active = atomic_fetch_add(&s_in_flight, 1) + 1;
    int threads = cores / active;
    if (threads < 1) threads = 1;
    omp_set_num_threads(threads);
    return threads;
}

static void s_threads_end(void)
{
    atomic_fetch_sub(&s_in_flight, 1);
}

/* ---- the cache ------------------------------------------------------------------- */

/* A filter in a primitive's layout, shared by the steps using it. */
typedef struct {
    atomic_int refs;
    zf_buffer_t *src; /* the filter's buffer: a reference, and the key */
    size_t offset;
    uint64_t version;
    dnnl_memory_t mem;
} s_weights_t;

typedef struct {
    zf__win_geom_t g; /* the key, with threads */
    int threads;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_memory_desc_t user_wei_md, wei_md; /* TensorFlow's filter layout; the primitive's */
    dnnl_primitive_t reorder;               /* user_wei_md -> wei_md; NULL when equal */
    s_weights_t *weights;                   /* the last filter, reordered; or NULL */
} s_entry_t;

struct zf__dnnl_cache {
    pthread_mutex_t mu;
    s_entry_t *entries[S_ENTRIES];
    int n;
};

static void s_weights_unref(s_weights_t **w_p)
{
    s_weights_t *w = *w_p;
    *w_p = NULL;
    if (!w || atomic_fetch_sub(&w->refs, 1) != 1) return;
    dnnl_memory_destroy(w->mem);
    zf_buffer_unref(&w->src);
    free(w);
}

static void s_entry_free(s_entry_t *e)
{
    if (!e) return;
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->reorder) dnnl_primitive_destroy(e->reorder);
    s_weights_unref(&e->weights);
    free(e);
}

zf_status_t zf__dnnl_cache_new(zf__dnnl_cache_t **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return zf_out_of_memory("oneDNN primitive cache");
    pthread_mutex_init(&(*out)->mu, NULL);
    return ZF_STATUS_OK;
}

void zf__dnnl_cache_destroy(zf__dnnl_cache_t **cache_p)
{
    zf__dnnl_cache_t *c = *cache_p;
    if (!c) return;
    *cache_p = NULL;
    for (int i = 0; i < c->n; i++) s_entry_free(c->entries[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static bool s_geom_equal(const zf__win_geom_t *a, const zf__win_geom_t *b)
{
    return a->kind == b->kind && a->nchw == b->nchw && a->n == b->n && a->h == b->h &&
           a->w == b->w && a->c == b->c && a->kh == b->kh && a->kw == b->kw && a->sh == b->sh &&
           a->sw == b->sw && a->dh == b->dh && a->dw == b->dw && a->pt == b->pt && a->pb == b->pb &&
           a->pl == b->pl && a->pr == b->pr && a->oh == b->oh && a->ow == b->ow && a->oc == b->oc;
}

/* ---- building primitives --------------------------------------------------------- */

static zf_status_t s_data_md(const zf_kernel_ctx_t *ctx, bool nchw, int64_t n, int64_t c, int64_t h,
                             int64_t w, dnnl_memory_desc_t *md)
{
    dnnl_dims_t dims = {n, c, h, w};
    S_DNNL(ctx, dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, nchw ? dnnl_nchw : dnnl_nhwc),
           "memory descriptor");
    return ZF_STATUS_OK;
}

/* TensorFlow's filter as oneDNN dims: Conv2D's HWIO is OIHW dims with hwio
 * strides; a depthwise [KH, KW, C, M] is a grouped GOIHW (G = C, O = M,
 * I = 1) with output channel g*M + m, as TensorFlow's. */
static zf_status_t s_filter_mds(const zf_kernel_ctx_t *ctx, const zf__win_geom_t *g,
                                dnnl_memory_desc_t *user, dnnl_memory_desc_t *any)
{
    if (g->kind == ZF__WIN_CONV) {
        dnnl_dims_t dims = {g->oc, g->c, g->kh, g->kw};
        S_DNNL(ctx, dnnl_memory_desc_init_by_tag(user, 4, dims, dnnl_f32, dnnl_hwio), "filter");
        S_DNNL(ctx, dnnl_memory_desc_init_by_tag(any, 4, dims, dnnl_f32, dnnl_format_tag_any),
               "filter");
        return ZF_STATUS_OK;
    }
    int64_t m = g->oc / g->c;
    dnnl_dims_t dims = {g->c, m, 1, g->kh, g->kw};
    dnnl_dims_t strides = {m, 1, 1, g->kw * g->c * m, g->c * m};
    S_DNNL(ctx, dnnl_memory_desc_init_by_strides(user, 5, dims, dnnl_f32, strides), "filter");
    S_DNNL(ctx, dnnl_memory_desc_init_by_tag(any, 5, dims, dnnl_f32, dnnl_format_tag_any),
           "filter");
    return ZF_STATUS_OK;
}

static bool s_is_conv(const zf__win_geom_t *g)
{
    return g->kind == ZF__WIN_CONV || g->kind == ZF__WIN_DEPTHWISE;
}

/* Builds e's primitive (and filter reorder) for e->g. */
static zf_status_t s_entry_build(const zf_kernel_ctx_t *ctx, s_entry_t *e)
{
    const zf__win_geom_t *g = &e->g;
    ZF_TRY(s_data_md(ctx, g->nchw, g->n, g->c, g->h, g->w, &e->src_md));
    ZF_TRY(s_data_md(ctx, g->nchw, g->n, g->oc, g->oh, g->ow, &e->dst_md));
    dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1};
    dnnl_dims_t pad_l = {g->pt, g->pl}, pad_r = {g->pb, g->pr};
    dnnl_primitive_desc_t pd = NULL;
    if (s_is_conv(g)) {
        dnnl_memory_desc_t any;
        ZF_TRY(s_filter_mds(ctx, g, &e->user_wei_md, &any));
        dnnl_convolution_desc_t cd;
        S_DNNL(ctx,
               dnnl_dilated_convolution_forward_desc_init(
                   &cd, dnnl_forward_inference, dnnl_convolution_direct, &e->src_md, &any, NULL,
                   &e->dst_md, strides, dil, pad_l, pad_r),
               "convolution");
        S_DNNL(ctx, dnnl_primitive_desc_create(&pd, &cd, NULL, s_engine, NULL), "convolution");
        e->wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    } else {
        dnnl_dims_t kernel = {g->kh, g->kw}, no_dil = {0, 0};
        dnnl_pooling_v2_desc_t pdesc;
        dnnl_alg_kind_t alg =
            g->kind == ZF__WIN_MAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
        S_DNNL(ctx,
               dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference, alg, &e->src_md,
                                                 &e->dst_md, strides, kernel, no_dil, pad_l, pad_r),
               "pool");
        S_DNNL(ctx, dnnl_primitive_desc_create(&pd, &pdesc, NULL, s_engine, NULL), "pool");
    }
    dnnl_status_t st = dnnl_primitive_create(&e->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return s_error(ctx, st, s_is_conv(g) ? "convolution" : "pool");
    if (s_is_conv(g) && !dnnl_memory_desc_equal(&e->user_wei_md, &e->wei_md)) {
        dnnl_primitive_desc_t rpd = NULL;
        S_DNNL(ctx,
               dnnl_reorder_primitive_desc_create(&rpd, &e->user_wei_md, s_engine, &e->wei_md,
                                                  s_engine, NULL),
               "filter reorder");
        st = dnnl_primitive_create(&e->reorder, rpd);
        dnnl_primitive_desc_destroy(rpd);
        if (st != dnnl_success) return s_error(ctx, st, "filter reorder");
    }
    return ZF_STATUS_OK;
}

/* The entry for g at this thread count: cached, or built (and cached while
 * there is room; *temp says the caller frees it). */
static zf_status_t s_entry_get(const zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *c,
                               const zf__win_geom_t *g, int threads, s_entry_t **out, bool *temp)
{
    *out = NULL;
    *temp = false;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (c->entries[i]->threads == threads && s_geom_equal(&c->entries[i]->g, g)) {
            *out = c->entries[i];
            pthread_mutex_unlock(&c->mu);
            return ZF_STATUS_OK;
        }
    s_entry_t *e = calloc(1, sizeof *e);
    zf_status_t s = e ? ZF_STATUS_OK : zf_kernel_error(ctx, ZF_RESOURCE_EXHAUSTED, "no memory");
    if (e) {
        e->g = *g;
        e->threads = threads;
        s = s_entry_build(ctx, e);
    }
    if (!zf_ok(s)) {
        s_entry_free(e);
    } else if (c->n < S_ENTRIES) {
        c->entries[c->n++] = e;
        *out = e;
    } else {
        *out = e;
        *temp = true;
    }
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* ---- running ----------------------------------------------------------------------- */

static zf_status_t s_execute(const zf_kernel_ctx_t *ctx, dnnl_primitive_t prim,
                             const dnnl_exec_arg_t *args, int nargs, const char *what)
{
    dnnl_stream_t stream = NULL;
    S_DNNL(ctx, dnnl_stream_create(&stream, s_engine, dnnl_stream_default_flags), what);
    dnnl_status_t st = dnnl_primitive_execute(prim, stream, nargs, args);
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    dnnl_stream_destroy(stream);
    if (st != dnnl_success) return s_error(ctx, st, what);
    return ZF_STATUS_OK;
}

/* A memory object over a tensor's bytes (oneDNN never writes a source). */
static zf_status_t s_wrap(const zf_kernel_ctx_t *ctx, const dnnl_memory_desc_t *md,
                          const zf_tensor_t *t, dnnl_memory_t *out)
{
    S_DNNL(ctx, dnnl_memory_create(out, md, s_engine, zf_tensor_data(t)), "memory");
    return ZF_STATUS_OK;
}

/* f reordered for e: the cached copy when f's buffer, offset and version
 * match it, else a new one that replaces it. *out holds a reference. */
static zf_status_t s_weights_get(const zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *c, s_entry_t *e,
                                 const zf_tensor_t *f, s_weights_t **out)
{
    *out = NULL;
    zf_buffer_t *buf = zf_tensor_buffer(f);
    size_t offset = zf_tensor_offset(f);
    uint64_t version = zf_buffer_version(buf);
    pthread_mutex_lock(&c->mu);
    s_weights_t *w = e->weights;
    if (w && w->src == buf && w->offset == offset && w->version == version) {
        atomic_fetch_add(&w->refs, 1);
        *out = w;
    }
    pthread_mutex_unlock(&c->mu);
    if (*out) return ZF_STATUS_OK;

    w = calloc(1, sizeof *w);
    if (!w) return zf_kernel_error(ctx, ZF_RESOURCE_EXHAUSTED, "no memory for the filter");
    atomic_init(&w->refs, 1);
    w->src = zf_buffer_ref(buf);
    w->offset = offset;
    w->version = version;
    dnnl_memory_t user = NULL;
    dnnl_status_t st = dnnl_memory_create(&w->mem, &e->wei_md, s_engine, DNNL_MEMORY_ALLOCATE);
    zf_status_t s =
        st == dnnl_success ? s_wrap(ctx, &e->user_wei_md, f, &user) : s_error(ctx, st, "filter");
    if (zf_ok(s)) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, w->mem}};
        s = s_execute(ctx, e->reorder, args, 2, "filter reorder");
    }
    if (user) dnnl_memory_destroy(user);
    if (!zf_ok(s)) {
        s_weights_unref(&w);
        return s;
    }
    atomic_fetch_add(&w->refs, 1); /* the caller's; the other is the cache's */
    pthread_mutex_lock(&c->mu);
    s_weights_t *old = e->weights;
    e->weights = w;
    pthread_mutex_unlock(&c->mu);
    s_weights_unref(&old);
    *out = w;
    return ZF_STATUS_OK;
}

static zf_status_t s_run_entry(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *c, s_entry_t *e,
                               const zf_tensor_t *x, const zf_tensor_t *f, zf_tensor_t *y)
{
    dnnl_memory_t src = NULL, dst = NULL, user_wei = NULL;
    s_weights_t *w = NULL;
    zf_status_t s = s_wrap(ctx, &e->src_md, x, &src);
    if (zf_ok(s)) s = s_wrap(ctx, &e->dst_md, y, &dst);
    if (zf_ok(s) && f) {
        if (e->reorder)
            s = s_weights_get(ctx, c, e, f, &w);
        else
            s = s_wrap(ctx, &e->user_wei_md, f, &user_wei);
    }
    if (zf_ok(s)) {
        dnnl_exec_arg_t args[] = {
            {DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WEIGHTS, w ? w->mem : user_wei}};
        s = s_execute(ctx, e->prim, args, f ? 3 : 2, f ? "convolution" : "pool");
    }
    s_weights_unref(&w);
    if (user_wei) dnnl_memory_destroy(user_wei);
    if (dst) dnnl_memory_destroy(dst);
    if (src) dnnl_memory_destroy(src);
    return s;
}

zf_status_t zf__dnnl_run(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *cache, const zf__win_geom_t *g,
                         const zf_tensor_t *x, const zf_tensor_t *f, zf_tensor_t *y)
{
    pthread_once(&s_engine_once, s_engine_init);
    if (s_engine_status != dnnl_success) return s_error(ctx, s_engine_status, "CPU engine");
    int threads = s_threads_begin(ctx);
    s_entry_t *e = NULL;
    bool temp = false;
    zf_status_t s = s_entry_get(ctx, cache, g, threads, &e, &temp);
    if (zf_ok(s)) s = s_run_entry(ctx, cache, e, x, f, y);
    if (temp) s_entry_free(e);
    s_threads_end();
    return s;
}
