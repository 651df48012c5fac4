/* Tests for CurveZMQ key files: zf_keygen's files, modes and format, what
 * zf_key_read refuses, zf_keys_load's trusted keys by role, and the
 * `zflow keygen` command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>
#include <cmocka.h>

#include "common/keys.h"
#include "process_test_util.h"
#include "test_util.h"

/* A fresh empty directory under /tmp; the caller removes it (s_rm). */
static void s_tmpdir(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/zflow-keys-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void s_rm(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void s_read_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void s_write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static mode_t s_mode(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static void test_curve_is_available(void **state)
{
    (void)state;
    assert_true(zf_curve_available());
}

static void test_keygen_writes_a_secret_0600_and_its_public_key_as_z85_lines(void **state)
{
    (void)state;
    char dir[64], path[128], sec[128], pub[128];
    s_tmpdir(dir, sizeof dir);
    char sub[96];
    snprintf(sub, sizeof sub, "%s/new", dir); /* made by keygen, 0700 */
    ASSERT_OK(zf_keygen(sub, "alice"));
    assert_int_equal(s_mode(sub), 0700);
    snprintf(path, sizeof path, "%s/alice.key", sub);
    assert_int_equal(s_mode(path), 0600);
    s_read_file(path, sec, sizeof sec);
    snprintf(path, sizeof path, "%s/alice.pub", sub);
    assert_int_equal(s_mode(path), 0644);
    s_read_file(path, pub, sizeof pub);
    /* one line of 40 Z85 characters each */
    assert_int_equal(strlen(sec), ZF_KEY_Z85_LEN + 1);
    assert_int_equal(strlen(pub), ZF_KEY_Z85_LEN + 1);
    assert_int_equal(sec[ZF_KEY_Z85_LEN], '\n');
    assert_int_equal(pub[ZF_KEY_Z85_LEN], '\n');
    sec[ZF_KEY_Z85_LEN] = pub[ZF_KEY_Z85_LEN] = '\0';
    uint8_t bin[32];
    assert_non_null(zmq_z85_decode(bin, sec));
    assert_non_null(zmq_z85_decode(bin, pub));
    /* the public key is the secret key's */
    char derived[ZF_KEY_Z85_LEN + 1];
    assert_int_equal(zmq_curve_public(derived, sec), 0);
    assert_string_equal(derived, pub);
    /* a second keypair differs */
    ASSERT_OK(zf_keygen(sub, "bob"));
    char other[ZF_KEY_Z85_LEN + 1];
    snprintf(path, sizeof path, "%s/bob.pub", sub);
    ASSERT_OK(zf_key_read(path, other));
    assert_string_not_equal(other, pub);
    s_rm(dir);
}

static void test_keygen_never_overwrites_and_refuses_bad_names(void **state)
{
    (void)state;
    char dir[64], path[128], before[128], after[128];
    s_tmpdir(dir, sizeof dir);
    ASSERT_OK(zf_keygen(dir, "client"));
    snprintf(path, sizeof path, "%s/client.key", dir);
    s_read_file(path, before, sizeof before);
    zf_status_t s = zf_keygen(dir, "client");
    assert_int_equal(s.code, ZF_ALREADY_EXISTS);
    char want[160];
    snprintf(want, sizeof want, "%s/client.key already exists", dir);
    assert_string_equal(zf_status_msg(&s), want);
    zf_status_clear(&s);
    s_read_file(path, after, sizeof after);
    assert_string_equal(before, after);
    static const char *const bad[] = {"", ".hidden", "a/b", "../x", "sp ace"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = zf_keygen(dir, bad[i]);
        assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
        assert_non_null(strstr(zf_status_msg(&s), "bad key name"));
        zf_status_clear(&s);
    }
    s_rm(dir);
}

static void test_key_read_refuses_open_secret_keys_and_non_keys(void **state)
{
    (void)state;
    char dir[64], path[128], z85[ZF_KEY_Z85_LEN + 1], want[256];
    s_tmpdir(dir, sizeof dir);
    ASSERT_OK(zf_keygen(dir, "x"));
    snprintf(path, sizeof path, "%s/x.key", dir);
    ASSERT_OK(zf_key_read(path, z85));
    assert_int_equal(chmod(path, 0640), 0);
    zf_status_t s = zf_key_read(path, z85);
    assert_int_equal(s.code, ZF_PERMISSION_DENIED);
    snprintf(want, sizeof want,
             "%s: a secret key must be readable by its owner only (mode 0640; chmod 600 it)", path);
    assert_string_equal(zf_status_msg(&s), want);
    zf_status_clear(&s);
    snprintf(path, sizeof path, "%s/bad.pub", dir);
    static const char *const texts[] = {"", "short\n",
                                        "0123456789012345678901234567890123456789x\n",
                                        "~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        s_write_file(path, texts[i], 0644);
        s = zf_key_read(path, z85);
        assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
        snprintf(want, sizeof want, "%s: not a CURVE key (expected 40 Z85 characters)", path);
        assert_string_equal(zf_status_msg(&s), want);
        zf_status_clear(&s);
    }
    snprintf(path, sizeof path, "%s/none.pub", dir);
    s = zf_key_read(path, z85);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    snprintf(want, sizeof want, "%s: no such key file", path);
    assert_string_equal(zf_status_msg(&s), want);
    zf_status_clear(&s);
    s_rm(dir);
}

/* A NUL inside the 40 characters would leave a shorter string that
 * still decodes, and the socket options would read past it. */
static void test_key_read_refuses_a_nul_inside_the_key(void **state)
{
    (void)state;
    char dir[64], path[128], z85[ZF_KEY_Z85_LEN + 1];
    s_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/nul.pub", dir);
    char text[ZF_KEY_Z85_LEN + 1];
    memset(text, '0', ZF_KEY_Z85_LEN);
    text[35] = '\0';
    text[ZF_KEY_Z85_LEN] = '\n';
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, sizeof text, f), sizeof text);
    fclose(f);
    zf_status_t s = zf_key_read(path, z85);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(z85, "");
    zf_status_clear(&s);
    s_rm(dir);
}

static void test_keys_load_trusts_role_keys_and_role_folders(void **state)
{
    (void)state;
    char dir[64], sub[96], path[160], z85[ZF_KEY_Z85_LEN + 1];
    s_tmpdir(dir, sizeof dir);
    ASSERT_OK(zf_keygen_cluster(dir));
    snprintf(sub, sizeof sub, "%s/schedulers", dir);
    ASSERT_OK(zf_keygen(sub, "second"));
    zf_keys_t *k = NULL;
    ASSERT_OK(zf_keys_load(dir, ZF_ROLE_EXECUTOR, &k));
    assert_int_equal(zf_keys_role(k), ZF_ROLE_EXECUTOR);
    snprintf(path, sizeof path, "%s/executor.pub", dir);
    ASSERT_OK(zf_key_read(path, z85));
    assert_string_equal(zf_keys_public(k), z85);
    zf_role_t role = ZF_ROLE_NONE;
    const char *name = NULL;
    snprintf(path, sizeof path, "%s/client.pub", dir);
    ASSERT_OK(zf_key_read(path, z85));
    assert_true(zf_keys_lookup(k, z85, &role, &name));
    assert_int_equal(role, ZF_ROLE_CLIENT);
    assert_string_equal(name, "client");
    assert_string_equal(zf_keys_role_public(k, ZF_ROLE_CLIENT), z85);
    snprintf(path, sizeof path, "%s/second.pub", sub);
    ASSERT_OK(zf_key_read(path, z85));
    assert_true(zf_keys_lookup(k, z85, &role, &name));
    assert_int_equal(role, ZF_ROLE_SCHEDULER);
    assert_string_equal(name, "second");
    /* a key nobody put there */
    char pub[ZF_KEY_Z85_LEN + 1], sec[ZF_KEY_Z85_LEN + 1];
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    assert_false(zf_keys_lookup(k, pub, &role, &name));
    zf_keys_destroy(&k);
    assert_null(k);
    assert_int_equal(zf_role_of_identity("scheduler:second"), ZF_ROLE_SCHEDULER);
    assert_int_equal(zf_role_of_identity("client:x"), ZF_ROLE_CLIENT);
    assert_int_equal(zf_role_of_identity("schedulerx:y"), ZF_ROLE_NONE);
    assert_int_equal(zf_role_of_identity(""), ZF_ROLE_NONE);
    assert_int_equal(zf_role_of_identity(NULL), ZF_ROLE_NONE);
    s_rm(dir);
}

static void test_keys_load_names_what_is_missing(void **state)
{
    (void)state;
    char dir[64], want[256];
    s_tmpdir(dir, sizeof dir);
    zf_keys_t *k = NULL;
    ASSERT_OK(zf_keygen(dir, "broker"));
    zf_status_t s = zf_keys_load(dir, ZF_ROLE_CLIENT, &k);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    snprintf(want, sizeof want, "%s/client.key: no such key file", dir);
    assert_string_equal(zf_status_msg(&s), want);
    zf_status_clear(&s);
    assert_null(k);
    s = zf_keys_load("/nonexistent/zflow-keys", ZF_ROLE_CLIENT, &k);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_string_equal(zf_status_msg(&s),
                        "key directory '/nonexistent/zflow-keys' does not exist");
    zf_status_clear(&s);
    s = zf_keys_load(dir, ZF_ROLE_ALL, &k);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    zf_status_clear(&s);
    /* a bad trusted key fails the load, naming the file */
    char sub[96], path[160];
    snprintf(sub, sizeof sub, "%s/clients", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/mallory.pub", sub);
    s_write_file(path, "not a key\n", 0644);
    s = zf_keys_load(dir, ZF_ROLE_BROKER, &k);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s: not a CURVE key (expected 40 Z85 characters)", path);
    assert_string_equal(zf_status_msg(&s), want);
    zf_status_clear(&s);
    s_rm(dir);
}

static void test_keys_dir_from_prefers_the_flag_then_the_environment(void **state)
{
    (void)state;
    unsetenv("ZFLOW_KEYS");
    assert_null(zf_keys_dir_from(NULL));
    setenv("ZFLOW_KEYS", "", 1);
    assert_null(zf_keys_dir_from(NULL));
    setenv("ZFLOW_KEYS", "/env/keys", 1);
    assert_string_equal(zf_keys_dir_from(NULL), "/env/keys");
    assert_string_equal(zf_keys_dir_from("/flag/keys"), "/flag/keys");
    unsetenv("ZFLOW_KEYS");
}

static void test_cli_keygen_writes_one_keypair_or_every_role(void **state)
{
    (void)state;
    char dir[64], args[256], out[4096], path[160];
    s_tmpdir(dir, sizeof dir);
    snprintf(args, sizeof args, "keygen %s/one alice", dir);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out), 0);
    assert_string_equal(out, "");
    snprintf(path, sizeof path, "%s/one/alice.key", dir);
    assert_int_equal(s_mode(path), 0600);
    snprintf(args, sizeof args, "keygen %s/all", dir);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out), 0);
    static const char *const roles[] = {"broker", "scheduler", "executor", "client"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/all/%s.key", dir, roles[i]);
        assert_int_equal(s_mode(path), 0600);
        snprintf(path, sizeof path, "%s/all/%s.pub", dir, roles[i]);
        assert_int_equal(s_mode(path), 0644);
    }
    /* again: refused, nothing overwritten */
    snprintf(args, sizeof args, "keygen %s/one alice", dir);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out), 1);
    char want[256];
    snprintf(want, sizeof want, "zflow keygen: ALREADY_EXISTS: %s/one/alice.key already exists\n",
             dir);
    assert_string_equal(out, want);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", "keygen", out, sizeof out), 2);
    assert_non_null(strstr(out, "zflow keygen: need a key directory DIR"));
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", "keygen --bad", out, sizeof out), 2);
    assert_non_null(strstr(out, "zflow keygen: unknown option '--bad'"));
    s_rm(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curve_is_available),
        cmocka_unit_test(test_keygen_writes_a_secret_0600_and_its_public_key_as_z85_lines),
        cmocka_unit_test(test_keygen_never_overwrites_and_refuses_bad_names),
        cmocka_unit_test(test_key_read_refuses_open_secret_keys_and_non_keys),
        cmocka_unit_test(test_key_read_refuses_a_nul_inside_the_key),
        cmocka_unit_test(test_keys_load_trusts_role_keys_and_role_folders),
        cmocka_unit_test(test_keys_load_names_what_is_missing),
        cmocka_unit_test(test_keys_dir_from_prefers_the_flag_then_the_environment),
        cmocka_unit_test(test_cli_keygen_writes_one_keypair_or_every_role),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
