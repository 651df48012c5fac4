/* The kernel definition registry: (op, device type, dtype constraint) ->
 * definition, and the implementation the runtime attached to each. */
#include "common/kernel_def.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/log.h"
#include "common/op_registry.h"
#include "common/strmap.h"

typedef struct {
    const zf_kernel_def_t **defs;
    const void **impls;
    int *next; /* next definition for the same op, or -1 */
    int n, cap;
    zf_strmap_t *first; /* op -> index of its first definition */
    bool builtin;       /* the built-in definitions are registered */
} s_registry_t;

static s_registry_t s_reg;
static pthread_rwlock_t s_lock = PTHREAD_RWLOCK_INITIALIZER;

static bool s_types_overlap(const zf_kernel_def_t *a, const zf_kernel_def_t *b)
{
    if (!a->allowed_types || !b->allowed_types) return true;
    return (a->allowed_types & b->allowed_types) != 0;
}

static int s_first(const char *op)
{
    uintptr_t v;
    return s_reg.first && zf_strmap_get_n(s_reg.first, op, strlen(op), &v) ? (int)v : -1;
}

static zf_status_t s_grow(void)
{
    if (s_reg.n < s_reg.cap) return ZF_STATUS_OK;
    int cap = s_reg.cap ? s_reg.cap * 2 : 256;
    const zf_kernel_def_t **defs = realloc(s_reg.defs, (size_t)cap * sizeof *defs);
    if (!defs) return zf_out_of_memory("kernel definitions");
    s_reg.defs = defs;
    const void **impls = realloc(s_reg.impls, (size_t)cap * sizeof *impls);
    if (!impls) return zf_out_of_memory("kernel definitions");
    s_reg.impls = impls;
    int *next = realloc(s_reg.next, (size_t)cap * sizeof *next);
    if (!next) return zf_out_of_memory("kernel definitions");
    s_reg.next = next;
    s_reg.cap = cap;
    if (!s_reg.first && !(s_reg.first = zf_strmap_new(256, 0)))
        return zf_out_of_memory("kernel definitions");
    return ZF_STATUS_OK;
}

static zf_status_t s_register_locked(const zf_kernel_def_t *def)
{
    if (!def->op || !def->device_type)
        return zf_invalid_argument("a kernel definition needs an op and a device type");
    for (int i = s_first(def->op); i >= 0; i = s_reg.next[i]) {
        const zf_kernel_def_t *other = s_reg.defs[i];
        if (strcmp(other->device_type, def->device_type) == 0 && s_types_overlap(other, def))
            return zf_status_new(ZF_ALREADY_EXISTS,
                                 "a kernel for op '%s' on %s with overlapping types is already "
                                 "registered",
                                 def->op, def->device_type);
    }
    ZF_TRY(zf_op_register_kernel(def->op, def->device_type));
    ZF_TRY(s_grow());
    int idx = s_reg.n++;
    s_reg.defs[idx] = def;
    s_reg.impls[idx] = NULL;
    /* Append to the op's chain so lookups see definitions in registration order. */
    s_reg.next[idx] = -1;
    int head = s_first(def->op);
    if (head < 0) {
        if (zf_strmap_put_n(s_reg.first, def->op, strlen(def->op), (uintptr_t)idx) != 0) {
            s_reg.n--;
            return zf_out_of_memory("kernel definitions");
        }
    } else {
        while (s_reg.next[head] >= 0) head = s_reg.next[head];
        s_reg.next[head] = idx;
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_kernel_def_register(const zf_kernel_def_t *def)
{
    pthread_rwlock_wrlock(&s_lock);
    zf_status_t s = s_register_locked(def);
    pthread_rwlock_unlock(&s_lock);
    return s;
}

void zf_kernel_defs_register_builtin(void)
{
    int n = 0;
    const zf_kernel_def_t *defs = zf__kernel_defs_builtin(&n);
    pthread_rwlock_wrlock(&s_lock);
    for (int i = 0; i < n && !s_reg.builtin; i++) {
        zf_status_t s = s_register_locked(&defs[i]);
        if (!zf_ok(s))
            zf_log(ZF_LOG_ERROR, "kernels", "registering the definition of %s on %s: %s",
                   defs[i].op, defs[i].device_type, zf_status_msg(&s));
        zf_status_clear(&s);
    }
    s_reg.builtin = true;
    pthread_rwlock_unlock(&s_lock);
}

void zf_kernel_def_registry_reset(void)
{
    pthread_rwlock_wrlock(&s_lock);
    free(s_reg.defs);
    free(s_reg.impls);
    free(s_reg.next);
    zf_strmap_destroy(&s_reg.first);
    memset(&s_reg, 0, sizeof s_reg);
    zf_op_registry_reset_kernels();
    pthread_rwlock_unlock(&s_lock);
}

bool zf_kernel_def_exists(const char *op, const char *device_type)
{
    bool found = false;
    pthread_rwlock_rdlock(&s_lock);
    for (int i = s_first(op); i >= 0 && !found; i = s_reg.next[i])
        found = strcmp(s_reg.defs[i]->device_type, device_type) == 0;
    pthread_rwlock_unlock(&s_lock);
    return found;
}

static int s_index_of(const zf_kernel_def_t *def)
{
    for (int i = s_first(def->op); i >= 0; i = s_reg.next[i])
        if (s_reg.defs[i] == def) return i;
    return -1;
}

const zf_kernel_def_t *zf_kernel_def_lookup(const char *op, const char *device_type,
                                            uint64_t allowed_types)
{
    const zf_kernel_def_t *found = NULL;
    pthread_rwlock_rdlock(&s_lock);
    for (int i = s_first(op); i >= 0 && !found; i = s_reg.next[i])
        if (strcmp(s_reg.defs[i]->device_type, device_type) == 0 &&
            s_reg.defs[i]->allowed_types == allowed_types)
            found = s_reg.defs[i];
    pthread_rwlock_unlock(&s_lock);
    return found;
}

zf_status_t zf_kernel_def_attach(const zf_kernel_def_t *def, const void *impl)
{
    zf_status_t s = ZF_STATUS_OK;
    pthread_rwlock_wrlock(&s_lock);
    int i = s_index_of(def);
    if (i < 0)
        s = zf_not_found("the kernel definition of %s on %s is not registered", def->op,
                         def->device_type);
    else if (s_reg.impls[i] && s_reg.impls[i] != impl)
        s = zf_status_new(ZF_ALREADY_EXISTS,
                          "a kernel for op '%s' on %s with these types is already registered",
                          def->op, def->device_type);
    else
        s_reg.impls[i] = impl;
    pthread_rwlock_unlock(&s_lock);
    return s;
}

/* The dtype a definition's constraint applies to, from the node's attr. */
static bool s_matches(const zf_kernel_def_t *def, const Tensorflow__NodeDef *node)
{
    if (!def->type_attr || !def->allowed_types) return true;
    const Tensorflow__AttrValue *v = zf_node_attr(node, def->type_attr);
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TYPE) return false;
    int t = (int)zf_dtype_base((int)v->type);
    return t > 0 && t < 64 && (def->allowed_types & ZF_TYPE_BIT(t)) != 0;
}

bool zf_kernel_def_accepts_dtype(const char *device_type, const Tensorflow__NodeDef *node)
{
    bool registered = false, accepted = false;
    pthread_rwlock_rdlock(&s_lock);
    for (int i = s_first(node->op); i >= 0 && !accepted; i = s_reg.next[i]) {
        if (strcmp(s_reg.defs[i]->device_type, device_type) != 0) continue;
        registered = true;
        accepted = s_matches(s_reg.defs[i], node);
    }
    pthread_rwlock_unlock(&s_lock);
    return accepted || !registered;
}

static zf_status_t s_not_found(const char *device_type, const Tensorflow__NodeDef *node)
{
    char attrs[256] = "", kernels[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < node->n_attr && used < sizeof attrs; i++) {
        const Tensorflow__AttrValue *v = node->attr[i]->value;
        if (v && v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_TYPE)
            used += (size_t)snprintf(
                attrs + used, sizeof attrs - used, "%s%s=%s", used ? ", " : "", node->attr[i]->key,
                zf_dtype_enum_name((int)v->type) ? zf_dtype_enum_name((int)v->type) : "?");
    }
    used = 0;
    for (int i = s_first(node->op); i >= 0 && used < sizeof kernels; i = s_reg.next[i])
        used += (size_t)snprintf(kernels + used, sizeof kernels - used, "%sdevice='%s'",
                                 used ? "; " : "", s_reg.defs[i]->device_type);
    return zf_status_new(ZF_NOT_FOUND,
                         "No OpKernel was registered to support Op '%s' used by node %s on %s "
                         "with these attrs: [%s]; registered kernels: %s",
                         node->op, node->name, device_type, attrs,
                         used ? kernels : "<no registered kernels>");
}

zf_status_t zf_kernel_def_find(const char *device_type, const Tensorflow__NodeDef *node,
                               const zf_kernel_def_t **out, const void **impl)
{
    *out = NULL;
    if (impl) *impl = NULL;
    pthread_rwlock_rdlock(&s_lock);
    for (int i = s_first(node->op); i >= 0; i = s_reg.next[i]) {
        const zf_kernel_def_t *def = s_reg.defs[i];
        if (strcmp(def->device_type, device_type) == 0 && s_matches(def, node)) {
            *out = def;
            if (impl) *impl = s_reg.impls[i];
            break;
        }
    }
    zf_status_t s = *out ? ZF_STATUS_OK : s_not_found(device_type, node);
    pthread_rwlock_unlock(&s_lock);
    return s;
}

void zf_kernel_def_foreach(void (*fn)(const zf_kernel_def_t *def, const void *impl, void *arg),
                           void *arg)
{
    pthread_rwlock_rdlock(&s_lock);
    for (int i = 0; i < s_reg.n; i++) fn(s_reg.defs[i], s_reg.impls[i], arg);
    pthread_rwlock_unlock(&s_lock);
}
