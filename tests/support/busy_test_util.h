/* Test helpers for catching a process in the middle of a step: its CPU time
 * from /proc, and a graph that keeps a device busy for a while;
 * include after <cmocka.h>. */
#ifndef ZF_BUSY_TEST_UTIL_H
#define ZF_BUSY_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/graphdef_io.h"
#include "test_util.h"

/* CPU time (user + system, in clock ticks) process pid has used so far;
 * -1 when /proc does not say. */
long zf_test_cpu_ticks(pid_t pid);

/* Waits up to wait_ms until process pid has used `ticks` more CPU ticks
 * than `since`; fails the test otherwise. */
void zf_test_wait_cpu(pid_t pid, long since, long ticks, int wait_ms);

/* x on cpu0, y = x * x on cpu1, z = -y on cpu0, and y waits for a chain of 20
 * products of 1024x1024 matrices on cpu1 (a few tenths of a second of CPU
 * time; the values stay 1/1024), so a step is busy on cpu1 long enough to
 * be caught there. z equals -(x * x). */
Tensorflow__GraphDef *zf_test_slow_chain_graph(const char *cpu0, const char *cpu1);

#endif
