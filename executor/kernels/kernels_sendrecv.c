/* The Send/Recv kernels over the step's rendezvous (CPU registrations;
 * host memory and device memory are the same thing there). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/log.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/kernels_sendrecv.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/rendezvous.h"
#include "common/rendezvous_key.h"

/* Reads a string attr into a new NUL-terminated copy. */
static zf_status_t s_attr_str(const Tensorflow__NodeDef *node, const char *key, char **out)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(node, key, &data, &len));
    if (memchr(data, '\0', len))
        return zf_invalid_argument("node '%s' (%s): attr '%s' contains a NUL byte", node->name,
                                   node->op, key);
    *out = malloc(len + 1);
    if (!*out) return zf_out_of_memory("rendezvous key");
    memcpy(*out, data, len);
    (*out)[len] = '\0';
    return ZF_STATUS_OK;
}

/* The state of every kernel of the family: its rendezvous key at the top
 * level ("...;0:0"), and the length of the part before the frame and
 * iteration, which a node inside a while loop replaces per iteration. */
typedef struct {
    char *key;
    size_t prefix;
} s_key_t;

static zf_status_t s_create(const Tensorflow__NodeDef *node, void **state)
{
    char *tensor_name = NULL, *send_device = NULL, *recv_device = NULL;
    int64_t incarnation = 0;
    zf_status_t s = s_attr_str(node, "tensor_name", &tensor_name);
    if (zf_ok(s)) s = s_attr_str(node, "send_device", &send_device);
    if (zf_ok(s)) s = s_attr_str(node, "recv_device", &recv_device);
    if (zf_ok(s)) s = zf_node_attr_int(node, "send_device_incarnation", &incarnation);
    s_key_t *k = NULL;
    if (zf_ok(s)) {
        k = calloc(1, sizeof *k);
        if (k)
            k->key =
                zf_rendezvous_key(send_device, (uint64_t)incarnation, recv_device, tensor_name);
        if (!k || !k->key) {
            free(k);
            k = NULL;
            s = zf_out_of_memory("rendezvous key");
        } else {
            k->prefix = strlen(k->key) - strlen(";0:0");
        }
    }
    free(tensor_name);
    free(send_device);
    free(recv_device);
    *state = k;
    return s;
}

static void s_destroy(void *state)
{
    s_key_t *k = state;
    if (k) free(k->key);
    free(k);
}

/* The key of this run: the node's own at the top level, else one with the
 * frame and iteration the node runs in (into buf when it fits, or a new
 * string the caller frees through *owned). NULL when out of memory. */
static const char *s_run_key(const zf_kernel_ctx_t *ctx, char *buf, size_t size, char **owned)
{
    const s_key_t *k = ctx->state;
    *owned = NULL;
    if (ctx->frame_id == 0 && ctx->iter_id == 0) return k->key;
    size_t need = k->prefix + 48;
    char *out = need <= size ? buf : (*owned = malloc(need));
    if (out)
        snprintf(out, need, "%.*s;%llu:%lld", (int)k->prefix, k->key,
                 (unsigned long long)ctx->frame_id, (long long)ctx->iter_id);
    return out;
}

static zf_status_t s_no_rendezvous(const zf_kernel_ctx_t *ctx)
{
    return zf_kernel_error(ctx, ZF_FAILED_PRECONDITION, "no rendezvous for step %lld",
                           (long long)ctx->step_id);
}

static zf_status_t s_send_compute(zf_kernel_ctx_t *ctx)
{
    if (!ctx->rendezvous) return s_no_rendezvous(ctx);
    zf_tensor_t *t = ctx->num_inputs > 0 ? ctx->inputs[0] : NULL;
    char buf[256], *owned = NULL;
    const char *key = s_run_key(ctx, buf, sizeof buf, &owned);
    if (!key) return zf_out_of_memory("rendezvous key");
    zf_status_t s = zf_rendezvous_send(ctx->rendezvous, key, t, ctx->input_is_dead);
    free(owned);
    return s;
}

typedef struct {
    zf_kernel_ctx_t *ctx;
    zf_kernel_done_fn done;
    void *arg;
} s_recv_t;

/* A placeholder for a CUDA IPC offer (executor/rendezvous/remote.h) holds no bytes:
 * only the GPU kernels, which run this one without a device, open it. */
static zf_status_t s_check_not_offer(const zf_kernel_ctx_t *ctx, const zf_tensor_t *tensor)
{
    const char *src = NULL;
    if (!ctx->device || !zf_remote_ipc_offer(tensor, NULL, &src)) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_FAILED_PRECONDITION,
                           "%s offered this tensor over CUDA IPC, which only a GPU device "
                           "can receive, not %s",
                           src, ctx->device->name_str);
}

static void s_recv_done(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    s_recv_t r = *(s_recv_t *)arg;
    free(arg);
    if (zf_ok(status) && tensor) status = s_check_not_offer(r.ctx, tensor);
    if (zf_ok(status) && r.ctx->num_outputs > 0) {
        r.ctx->outputs[0] = tensor; /* the rendezvous' reference becomes the output's */
        if (r.ctx->is_dead_outputs) r.ctx->is_dead_outputs[0] = is_dead;
    } else {
        zf_tensor_unref(&tensor);
    }
    r.done(r.ctx, status, r.arg);
}

static void s_recv_compute(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg)
{
    if (!ctx->rendezvous) {
        done(ctx, s_no_rendezvous(ctx), arg);
        return;
    }
    s_recv_t *r = malloc(sizeof *r);
    if (!r) {
        done(ctx, zf_out_of_memory("recv"), arg);
        return;
    }
    *r = (s_recv_t){ctx, done, arg};
    char buf[256], *owned = NULL;
    const char *key = s_run_key(ctx, buf, sizeof buf, &owned);
    zf_status_t s = key ? zf_rendezvous_recv_async(ctx->rendezvous, key, s_recv_done, r, NULL)
                        : zf_out_of_memory("rendezvous key");
    free(owned);
    if (zf_ok(s)) return;
    free(r);
    done(ctx, s, arg);
}

#define S_SEND(op_)                                                                                \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .create = s_create, .destroy = s_destroy,               \
        .compute = s_send_compute                                                                  \
    }
#define S_RECV(op_)                                                                                \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .flags = ZF_KERNEL_ASYNC, .create = s_create,           \
        .destroy = s_destroy, .compute_async = s_recv_compute                                      \
    }

static const zf_kernel_t s_defs[] = {
    S_SEND("_Send"),
    S_SEND("_HostSend"),
    S_RECV("_Recv"),
    S_RECV("_HostRecv"),
};

static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_register(void)
{
    for (size_t i = 0; i < sizeof s_defs / sizeof s_defs[0]; i++) {
        zf_status_t s = zf_kernel_register(&s_defs[i]);
        if (!zf_ok(s))
            zf_log_error("kernels", "registering %s: %s", s_defs[i].op, zf_status_msg(&s));
        zf_status_clear(&s);
    }
}

void zf_kernels_register_sendrecv(void)
{
    pthread_once(&s_once, s_register);
}
