/* zflow run --trace: a traced step as Chrome's trace-event JSON (what
 * chrome://tracing and Perfetto open). One process per device, named after
 * it; one complete event ("X") per kernel run, its name the node's, its
 * category the op, its time in µs from the step's start; an arrow (a flow:
 * "s" at the _Send's end, "f" at the matching _Recv's end) for each tensor
 * that crossed between partitions, matched by tensor name, devices, frame
 * and iteration. One event per line. The runs come from the in-process
 * session's trace or from the service (NodeRun), alike. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "common/strmap.h"
#include "proto/service.pb-c.h"

/* s as a JSON string's contents. */
static void s_json_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* The key a transfer's two ends share (its tensor, devices, frame and
 * iteration); false for a node that is no transfer between partitions. */
static bool s_transfer_key(const Zflow__NodeRun *r, bool *send, char *key, size_t size)
{
    if (!r->transfer || !*r->transfer) return false;
    *send = strcmp(r->op, "_Send") == 0 || strcmp(r->op, "_HostSend") == 0;
    snprintf(key, size, "%s;%" PRIu64 ":%" PRId64, r->transfer, r->frame_id, r->iter);
    return true;
}

/* The index of device in devs (added when new). */
static int s_pid(const char **devs, int *n, const char *device)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(devs[i], device) == 0) return i;
    devs[*n] = device;
    return (*n)++;
}

static void s_flows(FILE *f, Zflow__NodeRun *const *runs, size_t n, const int *pid, int64_t t0,
                    zf_strmap_t *sends)
{
    char key[1024];
    bool send = false;
    for (size_t i = 0; i < n; i++)
        if (s_transfer_key(runs[i], &send, key, sizeof key) && send)
            zf_strmap_put(sends, key, (uintptr_t)i);
    uint64_t id = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t at = 0;
        if (!s_transfer_key(runs[i], &send, key, sizeof key) || send ||
            !zf_strmap_get(sends, key, &at))
            continue;
        const Zflow__NodeRun *s = runs[at], *r = runs[i];
        id++;
        fprintf(f, ",\n{\"ph\":\"s\",\"id\":%" PRIu64 ",\"name\":\"", id);
        s_json_str(f, key);
        fprintf(f, "\",\"cat\":\"transfer\",\"pid\":%d,\"tid\":0,\"ts\":%" PRId64 "}", pid[at],
                s->end_us - t0);
        fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%" PRIu64 ",\"name\":\"", id);
        s_json_str(f, key);
        fprintf(f, "\",\"cat\":\"transfer\",\"pid\":%d,\"tid\":0,\"ts\":%" PRId64 "}", pid[i],
                r->end_us - t0);
    }
}

zf_status_t zf_cli_write_trace(const char *path, Zflow__NodeRun *const *runs, size_t n,
                               int64_t start_us, int64_t end_us)
{
    FILE *f = fopen(path, "w");
    if (!f) return zf_status_new(ZF_UNAVAILABLE, "cannot write the trace %s", path);
    const char **devs = calloc(n + 1, sizeof *devs);
    int *pid = calloc(n + 1, sizeof *pid);
    zf_strmap_t *sends = zf_strmap_new(16, ZF_STRMAP_COPY_KEYS);
    if (!devs || !pid || !sends) {
        fclose(f);
        free(devs);
        free(pid);
        zf_strmap_destroy(&sends);
        return zf_out_of_memory("trace");
    }
    int n_devs = 0;
    for (size_t i = 0; i < n; i++) pid[i] = s_pid(devs, &n_devs, runs[i]->device);
    fprintf(f,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"step_wall_us\":%" PRId64
            "},\n\"traceEvents\":[\n",
            end_us - start_us);
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":-1,\"args\":{\"name\":\"step\"}}");
    for (int d = 0; d < n_devs; d++) {
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"",
                d);
        s_json_str(f, devs[d]);
        fprintf(f, "\"}}");
    }
    for (size_t i = 0; i < n; i++) {
        const Zflow__NodeRun *r = runs[i];
        fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"");
        s_json_str(f, r->node);
        fprintf(f, "\",\"cat\":\"");
        s_json_str(f, r->op);
        fprintf(f,
                "\",\"pid\":%d,\"tid\":0,\"ts\":%" PRId64 ",\"dur\":%" PRId64
                ",\"args\":{\"frame\":%" PRIu64 ",\"iter\":%" PRId64 ",\"bytes\":%" PRId64 "}}",
                pid[i], r->start_us - start_us, r->end_us - r->start_us, r->frame_id, r->iter,
                r->output_bytes);
    }
    s_flows(f, runs, n, pid, start_us, sends);
    fprintf(f, "\n]}\n");
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    free(devs);
    free(pid);
    zf_strmap_destroy(&sends);
    return ok ? ZF_STATUS_OK : zf_status_new(ZF_UNAVAILABLE, "writing the trace %s failed", path);
}

/* Most compute first; ties by device, then node. */
static int s_cost_cmp(const void *a, const void *b)
{
    const Zflow__CostNode *x = *(Zflow__CostNode *const *)a, *y = *(Zflow__CostNode *const *)b;
    if (x->compute_us != y->compute_us) return x->compute_us > y->compute_us ? -1 : 1;
    int c = strcmp(x->device ? x->device : "", y->device ? y->device : "");
    return c ? c : strcmp(x->node ? x->node : "", y->node ? y->node : "");
}

zf_status_t zf_cli_write_cost_graph(const char *path, Zflow__CostNode *const *nodes, size_t n)
{
    Zflow__CostNode **sorted = malloc((n + 1) * sizeof *sorted);
    if (!sorted) return zf_out_of_memory("cost graph");
    if (n) memcpy(sorted, nodes, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, s_cost_cmp);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(sorted);
        return zf_status_new(ZF_NOT_FOUND, "cannot write the cost graph to '%s': %s", path,
                             strerror(errno));
    }
    fprintf(f, "node\tdevice\tsteps\tcompute_us\toutput_bytes\truns_per_step\n");
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\n",
                sorted[k]->node, sorted[k]->device, sorted[k]->steps, sorted[k]->compute_us,
                sorted[k]->output_bytes, sorted[k]->runs_per_step);
    free(sorted);
    if (fclose(f) != 0)
        return zf_status_new(ZF_INTERNAL, "writing the cost graph to '%s': %s", path,
                             strerror(errno));
    return ZF_STATUS_OK;
}
