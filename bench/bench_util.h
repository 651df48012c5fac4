/* Timing helpers shared by the benchmarks (header-only: each benchmark is
 * one program). Figures are ratios against a baseline in the same run. */
#ifndef ZF_BENCH_UTIL_H
#define ZF_BENCH_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/status.h"
#include "proto/node_def.pb-c.h"

static inline double zf_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Repetitions from ZFLOW_BENCH_REPS (default def), at least 1. */
static inline int zf_bench_reps(int def)
{
    const char *env = getenv("ZFLOW_BENCH_REPS");
    int n = env ? atoi(env) : def;
    return n > 0 ? n : 1;
}

static inline double zf_bench_min(double a, double b)
{
    return a < b ? a : b;
}

/* Exits the benchmark prog with "prog: [what: ]message" when s failed
 * (what may be NULL). */
static inline void zf_bench_check(const char *prog, const char *what, zf_status_t s)
{
    if (zf_ok(s)) return;
    if (what)
        fprintf(stderr, "%s: %s: %s\n", prog, what, zf_status_msg(&s));
    else
        fprintf(stderr, "%s: %s\n", prog, zf_status_msg(&s));
    exit(1);
}

/* n floats in [-0.5, 0.5), the same for the same seed. */
static inline void zf_bench_fill(float *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
}

/* Where zflow-broker & co. are: $ZFLOW_BIN_DIR, else bin/ beside this
 * program's directory (build/bench -> build/bin). */
static inline void zf_bench_bin_dir(const char *argv0, char *buf, size_t size)
{
    const char *env = getenv("ZFLOW_BIN_DIR");
    if (env && env[0]) {
        snprintf(buf, size, "%s", env);
        return;
    }
    ssize_t n = size > 16 ? readlink("/proc/self/exe", buf, size - 16) : -1;
    if (n <= 0)
        snprintf(buf, size, "%s", argv0);
    else
        buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash && (size_t)(slash - buf) + 8 <= size) strcpy(slash, "/../bin");
}

/* A NodeDef built in place (no allocation) with up to 4 type or bool
 * attrs, for benchmarks that run one kernel. */
#define ZF_BENCH_MAX_ATTRS 4

typedef struct {
    Tensorflow__NodeDef node;
    Tensorflow__NodeDef__AttrEntry entries[ZF_BENCH_MAX_ATTRS], *entry_ptrs[ZF_BENCH_MAX_ATTRS];
    Tensorflow__AttrValue values[ZF_BENCH_MAX_ATTRS];
    char *inputs[8];
} zf_bench_node_t;

/* A node called name running op with n_inputs inputs named "in". */
static inline void zf_bench_node_init(zf_bench_node_t *n, const char *name, const char *op,
                                      int n_inputs)
{
    tensorflow__node_def__init(&n->node);
    for (int i = 0; i < n_inputs && i < 8; i++) n->inputs[i] = "in";
    n->node.name = (char *)name;
    n->node.op = (char *)op;
    n->node.input = n->inputs;
    n->node.n_input = (size_t)n_inputs;
    n->node.attr = n->entry_ptrs;
}

static inline Tensorflow__AttrValue *zf_bench_node_attr(zf_bench_node_t *n, const char *key)
{
    size_t i = n->node.n_attr++;
    if (i >= ZF_BENCH_MAX_ATTRS) abort();
    tensorflow__node_def__attr_entry__init(&n->entries[i]);
    tensorflow__attr_value__init(&n->values[i]);
    n->entries[i].key = (char *)key;
    n->entries[i].value = &n->values[i];
    n->entry_ptrs[i] = &n->entries[i];
    return &n->values[i];
}

/* The attr key: float, as a type. */
static inline void zf_bench_node_float_type(zf_bench_node_t *n, const char *key)
{
    Tensorflow__AttrValue *v = zf_bench_node_attr(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
}

static inline void zf_bench_node_bool(zf_bench_node_t *n, const char *key, bool b)
{
    Tensorflow__AttrValue *v = zf_bench_node_attr(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    v->b = b;
}

/* The attr key: the string s (borrowed), as an equation. */
static inline void zf_bench_node_string(zf_bench_node_t *n, const char *key, const char *s)
{
    Tensorflow__AttrValue *v = zf_bench_node_attr(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)s;
    v->s.len = strlen(s);
}

static inline void zf_bench_node_int(zf_bench_node_t *n, const char *key, int64_t i)
{
    Tensorflow__AttrValue *v = zf_bench_node_attr(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = i;
}

#endif
