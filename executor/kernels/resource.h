/* Per-session resources that persist across steps: variables (VariableV2 by
 * container/shared_name; VarHandleOp handles). Thread-safe. */
#ifndef ZF_RESOURCE_H
#define ZF_RESOURCE_H

#include <stdbool.h>

#include "common/dtype.h"
#include "common/status.h"
#include "common/tensor.h"

typedef struct zf_resource_mgr zf_resource_mgr_t;

zf_status_t zf_resource_mgr_new(zf_resource_mgr_t **out);
void zf_resource_mgr_destroy(zf_resource_mgr_t **mgr_p);

/* The variable's current value (a new reference), or FAILED_PRECONDITION
 * "Attempting to use uninitialized value <name>" when never assigned. */
zf_status_t zf_resource_get_var(zf_resource_mgr_t *mgr, const char *name, zf_tensor_t **out);

/* Replaces the variable's value (takes a new reference to value). */
zf_status_t zf_resource_set_var(zf_resource_mgr_t *mgr, const char *name, zf_tensor_t *value);

/* Runs fn on the variable's tensor under the variable's lock (in-place
 * updates such as ApplyGradientDescent). FAILED_PRECONDITION when unset. */
zf_status_t zf_resource_update_var(zf_resource_mgr_t *mgr, const char *name,
                                   zf_status_t (*fn)(zf_tensor_t *var, void *arg), void *arg);

/* ---- reference variables ----------------------------------------------
 * VariableV2 passes the variable's storage tensor itself along its ref
 * edges (TensorFlow's reference semantics), so Assign and
 * ApplyGradientDescent update it in place and find the variable again by
 * that tensor's identity. Before its first assignment a variable's ref is
 * an empty marker tensor (shape [0]) that consumers must not read:
 * zf_resource_check_ref() turns it into TensorFlow's error. */

/* The ref for VariableV2: the variable's value (a new reference; the
 * variable is created when absent) or, while unassigned, its marker of
 * dtype. */
zf_status_t zf_resource_var_ref(zf_resource_mgr_t *mgr, const char *name, zf_dtype_t dtype,
                                zf_tensor_t **out);

/* The name of the variable whose ref t is, or NULL when t is none; sets
 * *initialized (may be NULL) to false for a marker. The name is borrowed
 * and lives as long as mgr. */
const char *zf_resource_ref_lookup(zf_resource_mgr_t *mgr, const zf_tensor_t *t, bool *initialized);

/* FAILED_PRECONDITION "Attempting to use uninitialized value <name>" when t
 * is an unassigned variable's marker; OK otherwise (also for mgr NULL). */
zf_status_t zf_resource_check_ref(zf_resource_mgr_t *mgr, const zf_tensor_t *t);

/* Assign: copies value into the variable's tensor in place when it has the
 * same dtype and shape, else stores a private copy (with validate_shape, a
 * different shape of an assigned variable is INVALID_ARGUMENT). *out gets
 * the variable's value (a new reference). */
zf_status_t zf_resource_assign_var(zf_resource_mgr_t *mgr, const char *name,
                                   const zf_tensor_t *value, bool validate_shape,
                                   zf_tensor_t **out);

/* As zf_resource_update_var, but copy-on-write (resource variables): when
 * anyone else holds the variable's tensor, fn runs on a private copy that
 * then replaces it, so values handed out earlier never change. */
zf_status_t zf_resource_update_var_cow(zf_resource_mgr_t *mgr, const char *name,
                                       zf_status_t (*fn)(zf_tensor_t *var, void *arg), void *arg);

/* True when the variable exists and holds a value. */
bool zf_resource_var_is_initialized(zf_resource_mgr_t *mgr, const char *name);

#endif
