/* The executor registry: owns one copy of each live executor's ExecutorInfo,
 * its last heartbeat time, and the naming of executors that come unnamed. */
#include "broker/registry.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/device_name.h"
#include "common/proto_util.h"

#define S_TEXT_MAX 1024 /* longest endpoint or host id accepted */

typedef struct s_entry {
    Zflow__ExecutorInfo *info; /* owned; info->device->name is the canonical name */
    int64_t last_seen_ms;
    int conn; /* the connection it last spoke on (zf_registry_set_conn); -1: unknown */
} s_entry_t;

struct zf_registry {
    int heartbeat_ms;
    int heartbeat_misses;
    zf_registry_clock_fn now;
    void *now_arg;
    bool keep_live;
    zf_registry_listener_fn listener;
    void *listener_arg;
    s_entry_t *entries;
    int n, cap;
    int next_task; /* first task number tried for the next unnamed executor */
};

static int64_t s_monotonic_ms(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

zf_status_t zf_registry_new(const zf_registry_config_t *config, zf_registry_t **out)
{
    *out = NULL;
    if (config->heartbeat_ms < 1 || config->heartbeat_misses < 1)
        return zf_invalid_argument("heartbeat period (%d ms) and misses (%d) must be at least 1",
                                   config->heartbeat_ms, config->heartbeat_misses);
    zf_registry_t *reg = calloc(1, sizeof *reg);
    if (!reg) return zf_out_of_memory("an executor registry");
    reg->heartbeat_ms = config->heartbeat_ms;
    reg->heartbeat_misses = config->heartbeat_misses;
    reg->now = config->now ? config->now : s_monotonic_ms;
    reg->now_arg = config->now_arg;
    reg->keep_live = config->keep_live;
    *out = reg;
    return ZF_STATUS_OK;
}

void zf_registry_destroy(zf_registry_t **reg_p)
{
    if (!reg_p || !*reg_p) return;
    zf_registry_t *reg = *reg_p;
    *reg_p = NULL;
    for (int i = 0; i < reg->n; i++)
        zflow__executor_info__free_unpacked(reg->entries[i].info, NULL);
    free(reg->entries);
    free(reg);
}

void zf_registry_set_listener(zf_registry_t *reg, zf_registry_listener_fn fn, void *arg)
{
    reg->listener = fn;
    reg->listener_arg = arg;
}

zf_status_t zf_executor_info_copy(const Zflow__ExecutorInfo *info, Zflow__ExecutorInfo **out)
{
    ProtobufCMessage *c = NULL;
    zf_status_t st = zf_proto_clone(&info->base, "an executor info copy", &c);
    *out = (Zflow__ExecutorInfo *)c;
    return st;
}

static int s_find(const zf_registry_t *reg, const char *name)
{
    for (int i = 0; i < reg->n; i++)
        if (strcmp(reg->entries[i].info->device->name, name) == 0) return i;
    return -1;
}

static bool s_type_valid(const char *t)
{
    if (!isalpha((unsigned char)t[0]) || strlen(t) > ZF_DEVICE_TYPE_MAX) return false;
    for (; *t; t++)
        if (!isalnum((unsigned char)*t) && *t != '_') return false;
    return true;
}

static zf_status_t s_check_info(const Zflow__ExecutorInfo *info)
{
    if (!info || !info->device) return zf_invalid_argument("executor info has no device");
    const char *type = info->device->device_type ? info->device->device_type : "";
    if (!s_type_valid(type))
        return zf_invalid_argument("device_type '%s' is not a device type ([A-Za-z][A-Za-z0-9_]*)",
                                   type);
    if (info->device->incarnation == 0)
        return zf_invalid_argument("incarnation must not be 0 (executor '%s')", type);
    if (!info->control_endpoint || !info->control_endpoint[0])
        return zf_invalid_argument("control_endpoint is empty");
    if (!info->rendezvous_endpoint || !info->rendezvous_endpoint[0])
        return zf_invalid_argument("rendezvous_endpoint is empty");
    if (strlen(info->control_endpoint) > S_TEXT_MAX ||
        strlen(info->rendezvous_endpoint) > S_TEXT_MAX ||
        (info->host_id && strlen(info->host_id) > S_TEXT_MAX))
        return zf_invalid_argument("an endpoint or the host_id is longer than %d characters",
                                   S_TEXT_MAX);
    return ZF_STATUS_OK;
}

/* The smallest task number from next_task on that no live /job:worker
 * replica-0 executor of any type uses. */
static int s_free_task(zf_registry_t *reg)
{
    for (int task = reg->next_task;; task++) {
        bool used = false;
        for (int i = 0; i < reg->n && !used; i++) {
            zf_device_name_t d;
            zf_status_t s = zf_device_name_parse(reg->entries[i].info->device->name, &d);
            zf_status_clear(&s);
            used = strcmp(d.job, "worker") == 0 && d.replica == 0 && d.task == task;
        }
        if (!used) return task;
    }
}

/* The canonical full name for info: given, completed, or assigned. */
static zf_status_t s_resolve_name(zf_registry_t *reg, const Zflow__ExecutorInfo *info, char *buf,
                                  size_t size)
{
    const char *given = info->device->name ? info->device->name : "";
    const char *type = info->device->device_type;
    zf_device_name_t name;
    ZF_TRY(zf_status_prefix(zf_device_name_parse(given, &name), "device name"));
    if (name.has_type && strcmp(name.type, type) != 0)
        return zf_invalid_argument("device name '%s' has type %s but device_type is %s", given,
                                   name.type, type);
    if (!zf_device_name_is_full(&name)) {
        bool assign_task = !name.has_task;
        zf_device_name_t fill;
        ZF_TRY(zf_device_name_make("worker", 0, assign_task ? s_free_task(reg) : name.task, type, 0,
                                   &fill));
        zf_device_name_merge_unset(&name, &fill);
        if (assign_task) reg->next_task = fill.task + 1;
    }
    zf_device_name_format(&name, buf, size);
    return ZF_STATUS_OK;
}

static void s_notify(zf_registry_t *reg, zf_registry_event_t ev, const Zflow__ExecutorInfo *info,
                     const char *reason)
{
    if (reg->listener) reg->listener(reg->listener_arg, ev, info, reason);
}

static void s_remove(zf_registry_t *reg, int i, const char *reason)
{
    Zflow__ExecutorInfo *info = reg->entries[i].info;
    memmove(&reg->entries[i], &reg->entries[i + 1],
            (size_t)(reg->n - i - 1) * sizeof *reg->entries);
    reg->n--;
    s_notify(reg, ZF_REGISTRY_DIED, info, reason);
    zflow__executor_info__free_unpacked(info, NULL);
}

/* A copy of info named name, with the heartbeat age cleared. */
static zf_status_t s_make_entry(const Zflow__ExecutorInfo *info, const char *name, s_entry_t *e)
{
    ZF_TRY(zf_executor_info_copy(info, &e->info));
    char *dup = strdup(name);
    if (!dup) {
        zflow__executor_info__free_unpacked(e->info, NULL);
        e->info = NULL;
        return zf_out_of_memory("a device name");
    }
    if (e->info->device->name != protobuf_c_empty_string) free(e->info->device->name);
    e->info->device->name = dup;
    e->info->ms_since_heartbeat = 0;
    return ZF_STATUS_OK;
}

static zf_status_t s_reserve(zf_registry_t *reg)
{
    if (reg->n < reg->cap) return ZF_STATUS_OK;
    int cap = reg->cap ? 2 * reg->cap : 8;
    s_entry_t *e = realloc(reg->entries, (size_t)cap * sizeof *e);
    if (!e) return zf_out_of_memory("the executor registry");
    reg->entries = e;
    reg->cap = cap;
    return ZF_STATUS_OK;
}

static zf_status_t s_register(zf_registry_t *reg, const Zflow__ExecutorInfo *info, char *name,
                              size_t name_size)
{
    ZF_TRY(s_check_info(info));
    ZF_TRY(s_resolve_name(reg, info, name, name_size));
    int old = s_find(reg, name);
    if (old >= 0 && reg->entries[old].info->device->incarnation == info->device->incarnation)
        return zf_status_new(ZF_ALREADY_EXISTS,
                             "device '%s' is already registered by a live executor with the same "
                             "incarnation",
                             name);
    if (old >= 0 && reg->keep_live)
        return zf_status_new(ZF_ALREADY_EXISTS,
                             "device '%s' is held by a live executor (incarnation 0x%016" PRIx64
                             "); it can be registered again once that one has missed %d "
                             "heartbeats",
                             name, reg->entries[old].info->device->incarnation,
                             reg->heartbeat_misses);
    ZF_TRY(s_reserve(reg));
    s_entry_t e = {NULL, reg->now(reg->now_arg), -1};
    ZF_TRY(s_make_entry(info, name, &e));
    if (old >= 0) {
        char reason[96];
        snprintf(reason, sizeof reason, "restarted with a new incarnation 0x%016" PRIx64,
                 info->device->incarnation);
        s_remove(reg, old, reason);
    }
    reg->entries[reg->n++] = e;
    s_notify(reg, ZF_REGISTRY_JOINED, e.info, "");
    return ZF_STATUS_OK;
}

zf_status_t zf_registry_register(zf_registry_t *reg, const Zflow__ExecutorInfo *info, char *name,
                                 size_t name_size)
{
    zf_status_t s = s_register(reg, info, name, name_size);
    if (!zf_ok(s) && name_size) name[0] = '\0';
    return s;
}

/* The entry of name at incarnation, or NOT_FOUND. */
static zf_status_t s_find_live(const zf_registry_t *reg, const char *name, uint64_t incarnation,
                               int *at)
{
    int i = s_find(reg, name ? name : "");
    if (i < 0) return zf_not_found("device '%s' is not registered", name ? name : "");
    const s_entry_t *e = &reg->entries[i];
    if (e->info->device->incarnation != incarnation)
        return zf_not_found("device '%s' is registered with incarnation 0x%016" PRIx64
                            ", not 0x%016" PRIx64,
                            name, e->info->device->incarnation, incarnation);
    *at = i;
    return ZF_STATUS_OK;
}

zf_status_t zf_registry_deregister(zf_registry_t *reg, const char *name, uint64_t incarnation,
                                   int conn)
{
    int i = -1;
    ZF_TRY(s_find_live(reg, name, incarnation, &i));
    if (reg->entries[i].conn >= 0 && reg->entries[i].conn != conn)
        return zf_status_new(ZF_PERMISSION_DENIED,
                             "device '%s' may be deregistered only by the executor that holds "
                             "it, over its own connection",
                             name);
    s_remove(reg, i, "stopped");
    return ZF_STATUS_OK;
}

zf_status_t zf_registry_heartbeat(zf_registry_t *reg, const char *name, uint64_t incarnation,
                                  int64_t load)
{
    int i = -1;
    ZF_TRY(s_find_live(reg, name, incarnation, &i));
    s_entry_t *e = &reg->entries[i];
    e->last_seen_ms = reg->now(reg->now_arg);
    e->info->load = load;
    return ZF_STATUS_OK;
}

static int64_t s_deadline_ms(const zf_registry_t *reg)
{
    return (int64_t)reg->heartbeat_ms * reg->heartbeat_misses;
}

void zf_registry_set_conn(zf_registry_t *reg, const char *name, int conn)
{
    int i = s_find(reg, name ? name : "");
    if (i >= 0) reg->entries[i].conn = conn;
}

int zf_registry_drop_conn(zf_registry_t *reg, int conn)
{
    int removed = 0;
    for (int i = 0; i < reg->n;) {
        if (conn < 0 || reg->entries[i].conn != conn) {
            i++;
            continue;
        }
        s_remove(reg, i, "its connection to the broker closed");
        removed++;
    }
    return removed;
}

int zf_registry_expire(zf_registry_t *reg)
{
    int64_t now = reg->now(reg->now_arg);
    int removed = 0;
    for (int i = 0; i < reg->n;) {
        int64_t silent = now - reg->entries[i].last_seen_ms;
        if (silent <= s_deadline_ms(reg)) {
            i++;
            continue;
        }
        char reason[64];
        snprintf(reason, sizeof reason, "no heartbeat for %" PRId64 " ms", silent);
        s_remove(reg, i, reason);
        removed++;
    }
    return removed;
}

int64_t zf_registry_next_expiry_ms(const zf_registry_t *reg)
{
    if (reg->n == 0) return -1;
    int64_t now = reg->now(reg->now_arg), next = INT64_MAX;
    for (int i = 0; i < reg->n; i++) {
        int64_t left = reg->entries[i].last_seen_ms + s_deadline_ms(reg) + 1 - now;
        if (left < next) next = left;
    }
    return next < 0 ? 0 : next;
}

int zf_registry_count(const zf_registry_t *reg)
{
    return reg->n;
}

const Zflow__ExecutorInfo *zf_registry_find(const zf_registry_t *reg, const char *name)
{
    int i = s_find(reg, name);
    return i < 0 ? NULL : reg->entries[i].info;
}

zf_status_t zf_registry_list(const zf_registry_t *reg, Zflow__ExecutorInfo ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    Zflow__ExecutorInfo **list = calloc((size_t)reg->n + 1, sizeof *list);
    if (!list) return zf_out_of_memory("an executor list");
    int64_t now = reg->now(reg->now_arg);
    for (int i = 0; i < reg->n; i++) {
        zf_status_t s = zf_executor_info_copy(reg->entries[i].info, &list[i]);
        if (!zf_ok(s)) {
            zf_registry_list_free(list, (size_t)i);
            return s;
        }
        list[i]->ms_since_heartbeat = now - reg->entries[i].last_seen_ms;
    }
    *out = list;
    *n = (size_t)reg->n;
    return ZF_STATUS_OK;
}

void zf_registry_list_free(Zflow__ExecutorInfo **list, size_t n)
{
    if (!list) return;
    for (size_t i = 0; i < n; i++) zflow__executor_info__free_unpacked(list[i], NULL);
    free(list);
}
