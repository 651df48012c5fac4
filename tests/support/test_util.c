/* Definitions of test_util.h. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/graphdef_io.h"
#include "test_util.h"

int zf_test_shm_segments_of(long pid)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "zflow-%ld-", pid);
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

void zf_test_expect_error(zf_status_t s, zf_code_t code, const char *substring)
{
    if (s.code != code)
        fail_msg("expected %s, got %s: %s", zf_code_name(code), zf_code_name(s.code),
                 zf_status_msg(&s));
    if (substring && !strstr(zf_status_msg(&s), substring))
        fail_msg("message '%s' lacks '%s'", zf_status_msg(&s), substring);
    zf_status_clear(&s);
}

Tensorflow__GraphDef *zf_test_graphdef(const char *text)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), text);
    return gd;
}

Tensorflow__GraphDef *zf_test_tf_graphdef(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ZF_TF_DATA_DIR, name);
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) fail_msg("%s: %s", name, zf_status_msg(&s));
    return gd;
}

zf_local_session_t *zf_test_local_session(Tensorflow__GraphDef *gd, const char *devices)
{
    return zf_test_local_session_sched(gd, devices, false);
}

zf_local_session_t *zf_test_local_session_sched(Tensorflow__GraphDef *gd, const char *devices,
                                                bool recv_scheduling)
{
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = devices;
    opts.recv_scheduling = recv_scheduling;
    zf_local_session_t *s = NULL;
    zf_status_t st = zf_local_session_new(gd, &opts, &s);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    return s;
}

char *zf_test_tmpdir(const char *name)
{
    char *dir = malloc(strlen(name) + 16);
    assert_non_null(dir);
    sprintf(dir, "/tmp/%s-XXXXXX", name);
    assert_non_null(mkdtemp(dir));
    return dir;
}

void zf_test_rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        zf_test_rm_rf(sub);
    }
    closedir(d);
    rmdir(path);
}
