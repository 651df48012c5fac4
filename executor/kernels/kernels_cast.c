/* CPU Cast between the real and boolean dtypes (float, double, half,
 * bfloat16, signed and unsigned integers, bool), and ToBool (TensorFlow's
 * truthiness of a whole tensor, for If predicates that are not bool).
 *
 * Values go through a wide intermediate in blocks: double for floating
 * sources, int64 for integer and bool sources, so integer casts stay exact.
 * Floating values outside an integer type's range saturate and NaN becomes
 * 0 (C leaves those conversions undefined); integer narrowing wraps, as in
 * TensorFlow. Truncate=true makes float -> bfloat16 truncate instead of
 * round, as TensorFlow's bfloat16 Send/Recv does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

#define S_CAST_TYPES                                                                               \
    (ZF_TYPES_REAL | ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_BFLOAT16) |      \
     ZF_TYPE_BIT(ZF_UINT8) | ZF_TYPE_BIT(ZF_INT8) | ZF_TYPE_BIT(ZF_INT16) |                        \
     ZF_TYPE_BIT(ZF_UINT16) | ZF_TYPE_BIT(ZF_UINT32) | ZF_TYPE_BIT(ZF_UINT64))

#define S_BLOCK 512

typedef struct {
    zf_dtype_t src, dst;
    bool truncate;
} s_cast_t;

static bool s_is_floating(zf_dtype_t t)
{
    return t == ZF_FLOAT || t == ZF_DOUBLE || t == ZF_HALF || t == ZF_BFLOAT16;
}

/* ---- reading into the intermediate ------------------------------------------- */

static void s_read_floating(zf_dtype_t t, const void *src, int64_t n, double *out)
{
    switch (t) {
    case ZF_FLOAT:
        for (int64_t i = 0; i < n; i++) out[i] = ((const float *)src)[i];
        break;
    case ZF_DOUBLE: memcpy(out, src, (size_t)n * sizeof *out); break;
    case ZF_HALF:
        for (int64_t i = 0; i < n; i++) out[i] = zf_half_to_float(((const uint16_t *)src)[i]);
        break;
    default: /* BFLOAT16 */
        for (int64_t i = 0; i < n; i++) out[i] = zf_bfloat16_to_float(((const uint16_t *)src)[i]);
    }
}

#define S_READ_INT(T)                                                                              \
    for (int64_t i = 0; i < n; i++) out[i] = (int64_t)((const T *)src)[i];

static void s_read_integer(zf_dtype_t t, const void *src, int64_t n, int64_t *out)
{
    switch (t) {
    case ZF_INT32: S_READ_INT(int32_t) break;
    case ZF_INT64: memcpy(out, src, (size_t)n * sizeof *out); break;
    case ZF_BOOL: S_READ_INT(bool) break;
    case ZF_UINT8: S_READ_INT(uint8_t) break;
    case ZF_INT8: S_READ_INT(int8_t) break;
    case ZF_INT16: S_READ_INT(int16_t) break;
    case ZF_UINT16: S_READ_INT(uint16_t) break;
    case ZF_UINT32: S_READ_INT(uint32_t) break;
    default: S_READ_INT(uint64_t) /* UINT64: wraps above INT64_MAX */
    }
}

/* ---- writing from doubles ------------------------------------------------------ */

/* A double saturated into [lo, hi] (NaN -> 0), for integer destinations.
 * hi_excl is the first value above the range, exactly representable. */
static double s_saturate(double v, double lo, double hi_excl, bool *at_max)
{
    *at_max = false;
    if (isnan(v)) return 0;
    if (v >= hi_excl) {
        *at_max = true;
        return 0;
    }
    return v < lo ? lo : v;
}

#define S_WRITE_SAT(T, LO, HI_EXCL, MAX)                                                           \
    for (int64_t i = 0; i < n; i++) {                                                              \
        bool at_max;                                                                               \
        double v = s_saturate(in[i], (LO), (HI_EXCL), &at_max);                                    \
        ((T *)dst)[i] = at_max ? (MAX) : (T)v;                                                     \
    }

static void s_write_from_double(const s_cast_t *c, const double *in, int64_t n, void *dst)
{
    switch (c->dst) {
    case ZF_FLOAT:
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)in[i];
        break;
    case ZF_DOUBLE: memcpy(dst, in, (size_t)n * sizeof *in); break;
    case ZF_HALF:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = zf_float_to_half((float)in[i]);
        break;
    case ZF_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = c->truncate ? zf_float_to_bfloat16_truncate((float)in[i])
                                               : zf_float_to_bfloat16((float)in[i]);
        break;
    case ZF_BOOL:
        for (int64_t i = 0; i < n; i++) ((bool *)dst)[i] = in[i] != 0;
        break;
    case ZF_INT32: S_WRITE_SAT(int32_t, -2147483648.0, 2147483648.0, INT32_MAX) break;
    case ZF_INT64:
        S_WRITE_SAT(int64_t, -9223372036854775808.0, 9223372036854775808.0, INT64_MAX) break;
    case ZF_UINT8: S_WRITE_SAT(uint8_t, 0.0, 256.0, UINT8_MAX) break;
    case ZF_INT8: S_WRITE_SAT(int8_t, -128.0, 128.0, INT8_MAX) break;
    case ZF_INT16: S_WRITE_SAT(int16_t, -32768.0, 32768.0, INT16_MAX) break;
    case ZF_UINT16: S_WRITE_SAT(uint16_t, 0.0, 65536.0, UINT16_MAX) break;
    case ZF_UINT32: S_WRITE_SAT(uint32_t, 0.0, 4294967296.0, UINT32_MAX) break;
    default: S_WRITE_SAT(uint64_t, 0.0, 18446744073709551616.0, UINT64_MAX)
    }
}

/* ---- writing from int64 ---------------------------------------------------------- */

/* Narrowing through the unsigned type wraps modulo 2^bits. */
#define S_WRITE_WRAP(T, U)                                                                         \
    for (int64_t i = 0; i < n; i++) ((T *)dst)[i] = (T)(U)(uint64_t)in[i];

static void s_write_from_int(const s_cast_t *c, const int64_t *in, int64_t n, void *dst)
{
    if (s_is_floating(c->dst)) {
        double buf[S_BLOCK];
        for (int64_t i = 0; i < n; i++) buf[i] = (double)in[i];
        s_write_from_double(c, buf, n, dst);
        return;
    }
    switch (c->dst) {
    case ZF_BOOL:
        for (int64_t i = 0; i < n; i++) ((bool *)dst)[i] = in[i] != 0;
        break;
    case ZF_INT32: S_WRITE_WRAP(int32_t, uint32_t) break;
    case ZF_INT64: memcpy(dst, in, (size_t)n * sizeof *in); break;
    case ZF_UINT8: S_WRITE_WRAP(uint8_t, uint8_t) break;
    case ZF_INT8: S_WRITE_WRAP(int8_t, uint8_t) break;
    case ZF_INT16: S_WRITE_WRAP(int16_t, uint16_t) break;
    case ZF_UINT16: S_WRITE_WRAP(uint16_t, uint16_t) break;
    case ZF_UINT32: S_WRITE_WRAP(uint32_t, uint32_t) break;
    default: S_WRITE_WRAP(uint64_t, uint64_t)
    }
}

/* ---- the kernel -------------------------------------------------------------------- */

typedef struct {
    const s_cast_t *cast;
    const char *in;
    char *out;
    size_t in_elem, out_elem;
} s_cast_job_t;

static void s_cast_blocks(void *arg, int64_t begin, int64_t end)
{
    const s_cast_job_t *j = arg;
    for (int64_t at = begin; at < end; at += S_BLOCK) {
        int64_t n = end - at < S_BLOCK ? end - at : S_BLOCK;
        const char *src = j->in + (size_t)at * j->in_elem;
        char *dst = j->out + (size_t)at * j->out_elem;
        if (s_is_floating(j->cast->src)) {
            double buf[S_BLOCK];
            s_read_floating(j->cast->src, src, n, buf);
            s_write_from_double(j->cast, buf, n, dst);
        } else {
            int64_t buf[S_BLOCK];
            s_read_integer(j->cast->src, src, n, buf);
            s_write_from_int(j->cast, buf, n, dst);
        }
    }
}

static zf_status_t s_cast_create(const Tensorflow__NodeDef *node, void **state)
{
    s_cast_t c = {ZF_INVALID, ZF_INVALID, false};
    ZF_TRY(zf_kernels_attr_dtype(node, "SrcT", S_CAST_TYPES, &c.src));
    ZF_TRY(zf_kernels_attr_dtype(node, "DstT", S_CAST_TYPES, &c.dst));
    ZF_TRY(zf_node_attr_bool_or(node, "Truncate", false, &c.truncate));
    s_cast_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("Cast kernel");
    *p = c;
    *state = p;
    return ZF_STATUS_OK;
}

static zf_status_t s_cast_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const s_cast_t *c = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    ZF_TRY(zf_kernels_check_dtype(ctx, 0, c->src));
    if (c->src == c->dst) { /* nothing to convert: share the input */
        zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
        return ZF_STATUS_OK;
    }
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, c->dst, zf_tensor_shape(x), &out));
    s_cast_job_t job = {c, zf_tensor_data(x), zf_tensor_data(out), zf_dtype_size(c->src),
                        zf_dtype_size(c->dst)};
    zf_kernels_parallel_for(ctx, zf_tensor_num_elements(x), ZF_KERNELS_PARALLEL_MIN, s_cast_blocks,
                            &job);
    return ZF_STATUS_OK;
}

/* ---- ToBool ------------------------------------------------------------------- */

/* A scalar is true when non-zero (a string when non-empty); any other
 * tensor when it has elements. */
static zf_status_t s_to_bool_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_dtype_t t = zf_dtype_base(zf_tensor_dtype(x));
    const void *data = zf_tensor_data(x);
    bool v = false;
    if (zf_tensor_shape(x)->rank > 0) {
        v = zf_tensor_num_elements(x) > 0;
    } else if (t == ZF_STRING) {
        v = ((const zf_tstring_t *)data)->len > 0;
    } else if (s_is_floating(t)) {
        double d = 0;
        s_read_floating(t, data, 1, &d);
        v = d != 0; /* NaN is true, -0.0 false */
    } else {
        int64_t i = 0;
        s_read_integer(t, data, 1, &i);
        v = i != 0;
    }
    zf_tensor_t *out = NULL;
    zf_shape_t scalar = {0};
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_BOOL, &scalar, &out));
    *(bool *)zf_tensor_data(out) = v;
    return ZF_STATUS_OK;
}

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("ToBool", S_CAST_TYPES | ZF_TYPE_BIT(ZF_STRING), s_to_bool_compute),
    {.op = "Cast",
     .device_type = "CPU",
     .allowed_types = S_CAST_TYPES,
     .create = s_cast_create,
     .destroy = free,
     .compute = s_cast_compute},
};

zf_status_t zf__kernels_register_cast(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
