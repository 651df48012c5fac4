/* Two-pass partitioning (docs/service.md, "Partitioning by task"): by task, as a TensorFlow
 * master does, then each task's partition by device, as its worker's graph manager does. Both
 * passes are zf_partition_graph(); this file only carries each task's partition, its devices
 * and its client endpoints from the first pass into the second, and gathers the results. */
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/rendezvous_key.h"
#include "scheduler/graph/partition.h"

/* One task of the first pass: its devices (indexes into the whole set) and
 * the device set and assignment the second pass runs over. */
typedef struct {
    const zf_partition_t *part;
    int *index; /* per task device: its index in the whole set */
    zf_partition_device_t *devs;
    int n_devs;
    int *assignment; /* per node of part->graph */
} s_task_t;

static void s_task_free(s_task_t *t)
{
    free(t->index);
    free(t->devs);
    free(t->assignment);
}

/* The devices of the whole set whose task is part's (its key). */
static zf_status_t s_task_devices(const zf_partition_device_t *devices, int n_devices, s_task_t *t)
{
    t->index = calloc((size_t)n_devices, sizeof *t->index);
    t->devs = calloc((size_t)n_devices, sizeof *t->devs);
    if (!t->index || !t->devs) return zf_out_of_memory("partition");
    for (int d = 0; d < n_devices; d++) {
        char task[ZF_DEVICE_NAME_MAX];
        ZF_TRY(zf_device_name_task(&devices[d].name, task, sizeof task));
        if (strcmp(task, t->part->device) != 0) continue;
        t->index[t->n_devs] = d;
        t->devs[t->n_devs++] = devices[d];
    }
    return ZF_STATUS_OK;
}

/* Each node's device, by name, among the task's devices: the first pass
 * put every node, its transfers included, on a full device name. */
static zf_status_t s_task_assignment(s_task_t *t, const zf_graph_t *g)
{
    int n = zf_graph_num_nodes(g);
    char(*names)[ZF_DEVICE_NAME_MAX] = calloc((size_t)t->n_devs, sizeof *names);
    t->assignment = calloc((size_t)n + 1, sizeof *t->assignment);
    zf_status_t s = names && t->assignment ? ZF_STATUS_OK : zf_out_of_memory("partition");
    for (int d = 0; zf_ok(s) && d < t->n_devs; d++)
        zf_device_name_format(&t->devs[d].name, names[d], sizeof names[d]);
    for (int i = 0; zf_ok(s) && i < n; i++) {
        const char *dev = zf_graph_node_device(g, i);
        int d = 0;
        while (d < t->n_devs && strcmp(names[d], dev) != 0) d++;
        if (d == t->n_devs)
            s = zf_internal("node '%s' of the partition of task %s is on '%s', not one of its "
                            "devices",
                            zf_graph_node_name(g, i), t->part->device, dev);
        t->assignment[i] = d;
    }
    free(names);
    return s;
}

/* The partition of set whose device is the key's sending (src) or
 * receiving device. */
static zf_partition_t *s_part_of_key(zf_partition_set_t *set, const char *key, bool src)
{
    zf_rendezvous_parsed_key_t k;
    zf_status_t s = zf_rendezvous_key_parse(key, &k);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return NULL;
    }
    const char *dev = src ? k.src_device : k.dst_device;
    size_t len = src ? k.src_len : k.dst_len;
    for (int i = 0; i < set->n_parts; i++)
        if (strlen(set->parts[i].device) == len && memcmp(set->parts[i].device, dev, len) == 0)
            return &set->parts[i];
    return NULL;
}

/* Moves the first pass's io list (feeds: src false, by their receiving
 * device; fetches: src true, by their sending device) to the second
 * pass's device partitions. */
static zf_status_t s_move_io(zf_partition_io_t *io, int n, bool src, zf_partition_set_t *set)
{
    for (int k = 0; k < n; k++) {
        zf_partition_t *p = s_part_of_key(set, io[k].key, src);
        if (!p)
            return zf_internal("no device partition holds the client endpoint '%s' (key %s)",
                               io[k].tensor_name, io[k].key);
        zf_partition_io_t **arr = src ? &p->fetches : &p->feeds;
        int *count = src ? &p->n_fetches : &p->n_feeds;
        zf_partition_io_t *grown = realloc(*arr, (size_t)(*count + 1) * sizeof *grown);
        if (!grown) return zf_out_of_memory("partition");
        *arr = grown;
        grown[(*count)++] = io[k];
        io[k] = (zf_partition_io_t){NULL, NULL};
    }
    return ZF_STATUS_OK;
}

/* Whether nd is a transfer between two devices of op a or b (not a
 * client's feed or fetch). */
static bool s_is_transfer(const Tensorflow__NodeDef *nd, const char *a, const char *b)
{
    if (strcmp(nd->op, a) != 0 && strcmp(nd->op, b) != 0) return false;
    bool client = false;
    zf_status_t s = zf_node_attr_bool_or(nd, "client_terminated", false, &client);
    zf_status_clear(&s); /* made by the partitioner: a bool when there */
    return !client;
}

/* Counts the transfers of both passes in p's graph. */
static void s_count_transfers(zf_partition_t *p)
{
    p->n_send = p->n_recv = 0;
    for (size_t i = 0; i < p->graph->n_node; i++) {
        p->n_send += s_is_transfer(p->graph->node[i], "_Send", "_HostSend");
        p->n_recv += s_is_transfer(p->graph->node[i], "_Recv", "_HostRecv");
    }
}

/* Appends the parts of from (emptied) to into. */
static zf_status_t s_append(zf_partition_set_t *into, zf_partition_set_t *from)
{
    int n = into->n_parts + from->n_parts;
    zf_partition_t *grown = realloc(into->parts, (size_t)(n ? n : 1) * sizeof *grown);
    if (!grown) return zf_out_of_memory("partition");
    into->parts = grown;
    memcpy(into->parts + into->n_parts, from->parts, (size_t)from->n_parts * sizeof *grown);
    into->n_parts = n;
    from->n_parts = 0;
    return ZF_STATUS_OK;
}

/* The second pass over one task's partition; its device partitions are
 * appended to out. */
static zf_status_t s_split_task(const zf_graph_t *g, const zf_partition_device_t *devices,
                                int n_devices, const zf_partition_options_t *opts,
                                zf_partition_t *part, zf_partition_set_t *out)
{
    s_task_t t = {.part = part};
    zf_graph_t *tg = NULL;
    zf_partition_set_t *set = NULL;
    zf_partition_options_t o = {
        .by = ZF_PARTITION_BY_DEVICE,
        .recv_scheduling = opts->recv_scheduling,
        .first_name_id = out->next_name_id,
        .avoid_names = g,
    };
    zf_status_t s = s_task_devices(devices, n_devices, &t);
    if (zf_ok(s)) s = zf_graph_new_from_graphdef(part->graph, &tg);
    if (zf_ok(s)) s = s_task_assignment(&t, tg);
    if (zf_ok(s)) s = zf_partition_graph(tg, t.devs, t.n_devs, t.assignment, &o, &set);
    if (!zf_ok(s))
        s = zf_status_prefix(s, "splitting the partition of task %s by device", part->device);
    if (zf_ok(s)) s = s_move_io(part->feeds, part->n_feeds, false, set);
    if (zf_ok(s)) s = s_move_io(part->fetches, part->n_fetches, true, set);
    for (int i = 0; zf_ok(s) && i < set->n_parts; i++) {
        set->parts[i].device_index = t.index[set->parts[i].device_index];
        s_count_transfers(&set->parts[i]);
    }
    if (zf_ok(s)) out->next_name_id = set->next_name_id;
    if (zf_ok(s)) s = s_append(out, set);
    zf_partition_set_destroy(&set);
    zf_graph_destroy(&tg);
    s_task_free(&t);
    return s;
}

static int s_part_cmp(const void *a, const void *b)
{
    return strcmp(((const zf_partition_t *)a)->device, ((const zf_partition_t *)b)->device);
}

zf_status_t zf_partition_graph_two_pass(const zf_graph_t *g, const zf_partition_device_t *devices,
                                        int n_devices, const int *assignment,
                                        const zf_partition_options_t *opts,
                                        zf_partition_set_t **out)
{
    if (!out) return zf_invalid_argument("zf_partition_graph_two_pass needs an output");
    *out = NULL;
    static const zf_partition_options_t defaults = {0};
    zf_partition_options_t o = opts ? *opts : defaults;
    o.by = ZF_PARTITION_BY_TASK;
    zf_partition_set_t *tasks = NULL, *set = calloc(1, sizeof *set);
    zf_status_t s = set ? zf_partition_graph(g, devices, n_devices, assignment, &o, &tasks)
                        : zf_out_of_memory("partition");
    if (zf_ok(s)) set->next_name_id = tasks->next_name_id;
    for (int i = 0; zf_ok(s) && i < tasks->n_parts; i++)
        s = s_split_task(g, devices, n_devices, &o, &tasks->parts[i], set);
    zf_partition_set_destroy(&tasks);
    if (zf_ok(s)) {
        if (set->n_parts > 1)
            qsort(set->parts, (size_t)set->n_parts, sizeof *set->parts, s_part_cmp);
        *out = set;
    } else {
        zf_partition_set_destroy(&set);
    }
    return s;
}
