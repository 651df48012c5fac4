/* GPU registrations of _Send, _Recv, _HostSend and _HostRecv. They run the
 * CPU kernels of the family (kernels_sendrecv.c: rendezvous keys, sends,
 * asynchronous recvs) and move the bytes where each side needs them:
 *   _Send hands a device tensor on as it is when the receiver is a GPU
 *   (after waiting for the stream, since the receiver reads it on another
 *   stream; a GPU in another process on this host gets it over CUDA IPC,
 *   executor/rendezvous/remote.h), and a copy in pinned host memory otherwise;
 *   _Recv leaves its output in this GPU's memory, _HostRecv in host memory,
 *   copying whatever arrived from wherever it is (an IPC offer device to
 *   device). */
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/rendezvous/remote.h"

typedef struct {
    const zf_kernel_t *cpu;
    void *state; /* the CPU kernel's */
    bool to_gpu; /* _Send: the receiving device is a GPU */
} s_sr_t;

static void s_sr_destroy(void *state)
{
    s_sr_t *sr = state;
    if (!sr) return;
    if (sr->cpu->destroy) sr->cpu->destroy(sr->state);
    free(sr);
}

static zf_status_t s_recv_device_is_gpu(const Tensorflow__NodeDef *node, bool *gpu)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(node, "recv_device", &data, &len));
    char name[ZF_DEVICE_NAME_MAX + 1];
    if (len > ZF_DEVICE_NAME_MAX)
        return zf_invalid_argument("%s (%s): attr 'recv_device' is too long", node->name, node->op);
    memcpy(name, data, len);
    name[len] = '\0';
    zf_device_name_t dn;
    zf_status_t s = zf_device_name_parse(name, &dn);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s): attr 'recv_device'", node->name, node->op);
    *gpu = dn.has_type && strcmp(dn.type, ZF_DEVICE_TYPE_GPU) == 0;
    return ZF_STATUS_OK;
}

static zf_status_t s_sr_create(const Tensorflow__NodeDef *node, void **state)
{
    const zf_kernel_t *cpu = NULL;
    ZF_TRY(zf_kernel_find("CPU", node, &cpu));
    bool recv = strstr(node->op, "Recv") != NULL;
    if (recv ? !cpu->compute_async : !cpu->compute)
        return zf_internal("%s (%s): the CPU kernel is not %s", node->name, node->op,
                           recv ? "asynchronous" : "synchronous");
    s_sr_t *sr = calloc(1, sizeof *sr);
    if (!sr) return zf_out_of_memory("send/recv state");
    sr->cpu = cpu;
    zf_status_t s = ZF_STATUS_OK;
    if (strcmp(node->op, "_Send") == 0) s = s_recv_device_is_gpu(node, &sr->to_gpu);
    if (zf_ok(s) && cpu->create) s = cpu->create(node, &sr->state);
    if (!zf_ok(s)) {
        free(sr);
        return s;
    }
    *state = sr;
    return ZF_STATUS_OK;
}

/* ---- sends ------------------------------------------------------------------ */

/* What to send for t: itself (host memory, or device memory for a GPU
 * receiver once the stream has finished it), else a host copy. */
static zf_status_t s_send_value(zf_kernel_ctx_t *ctx, const s_sr_t *sr, zf_tensor_t *t,
                                zf_tensor_t **out)
{
    *out = NULL;
    if (!t || zf_tensor_memory_kind(t) != ZF_MEMORY_DEVICE) {
        *out = t ? zf_tensor_ref(t) : NULL;
        return ZF_STATUS_OK;
    }
    if (sr->to_gpu) {
        ZF_TRY(ctx->device->ops->sync(ctx->device));
        *out = zf_tensor_ref(t);
        return ZF_STATUS_OK;
    }
    return zf_gpu_tensor_to_host(ctx->device, t, out);
}

static zf_status_t s_send(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    s_sr_t *sr = ctx->state;
    zf_tensor_t *in = ctx->num_inputs > 0 ? ctx->inputs[0] : NULL, *value = NULL;
    zf_status_t s = s_send_value(ctx, sr, in, &value);
    if (!zf_ok(s)) return zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    zf_tensor_t *inputs[1] = {value};
    zf_kernel_ctx_t sub = *ctx;
    sub.device = NULL;
    sub.state = sr->state;
    if (ctx->num_inputs > 0) sub.inputs = inputs;
    s = sr->cpu->compute(&sub);
    zf_tensor_unref(&value);
    return s;
}

/* ---- recvs ---------------------------------------------------------------------- */

typedef struct {
    zf_kernel_ctx_t sub; /* what the CPU kernel sees; outlives its recv */
    zf_kernel_ctx_t *ctx;
    zf_kernel_done_fn done;
    void *arg;
    bool to_host;
} s_recv_t;

/* A CUDA IPC offer from a peer on this host (executor/rendezvous/remote.h): copied
 * device to device into this GPU's memory; dropping the placeholder tells
 * the sender it may let its memory go. */
static zf_status_t s_take_offer(zf_kernel_ctx_t *ctx, zf_tensor_t **t)
{
    zf_gpu_ipc_handle_t h;
    const char *src = NULL;
    if (!zf_remote_ipc_offer(*t, &h, &src)) return ZF_STATUS_OK;
    zf_tensor_t *copy = NULL;
    zf_status_t s =
        zf_gpu_ipc_copy(ctx->device, &h, zf_tensor_dtype(*t), zf_tensor_shape(*t), &copy);
    if (!zf_ok(s))
        s = zf_status_prefix(s, "CUDA IPC from %s (GPU %d) to %s", src, (int)h.device_id,
                             ctx->device->name_str);
    zf_tensor_unref(t);
    *t = copy;
    return s;
}

/* Brings a received tensor to where this kernel's output lives. */
static zf_status_t s_place(zf_kernel_ctx_t *ctx, bool to_host, zf_tensor_t **t)
{
    if (!*t) return ZF_STATUS_OK;
    ZF_TRY(s_take_offer(ctx, t));
    zf_tensor_t *moved = NULL;
    zf_status_t s = to_host ? zf_gpu_tensor_to_host(ctx->device, *t, &moved)
                            : zf_gpu_tensor_to_device(ctx->device, *t, &moved);
    zf_tensor_unref(t);
    *t = moved;
    return s;
}

static void s_recv_done(zf_kernel_ctx_t *sub, zf_status_t status, void *arg)
{
    (void)sub;
    s_recv_t r = *(s_recv_t *)arg;
    free(arg);
    if (zf_ok(status) && r.ctx->num_outputs > 0) {
        status = s_place(r.ctx, r.to_host, &r.ctx->outputs[0]);
        if (!zf_ok(status))
            status = zf_status_prefix(status, "%s (%s)", r.ctx->node->name, r.ctx->node->op);
    }
    r.done(r.ctx, status, r.arg);
}

static void s_recv_start(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg, bool to_host)
{
    zf__gpu_t *g = NULL;
    zf_status_t s = zf__gpu_kernel_gpu(ctx, &g);
    s_recv_t *r = zf_ok(s) ? malloc(sizeof *r) : NULL;
    if (zf_ok(s) && !r) s = zf_out_of_memory("recv");
    if (!zf_ok(s)) {
        done(ctx, s, arg);
        return;
    }
    const s_sr_t *sr = ctx->state;
    *r = (s_recv_t){.sub = *ctx, .ctx = ctx, .done = done, .arg = arg, .to_host = to_host};
    r->sub.device = NULL;
    r->sub.state = sr->state;
    sr->cpu->compute_async(&r->sub, s_recv_done, r);
}

static void s_recv(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg)
{
    s_recv_start(ctx, done, arg, false);
}

static void s_recv_host(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg)
{
    s_recv_start(ctx, done, arg, true);
}

/* ---- registration ------------------------------------------------------------------ */

#define S_SEND(op_, types_, host_in_)                                                              \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = (types_), .create = s_sr_create,       \
        .destroy = s_sr_destroy, .compute = s_send                                                 \
    }
#define S_RECV(op_, types_, host_out_, fn_)                                                        \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = (types_), .flags = ZF_KERNEL_ASYNC,    \
        .create = s_sr_create, .destroy = s_sr_destroy, .compute_async = (fn_)                     \
    }

static const zf_kernel_t s_defs[] = {
    S_SEND("_Send", ZF_TYPES_GPU_DEVICE, 0),
    S_SEND("_Send", ZF_TYPES_GPU_HOST, 1u << 0),
    S_SEND("_HostSend", 0, 1u << 0),
    S_RECV("_Recv", ZF_TYPES_GPU_DEVICE, 0, s_recv),
    S_RECV("_Recv", ZF_TYPES_GPU_HOST, 1u << 0, s_recv_host),
    S_RECV("_HostRecv", 0, 1u << 0, s_recv_host),
};

/* Needs the CPU kernels of the family (registered before the GPU ones). */
zf_status_t zf__gpu_register_sendrecv(void)
{
    return zf__gpu_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
