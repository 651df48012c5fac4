/* Float convolutions, pools and batch normalisation on oneDNN (its 2.x C
 * API, as Debian ships), forward and backward.
 *
 * Primitives: each node keeps its own (zf__dnnl_cache_t, made by the
 * kernel's create()), keyed by geometry (kind, input shape, window,
 * strides, dilations, padding, layout, epsilon) and the thread count they
 * were built for; a step finds its primitive there and builds none after
 * the first step of a shape. A backward primitive is built with its
 * forward one as the hint; MaxPoolGrad keeps that forward primitive too,
 * to record where the maxima are. Inputs and outputs stay in TensorFlow's
 * layout (NHWC or NCHW); the filter is reordered from HWIO (or depthwise
 * HW C M) to the primitive's preferred layout, and a filter's gradient
 * from the primitive's layout back to HWIO.
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
#include <assert.h>
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
    dnnl_primitive_t fwd; /* MaxPoolGrad: the forward pass that records the maxima */
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_memory_desc_t user_wei_md, wei_md; /* TensorFlow's filter layout; the primitive's */
    dnnl_memory_desc_t ws_md, stat_md;      /* MaxPoolGrad's workspace; batch norm's vectors */
    dnnl_primitive_t reorder; /* user_wei_md -> wei_md (the reverse for a filter's gradient);
                                 NULL when equal */
    s_weights_t *weights;     /* the last filter, reordered; or NULL */
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
    if (e->fwd) dnnl_primitive_destroy(e->fwd);
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
           a->pl == b->pl && a->pr == b->pr && a->oh == b->oh && a->ow == b->ow && a->oc == b->oc &&
           a->epsilon == b->epsilon;
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
    if (g->kind != ZF__WIN_DEPTHWISE) {
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
    return g->kind == ZF__WIN_CONV || g->kind == ZF__WIN_DEPTHWISE ||
           g->kind == ZF__WIN_CONV_BWD_INPUT || g->kind == ZF__WIN_CONV_BWD_FILTER;
}

static bool s_is_bn(const zf__win_geom_t *g)
{
    return g->kind == ZF__WIN_BN_TRAIN || g->kind == ZF__WIN_BN_INFER ||
           g->kind == ZF__WIN_BN_BWD || g->kind == ZF__WIN_BN_BWD_FROZEN;
}

static const char *s_what(const zf__win_geom_t *g)
{
    return s_is_conv(g) ? "convolution" : s_is_bn(g) ? "batch normalization" : "pool";
}

/* Makes *out from pd, which it destroys. */
static zf_status_t s_prim_from(const zf_kernel_ctx_t *ctx, dnnl_primitive_desc_t pd,
                               const char *what, dnnl_primitive_t *out)
{
    dnnl_status_t st = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return st == dnnl_success ? ZF_STATUS_OK : s_error(ctx, st, what);
}

/* A backward primitive's descriptor from its op descriptor and the forward
 * one's (the hint), which it destroys. */
static zf_status_t s_backward_pd(const zf_kernel_ctx_t *ctx, dnnl_status_t init_st,
                                 const void *desc, dnnl_primitive_desc_t hint, const char *what,
                                 dnnl_primitive_desc_t *pd)
{
    dnnl_status_t st = init_st;
    if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, desc, NULL, s_engine, hint);
    dnnl_primitive_desc_destroy(hint);
    return st == dnnl_success ? ZF_STATUS_OK : s_error(ctx, st, what);
}

static zf_status_t s_build_conv(const zf_kernel_ctx_t *ctx, s_entry_t *e)
{
    const zf__win_geom_t *g = &e->g;
    dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1};
    dnnl_dims_t pad_l = {g->pt, g->pl}, pad_r = {g->pb, g->pr};
    dnnl_memory_desc_t any;
    ZF_TRY(s_filter_mds(ctx, g, &e->user_wei_md, &any));
    bool forward = g->kind == ZF__WIN_CONV || g->kind == ZF__WIN_DEPTHWISE;
    dnnl_convolution_desc_t cd, bd;
    S_DNNL(ctx,
           dnnl_dilated_convolution_forward_desc_init(
               &cd, forward ? dnnl_forward_inference : dnnl_forward_training,
               dnnl_convolution_direct, &e->src_md, &any, NULL, &e->dst_md, strides, dil, pad_l,
               pad_r),
           "convolution");
    dnnl_primitive_desc_t pd = NULL;
    S_DNNL(ctx, dnnl_primitive_desc_create(&pd, &cd, NULL, s_engine, NULL), "convolution");
    e->wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (forward) return s_prim_from(ctx, pd, "convolution", &e->prim);
    dnnl_status_t st;
    if (g->kind == ZF__WIN_CONV_BWD_FILTER)
        st = dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct,
                                                                 &e->src_md, &any, NULL, &e->dst_md,
                                                                 strides, dil, pad_l, pad_r);
    else
        st = dnnl_dilated_convolution_backward_data_desc_init(
            &bd, dnnl_convolution_direct, &e->src_md, &any, &e->dst_md, strides, dil, pad_l, pad_r);
    ZF_TRY(s_backward_pd(ctx, st, &bd, pd, "convolution gradient", &pd));
    e->wei_md = *dnnl_primitive_desc_query_md(
        pd, g->kind == ZF__WIN_CONV_BWD_INPUT ? dnnl_query_weights_md : dnnl_query_diff_weights_md,
        0);
    return s_prim_from(ctx, pd, "convolution gradient", &e->prim);
}

static zf_status_t s_build_pool(const zf_kernel_ctx_t *ctx, s_entry_t *e)
{
    const zf__win_geom_t *g = &e->g;
    dnnl_dims_t strides = {g->sh, g->sw}, kernel = {g->kh, g->kw}, no_dil = {0, 0};
    dnnl_dims_t pad_l = {g->pt, g->pl}, pad_r = {g->pb, g->pr};
    bool max = g->kind == ZF__WIN_MAXPOOL || g->kind == ZF__WIN_MAXPOOL_BWD;
    bool forward = g->kind == ZF__WIN_MAXPOOL || g->kind == ZF__WIN_AVGPOOL;
    dnnl_alg_kind_t alg = max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t fd, bd;
    S_DNNL(ctx,
           dnnl_pooling_v2_forward_desc_init(
               &fd, forward ? dnnl_forward_inference : dnnl_forward_training, alg, &e->src_md,
               &e->dst_md, strides, kernel, no_dil, pad_l, pad_r),
           "pool");
    dnnl_primitive_desc_t pd = NULL;
    S_DNNL(ctx, dnnl_primitive_desc_create(&pd, &fd, NULL, s_engine, NULL), "pool");
    if (forward) return s_prim_from(ctx, pd, "pool", &e->prim);
    if (max) { /* the forward pass records where the maxima are */
        e->ws_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
        dnnl_status_t st = dnnl_primitive_create(&e->fwd, pd);
        if (st != dnnl_success) {
            dnnl_primitive_desc_destroy(pd);
            return s_error(ctx, st, "pool");
        }
    }
    dnnl_status_t st = dnnl_pooling_v2_backward_desc_init(&bd, alg, &e->src_md, &e->dst_md, strides,
                                                          kernel, no_dil, pad_l, pad_r);
    ZF_TRY(s_backward_pd(ctx, st, &bd, pd, "pool gradient", &pd));
    return s_prim_from(ctx, pd, "pool gradient", &e->prim);
}

/* Batch normalisation's data as an n x c x h x 1 image (oneDNN's fast
 * kernels want 4-D or 5-D), channels last for NHWC. */
static zf_status_t s_build_bn(const zf_kernel_ctx_t *ctx, s_entry_t *e)
{
    const zf__win_geom_t *g = &e->g;
    ZF_TRY(s_data_md(ctx, g->nchw, g->n, g->c, g->h, 1, &e->src_md));
    e->dst_md = e->src_md;
    dnnl_dims_t cdims = {g->c};
    S_DNNL(ctx, dnnl_memory_desc_init_by_tag(&e->stat_md, 1, cdims, dnnl_f32, dnnl_a),
           "memory descriptor");
    bool global = g->kind == ZF__WIN_BN_INFER || g->kind == ZF__WIN_BN_BWD_FROZEN;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (global ? dnnl_use_global_stats : 0u);
    dnnl_batch_normalization_desc_t fd, bd;
    S_DNNL(ctx,
           dnnl_batch_normalization_forward_desc_init(
               &fd, g->kind == ZF__WIN_BN_INFER ? dnnl_forward_inference : dnnl_forward_training,
               &e->src_md, g->epsilon, flags),
           "batch normalization");
    dnnl_primitive_desc_t pd = NULL;
    S_DNNL(ctx, dnnl_primitive_desc_create(&pd, &fd, NULL, s_engine, NULL), "batch normalization");
    if (g->kind == ZF__WIN_BN_TRAIN || g->kind == ZF__WIN_BN_INFER)
        return s_prim_from(ctx, pd, "batch normalization", &e->prim);
    dnnl_status_t st = dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &e->src_md,
                                                                   &e->src_md, g->epsilon, flags);
    ZF_TRY(s_backward_pd(ctx, st, &bd, pd, "batch normalization gradient", &pd));
    return s_prim_from(ctx, pd, "batch normalization gradient", &e->prim);
}

/* Builds e's primitive (and filter reorder) for e->g. */
static zf_status_t s_entry_build(const zf_kernel_ctx_t *ctx, s_entry_t *e)
{
    const zf__win_geom_t *g = &e->g;
    if (s_is_bn(g)) return s_build_bn(ctx, e);
    ZF_TRY(s_data_md(ctx, g->nchw, g->n, g->c, g->h, g->w, &e->src_md));
    ZF_TRY(s_data_md(ctx, g->nchw, g->n, g->oc, g->oh, g->ow, &e->dst_md));
    if (!s_is_conv(g)) return s_build_pool(ctx, e);
    ZF_TRY(s_build_conv(ctx, e));
    if (dnnl_memory_desc_equal(&e->user_wei_md, &e->wei_md)) return ZF_STATUS_OK;
    /* the filter into the primitive's layout, or its gradient out of it */
    bool out = g->kind == ZF__WIN_CONV_BWD_FILTER;
    dnnl_primitive_desc_t rpd = NULL;
    S_DNNL(ctx,
           dnnl_reorder_primitive_desc_create(&rpd, out ? &e->wei_md : &e->user_wei_md, s_engine,
                                              out ? &e->user_wei_md : &e->wei_md, s_engine, NULL),
           "filter reorder");
    return s_prim_from(ctx, rpd, "filter reorder", &e->reorder);
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

/* The memory objects of one call, freed together. */
#define S_MAX_ARGS 10

typedef struct {
    dnnl_exec_arg_t args[S_MAX_ARGS];
    int n;
} s_args_t;

static void s_args_free(s_args_t *a)
{
    for (int i = 0; i < a->n; i++)
        if (a->args[i].memory) dnnl_memory_destroy(a->args[i].memory);
    a->n = 0;
}

/* Adds argument arg over data (DNNL_MEMORY_ALLOCATE: a scratch buffer). */
static zf_status_t s_arg(const zf_kernel_ctx_t *ctx, s_args_t *a, int arg,
                         const dnnl_memory_desc_t *md, void *data)
{
    assert(a->n < S_MAX_ARGS);
    dnnl_memory_t m = NULL;
    S_DNNL(ctx, dnnl_memory_create(&m, md, s_engine, data), "memory");
    a->args[a->n++] = (dnnl_exec_arg_t){arg, m};
    return ZF_STATUS_OK;
}

/* The memory of argument arg in a. */
static dnnl_memory_t s_arg_memory(const s_args_t *a, int arg)
{
    for (int i = 0; i < a->n; i++)
        if (a->args[i].arg == arg) return a->args[i].memory;
    return NULL;
}

static void *s_data(const zf_tensor_t *t)
{
    return zf_tensor_data(t);
}

/* Adds the filter argument: the cached reordered copy, or the tensor. */
static zf_status_t s_arg_weights(const zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *c, s_entry_t *e,
                                 const zf_tensor_t *f, s_args_t *a, s_weights_t **w)
{
    if (!e->reorder) return s_arg(ctx, a, DNNL_ARG_WEIGHTS, &e->user_wei_md, s_data(f));
    ZF_TRY(s_weights_get(ctx, c, e, f, w));
    a->args[a->n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, (*w)->mem}; /* the cache's */
    return ZF_STATUS_OK;
}

/* Fills a with the arguments of e's primitive for the tensors in t. */
static zf_status_t s_args_fill(const zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *c, s_entry_t *e,
                               const zf__dnnl_args_t *t, s_args_t *a, s_weights_t **w)
{
    const zf__win_geom_t *g = &e->g;
    switch (g->kind) {
    case ZF__WIN_CONV:
    case ZF__WIN_DEPTHWISE:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_SRC, &e->src_md, s_data(t->src)));
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DST, &e->dst_md, s_data(t->out)));
        return s_arg_weights(ctx, c, e, t->weights, a, w);
    case ZF__WIN_CONV_BWD_INPUT:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_DST, &e->dst_md, s_data(t->diff_dst)));
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_SRC, &e->src_md, s_data(t->out)));
        return s_arg_weights(ctx, c, e, t->weights, a, w);
    case ZF__WIN_CONV_BWD_FILTER:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_SRC, &e->src_md, s_data(t->src)));
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_DST, &e->dst_md, s_data(t->diff_dst)));
        if (e->reorder) /* into a scratch filter, then reordered into out */
            return s_arg(ctx, a, DNNL_ARG_DIFF_WEIGHTS, &e->wei_md, DNNL_MEMORY_ALLOCATE);
        return s_arg(ctx, a, DNNL_ARG_DIFF_WEIGHTS, &e->user_wei_md, s_data(t->out));
    case ZF__WIN_MAXPOOL:
    case ZF__WIN_AVGPOOL:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_SRC, &e->src_md, s_data(t->src)));
        return s_arg(ctx, a, DNNL_ARG_DST, &e->dst_md, s_data(t->out));
    case ZF__WIN_MAXPOOL_BWD:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_WORKSPACE, &e->ws_md, DNNL_MEMORY_ALLOCATE));
        /* fall through */
    case ZF__WIN_AVGPOOL_BWD:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_DST, &e->dst_md, s_data(t->diff_dst)));
        return s_arg(ctx, a, DNNL_ARG_DIFF_SRC, &e->src_md, s_data(t->out));
    case ZF__WIN_BN_TRAIN:
    case ZF__WIN_BN_INFER: ZF_TRY(s_arg(ctx, a, DNNL_ARG_DST, &e->dst_md, s_data(t->out))); break;
    case ZF__WIN_BN_BWD:
    case ZF__WIN_BN_BWD_FROZEN:
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_DST, &e->dst_md, s_data(t->diff_dst)));
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_SRC, &e->src_md, s_data(t->out)));
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_SCALE, &e->stat_md, t->diff_scale));
        ZF_TRY(s_arg(ctx, a, DNNL_ARG_DIFF_SHIFT, &e->stat_md, t->diff_shift));
        break;
    }
    ZF_TRY(s_arg(ctx, a, DNNL_ARG_SRC, &e->src_md, s_data(t->src)));
    ZF_TRY(s_arg(ctx, a, DNNL_ARG_MEAN, &e->stat_md, t->mean));
    ZF_TRY(s_arg(ctx, a, DNNL_ARG_VARIANCE, &e->stat_md, t->variance));
    ZF_TRY(s_arg(ctx, a, DNNL_ARG_SCALE, &e->stat_md, (void *)t->scale));
    /* the backward primitive wants a shift too, which it does not read */
    bool fwd = g->kind == ZF__WIN_BN_TRAIN || g->kind == ZF__WIN_BN_INFER;
    return s_arg(ctx, a, DNNL_ARG_SHIFT, &e->stat_md,
                 fwd ? (void *)t->shift : DNNL_MEMORY_ALLOCATE);
}

static zf_status_t s_run_entry(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *c, s_entry_t *e,
                               const zf__dnnl_args_t *t)
{
    s_args_t a = {.n = 0};
    s_weights_t *w = NULL;
    const char *what = s_what(&e->g);
    zf_status_t s = s_args_fill(ctx, c, e, t, &a, &w);
    if (zf_ok(s) && e->fwd) { /* MaxPoolGrad: the maxima first, into a scratch output */
        s_args_t f = {.n = 0};
        dnnl_memory_t ws = s_arg_memory(&a, DNNL_ARG_WORKSPACE);
        s = s_arg(ctx, &f, DNNL_ARG_SRC, &e->src_md, s_data(t->src));
        if (zf_ok(s)) s = s_arg(ctx, &f, DNNL_ARG_DST, &e->dst_md, DNNL_MEMORY_ALLOCATE);
        if (zf_ok(s)) {
            f.args[f.n] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, ws};
            s = s_execute(ctx, e->fwd, f.args, f.n + 1, what);
        }
        s_args_free(&f);
    }
    if (zf_ok(s)) s = s_execute(ctx, e->prim, a.args, a.n, what);
    if (zf_ok(s) && e->g.kind == ZF__WIN_CONV_BWD_FILTER && e->reorder) {
        s_args_t r = {.n = 0};
        s = s_arg(ctx, &r, DNNL_ARG_TO, &e->user_wei_md, s_data(t->out));
        if (zf_ok(s)) {
            r.args[r.n] = (dnnl_exec_arg_t){DNNL_ARG_FROM, s_arg_memory(&a, DNNL_ARG_DIFF_WEIGHTS)};
            s = s_execute(ctx, e->reorder, r.args, r.n + 1, "filter gradient reorder");
        }
        s_args_free(&r);
    }
    for (int i = 0; w && i < a.n; i++)
        if (a.args[i].memory == w->mem) a.args[i].memory = NULL; /* the cache's */
    s_weights_unref(&w);
    s_args_free(&a);
    return s;
}

zf_status_t zf__dnnl_exec(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *cache, const zf__win_geom_t *g,
                          const zf__dnnl_args_t *a)
{
    pthread_once(&s_engine_once, s_engine_init);
    if (s_engine_status != dnnl_success) return s_error(ctx, s_engine_status, "CPU engine");
    int threads = s_threads_begin(ctx);
    s_entry_t *e = NULL;
    bool temp = false;
    zf_status_t s = s_entry_get(ctx, cache, g, threads, &e, &temp);
    if (zf_ok(s)) s = s_run_entry(ctx, cache, e, a);
    if (temp) s_entry_free(e);
    s_threads_end();
    return s;
}

zf_status_t zf__dnnl_run(zf_kernel_ctx_t *ctx, zf__dnnl_cache_t *cache, const zf__win_geom_t *g,
                         const zf_tensor_t *x, const zf_tensor_t *f, zf_tensor_t *y)
{
    zf__dnnl_args_t a = {.src = x, .weights = f, .out = y};
    return zf__dnnl_exec(ctx, cache, g, &a);
}
