/* CPU random-number kernels: RandomUniform, RandomStandardNormal and
 * TruncatedNormal (float, double) and RandomUniformInt (int32, int64).
 *
 * The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011): a counter-based generator that maps a
 * 128-bit counter and a 64-bit key to 128 random bits. The key is the
 * node's seed and seed2 attrs mixed into 64 bits; both 0 takes a random
 * key when the kernel is created, as TensorFlow does. Each kernel keeps a 64-bit count of the
 * elements it has made; a run reserves the next n counts atomically, and
 * element i of the run draws from the counter (count + i, attempt, 0).
 * So a node with fixed seeds gives the same values in the same order run
 * after run, process after process, however its chunks are split over
 * threads; two nodes with the same seeds give the same sequence. The
 * values are not bit-identical to TensorFlow's.
 *
 * Uniform floats take 24 (float) or 53 (double) random bits in [0, 1);
 * normals come from Box-Muller on two uniforms; TruncatedNormal draws
 * again (the next attempt) while |x| > 2; RandomUniformInt takes 64
 * random bits modulo maxval - minval, a bias of at most range / 2^64
 * (below 2^-32 for any int32 range). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/random.h"
#include "executor/kernels/kernels_util.h"

/* ---- Philox4x32-10 ---------------------------------------------------------------------- */

#define S_PHILOX_M0 0xD2511F53u
#define S_PHILOX_M1 0xCD9E8D57u
#define S_PHILOX_W0 0x9E3779B9u
#define S_PHILOX_W1 0xBB67AE85u

/* out = Philox4x32-10(ctr, key). */
static void s_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)S_PHILOX_M0 * c0, p1 = (uint64_t)S_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += S_PHILOX_W0;
        k1 += S_PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The 128 bits of element index, attempt. */
static void s_draw(const uint32_t key[2], uint64_t index, uint32_t attempt, uint32_t out[4])
{
    const uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), attempt, 0};
    s_philox(ctr, key, out);
}

static double s_unit53(uint32_t hi, uint32_t lo)
{
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1.0p-53;
}

/* A standard normal from Box-Muller on the 128 bits r. */
static double s_normal(const uint32_t r[4])
{
    double u1 = s_unit53(r[0], r[1]), u2 = s_unit53(r[2], r[3]);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * 3.14159265358979323846 * u2); /* 1 - u1 > 0 */
}

/* ---- the kernels' state ---------------------------------------------------------------------- */

typedef enum { S_UNIFORM, S_NORMAL, S_TRUNCATED, S_UNIFORM_INT } s_dist_t;

typedef struct {
    s_dist_t dist;
    zf_dtype_t dtype;
    uint32_t key[2];
    _Atomic uint64_t next; /* the first element count not yet used */
} s_state_t;

static zf_status_t s_create(const Tensorflow__NodeDef *node, void **state)
{
    s_dist_t dist = !strcmp(node->op, "RandomStandardNormal") ? S_NORMAL
                    : !strcmp(node->op, "TruncatedNormal")    ? S_TRUNCATED
                    : !strcmp(node->op, "RandomUniformInt")   ? S_UNIFORM_INT
                                                              : S_UNIFORM;
    zf_dtype_t dtype = ZF_INVALID;
    if (dist == S_UNIFORM_INT)
        ZF_TRY(zf_kernels_attr_dtype(node, "Tout", ZF_TYPES_INDEX, &dtype));
    else
        ZF_TRY(zf_kernels_attr_dtype(node, "dtype", ZF_TYPES_FLOAT, &dtype));
    int64_t seed = 0, seed2 = 0;
    ZF_TRY(zf_node_attr_int_or(node, "seed", 0, &seed));
    ZF_TRY(zf_node_attr_int_or(node, "seed2", 0, &seed2));
    if (seed == 0 && seed2 == 0) {
        uint64_t r = zf_random_id();
        seed = (int64_t)(r & 0xffffffffu);
        seed2 = (int64_t)(r >> 32);
    }
    s_state_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("random kernel");
    st->dist = dist;
    st->dtype = dtype;
    /* one 64-bit key from both seeds */
    uint64_t k = (uint64_t)seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)seed2;
    st->key[0] = (uint32_t)k;
    st->key[1] = (uint32_t)(k >> 32);
    atomic_init(&st->next, 0);
    *state = st;
    return ZF_STATUS_OK;
}

/* ---- filling ----------------------------------------------------------------------------- */

typedef struct {
    const s_state_t *st;
    uint64_t base; /* element count of out[0] */
    void *out;
    int64_t lo;     /* RandomUniformInt: minval */
    uint64_t range; /* and maxval - minval */
} s_job_t;

static double s_value(const s_job_t *j, int64_t i)
{
    uint32_t r[4];
    uint64_t index = j->base + (uint64_t)i;
    s_draw(j->st->key, index, 0, r);
    switch (j->st->dist) {
    case S_UNIFORM:
        return j->st->dtype == ZF_FLOAT ? (double)(r[0] >> 8) * 0x1.0p-24 : s_unit53(r[0], r[1]);
    case S_NORMAL: return s_normal(r);
    default: {
        double x = s_normal(r);
        for (uint32_t attempt = 1; fabs(x) > 2.0; attempt++) {
            s_draw(j->st->key, index, attempt, r);
            x = s_normal(r);
        }
        return x;
    }
    }
}

static void s_fill(void *arg, int64_t begin, int64_t end)
{
    const s_job_t *j = arg;
    switch (j->st->dtype) {
    case ZF_FLOAT:
        for (int64_t i = begin; i < end; i++) {
            float v = (float)s_value(j, i);
            /* a float normal rounded past 2 would break truncation */
            if (j->st->dist == S_TRUNCATED && fabsf(v) > 2.0f) v = v > 0 ? 2.0f : -2.0f;
            ((float *)j->out)[i] = v;
        }
        break;
    case ZF_DOUBLE:
        for (int64_t i = begin; i < end; i++) ((double *)j->out)[i] = s_value(j, i);
        break;
    default:
        for (int64_t i = begin; i < end; i++) {
            uint32_t r[4];
            s_draw(j->st->key, j->base + (uint64_t)i, 0, r);
            uint64_t bits = ((uint64_t)r[0] << 32) | r[1];
            int64_t v = (int64_t)((uint64_t)j->lo + bits % j->range);
            if (j->st->dtype == ZF_INT32)
                ((int32_t *)j->out)[i] = (int32_t)v;
            else
                ((int64_t *)j->out)[i] = v;
        }
    }
}

/* ---- inputs ------------------------------------------------------------------------------- */

/* The output shape from input 0, a vector of non-negative dims. */
static zf_status_t s_shape(const zf_kernel_ctx_t *ctx, zf_shape_t *out)
{
    const zf_tensor_t *t = ctx->inputs[0];
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(t)->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "shape must be a vector of {int32,int64}, got shape %s",
                               zf_kernels_shape_str(t, sbuf));
    int64_t dims[ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 0, "shape", dims, ZF_MAX_RANK, &n));
    out->rank = n;
    for (int k = 0; k < n; k++) {
        if (dims[k] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Dimension %d of shape must be >= 0, got %lld", k,
                                   (long long)dims[k]);
        out->dims[k] = dims[k];
    }
    return ZF_STATUS_OK;
}

/* RandomUniformInt's bounds: scalars of its dtype with minval < maxval. */
static zf_status_t s_bounds(const zf_kernel_ctx_t *ctx, zf_dtype_t dtype, int64_t *lo, int64_t *hi)
{
    const char *names[2] = {"minval", "maxval"};
    int64_t v[2];
    for (int k = 0; k < 2; k++) {
        const zf_tensor_t *t = ctx->inputs[1 + k];
        char sbuf[ZF_SHAPE_STRING_MAX];
        ZF_TRY(zf_kernels_check_dtype(ctx, 1 + k, dtype));
        if (zf_tensor_shape(t)->rank != 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be 0-D, got shape %s",
                                   names[k], zf_kernels_shape_str(t, sbuf));
        v[k] = dtype == ZF_INT32 ? *(const int32_t *)zf_tensor_data(t)
                                 : *(const int64_t *)zf_tensor_data(t);
    }
    *lo = v[0];
    *hi = v[1];
    return ZF_STATUS_OK;
}

static zf_status_t s_compute(zf_kernel_ctx_t *ctx)
{
    s_state_t *st = ctx->state;
    bool ints = st->dist == S_UNIFORM_INT;
    ZF_TRY(zf_kernels_check_inputs(ctx, ints ? 3 : 1));
    zf_shape_t shape;
    ZF_TRY(s_shape(ctx, &shape));
    int64_t lo = 0, hi = 0;
    if (ints) ZF_TRY(s_bounds(ctx, st->dtype, &lo, &hi));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, st->dtype, &shape, &out));
    int64_t n = zf_tensor_num_elements(out);
    if (ints && n > 0 && lo >= hi)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Need minval < maxval: %lld >= %lld",
                               (long long)lo, (long long)hi);
    if (n == 0) return ZF_STATUS_OK;
    s_job_t job = {.st = st,
                   .base = atomic_fetch_add(&st->next, (uint64_t)n),
                   .out = zf_tensor_data(out),
                   .lo = lo,
                   .range = (uint64_t)hi - (uint64_t)lo};
    zf_kernels_parallel_for(ctx, n, ZF_KERNELS_PARALLEL_MIN / 16, s_fill, &job);
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------------------ */

#define S_KERNEL(op_, types_)                                                                      \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = (types_),                              \
        .flags = ZF_KERNEL_EXPENSIVE | ZF_KERNEL_SIZED_BY_VALUE, .create = s_create,               \
        .destroy = free, .compute = s_compute                                                      \
    }

static const zf_kernel_t s_defs[] = {
    S_KERNEL("RandomUniform", ZF_TYPES_FLOAT),
    S_KERNEL("RandomStandardNormal", ZF_TYPES_FLOAT),
    S_KERNEL("TruncatedNormal", ZF_TYPES_FLOAT),
    S_KERNEL("RandomUniformInt", ZF_TYPES_INDEX),
};

zf_status_t zf__kernels_register_random(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
