/* CPU kernels for variables that persist across steps in the session's
 * resource manager (ctx->resources): reference variables (VariableV2,
 * Assign, AssignAdd/Sub, ApplyGradientDescent, IsVariableInitialized) and
 * resource variables (VarHandleOp, ReadVariableOp, AssignVariableOp,
 * AssignAdd/SubVariableOp, ResourceApplyGradientDescent, VarIsInitializedOp).
 *
 * A variable is named by its shared_name (the node's name when empty),
 * prefixed with "<container>|" when a container is set. A resource handle
 * is a RESOURCE scalar holding that name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/kernels_vars.h"
#include "executor/kernels/resource.h"

/* ---- names and handles ---------------------------------------------------- */

typedef struct {
    char *name;          /* the variable's name in the resource manager */
    zf_dtype_t dtype;    /* its dtype attr */
    zf_tensor_t *handle; /* VarHandleOp: the handle it outputs */
} s_var_state_t;

static void s_var_state_destroy(void *state)
{
    s_var_state_t *st = state;
    if (!st) return;
    zf_tensor_unref(&st->handle);
    free(st->name);
    free(st);
}

static zf_status_t s_var_name(const Tensorflow__NodeDef *node, char **out)
{
    const uint8_t *c = NULL, *n = NULL;
    size_t clen = 0, nlen = 0;
    ZF_TRY(zf_node_attr_string_or(node, "container", "", &c, &clen));
    ZF_TRY(zf_node_attr_string_or(node, "shared_name", "", &n, &nlen));
    if (nlen == 0) {
        n = (const uint8_t *)node->name;
        nlen = strlen(node->name);
    }
    size_t cap = clen + nlen + 2;
    char *name = malloc(cap);
    if (!name) return zf_out_of_memory("variable name");
    if (clen)
        snprintf(name, cap, "%.*s|%.*s", (int)clen, (const char *)c, (int)nlen, (const char *)n);
    else
        snprintf(name, cap, "%.*s", (int)nlen, (const char *)n);
    *out = name;
    return ZF_STATUS_OK;
}

static zf_status_t s_new_handle(const char *name, zf_tensor_t **out)
{
    zf_shape_t scalar = zf_shape_scalar();
    ZF_TRY(zf_tensor_new(ZF_RESOURCE, &scalar, out));
    zf_status_t s = zf_tensor_set_string(*out, 0, name, strlen(name));
    if (!zf_ok(s)) zf_tensor_unref(out);
    return s;
}

static zf_status_t s_var_create(const Tensorflow__NodeDef *node, void **state)
{
    s_var_state_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("variable kernel");
    zf_status_t s = zf_node_attr_type(node, "dtype", &st->dtype);
    if (zf_ok(s)) s = s_var_name(node, &st->name);
    if (zf_ok(s) && strcmp(node->op, "VarHandleOp") == 0) s = s_new_handle(st->name, &st->handle);
    if (!zf_ok(s)) {
        s_var_state_destroy(st);
        return s;
    }
    st->dtype = zf_dtype_base((int)st->dtype);
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_need_resources(const zf_kernel_ctx_t *ctx)
{
    if (ctx->resources) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_FAILED_PRECONDITION,
                           "variables need a session resource manager, and this run has none");
}

/* The variable a ref input (the tensor VariableV2 handed out) belongs to. */
static zf_status_t s_ref_name(const zf_kernel_ctx_t *ctx, int i, const char **name)
{
    ZF_TRY(s_need_resources(ctx));
    *name = zf_resource_ref_lookup(ctx->resources, ctx->inputs[i], NULL);
    if (*name) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "input %d is not a variable reference (it must come from a "
                           "VariableV2 node)",
                           i);
}

/* The variable resource handle input i names. */
static zf_status_t s_handle_name_at(const zf_kernel_ctx_t *ctx, int i, const char **name)
{
    ZF_TRY(s_need_resources(ctx));
    const zf_tensor_t *h = ctx->inputs[i];
    const zf_tstring_t *str = zf_tensor_dtype(h) == ZF_RESOURCE && zf_tensor_num_elements(h) == 1
                                  ? zf_tensor_string(h, 0)
                                  : NULL;
    if (!str || !str->data || strlen(str->data) != str->len)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input %d is not a resource handle (from a VarHandleOp node)", i);
    *name = str->data;
    return ZF_STATUS_OK;
}

static zf_status_t s_handle_name(const zf_kernel_ctx_t *ctx, const char **name)
{
    return s_handle_name_at(ctx, 0, name);
}

/* TensorFlow's text for reading a resource variable that was never set. */
static zf_status_t s_not_found(const zf_kernel_ctx_t *ctx, const char *name)
{
    const char *bar = strchr(name, '|');
    int clen = bar ? (int)(bar - name) : 9;
    const char *container = bar ? name : "localhost";
    const char *short_name = bar ? bar + 1 : name;
    return zf_kernel_error(
        ctx, ZF_FAILED_PRECONDITION,
        "Could not find variable %s. This could mean that the variable has been deleted. In "
        "TF1, it can also mean the variable is uninitialized. Debug info: container=%.*s, "
        "status error message=Resource %.*s/%s/N10tensorflow3VarE does not exist.",
        short_name, clen, container, clen, container, short_name);
}

/* ---- reference variables ---------------------------------------------------- */

static zf_status_t s_variable_compute(zf_kernel_ctx_t *ctx)
{
    const s_var_state_t *st = ctx->state;
    ZF_TRY(s_need_resources(ctx));
    zf_tensor_t *ref = NULL;
    zf_status_t s = zf_resource_var_ref(ctx->resources, st->name, st->dtype, &ref);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_kernel_set_output(ctx, 0, ref);
    zf_tensor_unref(&ref);
    return ZF_STATUS_OK;
}

typedef struct {
    bool validate_shape;
} s_assign_state_t;

static zf_status_t s_assign_create(const Tensorflow__NodeDef *node, void **state)
{
    bool validate = true;
    ZF_TRY(zf_node_attr_bool_or(node, "validate_shape", true, &validate));
    s_assign_state_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("Assign kernel");
    st->validate_shape = validate;
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_assign_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const char *name = NULL;
    ZF_TRY(s_ref_name(ctx, 0, &name));
    const zf_tensor_t *value = ctx->inputs[1];
    if (zf_tensor_dtype(value) != zf_tensor_dtype(ctx->inputs[0]))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "cannot assign a %s value to %s variable %s",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(value)),
                               zf_kernels_dtype_name((int)zf_tensor_dtype(ctx->inputs[0])), name);
    zf_tensor_t *out = NULL;
    const s_assign_state_t *st = ctx->state;
    zf_status_t s = zf_resource_assign_var(ctx->resources, name, value, st->validate_shape, &out);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_kernel_set_output(ctx, 0, out);
    zf_tensor_unref(&out);
    return ZF_STATUS_OK;
}

/* The variable's value after an update, as the node's ref output. */
static zf_status_t s_output_var(zf_kernel_ctx_t *ctx, const char *name)
{
    zf_tensor_t *v = NULL;
    ZF_TRY(zf_resource_get_var(ctx->resources, name, &v));
    zf_kernel_set_output(ctx, 0, v);
    zf_tensor_unref(&v);
    return ZF_STATUS_OK;
}

/* ---- in-place updates ---------------------------------------------------------- */

typedef enum { S_UPDATE_ADD, S_UPDATE_SUB, S_UPDATE_SGD } s_update_kind_t;

typedef struct {
    const zf_kernel_ctx_t *ctx;
    s_update_kind_t kind;
    const zf_tensor_t *delta;
    const zf_tensor_t *alpha; /* SGD only */
} s_update_t;

#define S_UPDATE_LOOP(T, U)                                                                        \
    do {                                                                                           \
        T *v = zf_tensor_data(var);                                                                \
        const T *d = zf_tensor_data(u->delta);                                                     \
        if (u->kind == S_UPDATE_SGD) {                                                             \
            T lr = *(const T *)zf_tensor_data(u->alpha);                                           \
            for (int64_t i = 0; i < n; i++) v[i] = (T)(v[i] - lr * d[i]);                          \
        } else if (u->kind == S_UPDATE_ADD) {                                                      \
            for (int64_t i = 0; i < n; i++) v[i] = (T)((U)v[i] + (U)d[i]);                         \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) v[i] = (T)((U)v[i] - (U)d[i]);                         \
        }                                                                                          \
    } while (0)

static zf_status_t s_update_fn(zf_tensor_t *var, void *arg)
{
    const s_update_t *u = arg;
    char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_dtype(var) != zf_tensor_dtype(u->delta))
        return zf_kernel_error(u->ctx, ZF_INVALID_ARGUMENT,
                               "cannot update a %s variable with a %s tensor",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(var)),
                               zf_kernels_dtype_name((int)zf_tensor_dtype(u->delta)));
    if (!zf_shape_equal(zf_tensor_shape(var), zf_tensor_shape(u->delta))) {
        zf_kernels_shape_str(var, a);
        zf_kernels_shape_str(u->delta, b);
        if (u->kind == S_UPDATE_SGD)
            return zf_kernel_error(u->ctx, ZF_INVALID_ARGUMENT,
                                   "var and delta do not have the same shape%s %s", a, b);
        return zf_kernel_error(u->ctx, ZF_INVALID_ARGUMENT,
                               "Cannot update variable with shape %s using a Tensor with shape "
                               "%s, shapes must be equal.",
                               a, b);
    }
    if (u->kind == S_UPDATE_SGD && !zf_dtype_is_floating(zf_tensor_dtype(var)))
        return zf_kernel_error(u->ctx, ZF_INVALID_ARGUMENT,
                               "gradient descent needs a floating variable, got %s",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(var)));
    int64_t n = zf_tensor_num_elements(var);
    switch (zf_tensor_dtype(var)) {
    case ZF_FLOAT: S_UPDATE_LOOP(float, float); break;
    case ZF_DOUBLE: S_UPDATE_LOOP(double, double); break;
    case ZF_INT32: S_UPDATE_LOOP(int32_t, uint32_t); break;
    case ZF_INT64: S_UPDATE_LOOP(int64_t, uint64_t); break;
    default:
        return zf_kernel_error(u->ctx, ZF_UNIMPLEMENTED, "no CPU kernel for %s variables",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(var)));
    }
    return ZF_STATUS_OK;
}

/* Inputs (var, alpha, delta) for the SGD kernels, (var, value) otherwise. */
static zf_status_t s_update_args(const zf_kernel_ctx_t *ctx, s_update_kind_t kind, s_update_t *u)
{
    *u = (s_update_t){ctx, kind, ctx->inputs[1], NULL};
    if (kind != S_UPDATE_SGD) return ZF_STATUS_OK;
    u->alpha = ctx->inputs[1];
    u->delta = ctx->inputs[2];
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(u->alpha)->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "alpha is not a scalar: %s",
                               zf_kernels_shape_str(u->alpha, sbuf));
    if (zf_tensor_dtype(u->alpha) != zf_tensor_dtype(u->delta))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "alpha is %s but delta is %s",
                               zf_kernels_dtype_name((int)zf_tensor_dtype(u->alpha)),
                               zf_kernels_dtype_name((int)zf_tensor_dtype(u->delta)));
    return ZF_STATUS_OK;
}

static zf_status_t s_ref_update(zf_kernel_ctx_t *ctx, s_update_kind_t kind)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, kind == S_UPDATE_SGD ? 3 : 2));
    const char *name = NULL;
    s_update_t u;
    ZF_TRY(s_ref_name(ctx, 0, &name));
    ZF_TRY(s_update_args(ctx, kind, &u));
    zf_status_t s = zf_resource_update_var(ctx->resources, name, s_update_fn, &u);
    if (s.code == ZF_FAILED_PRECONDITION)
        s = zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    ZF_TRY(s);
    return s_output_var(ctx, name);
}

static zf_status_t s_apply_gd_compute(zf_kernel_ctx_t *ctx)
{
    return s_ref_update(ctx, S_UPDATE_SGD);
}

static zf_status_t s_assign_add_compute(zf_kernel_ctx_t *ctx)
{
    return s_ref_update(ctx, S_UPDATE_ADD);
}

static zf_status_t s_assign_sub_compute(zf_kernel_ctx_t *ctx)
{
    return s_ref_update(ctx, S_UPDATE_SUB);
}

static zf_status_t s_is_initialized_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(s_need_resources(ctx));
    bool init = false;
    if (!zf_resource_ref_lookup(ctx->resources, ctx->inputs[0], &init)) init = true;
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_tensor_new_scalar_bool(init, &out));
    zf_kernel_set_output(ctx, 0, out);
    zf_tensor_unref(&out);
    return ZF_STATUS_OK;
}

/* ---- resource variables -------------------------------------------------------- */

static zf_status_t s_var_handle_compute(zf_kernel_ctx_t *ctx)
{
    const s_var_state_t *st = ctx->state;
    zf_kernel_set_output(ctx, 0, st->handle);
    return ZF_STATUS_OK;
}

static zf_status_t s_read_variable_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const s_var_state_t *st = ctx->state;
    const char *name = NULL;
    ZF_TRY(s_handle_name(ctx, &name));
    zf_tensor_t *v = NULL;
    zf_status_t s = zf_resource_get_var(ctx->resources, name, &v);
    if (s.code == ZF_FAILED_PRECONDITION) {
        zf_status_clear(&s);
        return s_not_found(ctx, name);
    }
    ZF_TRY(s);
    if (zf_tensor_dtype(v) != st->dtype) {
        s = zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                            "Trying to read variable with wrong dtype. Expected %s got %s",
                            zf_kernels_dtype_name((int)st->dtype),
                            zf_kernels_dtype_name((int)zf_tensor_dtype(v)));
        zf_tensor_unref(&v);
        return s;
    }
    zf_kernel_set_output(ctx, 0, v);
    zf_tensor_unref(&v);
    return ZF_STATUS_OK;
}

static zf_status_t s_assign_variable_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_var_state_t *st = ctx->state;
    const char *name = NULL;
    ZF_TRY(s_handle_name(ctx, &name));
    zf_tensor_t *value = ctx->inputs[1];
    if (zf_tensor_dtype(value) != st->dtype)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Trying to assign variable with wrong dtype. Expected %s got %s",
                               zf_kernels_dtype_name((int)st->dtype),
                               zf_kernels_dtype_name((int)zf_tensor_dtype(value)));
    /* Values are shared, not copied: updates copy on write. A reference
     * variable's storage changes in place, so that one is copied now. */
    zf_tensor_t *copy = NULL;
    if (zf_resource_ref_lookup(ctx->resources, value, NULL)) {
        ZF_TRY(zf_tensor_copy(value, &copy));
        value = copy;
    }
    zf_status_t s = zf_resource_set_var(ctx->resources, name, value);
    zf_tensor_unref(&copy);
    return s;
}

static zf_status_t s_resource_update(zf_kernel_ctx_t *ctx, s_update_kind_t kind)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, kind == S_UPDATE_SGD ? 3 : 2));
    const char *name = NULL;
    s_update_t u;
    ZF_TRY(s_handle_name(ctx, &name));
    ZF_TRY(s_update_args(ctx, kind, &u));
    zf_status_t s = zf_resource_update_var_cow(ctx->resources, name, s_update_fn, &u);
    if (s.code == ZF_FAILED_PRECONDITION && !zf_resource_var_is_initialized(ctx->resources, name)) {
        zf_status_clear(&s);
        return s_not_found(ctx, name);
    }
    return s;
}

static zf_status_t s_resource_apply_gd_compute(zf_kernel_ctx_t *ctx)
{
    return s_resource_update(ctx, S_UPDATE_SGD);
}

static zf_status_t s_assign_add_variable_compute(zf_kernel_ctx_t *ctx)
{
    return s_resource_update(ctx, S_UPDATE_ADD);
}

static zf_status_t s_assign_sub_variable_compute(zf_kernel_ctx_t *ctx)
{
    return s_resource_update(ctx, S_UPDATE_SUB);
}

static zf_status_t s_var_is_initialized_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const char *name = NULL;
    ZF_TRY(s_handle_name(ctx, &name));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_tensor_new_scalar_bool(zf_resource_var_is_initialized(ctx->resources, name), &out));
    zf_kernel_set_output(ctx, 0, out);
    zf_tensor_unref(&out);
    return ZF_STATUS_OK;
}

/* ---- for other kernels on variables (kernels_vars.h) ------------------------------ */

zf_status_t zf__kernels_var_ref_name(const zf_kernel_ctx_t *ctx, int i, const char **name)
{
    return s_ref_name(ctx, i, name);
}

zf_status_t zf__kernels_var_handle_name(const zf_kernel_ctx_t *ctx, int i, const char **name)
{
    return s_handle_name_at(ctx, i, name);
}

zf_status_t zf__kernels_var_not_found(const zf_kernel_ctx_t *ctx, const char *name)
{
    return s_not_found(ctx, name);
}

/* ---- registration ---------------------------------------------------------------- */

#define S_VAR_KERNEL(op_, compute_)                                                                \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .create = s_var_create, .destroy = s_var_state_destroy, \
        .compute = (compute_)                                                                      \
    }

static const zf_kernel_t s_defs[] = {
    S_VAR_KERNEL("VariableV2", s_variable_compute),
    S_VAR_KERNEL("Variable", s_variable_compute),
    {.op = "Assign",
     .device_type = "CPU",
     .create = s_assign_create,
     .destroy = free,
     .compute = s_assign_compute},
    ZF_CPU_KERNEL("AssignAdd", ZF_TYPES_REAL, s_assign_add_compute),
    ZF_CPU_KERNEL("AssignSub", ZF_TYPES_REAL, s_assign_sub_compute),
    ZF_CPU_KERNEL("ApplyGradientDescent", ZF_TYPES_FLOAT, s_apply_gd_compute),
    {.op = "IsVariableInitialized", .device_type = "CPU", .compute = s_is_initialized_compute},
    S_VAR_KERNEL("VarHandleOp", s_var_handle_compute),
    S_VAR_KERNEL("ReadVariableOp", s_read_variable_compute),
    S_VAR_KERNEL("AssignVariableOp", s_assign_variable_compute),
    {.op = "AssignAddVariableOp",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_REAL,
     .compute = s_assign_add_variable_compute},
    {.op = "AssignSubVariableOp",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_REAL,
     .compute = s_assign_sub_variable_compute},
    ZF_CPU_KERNEL("ResourceApplyGradientDescent", ZF_TYPES_FLOAT, s_resource_apply_gd_compute),
    {.op = "VarIsInitializedOp", .device_type = "CPU", .compute = s_var_is_initialized_compute},
};

zf_status_t zf__kernels_register_state(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
