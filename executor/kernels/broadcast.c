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

void zf_broadcast_plan_n(const zf_shape_t *const *ins, int n, const zf_shape_t *out,
                         zf_broadcast_n_t *plan)
{
    bool has[ZF_BROADCAST_MAX_INPUTS][ZF_MAX_RANK];
    int r = 0;
    memset(plan, 0, sizeof *plan);
    for (int k = 0; k < out->rank; k++) {
        int64_t d = out->dims[k];
        if (d == 1) continue;
        bool h[ZF_BROADCAST_MAX_INPUTS], same = r > 0;
        for (int i = 0; i < n; i++) {
            h[i] = s_dim(ins[i], out->rank, k) != 1;
            if (same && has[i][r - 1] != h[i]) same = false;
        }
        if (same) {
            plan->dims[r - 1] *= d;
            continue;
        }
        plan->dims[r] = d;
        for (int i = 0; i < n; i++) has[i][r] = h[i];
        r++;
    }
    plan->rank = r;
    for (int i = 0; i < n; i++) {
        int64_t stride = 1;
        for (int k = r - 1; k >= 0; k--) {
            plan->st[i][k] = has[i][k] ? stride : 0;
            if (has[i][k]) stride *= plan->dims[k];
        }
    }
}

void zf_broadcast_plan(const zf_shape_t *a, const zf_shape_t *b, const zf_shape_t *out,
                       zf_broadcast_t *plan)
{
    const zf_shape_t *ins[2] = {a, b};
    zf_broadcast_n_t p;
    zf_broadcast_plan_n(ins, 2, out, &p);
    memset(plan, 0, sizeof *plan);
    plan->rank = p.rank;
    memcpy(plan->dims, p.dims, sizeof plan->dims);
    memcpy(plan->sa, p.st[0], sizeof plan->sa);
    memcpy(plan->sb, p.st[1], sizeof plan->sb);
}
