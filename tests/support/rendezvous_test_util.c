/* Definitions of rendezvous_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rendezvous_test_util.h"

void zf_test_record_recv(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    zf_test_got_t *g = arg;
    g->fired++;
    g->status = status;
    g->tensor = tensor;
    g->is_dead = is_dead;
}

void zf_test_got_clear(zf_test_got_t *g)
{
    zf_status_clear(&g->status);
    zf_tensor_unref(&g->tensor);
    memset(g, 0, sizeof *g);
}

zf_tensor_t *zf_test_scalar(float v)
{
    zf_tensor_t *t = NULL;
    assert_int_equal(zf_tensor_new_scalar_float(v, &t).code, ZF_OK);
    return t;
}
