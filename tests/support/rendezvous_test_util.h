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

void zf_test_record_recv(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg);

/* Releases what g holds and zeroes it. */
void zf_test_got_clear(zf_test_got_t *g);

zf_tensor_t *zf_test_scalar(float v);

#endif
