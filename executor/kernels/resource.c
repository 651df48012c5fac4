/* The per-session resource manager: named variables, each with its own lock,
 * and the index from ref tensors (values and markers) back to their
 * variables. Variables live until the manager is destroyed. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "executor/kernels/resource.h"

typedef struct s_var {
    char *name;
    pthread_mutex_t mu;  /* guards the fields below and the value's contents */
    zf_tensor_t *value;  /* NULL until assigned */
    bool value_indexed;  /* value is private to the variable and in by_ref */
    zf_tensor_t *marker; /* the ref handed out before the first assignment */
} s_var_t;

/* Lock order: a variable's lock may be held while taking mgr->mu, never
 * the other way round. */
struct zf_resource_mgr {
    pthread_mutex_t mu;   /* guards the maps and the array */
    zf_strmap_t *by_name; /* name -> s_var_t * (copied keys) */
    zf_strmap_t *by_ref;  /* tensor address -> s_var_t * | S_MARKER_TAG (copied keys) */
    s_var_t **vars;
    int n, cap;
};

#define S_MARKER_TAG ((uintptr_t)1)

zf_status_t zf_resource_mgr_new(zf_resource_mgr_t **out)
{
    *out = NULL;
    zf_resource_mgr_t *mgr = calloc(1, sizeof *mgr);
    if (!mgr) return zf_out_of_memory("resource manager");
    mgr->by_name = zf_strmap_new(16, ZF_STRMAP_OWN_KEYS);
    mgr->by_ref = zf_strmap_new(16, ZF_STRMAP_OWN_KEYS);
    if (!mgr->by_name || !mgr->by_ref) {
        zf_strmap_destroy(&mgr->by_name);
        zf_strmap_destroy(&mgr->by_ref);
        free(mgr);
        return zf_out_of_memory("resource manager");
    }
    pthread_mutex_init(&mgr->mu, NULL);
    *out = mgr;
    return ZF_STATUS_OK;
}

void zf_resource_mgr_destroy(zf_resource_mgr_t **mgr_p)
{
    if (!mgr_p || !*mgr_p) return;
    zf_resource_mgr_t *mgr = *mgr_p;
    *mgr_p = NULL;
    for (int i = 0; i < mgr->n; i++) {
        s_var_t *v = mgr->vars[i];
        zf_tensor_unref(&v->value);
        zf_tensor_unref(&v->marker);
        pthread_mutex_destroy(&v->mu);
        free(v->name);
        free(v);
    }
    free(mgr->vars);
    zf_strmap_destroy(&mgr->by_name);
    zf_strmap_destroy(&mgr->by_ref);
    pthread_mutex_destroy(&mgr->mu);
    free(mgr);
}

/* ---- lookup --------------------------------------------------------------- */

static s_var_t *s_var_new(const char *name)
{
    s_var_t *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->name = strdup(name);
    if (!v->name) {
        free(v);
        return NULL;
    }
    pthread_mutex_init(&v->mu, NULL);
    return v;
}

static void s_var_free(s_var_t *v)
{
    pthread_mutex_destroy(&v->mu);
    free(v->name);
    free(v);
}

static zf_status_t s_add_locked(zf_resource_mgr_t *mgr, const char *name, s_var_t **out)
{
    if (mgr->n == mgr->cap) {
        int cap = mgr->cap ? mgr->cap * 2 : 16;
        s_var_t **vars = realloc(mgr->vars, (size_t)cap * sizeof *vars);
        if (!vars) return zf_out_of_memory("variable table");
        mgr->vars = vars;
        mgr->cap = cap;
    }
    s_var_t *v = s_var_new(name);
    if (!v) return zf_out_of_memory("variable");
    if (zf_strmap_put(mgr->by_name, v->name, (uintptr_t)v) != 0) {
        s_var_free(v);
        return zf_out_of_memory("variable table");
    }
    mgr->vars[mgr->n++] = v;
    *out = v;
    return ZF_STATUS_OK;
}

/* The variable called name; created when absent and create is set, else
 * *out is NULL. */
static zf_status_t s_find(zf_resource_mgr_t *mgr, const char *name, bool create, s_var_t **out)
{
    *out = NULL;
    if (!mgr || !name) return zf_invalid_argument("a variable needs a resource manager and a name");
    zf_status_t s = ZF_STATUS_OK;
    uintptr_t v = 0;
    pthread_mutex_lock(&mgr->mu);
    if (zf_strmap_get(mgr->by_name, name, &v))
        *out = (s_var_t *)v;
    else if (create)
        s = s_add_locked(mgr, name, out);
    pthread_mutex_unlock(&mgr->mu);
    return s;
}

static zf_status_t s_uninitialized(const char *name)
{
    return zf_status_new(ZF_FAILED_PRECONDITION, "Attempting to use uninitialized value %s", name);
}

/* ---- the ref index -------------------------------------------------------- */

static zf_status_t s_index(zf_resource_mgr_t *mgr, const zf_tensor_t *t, uintptr_t tagged)
{
    pthread_mutex_lock(&mgr->mu);
    int rc = zf_strmap_put_n(mgr->by_ref, (const char *)&t, sizeof t, tagged);
    pthread_mutex_unlock(&mgr->mu);
    return rc == 0 ? ZF_STATUS_OK : zf_out_of_memory("variable ref index");
}

static void s_unindex(zf_resource_mgr_t *mgr, const zf_tensor_t *t, const s_var_t *var)
{
    uintptr_t v = 0;
    pthread_mutex_lock(&mgr->mu);
    if (zf_strmap_get_n(mgr->by_ref, (const char *)&t, sizeof t, &v) &&
        (s_var_t *)(v & ~S_MARKER_TAG) == var)
        zf_strmap_remove_n(mgr->by_ref, (const char *)&t, sizeof t, NULL);
    pthread_mutex_unlock(&mgr->mu);
}

/* Installs value (the caller's reference moves in) as var's value; with
 * indexed, value must be private to the variable and becomes findable as
 * its ref. Caller holds var->mu. */
static zf_status_t s_replace_locked(zf_resource_mgr_t *mgr, s_var_t *var, zf_tensor_t *value,
                                    bool indexed)
{
    if (indexed) {
        zf_status_t s = s_index(mgr, value, (uintptr_t)var);
        if (!zf_ok(s)) {
            zf_tensor_unref(&value);
            return s;
        }
    }
    if (var->value && var->value_indexed) s_unindex(mgr, var->value, var);
    zf_tensor_unref(&var->value);
    var->value = value;
    var->value_indexed = indexed;
    return ZF_STATUS_OK;
}

/* ---- values ----------------------------------------------------------------- */

zf_status_t zf_resource_get_var(zf_resource_mgr_t *mgr, const char *name, zf_tensor_t **out)
{
    *out = NULL;
    s_var_t *var = NULL;
    ZF_TRY(s_find(mgr, name, false, &var));
    if (!var) return s_uninitialized(name);
    pthread_mutex_lock(&var->mu);
    if (var->value) *out = zf_tensor_ref(var->value);
    pthread_mutex_unlock(&var->mu);
    return *out ? ZF_STATUS_OK : s_uninitialized(name);
}

zf_status_t zf_resource_set_var(zf_resource_mgr_t *mgr, const char *name, zf_tensor_t *value)
{
    if (!value) return zf_invalid_argument("variable %s: no value to set", name ? name : "");
    s_var_t *var = NULL;
    ZF_TRY(s_find(mgr, name, true, &var));
    pthread_mutex_lock(&var->mu);
    zf_status_t s = s_replace_locked(mgr, var, zf_tensor_ref(value), false);
    pthread_mutex_unlock(&var->mu);
    return s;
}

zf_status_t zf_resource_update_var(zf_resource_mgr_t *mgr, const char *name,
                                   zf_status_t (*fn)(zf_tensor_t *var, void *arg), void *arg)
{
    s_var_t *var = NULL;
    ZF_TRY(s_find(mgr, name, false, &var));
    if (!var) return s_uninitialized(name);
    pthread_mutex_lock(&var->mu);
    zf_status_t s = var->value ? fn(var->value, arg) : s_uninitialized(name);
    if (var->value) zf_buffer_bump_version(zf_tensor_buffer(var->value));
    pthread_mutex_unlock(&var->mu);
    return s;
}

/* True when nobody but the variable holds its tensor or the tensor's bytes. */
static bool s_exclusive(const zf_tensor_t *t)
{
    return zf_tensor_refcount(t) == 1 && zf_buffer_refcount(zf_tensor_buffer(t)) == 1;
}

zf_status_t zf_resource_update_var_cow(zf_resource_mgr_t *mgr, const char *name,
                                       zf_status_t (*fn)(zf_tensor_t *var, void *arg), void *arg)
{
    s_var_t *var = NULL;
    ZF_TRY(s_find(mgr, name, false, &var));
    if (!var) return s_uninitialized(name);
    pthread_mutex_lock(&var->mu);
    zf_status_t s = ZF_STATUS_OK;
    zf_tensor_t *copy = NULL;
    if (!var->value)
        s = s_uninitialized(name);
    else if (s_exclusive(var->value)) {
        s = fn(var->value, arg);
        zf_buffer_bump_version(zf_tensor_buffer(var->value));
    } else if (zf_ok(s = zf_tensor_copy(var->value, &copy)) && zf_ok(s = fn(copy, arg)))
        s = s_replace_locked(mgr, var, copy, var->value_indexed);
    else
        zf_tensor_unref(&copy);
    pthread_mutex_unlock(&var->mu);
    return s;
}

bool zf_resource_var_is_initialized(zf_resource_mgr_t *mgr, const char *name)
{
    s_var_t *var = NULL;
    zf_status_t s = s_find(mgr, name, false, &var);
    zf_status_clear(&s);
    if (!var) return false;
    pthread_mutex_lock(&var->mu);
    bool init = var->value != NULL;
    pthread_mutex_unlock(&var->mu);
    return init;
}

/* ---- reference variables ------------------------------------------------------ */

/* Makes var's value private and indexed, so that it can be updated in place
 * and found by identity. Caller holds var->mu. */
static zf_status_t s_make_ref_locked(zf_resource_mgr_t *mgr, s_var_t *var)
{
    if (var->value_indexed) return ZF_STATUS_OK;
    zf_tensor_t *copy = NULL;
    ZF_TRY(zf_tensor_copy(var->value, &copy));
    return s_replace_locked(mgr, var, copy, true);
}

static zf_status_t s_marker_locked(zf_resource_mgr_t *mgr, s_var_t *var, zf_dtype_t dtype)
{
    if (var->marker) return ZF_STATUS_OK;
    zf_shape_t empty = {.rank = 1};
    zf_tensor_t *marker = NULL;
    ZF_TRY(zf_tensor_new(dtype, &empty, &marker));
    zf_status_t s = s_index(mgr, marker, (uintptr_t)var | S_MARKER_TAG);
    if (!zf_ok(s)) {
        zf_tensor_unref(&marker);
        return s;
    }
    var->marker = marker;
    return ZF_STATUS_OK;
}

zf_status_t zf_resource_var_ref(zf_resource_mgr_t *mgr, const char *name, zf_dtype_t dtype,
                                zf_tensor_t **out)
{
    *out = NULL;
    s_var_t *var = NULL;
    ZF_TRY(s_find(mgr, name, true, &var));
    pthread_mutex_lock(&var->mu);
    zf_status_t s = var->value ? s_make_ref_locked(mgr, var) : s_marker_locked(mgr, var, dtype);
    if (zf_ok(s)) *out = zf_tensor_ref(var->value ? var->value : var->marker);
    pthread_mutex_unlock(&var->mu);
    return s;
}

const char *zf_resource_ref_lookup(zf_resource_mgr_t *mgr, const zf_tensor_t *t, bool *initialized)
{
    if (initialized) *initialized = false;
    if (!mgr || !t) return NULL;
    uintptr_t v = 0;
    pthread_mutex_lock(&mgr->mu);
    bool found = zf_strmap_get_n(mgr->by_ref, (const char *)&t, sizeof t, &v);
    pthread_mutex_unlock(&mgr->mu);
    if (!found) return NULL;
    if (initialized) *initialized = (v & S_MARKER_TAG) == 0;
    return ((const s_var_t *)(v & ~S_MARKER_TAG))->name;
}

zf_status_t zf_resource_check_ref(zf_resource_mgr_t *mgr, const zf_tensor_t *t)
{
    if (!mgr || !t || zf_tensor_num_elements(t) != 0) return ZF_STATUS_OK;
    bool init = true;
    const char *name = zf_resource_ref_lookup(mgr, t, &init);
    return name && !init ? s_uninitialized(name) : ZF_STATUS_OK;
}

static zf_status_t s_assign_locked(zf_resource_mgr_t *mgr, s_var_t *var, const zf_tensor_t *value,
                                   bool validate_shape)
{
    zf_tensor_t *cur = var->value;
    if (cur == value) return ZF_STATUS_OK;
    bool same = cur && zf_tensor_dtype(cur) == zf_tensor_dtype(value) &&
                zf_shape_equal(zf_tensor_shape(cur), zf_tensor_shape(value));
    if (cur && validate_shape && !same) {
        char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX];
        return zf_invalid_argument(
            "Assign requires shapes of both tensors to match. lhs shape= %s rhs shape= %s",
            zf_shape_to_string(zf_tensor_shape(cur), a, sizeof a),
            zf_shape_to_string(zf_tensor_shape(value), b, sizeof b));
    }
    /* In place keeps the ref's identity; strings own their bytes, so they
     * are always replaced by a deep copy. */
    if (same && var->value_indexed && zf_tensor_dtype(cur) != ZF_STRING) {
        if (zf_tensor_nbytes(cur))
            memcpy(zf_tensor_data(cur), zf_tensor_data(value), zf_tensor_nbytes(cur));
        zf_buffer_bump_version(zf_tensor_buffer(cur));
        return ZF_STATUS_OK;
    }
    zf_tensor_t *copy = NULL;
    ZF_TRY(zf_tensor_copy(value, &copy));
    return s_replace_locked(mgr, var, copy, true);
}

zf_status_t zf_resource_assign_var(zf_resource_mgr_t *mgr, const char *name,
                                   const zf_tensor_t *value, bool validate_shape, zf_tensor_t **out)
{
    *out = NULL;
    s_var_t *var = NULL;
    ZF_TRY(s_find(mgr, name, true, &var));
    pthread_mutex_lock(&var->mu);
    zf_status_t s = s_assign_locked(mgr, var, value, validate_shape);
    if (zf_ok(s)) *out = zf_tensor_ref(var->value);
    pthread_mutex_unlock(&var->mu);
    return s;
}
