/* Test helpers for rendezvous tests: a recv callback that records what it
 * saw, and float scalars. Include after cmocka.h. */
#ifndef ZF_RENDEZVOUS_TEST_UTIL_H
#define ZF_RENDEZVOUS_TEST_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "common/tensor.h"
#include "executor/rendezvous/rendezvous.h"

/* Records what one recv callback saw. */
typedef struct {
    int fired;
    zf_status_t status;
    zf_tensor_t *tensor;
    bool is_dead;
} zf_test_got_t;

static inline void zf_test_record_recv(zf_status_t status, zf_tensor_t *tensor, bool is_dead,
                                       void *arg)
{
    zf_test_got_t *g = arg;
    g->fired++;
    g->status = status;
    g->tensor = tensor;
    g->is_dead = is_dead;
}

/* Releases what g holds and zeroes it. */
static inline void zf_test_got_clear(zf_test_got_t *g)
{
    zf_status_clear(&g->status);
    zf_tensor_unref(&g->tensor);
    memset(g, 0, sizeof *g);
}

static inline zf_tensor_t *zf_test_scalar(float v)
{
    zf_tensor_t *t = NULL;
    assert_int_equal(zf_tensor_new_scalar_float(v, &t).code, ZF_OK);
    return t;
}

#endif
