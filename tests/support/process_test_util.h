/* Test helpers for tests that run programs as child processes: a monotonic
 * clock, starting a program with its output on pipes, reading a line or a
 * pipe up to a deadline, reaping with a deadline, and running a program to
 * its end for its output and exit code. Include after cmocka.h. */
#ifndef ZF_PROCESS_TEST_UTIL_H
#define ZF_PROCESS_TEST_UTIL_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/zflow_client.h"

int64_t zf_test_now_ms(void);

/* Reads one line from fd within timeout_ms; false on timeout or EOF. */
bool zf_test_read_line(int fd, char *buf, size_t size, int timeout_ms);

/* Starts argv (NULL-terminated) with stdin from /dev/null, stdout on a
 * pipe (*out_fd) and stderr on another (*err_fd), or to /dev/null when
 * err_fd is NULL. The caller closes the fds and reaps the child. */
pid_t zf_test_spawn_piped(const char *const *argv, int *out_fd, int *err_fd);

/* Reads fd until EOF, the deadline (zf_test_now_ms) or a full buf into buf
 * (NUL-terminated). */
void zf_test_drain(int fd, char *buf, size_t size, int64_t deadline);

/* Waits for pid, SIGKILLing it at the deadline. Returns its exit code, 128
 * + the signal when a signal ended it, -1 when it had to be killed. */
int zf_test_reap(pid_t pid, int64_t deadline);

/* Runs "program args" through the shell, stderr folded into stdout, which
 * goes to out (NUL-terminated, cut at size - 1); returns the exit code, -1
 * when a signal ended it. */
int zf_test_run_program(const char *program, const char *args, char *out, size_t size);

/* Starts `zflow up --port 0 --cpu cpus` (zflow: the program's path) and
 * reads the broker's endpoint from its "zflow cluster listening on" line
 * into endpoint (size bytes) within wait_ms. Its pid, or -1 (the child
 * killed and reaped) when no such line came. */
pid_t zf_test_up_start(const char *zflow, int cpus, char *endpoint, size_t size, int wait_ms);

/* The same with `--devices list` (zf_device_list_parse's) for `--cpu`. */
pid_t zf_test_up_start_devices(const char *zflow, const char *list, char *endpoint, size_t size,
                               int wait_ms);

/* Connects *client to the broker at endpoint with wait_ms as its reply
 * timeout: 0, or -1 (printed) when it cannot. */
int zf_test_up_client(const char *endpoint, int wait_ms, zf_client_t **client);

/* Destroys *client, then SIGTERMs the cluster pid (nothing when pid <= 0)
 * and reaps it within wait_ms: 0 when it exited with 0, else -1. */
int zf_test_up_stop(pid_t pid, zf_client_t **client, int wait_ms);

#endif
