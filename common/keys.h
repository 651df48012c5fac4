/* CurveZMQ keys: key files, a process's own keypair and the public keys it
 * trusts, by role (docs/service.md, "Security").
 *
 * A key directory DIR holds:
 * - DIR/<role>.key and DIR/<role>.pub for each role (broker, scheduler,
 *   executor, client): the keypair every process of that role uses. A .key
 *   file holds the secret key, a .pub file the public key, each as one line
 *   of 40 Z85 characters; a .key file must not be readable by group or
 *   others (mode 0600).
 * - optionally DIR/schedulers/, DIR/executors/, DIR/clients/ and
 *   DIR/brokers/: more trusted public keys of that role, NAME.pub each.
 * A key found as DIR/<role>.pub is named after its role; one found as
 * DIR/<role>s/NAME.pub is named NAME. A peer's identity is "<role>:<name>".
 *
 * Thread-safety: a loaded zf_keys_t is read-only and may be shared. */
#ifndef ZF_KEYS_H
#define ZF_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"

#define ZF_KEY_Z85_LEN 40 /* a 32-byte key as Z85 text */

typedef enum zf_role {
    ZF_ROLE_NONE = 0,
    ZF_ROLE_BROKER = 1 << 0,
    ZF_ROLE_SCHEDULER = 1 << 1,
    ZF_ROLE_EXECUTOR = 1 << 2,
    ZF_ROLE_CLIENT = 1 << 3,
} zf_role_t;

#define ZF_ROLE_ALL (ZF_ROLE_BROKER | ZF_ROLE_SCHEDULER | ZF_ROLE_EXECUTOR | ZF_ROLE_CLIENT)

/* "broker", "scheduler", "executor", "client"; "none" otherwise. */
const char *zf_role_name(zf_role_t role);

/* The role an identity "<role>:<name>" names; ZF_ROLE_NONE for NULL, ""
 * or anything else. */
zf_role_t zf_role_of_identity(const char *identity);

/* Whether this libzmq can do CURVE (zmq_has("curve")). */
bool zf_curve_available(void);

/* Writes a fresh keypair as DIR/NAME.key (mode 0600) and DIR/NAME.pub
 * (mode 0644), creating DIR (mode 0700) when it does not exist. NAME is
 * one path component: letters, digits, '-', '_' and '.', not starting with
 * '.'. Errors: INVALID_ARGUMENT for a bad name, ALREADY_EXISTS when
 * DIR/NAME.key exists (it is never overwritten), UNIMPLEMENTED when libzmq
 * has no CURVE, UNAVAILABLE when a file cannot be written (naming it). */
zf_status_t zf_keygen(const char *dir, const char *name);

/* Writes the keypair of every role (broker, scheduler, executor, client)
 * into DIR, as zf_keygen. Errors as zf_keygen. */
zf_status_t zf_keygen_cluster(const char *dir);

/* Reads one key file (.key or .pub) into z85 (ZF_KEY_Z85_LEN + 1 bytes).
 * Errors: NOT_FOUND naming the file when it does not exist, PERMISSION_DENIED
 * for a .key file readable by group or others (naming its mode),
 * INVALID_ARGUMENT "<path>: not a CURVE key (expected 40 Z85 characters)",
 * UNAVAILABLE when it cannot be read. */
zf_status_t zf_key_read(const char *path, char z85[ZF_KEY_Z85_LEN + 1]);

typedef struct zf_keys zf_keys_t;

/* Loads the keys of a process of role from dir: its own keypair
 * (DIR/<role>.key; the public key is derived from it), the role keys it
 * connects to (DIR/<role>.pub) and every trusted public key. Caller owns
 * *out. Errors: as zf_key_read for the process's own key (NOT_FOUND names
 * it), INVALID_ARGUMENT for a role that is not exactly one role or a bad
 * trusted key file, NOT_FOUND when dir does not exist, UNIMPLEMENTED
 * without CURVE, RESOURCE_EXHAUSTED. */
zf_status_t zf_keys_load(const char *dir, zf_role_t role, zf_keys_t **out);

void zf_keys_destroy(zf_keys_t **keys_p);

/* Borrowed from keys. */
const char *zf_keys_dir(const zf_keys_t *keys);
zf_role_t zf_keys_role(const zf_keys_t *keys);
const char *zf_keys_public(const zf_keys_t *keys); /* own, Z85 */
const char *zf_keys_secret(const zf_keys_t *keys); /* own, Z85 */

/* The public key (Z85) of the processes of role, DIR/<role>.pub; NULL when
 * the directory has none. */
const char *zf_keys_role_public(const zf_keys_t *keys, zf_role_t role);

/* Looks up a trusted public key given as Z85: true with *role and *name
 * (borrowed) when it is trusted; false otherwise. */
bool zf_keys_lookup(const zf_keys_t *keys, const char *z85, zf_role_t *role, const char **name);

/* The key directory a program uses: flag (the value of its --keys) when not
 * NULL, else $ZFLOW_KEYS when set and not empty, else NULL (plain mode). */
const char *zf_keys_dir_from(const char *flag);

#endif
