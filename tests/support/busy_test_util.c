/* Definitions of busy_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "busy_test_util.h"
#include "process_test_util.h"

long zf_test_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold anything */
    unsigned long user = 0, sys = 0;
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &user, &sys) != 2)
        return -1;
    return (long)(user + sys);
}

void zf_test_wait_cpu(pid_t pid, long since, long ticks, int wait_ms)
{
    for (int64_t end = zf_test_now_ms() + wait_ms; zf_test_now_ms() < end; usleep(2000)) {
        long now = zf_test_cpu_ticks(pid);
        assert_true(now >= 0);
        if (now - since >= ticks) return;
    }
    fail_msg("process %d did not start computing within %d ms", (int)pid, wait_ms);
}

Tensorflow__GraphDef *zf_test_slow_chain_graph(const char *cpu0, const char *cpu1)
{
    enum { N = 1024, K = 20 };
    size_t cap = 4096 + (size_t)K * 200, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len,
                            "node { name: 'x' op: 'Placeholder' device: '%s'"
                            "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
                            "node { name: 'm0' op: 'Const' device: '%s'"
                            "  attr { key: 'dtype' value { type: DT_FLOAT } }"
                            "  attr { key: 'value' value { tensor { dtype: DT_FLOAT"
                            "    tensor_shape { dim { size: %d } dim { size: %d } }"
                            "    float_val: 0.0009765625 } } } }",
                            cpu0, cpu1, N, N);
    /* m1 waits for the feed: without it the chain would be constant, and
     * the graph optimizer would compute it once, when the graph is
     * registered, instead of in every step */
    for (int k = 1; k <= K; k++)
        len += (size_t)snprintf(text + len, cap - len,
                                "node { name: 'm%d' op: 'MatMul' input: 'm%d' input: 'm0'%s"
                                "  device: '%s' attr { key: 'T' value { type: DT_FLOAT } } }",
                                k, k - 1, k == 1 ? " input: '^x'" : "", cpu1);
    len += (size_t)snprintf(text + len, cap - len,
                            "node { name: 'y' op: 'Square' input: 'x' input: '^m%d' device: '%s'"
                            "  attr { key: 'T' value { type: DT_FLOAT } } }"
                            "node { name: 'z' op: 'Neg' input: 'y' device: '%s'"
                            "  attr { key: 'T' value { type: DT_FLOAT } } }",
                            K, cpu1, cpu0);
    assert_true(len < cap);
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, len, ZF_FORMAT_PBTXT, &gd));
    free(text);
    return gd;
}
