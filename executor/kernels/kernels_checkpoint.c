/* CPU kernels for TensorFlow's V2 checkpoints (common/tensor_bundle.h):
 * SaveV2, RestoreV2 and MergeV2Checkpoints, with TensorFlow's input checks
 * and messages. Only whole tensors are saved and restored: a non-empty
 * shape_and_slices entry (a slice of a partitioned variable) is
 * UNIMPLEMENTED, naming it. They touch files, so they run on the device's
 * pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/graph.h"
#include "common/tensor_bundle.h"
#include "executor/kernels/kernels_util.h"

/* Input i as a STRING tensor of the given rank (-1: any with one element);
 * what names it in TensorFlow's words. */
static zf_status_t s_string_input(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                  const zf_tstring_t **out)
{
    const zf_tensor_t *t = ctx->inputs[i];
    if (zf_tensor_dtype(t) != ZF_STRING)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input %s must be string, got %s", what,
                               zf_kernels_dtype_name((int)zf_tensor_dtype(t)));
    *out = zf_tensor_data(t);
    return ZF_STATUS_OK;
}

/* A string element as a path: no NUL bytes inside. */
static zf_status_t s_path(const zf_kernel_ctx_t *ctx, const zf_tstring_t *str, const char **out)
{
    if (str->len == 0) {
        *out = "";
        return ZF_STATUS_OK;
    }
    if (strlen(str->data) != str->len)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "checkpoint path holds a NUL byte");
    *out = str->data;
    return ZF_STATUS_OK;
}

/* The checks TensorFlow's SaveV2 and RestoreV2 share (ValidateInputs). */
static zf_status_t s_validate(const zf_kernel_ctx_t *ctx, bool is_save, const char **prefix,
                              const zf_tstring_t **names, const zf_tstring_t **slices, int64_t *num)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const zf_tstring_t *p = NULL;
    ZF_TRY(s_string_input(ctx, 0, "prefix", &p));
    ZF_TRY(s_string_input(ctx, 1, "tensor_names", names));
    ZF_TRY(s_string_input(ctx, 2, "shape_and_slices", slices));
    const zf_tensor_t *prefix_t = ctx->inputs[0], *names_t = ctx->inputs[1],
                      *slices_t = ctx->inputs[2];
    if (zf_tensor_num_elements(prefix_t) != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input prefix should have a single element, got %lld instead.",
                               (long long)zf_tensor_num_elements(prefix_t));
    if (zf_tensor_shape(names_t)->rank != 1 || zf_tensor_shape(slices_t)->rank != 1) {
        char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input tensor_names and shape_and_slices should be an 1-D tensors, "
                               "got %s and %s instead.",
                               zf_kernels_shape_str(names_t, a), zf_kernels_shape_str(slices_t, b));
    }
    *num = zf_tensor_num_elements(names_t);
    if (*num != zf_tensor_num_elements(slices_t))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "tensor_names and shape_and_slices have different number of "
                               "elements: %lld vs. %lld",
                               (long long)*num, (long long)zf_tensor_num_elements(slices_t));
    if (is_save && ctx->num_inputs - 3 != *num)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Got %lld tensor names but %d tensors.",
                               (long long)*num, ctx->num_inputs - 3);
    for (int64_t i = 0; i < *num; i++)
        if ((*slices)[i].len != 0)
            return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                                   "tensor %.*s has shape_and_slices '%.*s': saving and "
                                   "restoring slices of partitioned tensors is not supported",
                                   (int)(*names)[i].len, (*names)[i].data ? (*names)[i].data : "",
                                   (int)(*slices)[i].len, (*slices)[i].data);
    return s_path(ctx, p, prefix);
}

/* ---- SaveV2 ------------------------------------------------------------------------- */

static zf_status_t s_save_compute(zf_kernel_ctx_t *ctx)
{
    const char *prefix = NULL;
    const zf_tstring_t *names = NULL, *slices = NULL;
    int64_t n = 0;
    ZF_TRY(s_validate(ctx, true, &prefix, &names, &slices, &n));
    zf_status_t s =
        zf_bundle_write(prefix, names, (const zf_tensor_t *const *)ctx->inputs + 3, (size_t)n);
    return zf_ok(s) ? s : zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
}

/* ---- RestoreV2 ---------------------------------------------------------------------- */

typedef struct {
    zf_dtype_t *dtypes;
    size_t n;
} s_restore_state_t;

static void s_restore_destroy(void *state)
{
    s_restore_state_t *st = state;
    if (!st) return;
    free(st->dtypes);
    free(st);
}

static zf_status_t s_restore_create(const Tensorflow__NodeDef *node, void **state)
{
    const Tensorflow__DataType *types = NULL;
    size_t n = 0;
    ZF_TRY(zf_node_attr_list_type(node, "dtypes", &types, &n));
    s_restore_state_t *st = calloc(1, sizeof *st);
    if (st) st->dtypes = malloc((n ? n : 1) * sizeof *st->dtypes);
    if (!st || !st->dtypes) {
        s_restore_destroy(st);
        return zf_out_of_memory("RestoreV2 kernel");
    }
    for (size_t i = 0; i < n; i++) st->dtypes[i] = zf_dtype_base((int)types[i]);
    st->n = n;
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_restore_all(zf_kernel_ctx_t *ctx, const zf_bundle_reader_t *r,
                                 const zf_tstring_t *names, int64_t n)
{
    const s_restore_state_t *st = ctx->state;
    for (int64_t i = 0; i < n; i++) {
        const char *key = names[i].data ? names[i].data : "";
        zf_bundle_entry_t e;
        ZF_TRY(zf_bundle_reader_entry(r, key, names[i].len, &e));
        if (e.dtype != st->dtypes[i])
            return zf_status_new(ZF_INVALID_ARGUMENT,
                                 "tensor_name = %.*s; expected dtype %s does not equal restored "
                                 "dtype %s",
                                 (int)names[i].len, key, zf_kernels_dtype_name((int)st->dtypes[i]),
                                 zf_kernels_dtype_name((int)e.dtype));
        zf_tensor_t *t = NULL;
        ZF_TRY(zf_bundle_reader_lookup(r, key, names[i].len, &t));
        zf_kernel_set_output(ctx, (int)i, t);
        zf_tensor_unref(&t);
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_restore_compute(zf_kernel_ctx_t *ctx)
{
    const s_restore_state_t *st = ctx->state;
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    int64_t names = zf_tensor_num_elements(ctx->inputs[1]);
    if (names < 0 || (uint64_t)names != st->n)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Got %lld tensor names, but %zu expected dtypes.", (long long)names,
                               st->n);
    const char *prefix = NULL;
    const zf_tstring_t *keys = NULL, *slices = NULL;
    int64_t n = 0;
    ZF_TRY(s_validate(ctx, false, &prefix, &keys, &slices, &n));
    if (ctx->num_outputs < n)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "expects %lld outputs, has %d",
                               (long long)n, ctx->num_outputs);
    zf_bundle_reader_t *r = NULL;
    zf_status_t s = zf_bundle_reader_open(prefix, &r);
    if (zf_ok(s)) s = s_restore_all(ctx, r, keys, n);
    zf_bundle_reader_destroy(&r);
    if (!zf_ok(s)) {
        for (int i = 0; i < ctx->num_outputs; i++) zf_tensor_unref(&ctx->outputs[i]);
        return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    }
    return ZF_STATUS_OK;
}

/* ---- MergeV2Checkpoints ------------------------------------------------------------- */

typedef struct {
    bool delete_old_dirs;
    bool allow_missing_files;
} s_merge_state_t;

static zf_status_t s_merge_create(const Tensorflow__NodeDef *node, void **state)
{
    s_merge_state_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("MergeV2Checkpoints kernel");
    zf_status_t s = zf_node_attr_bool_or(node, "delete_old_dirs", true, &st->delete_old_dirs);
    if (zf_ok(s))
        s = zf_node_attr_bool_or(node, "allow_missing_files", false, &st->allow_missing_files);
    if (!zf_ok(s)) {
        free(st);
        return s;
    }
    *state = st;
    return ZF_STATUS_OK;
}

/* The directory part of path ("" when none), as TensorFlow's io::Dirname. */
static size_t s_dirname_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return 0;
    return slash == path ? 1 : (size_t)(slash - path);
}

static void s_delete_old_dirs(const char *const *paths, int64_t n, const char *dest)
{
    size_t dest_len = s_dirname_len(dest);
    for (int64_t i = 0; i < n; i++) {
        size_t len = s_dirname_len(paths[i]);
        if (len == 0 || (len == dest_len && memcmp(paths[i], dest, len) == 0)) continue;
        char *dir = strndup(paths[i], len);
        if (dir) (void)rmdir(dir); /* not empty or gone: TensorFlow ignores that too */
        free(dir);
    }
}

static zf_status_t s_merge_compute(zf_kernel_ctx_t *ctx)
{
    const s_merge_state_t *st = ctx->state;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tstring_t *srcs = NULL, *dst = NULL;
    ZF_TRY(s_string_input(ctx, 0, "checkpoint_prefixes", &srcs));
    ZF_TRY(s_string_input(ctx, 1, "destination_prefix", &dst));
    char buf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[0])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input checkpoint_prefixes should be an 1-D tensor, got %s instead.",
                               zf_kernels_shape_str(ctx->inputs[0], buf));
    if (zf_tensor_shape(ctx->inputs[1])->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input destination_prefix should be a scalar tensor, got %s "
                               "instead.",
                               zf_kernels_shape_str(ctx->inputs[1], buf));
    int64_t n = zf_tensor_num_elements(ctx->inputs[0]);
    const char **paths = malloc((size_t)(n ? n : 1) * sizeof *paths);
    if (!paths) return zf_out_of_memory("MergeV2Checkpoints prefixes");
    const char *dest = NULL;
    zf_status_t s = s_path(ctx, dst, &dest);
    for (int64_t i = 0; i < n && zf_ok(s); i++) s = s_path(ctx, &srcs[i], &paths[i]);
    if (zf_ok(s)) {
        s = zf_bundle_merge(paths, (size_t)n, dest, st->allow_missing_files);
        if (!zf_ok(s)) s = zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    }
    if (zf_ok(s) && st->delete_old_dirs) s_delete_old_dirs(paths, n, dest);
    free(paths);
    return s;
}

static const zf_kernel_t s_defs[] = {
    {.op = "SaveV2", .device_type = "CPU", .flags = ZF_KERNEL_EXPENSIVE, .compute = s_save_compute},
    {.op = "RestoreV2",
     .device_type = "CPU",
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_restore_create,
     .destroy = s_restore_destroy,
     .compute = s_restore_compute},
    {.op = "MergeV2Checkpoints",
     .device_type = "CPU",
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_merge_create,
     .destroy = free,
     .compute = s_merge_compute},
};

zf_status_t zf__kernels_register_checkpoint(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
