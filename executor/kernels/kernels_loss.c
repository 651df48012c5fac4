/* CPU loss kernels (FLOAT and DOUBLE): SoftmaxCrossEntropyWithLogits,
 * SparseSoftmaxCrossEntropyWithLogits and L2Loss.
 *
 * The cross entropies work row by row on [batch, classes] logits: each row
 * subtracts its max before exp() so that nothing overflows, and gives the
 * loss sum(labels * (log(sum(exp(x - max))) - (x - max))) and the backprop
 * softmax(x) - labels. SoftmaxCrossEntropyWithLogits broadcasts its
 * logits and labels against each other (NumPy rules) to two dims, as
 * TensorFlow does; the sparse form takes one class index per row (int32 or
 * int64) and refuses one outside [0, classes). Sums accumulate in
 * double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/kernels/kernels_util.h"

/* ---- the rows ---------------------------------------------------------------------------- */

/* Row r of logits and labels: element c is at r * s0 + c * s1 (s = 0
 * along a broadcast dim). Sparse labels use labels_idx instead. */
typedef struct {
    zf_dtype_t dtype;
    int64_t classes;
    const void *logits, *labels;
    int64_t ls0, ls1, bs0, bs1;
    const int64_t *labels_idx; /* sparse: one class per row, or NULL */
    void *loss, *backprop;
} s_xent_job_t;

#define S_XENT_ROWS(T)                                                                             \
    do {                                                                                           \
        const T *x = j->logits, *lab = j->labels;                                                  \
        T *loss = j->loss, *bp = j->backprop;                                                      \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *xr = x + r * j->ls0;                                                          \
            T *br = bp + r * j->classes;                                                           \
            double mx = -INFINITY, sum = 0, l = 0;                                                 \
            for (int64_t c = 0; c < j->classes; c++)                                               \
                if ((double)xr[c * j->ls1] > mx) mx = (double)xr[c * j->ls1];                      \
            for (int64_t c = 0; c < j->classes; c++) sum += exp((double)xr[c * j->ls1] - mx);      \
            double lse = log(sum);                                                                 \
            for (int64_t c = 0; c < j->classes; c++) {                                             \
                double z = (double)xr[c * j->ls1] - mx;                                            \
                double y = j->labels_idx ? (double)(j->labels_idx[r] == c)                         \
                                         : (double)lab[r * j->bs0 + c * j->bs1];                   \
                if (y != 0) l += y * (lse - z);                                                    \
                br[c] = (T)(exp(z) / sum - y);                                                     \
            }                                                                                      \
            loss[r] = (T)l;                                                                        \
        }                                                                                          \
    } while (0)

static void s_xent_rows(void *arg, int64_t begin, int64_t end)
{
    const s_xent_job_t *j = arg;
    if (j->dtype == ZF_FLOAT)
        S_XENT_ROWS(float);
    else
        S_XENT_ROWS(double);
}

/* Allocates loss [batch] and backprop [batch, classes] and fills them. */
static zf_status_t s_xent_run(zf_kernel_ctx_t *ctx, s_xent_job_t *job, int64_t batch)
{
    zf_tensor_t *loss = NULL, *backprop = NULL;
    zf_shape_t ls = ZF_SHAPE(batch), bs = ZF_SHAPE(batch, job->classes);
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, job->dtype, &ls, &loss));
    ZF_TRY(zf_kernel_alloc_output(ctx, 1, job->dtype, &bs, &backprop));
    job->loss = zf_tensor_data(loss);
    job->backprop = zf_tensor_data(backprop);
    zf_kernels_parallel_for(ctx, batch, ZF_KERNELS_PARALLEL_MIN / (job->classes + 1) + 1,
                            s_xent_rows, job);
    return ZF_STATUS_OK;
}

static zf_status_t s_check_float(const zf_kernel_ctx_t *ctx, zf_dtype_t t)
{
    if (t == ZF_FLOAT || t == ZF_DOUBLE) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                           zf_kernels_dtype_name((int)t));
}

/* ---- SoftmaxCrossEntropyWithLogits ------------------------------------------------------- */

/* Strides of a tensor of shape s (rank <= 2) read as the 2-D shape out. */
static void s_strides2(const zf_shape_t *s, const zf_shape_t *out, int64_t *s0, int64_t *s1)
{
    int64_t d0 = s->rank == 2 ? s->dims[0] : 1, d1 = s->rank >= 1 ? s->dims[s->rank - 1] : 1;
    *s1 = d1 == 1 && out->dims[1] != 1 ? 0 : 1;
    *s0 = d0 == 1 && out->dims[0] != 1 ? 0 : d1;
}

static zf_status_t s_xent_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *x = ctx->inputs[0], *y = ctx->inputs[1];
    zf_dtype_t t = zf_tensor_dtype(x);
    ZF_TRY(s_check_float(ctx, t));
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, t));
    const zf_shape_t *xs = zf_tensor_shape(x), *ys = zf_tensor_shape(y);
    char s1[ZF_SHAPE_STRING_MAX], s2[ZF_SHAPE_STRING_MAX];
    zf_shape_t shape;
    if (!zf_kernels_broadcast_shape(xs, ys, &shape))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "logits and labels must be broadcastable: logits_size=%s "
                               "labels_size=%s",
                               zf_kernels_shape_str(x, s1), zf_kernels_shape_str(y, s2));
    if (shape.rank != 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "logits and labels must be either 2-dimensional, or broadcasted "
                               "to be 2-dimensional: logits_size=%s labels_size=%s",
                               zf_kernels_shape_str(x, s1), zf_kernels_shape_str(y, s2));
    s_xent_job_t job = {.dtype = t,
                        .classes = shape.dims[1],
                        .logits = zf_tensor_data(x),
                        .labels = zf_tensor_data(y)};
    s_strides2(xs, &shape, &job.ls0, &job.ls1);
    s_strides2(ys, &shape, &job.bs0, &job.bs1);
    return s_xent_run(ctx, &job, shape.dims[0]);
}

/* ---- SparseSoftmaxCrossEntropyWithLogits --------------------------------------------------- */

static zf_status_t s_sparse_check(const zf_kernel_ctx_t *ctx)
{
    const zf_tensor_t *x = ctx->inputs[0], *y = ctx->inputs[1];
    const zf_shape_t *xs = zf_tensor_shape(x), *ys = zf_tensor_shape(y);
    char s1[ZF_SHAPE_STRING_MAX], s2[ZF_SHAPE_STRING_MAX];
    zf_dtype_t lt = zf_tensor_dtype(y);
    ZF_TRY(s_check_float(ctx, zf_tensor_dtype(x)));
    if (lt != ZF_INT32 && lt != ZF_INT64)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "labels must be int32 or int64, got %s",
                               zf_kernels_dtype_name((int)lt));
    if (xs->rank != 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "logits must be 2-D, but got shape %s",
                               zf_kernels_shape_str(x, s1));
    if (ys->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "labels must be 1-D, but got shape %s",
                               zf_kernels_shape_str(y, s1));
    if (xs->dims[0] != ys->dims[0])
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "logits and labels must have the same first dimension, got logits "
                               "shape %s and labels shape %s",
                               zf_kernels_shape_str(x, s1), zf_kernels_shape_str(y, s2));
    if (xs->dims[1] == 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Must have at least one class, but got logits shape %s",
                               zf_kernels_shape_str(x, s1));
    return ZF_STATUS_OK;
}

/* The labels as int64, each checked against [0, classes). */
static zf_status_t s_sparse_labels(const zf_kernel_ctx_t *ctx, int64_t classes, int64_t *out)
{
    const zf_tensor_t *y = ctx->inputs[1];
    int64_t n = zf_tensor_num_elements(y);
    const void *d = zf_tensor_data(y);
    bool i32 = zf_tensor_dtype(y) == ZF_INT32;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        out[i] = i32 ? ((const int32_t *)d)[i] : ((const int64_t *)d)[i];
        if (bad < 0 && (out[i] < 0 || out[i] >= classes)) bad = i;
    }
    if (bad < 0) return ZF_STATUS_OK;
    /* TensorFlow lists the label values after the offending one. */
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int64_t i = 0; i < n && len + 24 < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld", i ? " " : "",
                                (long long)out[i]);
    if (len + 24 >= sizeof list) snprintf(list + len, sizeof list - len, " ...");
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "Received a label value of %lld which is outside the valid range of "
                           "[0, %lld).  Label values: %s",
                           (long long)out[bad], (long long)classes, list);
}

static zf_status_t s_sparse_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(s_sparse_check(ctx));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *xs = zf_tensor_shape(x);
    int64_t batch = xs->dims[0], classes = xs->dims[1];
    int64_t *labels = malloc((size_t)(batch > 0 ? batch : 1) * sizeof *labels);
    if (!labels) return zf_out_of_memory("SparseSoftmaxCrossEntropyWithLogits labels");
    zf_status_t s = s_sparse_labels(ctx, classes, labels);
    if (zf_ok(s)) {
        s_xent_job_t job = {.dtype = zf_tensor_dtype(x),
                            .classes = classes,
                            .logits = zf_tensor_data(x),
                            .ls0 = classes,
                            .ls1 = 1,
                            .labels_idx = labels};
        s = s_xent_run(ctx, &job, batch);
    }
    free(labels);
    return s;
}

/* ---- L2Loss ------------------------------------------------------------------------------ */

static zf_status_t s_l2_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    zf_dtype_t t = zf_tensor_dtype(x);
    ZF_TRY(s_check_float(ctx, t));
    zf_tensor_t *out = NULL;
    zf_shape_t scalar = zf_shape_scalar();
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &scalar, &out));
    int64_t n = zf_tensor_num_elements(x);
    double sum = 0;
    if (t == ZF_FLOAT) {
        const float *v = zf_tensor_data(x);
        for (int64_t i = 0; i < n; i++) sum += (double)v[i] * (double)v[i];
        *(float *)zf_tensor_data(out) = (float)(sum / 2);
    } else {
        const double *v = zf_tensor_data(x);
        for (int64_t i = 0; i < n; i++) sum += v[i] * v[i];
        *(double *)zf_tensor_data(out) = sum / 2;
    }
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------------------ */

static const zf_kernel_t s_defs[] = {
    {.op = "SoftmaxCrossEntropyWithLogits",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .flags = ZF_KERNEL_EXPENSIVE,
     .compute = s_xent_compute},
    {.op = "SparseSoftmaxCrossEntropyWithLogits",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .flags = ZF_KERNEL_EXPENSIVE,
     .compute = s_sparse_compute},
    ZF_CPU_KERNEL("L2Loss", ZF_TYPES_FLOAT, s_l2_compute),
};

zf_status_t zf__kernels_register_loss(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
