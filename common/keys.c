/* CurveZMQ key files and the trusted keys of a key directory. */
#include "common/keys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define S_PATH_MAX 4096
#define S_NAME_MAX 64
#define S_ROLES    4

typedef struct s_trusted {
    char z85[ZF_KEY_Z85_LEN + 1];
    zf_role_t role;
    char name[S_NAME_MAX];
} s_trusted_t;

struct zf_keys {
    char *dir;
    zf_role_t role;
    char public_z85[ZF_KEY_Z85_LEN + 1];
    char secret_z85[ZF_KEY_Z85_LEN + 1];
    char role_public[S_ROLES][ZF_KEY_Z85_LEN + 1]; /* "" when absent */
    s_trusted_t *trusted;
    int n_trusted, cap_trusted;
};

static const zf_role_t s_roles[S_ROLES] = {ZF_ROLE_BROKER, ZF_ROLE_SCHEDULER, ZF_ROLE_EXECUTOR,
                                           ZF_ROLE_CLIENT};

static int s_role_index(zf_role_t role)
{
    for (int i = 0; i < S_ROLES; i++)
        if (s_roles[i] == role) return i;
    return -1;
}

const char *zf_role_name(zf_role_t role)
{
    switch (role) {
    case ZF_ROLE_BROKER: return "broker";
    case ZF_ROLE_SCHEDULER: return "scheduler";
    case ZF_ROLE_EXECUTOR: return "executor";
    case ZF_ROLE_CLIENT: return "client";
    default: return "none";
    }
}

zf_role_t zf_role_of_identity(const char *identity)
{
    if (!identity) return ZF_ROLE_NONE;
    const char *colon = strchr(identity, ':');
    if (!colon) return ZF_ROLE_NONE;
    size_t len = (size_t)(colon - identity);
    for (int i = 0; i < S_ROLES; i++) {
        const char *n = zf_role_name(s_roles[i]);
        if (strlen(n) == len && memcmp(n, identity, len) == 0) return s_roles[i];
    }
    return ZF_ROLE_NONE;
}

bool zf_curve_available(void)
{
    return zmq_has("curve") != 0;
}

/* ---- key files -------------------------------------------------------------- */

static bool s_valid_name(const char *name)
{
    if (!name || !name[0] || name[0] == '.' || strlen(name) >= S_NAME_MAX) return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok) return false;
    }
    return true;
}

static zf_status_t s_write_file(const char *path, const char *z85, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) {
        if (errno == EEXIST) return zf_status_new(ZF_ALREADY_EXISTS, "%s already exists", path);
        return zf_status_new(ZF_UNAVAILABLE, "cannot create %s: %s", path, strerror(errno));
    }
    char line[ZF_KEY_Z85_LEN + 2];
    snprintf(line, sizeof line, "%s\n", z85);
    size_t len = strlen(line);
    bool ok = write(fd, line, len) == (ssize_t)len && fchmod(fd, mode) == 0;
    int err = errno;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        unlink(path);
        return zf_status_new(ZF_UNAVAILABLE, "cannot write %s: %s", path, strerror(err));
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_keygen(const char *dir, const char *name)
{
    if (!dir || !dir[0]) return zf_invalid_argument("keygen: empty key directory");
    if (!s_valid_name(name))
        return zf_invalid_argument("keygen: bad key name '%s' (use letters, digits, '-', '_' "
                                   "and '.', not starting with '.')",
                                   name ? name : "");
    if (!zf_curve_available())
        return zf_status_new(ZF_UNIMPLEMENTED, "this libzmq was built without CURVE security");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return zf_status_new(ZF_UNAVAILABLE, "cannot create %s: %s", dir, strerror(errno));
    char pub[ZF_KEY_Z85_LEN + 1], sec[ZF_KEY_Z85_LEN + 1];
    if (zmq_curve_keypair(pub, sec) != 0)
        return zf_internal("zmq_curve_keypair failed: %s", zmq_strerror(errno));
    char key_path[S_PATH_MAX], pub_path[S_PATH_MAX];
    snprintf(key_path, sizeof key_path, "%s/%s.key", dir, name);
    snprintf(pub_path, sizeof pub_path, "%s/%s.pub", dir, name);
    ZF_TRY(s_write_file(key_path, sec, 0600));
    unlink(pub_path); /* a .pub without its .key is stale */
    zf_status_t s = s_write_file(pub_path, pub, 0644);
    if (!zf_ok(s)) unlink(key_path);
    memset(sec, 0, sizeof sec);
    return s;
}

zf_status_t zf_keygen_cluster(const char *dir)
{
    for (int i = 0; i < S_ROLES; i++) ZF_TRY(zf_keygen(dir, zf_role_name(s_roles[i])));
    return ZF_STATUS_OK;
}

static bool s_is_z85_key(const char *text, size_t len)
{
    if (len != ZF_KEY_Z85_LEN || memchr(text, '\0', len)) return false;
    char z85[ZF_KEY_Z85_LEN + 1];
    memcpy(z85, text, len);
    z85[len] = '\0';
    uint8_t bin[32];
    return zmq_z85_decode(bin, z85) != NULL;
}

zf_status_t zf_key_read(const char *path, char z85[ZF_KEY_Z85_LEN + 1])
{
    z85[0] = '\0';
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return zf_status_new(ZF_NOT_FOUND, "%s: no such key file", path);
        return zf_status_new(ZF_UNAVAILABLE, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat st;
    size_t plen = strlen(path);
    bool secret = plen > 4 && strcmp(path + plen - 4, ".key") == 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return zf_invalid_argument("%s: not a regular file", path);
    }
    if (secret && (st.st_mode & 077)) {
        close(fd);
        return zf_status_new(ZF_PERMISSION_DENIED,
                             "%s: a secret key must be readable by its owner only (mode %04o; "
                             "chmod 600 it)",
                             path, (unsigned)(st.st_mode & 07777));
    }
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) return zf_status_new(ZF_UNAVAILABLE, "cannot read %s: %s", path, strerror(errno));
    size_t len = (size_t)n;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ')) len--;
    if (!s_is_z85_key(buf, len))
        return zf_invalid_argument("%s: not a CURVE key (expected %d Z85 characters)", path,
                                   ZF_KEY_Z85_LEN);
    memcpy(z85, buf, len);
    z85[len] = '\0';
    return ZF_STATUS_OK;
}

/* ---- loading ---------------------------------------------------------------- */

static zf_status_t s_trust(zf_keys_t *k, const char *z85, zf_role_t role, const char *name)
{
    if (k->n_trusted == k->cap_trusted) {
        int cap = k->cap_trusted ? 2 * k->cap_trusted : 8;
        s_trusted_t *t = realloc(k->trusted, (size_t)cap * sizeof *t);
        if (!t) return zf_out_of_memory("trusted keys");
        k->trusted = t;
        k->cap_trusted = cap;
    }
    s_trusted_t *t = &k->trusted[k->n_trusted++];
    snprintf(t->z85, sizeof t->z85, "%s", z85);
    t->role = role;
    snprintf(t->name, sizeof t->name, "%s", name);
    return ZF_STATUS_OK;
}

/* Trusts every DIR/<role>s/NAME.pub. */
static zf_status_t s_trust_folder(zf_keys_t *k, zf_role_t role)
{
    char folder[S_PATH_MAX];
    snprintf(folder, sizeof folder, "%s/%ss", k->dir, zf_role_name(role));
    DIR *d = opendir(folder);
    if (!d) return ZF_STATUS_OK;
    zf_status_t s = ZF_STATUS_OK;
    for (struct dirent *e; zf_ok(s) && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 5 || strcmp(e->d_name + len - 4, ".pub") != 0) continue;
        char name[S_NAME_MAX];
        if (len - 4 >= sizeof name) continue;
        memcpy(name, e->d_name, len - 4);
        name[len - 4] = '\0';
        char path[S_PATH_MAX + S_NAME_MAX + 16], z85[ZF_KEY_Z85_LEN + 1];
        snprintf(path, sizeof path, "%s/%s.pub", folder, name);
        s = zf_key_read(path, z85);
        if (zf_ok(s)) s = s_trust(k, z85, role, name);
    }
    closedir(d);
    return s;
}

zf_status_t zf_keys_load(const char *dir, zf_role_t role, zf_keys_t **out)
{
    *out = NULL;
    if (s_role_index(role) < 0) return zf_invalid_argument("keys: %d is not a role", (int)role);
    if (!zf_curve_available())
        return zf_status_new(ZF_UNIMPLEMENTED, "--keys: this libzmq was built without CURVE "
                                               "security");
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return zf_status_new(ZF_NOT_FOUND, "key directory '%s' does not exist", dir ? dir : "");
    zf_keys_t *k = calloc(1, sizeof *k);
    if (!k || !(k->dir = strdup(dir))) {
        free(k);
        return zf_out_of_memory("keys");
    }
    k->role = role;
    char path[S_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.key", dir, zf_role_name(role));
    zf_status_t s = zf_key_read(path, k->secret_z85);
    if (zf_ok(s) && zmq_curve_public(k->public_z85, k->secret_z85) != 0)
        s = zf_invalid_argument("%s: cannot derive the public key", path);
    for (int i = 0; zf_ok(s) && i < S_ROLES; i++) {
        snprintf(path, sizeof path, "%s/%s.pub", dir, zf_role_name(s_roles[i]));
        s = zf_key_read(path, k->role_public[i]);
        if (s.code == ZF_NOT_FOUND) {
            zf_status_clear(&s);
            continue;
        }
        if (zf_ok(s)) s = s_trust(k, k->role_public[i], s_roles[i], zf_role_name(s_roles[i]));
    }
    for (int i = 0; zf_ok(s) && i < S_ROLES; i++) s = s_trust_folder(k, s_roles[i]);
    if (!zf_ok(s)) {
        zf_keys_destroy(&k);
        return s;
    }
    *out = k;
    return ZF_STATUS_OK;
}

void zf_keys_destroy(zf_keys_t **keys_p)
{
    if (!keys_p || !*keys_p) return;
    zf_keys_t *k = *keys_p;
    *keys_p = NULL;
    memset(k->secret_z85, 0, sizeof k->secret_z85);
    free(k->trusted);
    free(k->dir);
    free(k);
}

const char *zf_keys_dir(const zf_keys_t *keys)
{
    return keys->dir;
}

zf_role_t zf_keys_role(const zf_keys_t *keys)
{
    return keys->role;
}

const char *zf_keys_public(const zf_keys_t *keys)
{
    return keys->public_z85;
}

const char *zf_keys_secret(const zf_keys_t *keys)
{
    return keys->secret_z85;
}

const char *zf_keys_role_public(const zf_keys_t *keys, zf_role_t role)
{
    int i = s_role_index(role);
    if (i < 0 || !keys->role_public[i][0]) return NULL;
    return keys->role_public[i];
}

bool zf_keys_lookup(const zf_keys_t *keys, const char *z85, zf_role_t *role, const char **name)
{
    for (int i = 0; i < keys->n_trusted; i++) {
        if (strcmp(keys->trusted[i].z85, z85) != 0) continue;
        if (role) *role = keys->trusted[i].role;
        if (name) *name = keys->trusted[i].name;
        return true;
    }
    return false;
}

const char *zf_keys_dir_from(const char *flag)
{
    if (flag) return flag;
    const char *env = getenv("ZFLOW_KEYS");
    return env && env[0] ? env : NULL;
}
