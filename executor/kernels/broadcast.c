/* The broadcast planner (broadcast.h). */
#include "executor/kernels/broadcast.h"

#include <stdbool.h>
#include <string.h>

#include "common/tensor.h"

_Static_assert(ZF_BROADCAST_MAX_RANK == ZF_MAX_RANK, "a plan holds any shape's dims");

/* s's dim k once padded on the left with 1s to rank. */
static int64_t s_dim(const zf_shape_t *s, int rank, int k)
{
    int i = s->rank - rank + k;
    return i >= 0 ? s->dims[i] : 1;
}

void zf_broadcast_plan(const zf_shape_t *a, const zf_shape_t *b, const zf_shape_t *out,
                       zf_broadcast_t *plan)
{
    bool has_a[ZF_MAX_RANK], has_b[ZF_MAX_RANK];
    int r = 0;
    memset(plan, 0, sizeof *plan);
    for (int k = 0; k < out->rank; k++) {
        int64_t d = out->dims[k];
        if (d == 1) continue;
        bool ia = s_dim(a, out->rank, k) != 1, ib = s_dim(b, out->rank, k) != 1;
        if (r > 0 && has_a[r - 1] == ia && has_b[r - 1] == ib) {
            plan->dims[r - 1] *= d;
            continue;
        }
        plan->dims[r] = d;
        has_a[r] = ia;
        has_b[r] = ib;
        r++;
    }
    plan->rank = r;
    int64_t stride_a = 1, stride_b = 1;
    for (int k = r - 1; k >= 0; k--) {
        plan->sa[k] = has_a[k] ? stride_a : 0;
        plan->sb[k] = has_b[k] ? stride_b : 0;
        if (has_a[k]) stride_a *= plan->dims[k];
        if (has_b[k]) stride_b *= plan->dims[k];
    }
}
