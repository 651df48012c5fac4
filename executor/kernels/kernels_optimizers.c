/* CPU optimizer kernels with TensorFlow's update rules (FLOAT and DOUBLE),
 * each in a reference form (Apply*: the slots are Ref inputs, updated in
 * place, and the variable's ref is the output) and a resource form
 * (ResourceApply*: the slots are handles, updated copy-on-write as
 * ResourceApplyGradientDescent does in kernels_state.c):
 *
 *   Momentum       accum = accum * momentum + grad
 *                  var -= lr * accum, or with use_nesterov
 *                  var -= lr * grad + lr * momentum * accum
 *   KerasMomentum  accum = accum * momentum - lr * grad
 *                  var += accum, or with use_nesterov
 *                  var += momentum * accum - lr * grad
 *   Adam           lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
 *                  m += (grad - m) * (1 - beta1)
 *                  v += (grad^2 - v) * (1 - beta2)
 *                  var -= lr_t * m / (sqrt(v) + epsilon), or with
 *                  use_nesterov lr_t * (grad * (1 - beta1) + beta1 * m)
 *                  over the same
 *   RMSProp        ms += (grad^2 - ms) * (1 - rho)
 *                  mom = mom * momentum + lr * grad / sqrt(ms + epsilon)
 *                  var -= mom
 *   Adagrad        accum += grad^2 (when update_slots)
 *                  var -= lr * grad / sqrt(accum)
 *
 * Every slot has var's shape, grad too; the hyperparameters are scalars.
 * The variables of one update are locked together, in the order of their
 * names, so two updates sharing slots cannot deadlock; a large update is
 * split over the device's pool. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/kernels_vars.h"
#include "executor/kernels/resource.h"

typedef enum { S_MOMENTUM, S_KERAS_MOMENTUM, S_ADAM, S_RMSPROP, S_ADAGRAD } s_kind_t;

#define S_MAX_INPUTS 10
#define S_MAX_SLOTS  3

/* An update rule's inputs: its slots (variables, var first), then its
 * scalars and grad in the op's order. */
typedef struct {
    s_kind_t kind;
    int slots;
    int inputs;
    const char *names[S_MAX_INPUTS];
} s_rule_t;

static const s_rule_t s_rules[] = {
    [S_MOMENTUM] = {S_MOMENTUM, 2, 5, {"var", "accum", "lr", "grad", "momentum"}},
    [S_KERAS_MOMENTUM] = {S_KERAS_MOMENTUM, 2, 5, {"var", "accum", "lr", "grad", "momentum"}},
    [S_ADAM] = {S_ADAM,
                3,
                10,
                {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon",
                 "grad"}},
    [S_RMSPROP] = {S_RMSPROP,
                   3,
                   8,
                   {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}},
    [S_ADAGRAD] = {S_ADAGRAD, 2, 4, {"var", "accum", "lr", "grad"}},
};

typedef struct {
    const s_rule_t *rule;
    bool resource; /* ResourceApply*: handles, else refs */
    bool nesterov;
    bool update_slots; /* Adagrad */
    int grad;          /* grad's input index */
} s_opt_t;

static zf_status_t s_opt_create(const Tensorflow__NodeDef *node, s_kind_t kind, void **state)
{
    s_opt_t st = {.rule = &s_rules[kind], .resource = strncmp(node->op, "Resource", 8) == 0};
    ZF_TRY(zf_node_attr_bool_or(node, "use_nesterov", false, &st.nesterov));
    ZF_TRY(zf_node_attr_bool_or(node, "update_slots", true, &st.update_slots));
    for (int i = 0; i < st.rule->inputs; i++)
        if (strcmp(st.rule->names[i], "grad") == 0) st.grad = i;
    s_opt_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("optimizer kernel");
    *p = st;
    *state = p;
    return ZF_STATUS_OK;
}

/* ---- checks ------------------------------------------------------------------------- */

/* The hyperparameters and grad: one floating dtype, scalars but grad. */
static zf_status_t s_check_args(const zf_kernel_ctx_t *ctx, const s_opt_t *st, zf_dtype_t *dtype)
{
    const s_rule_t *r = st->rule;
    ZF_TRY(zf_kernels_check_inputs(ctx, r->inputs));
    *dtype = zf_tensor_dtype(ctx->inputs[st->grad]);
    if (*dtype != ZF_FLOAT && *dtype != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "grad must be float or double, got %s",
                               zf_kernels_dtype_name((int)*dtype));
    char sbuf[ZF_SHAPE_STRING_MAX];
    for (int i = r->slots; i < r->inputs; i++) {
        const zf_tensor_t *t = ctx->inputs[i];
        if (zf_tensor_dtype(t) != *dtype)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be %s like grad, got %s",
                                   r->names[i], zf_kernels_dtype_name((int)*dtype),
                                   zf_kernels_dtype_name((int)zf_tensor_dtype(t)));
        if (i != st->grad && zf_tensor_shape(t)->rank != 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s is not a scalar: %s", r->names[i],
                                   zf_kernels_shape_str(t, sbuf));
    }
    return ZF_STATUS_OK;
}

/* Every slot, then grad, against var: same dtype and shape. */
static zf_status_t s_check_slots(const zf_kernel_ctx_t *ctx, const s_opt_t *st,
                                 zf_tensor_t *const *slots)
{
    const s_rule_t *r = st->rule;
    const zf_tensor_t *var = slots[0], *grad = ctx->inputs[st->grad];
    char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
    for (int i = 0; i <= r->slots; i++) {
        const zf_tensor_t *t = i < r->slots ? slots[i] : grad;
        const char *name = i < r->slots ? r->names[i] : "grad";
        if (zf_tensor_dtype(t) != zf_tensor_dtype(grad))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s is a %s variable but grad is %s",
                                   name, zf_kernels_dtype_name((int)zf_tensor_dtype(t)),
                                   zf_kernels_dtype_name((int)zf_tensor_dtype(grad)));
        if (!zf_shape_equal(zf_tensor_shape(var), zf_tensor_shape(t)))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "var and %s do not have the same shape%s %s", name,
                                   zf_kernels_shape_str(var, a), zf_kernels_shape_str(t, b));
    }
    return ZF_STATUS_OK;
}

/* ---- the update rules ------------------------------------------------------------------ */

/* One update over elements [begin, end). */
typedef struct {
    const zf_kernel_ctx_t *ctx;
    const s_opt_t *st;
    zf_tensor_t *const *slots;
} s_update_job_t;

/* The update of elements [begin, end) in type T: var and the slots s1, s2,
 * g = grad, h[k] = the scalar input k (indexes into the op's inputs). */
#define S_UPDATE(T, SQRT)                                                                          \
    do {                                                                                           \
        T *var = (T *)zf_tensor_data(slots[0]) + begin;                                            \
        T *s1 = (T *)zf_tensor_data(slots[1]) + begin;                                             \
        T *s2 = r->slots > 2 ? (T *)zf_tensor_data(slots[2]) + begin : NULL;                       \
        const T *g = (const T *)zf_tensor_data(ctx->inputs[st->grad]) + begin;                     \
        int64_t n = end - begin;                                                                   \
        T h[S_MAX_INPUTS] = {0};                                                                   \
        for (int k = r->slots; k < r->inputs; k++)                                                 \
            if (k != st->grad) h[k] = *(const T *)zf_tensor_data(ctx->inputs[k]);                  \
        switch (r->kind) {                                                                         \
        case S_MOMENTUM: { /* lr 2, momentum 4 */                                                  \
            T lr = h[2], mu = h[4];                                                                \
            for (int64_t i = 0; i < n; i++) {                                                      \
                s1[i] = s1[i] * mu + g[i];                                                         \
                var[i] -= st->nesterov ? g[i] * lr + s1[i] * mu * lr : s1[i] * lr;                 \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case S_KERAS_MOMENTUM: {                                                                   \
            T lr = h[2], mu = h[4];                                                                \
            for (int64_t i = 0; i < n; i++) {                                                      \
                s1[i] = s1[i] * mu - g[i] * lr;                                                    \
                var[i] += st->nesterov ? s1[i] * mu - g[i] * lr : s1[i];                           \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case S_ADAM: { /* beta1_power 3, beta2_power 4, lr 5, beta1 6, beta2 7, epsilon 8 */       \
            T b1 = h[6], b2 = h[7], eps = h[8];                                                    \
            T lr_t = h[5] * SQRT((T)1 - h[4]) / ((T)1 - h[3]);                                     \
            for (int64_t i = 0; i < n; i++) {                                                      \
                s1[i] += (g[i] - s1[i]) * ((T)1 - b1);                                             \
                s2[i] += (g[i] * g[i] - s2[i]) * ((T)1 - b2);                                      \
                T step = st->nesterov ? g[i] * ((T)1 - b1) + b1 * s1[i] : s1[i];                   \
                var[i] -= step * lr_t / (SQRT(s2[i]) + eps);                                       \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case S_RMSPROP: { /* lr 3, rho 4, momentum 5, epsilon 6 */                                 \
            T lr = h[3], rho = h[4], mu = h[5], eps = h[6];                                        \
            for (int64_t i = 0; i < n; i++) {                                                      \
                s1[i] += (g[i] * g[i] - s1[i]) * ((T)1 - rho);                                     \
                s2[i] = s2[i] * mu + g[i] * lr / SQRT(s1[i] + eps);                                \
                var[i] -= s2[i];                                                                   \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        case S_ADAGRAD: { /* lr 2 */                                                               \
            T lr = h[2];                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                if (st->update_slots) s1[i] += g[i] * g[i];                                        \
                var[i] -= g[i] * lr / SQRT(s1[i]);                                                 \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        }                                                                                          \
    } while (0)

static void s_update_chunk(void *arg, int64_t begin, int64_t end)
{
    const s_update_job_t *j = arg;
    const zf_kernel_ctx_t *ctx = j->ctx;
    const s_opt_t *st = j->st;
    const s_rule_t *r = st->rule;
    zf_tensor_t *const *slots = j->slots;
    if (zf_tensor_dtype(slots[0]) == ZF_FLOAT)
        S_UPDATE(float, sqrtf);
    else
        S_UPDATE(double, sqrt);
}

/* Checks the slots and updates them, large variables over the device pool. */
static zf_status_t s_update(const zf_kernel_ctx_t *ctx, const s_opt_t *st,
                            zf_tensor_t *const *slots)
{
    ZF_TRY(s_check_slots(ctx, st, slots));
    s_update_job_t j = {ctx, st, slots};
    zf_kernels_parallel_for(ctx, zf_tensor_num_elements(slots[0]), ZF_KERNELS_PARALLEL_MIN,
                            s_update_chunk, &j);
    return ZF_STATUS_OK;
}

/* ---- locking the slots ------------------------------------------------------------------- */

typedef struct {
    const zf_kernel_ctx_t *ctx;
    const s_opt_t *st;
    const char *names[S_MAX_SLOTS];
    int order[S_MAX_SLOTS]; /* slot indexes by name */
    zf_tensor_t *slots[S_MAX_SLOTS];
    int depth; /* slots locked so far */
} s_apply_t;

static zf_status_t s_lock_next(s_apply_t *a);

/* Under the lock of slot order[depth]: takes the next lock, or updates. */
static zf_status_t s_locked(zf_tensor_t *t, void *arg)
{
    s_apply_t *a = arg;
    a->slots[a->order[a->depth++]] = t;
    zf_status_t s =
        a->depth == a->st->rule->slots ? s_update(a->ctx, a->st, a->slots) : s_lock_next(a);
    a->depth--;
    return s;
}

static zf_status_t s_lock_next(s_apply_t *a)
{
    const char *name = a->names[a->order[a->depth]];
    if (a->st->resource) return zf_resource_update_var_cow(a->ctx->resources, name, s_locked, a);
    return zf_resource_update_var(a->ctx->resources, name, s_locked, a);
}

/* The slots' variable names, distinct, and the order to lock them in. */
static zf_status_t s_slot_names(const zf_kernel_ctx_t *ctx, s_apply_t *a)
{
    const s_rule_t *r = a->st->rule;
    for (int i = 0; i < r->slots; i++) {
        if (a->st->resource)
            ZF_TRY(zf__kernels_var_handle_name(ctx, i, &a->names[i]));
        else
            ZF_TRY(zf__kernels_var_ref_name(ctx, i, &a->names[i]));
        for (int j = 0; j < i; j++)
            if (strcmp(a->names[i], a->names[j]) == 0)
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "%s and %s are the same variable %s", r->names[j],
                                       r->names[i], a->names[i]);
    }
    for (int i = 0; i < r->slots; i++) { /* insertion sort by name */
        int j = i;
        for (; j > 0 && strcmp(a->names[a->order[j - 1]], a->names[i]) > 0; j--)
            a->order[j] = a->order[j - 1];
        a->order[j] = i;
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_apply_compute(zf_kernel_ctx_t *ctx)
{
    const s_opt_t *st = ctx->state;
    zf_dtype_t dtype;
    ZF_TRY(s_check_args(ctx, st, &dtype));
    s_apply_t a = {.ctx = ctx, .st = st};
    ZF_TRY(s_slot_names(ctx, &a));
    zf_status_t s = s_lock_next(&a);
    if (s.code == ZF_FAILED_PRECONDITION) { /* an unassigned slot */
        for (int i = 0; st->resource && i < st->rule->slots; i++)
            if (!zf_resource_var_is_initialized(ctx->resources, a.names[i])) {
                zf_status_clear(&s);
                return zf__kernels_var_not_found(ctx, a.names[i]);
            }
        return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    }
    ZF_TRY(s);
    if (st->resource) return ZF_STATUS_OK;
    zf_tensor_t *v = NULL; /* the reference form outputs var's ref */
    ZF_TRY(zf_resource_get_var(ctx->resources, a.names[0], &v));
    zf_kernel_set_output(ctx, 0, v);
    zf_tensor_unref(&v);
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------------------ */

#define S_CREATE(name_, kind_)                                                                     \
    static zf_status_t name_(const Tensorflow__NodeDef *node, void **state)                        \
    {                                                                                              \
        return s_opt_create(node, (kind_), state);                                                 \
    }

S_CREATE(s_momentum_create, S_MOMENTUM)
S_CREATE(s_keras_momentum_create, S_KERAS_MOMENTUM)
S_CREATE(s_adam_create, S_ADAM)
S_CREATE(s_rmsprop_create, S_RMSPROP)
S_CREATE(s_adagrad_create, S_ADAGRAD)

#define S_KERNEL(op_, create_)                                                                     \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_FLOAT, .create = (create_),   \
        .destroy = free, .compute = s_apply_compute                                                \
    }

static const zf_kernel_t s_defs[] = {
    S_KERNEL("ApplyMomentum", s_momentum_create),
    S_KERNEL("ApplyAdam", s_adam_create),
    S_KERNEL("ApplyRMSProp", s_rmsprop_create),
    S_KERNEL("ApplyAdagrad", s_adagrad_create),
    S_KERNEL("ResourceApplyMomentum", s_momentum_create),
    S_KERNEL("ResourceApplyKerasMomentum", s_keras_momentum_create),
    S_KERNEL("ResourceApplyAdam", s_adam_create),
    S_KERNEL("ResourceApplyRMSProp", s_rmsprop_create),
    S_KERNEL("ResourceApplyAdagrad", s_adagrad_create),
};

zf_status_t zf__kernels_register_optimizers(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
