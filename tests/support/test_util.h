/* Assertions on zf_status_t, and graph and session fixtures, shared by the
 * cmocka tests. Include after <cmocka.h>. */
#ifndef ZF_TEST_UTIL_H
#define ZF_TEST_UTIL_H

#include <string.h>

#include "common/status.h"
#include "proto/graph.pb-c.h"
#include "session/local_session.h"

/* Fails the test with the status message when expr is not OK. */
#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        zf_status_t s_ = (expr);                                                                   \
        if (!zf_ok(s_)) fail_msg("%s: %s", #expr, zf_status_msg(&s_));                             \
    } while (0)

/* Checks s has code and (when substring is not NULL) a message containing
 * substring; clears s. */
void zf_test_expect_error(zf_status_t s, zf_code_t code, const char *substring);

/* A new directory /tmp/<name>-XXXXXX (mkdtemp); caller frees the path.
 * zf_test_rm_rf() removes a file or a directory tree (errors ignored). */
char *zf_test_tmpdir(const char *name);
void zf_test_rm_rf(const char *path);

/* The GraphDef of pbtxt text, or of the file name in tests/data/tensorflow;
 * fails the test on error. Free with zf_graphdef_free(). */
Tensorflow__GraphDef *zf_test_graphdef(const char *text);
Tensorflow__GraphDef *zf_test_tf_graphdef(const char *name);

/* An in-process session over gd (borrowed) on devices ("cpu:2"); fails the
 * test on error. */
zf_local_session_t *zf_test_local_session(Tensorflow__GraphDef *gd, const char *devices);

/* The same on devices, with recv scheduling (zf_local_session_options_t) on
 * or off. */
zf_local_session_t *zf_test_local_session_sched(Tensorflow__GraphDef *gd, const char *devices,
                                                bool recv_scheduling);

/* How many shared-memory arenas of process pid are in /dev/shm
 * (zflow-<pid>-*, executor/rendezvous/remote.h). */
int zf_test_shm_segments_of(long pid);

#endif
