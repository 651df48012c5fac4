/* Definitions of process_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "process_test_util.h"

int64_t zf_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool zf_test_read_line(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t n = 0;
    int64_t deadline = zf_test_now_ms() + timeout_ms;
    while (n + 1 < size) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)(deadline - zf_test_now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0) return false;
        char c;
        if (read(fd, &c, 1) != 1) return false;
        if (c == '\n') break;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return true;
}

pid_t zf_test_spawn_piped(const char *const *argv, int *out_fd, int *err_fd)
{
    int o[2], e[2];
    assert_int_equal(pipe(o), 0);
    assert_int_equal(pipe(e), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDWR);
        dup2(null_fd, STDIN_FILENO);
        dup2(o[1], STDOUT_FILENO);
        dup2(err_fd ? e[1] : null_fd, STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    *out_fd = o[0];
    if (err_fd)
        *err_fd = e[0];
    else
        close(e[0]);
    return pid;
}

void zf_test_drain(int fd, char *buf, size_t size, int64_t deadline)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)(deadline - zf_test_now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        ssize_t got = read(fd, buf + n, size - 1 - n);
        if (got <= 0) break;
        n += (size_t)got;
        if (n + 1 == size) break;
    }
    buf[n] = '\0';
}

int zf_test_reap(pid_t pid, int64_t deadline)
{
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (zf_test_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(10000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int zf_test_run_program(const char *program, const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", program, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static pid_t s_up_start(const char *const *up, char *endpoint, size_t size, int wait_ms)
{
    int fd = -1;
    pid_t pid = zf_test_spawn_piped(up, &fd, NULL);
    char line[512];
    if (!zf_test_read_line(fd, line, sizeof line, wait_ms)) line[0] = '\0';
    close(fd);
    const char *prefix = "zflow cluster listening on ";
    size_t len =
        strcspn(line + (strncmp(line, prefix, strlen(prefix)) == 0 ? strlen(prefix) : 0), " \t");
    if (strncmp(line, prefix, strlen(prefix)) != 0 || len == 0 || len >= size) {
        kill(pid, SIGKILL);
        zf_test_reap(pid, zf_test_now_ms() + wait_ms);
        return -1;
    }
    memcpy(endpoint, line + strlen(prefix), len);
    endpoint[len] = '\0';
    return pid;
}

pid_t zf_test_up_start(const char *zflow, int cpus, char *endpoint, size_t size, int wait_ms)
{
    char n[16];
    snprintf(n, sizeof n, "%d", cpus);
    const char *up[] = {zflow, "up", "--port", "0", "--cpu", n, NULL};
    return s_up_start(up, endpoint, size, wait_ms);
}

int zf_test_up_client(const char *endpoint, int wait_ms, zf_client_t **client)
{
    zf_status_t s = zf_client_connect(endpoint, client);
    if (!zf_ok(s)) {
        fprintf(stderr, "connecting to %s: %s\n", endpoint, zf_status_msg(&s));
        zf_status_clear(&s);
        return -1;
    }
    zf_client_set_timeout(*client, wait_ms);
    return 0;
}

int zf_test_up_stop(pid_t pid, zf_client_t **client, int wait_ms)
{
    zf_client_destroy(client);
    if (pid <= 0) return 0;
    kill(pid, SIGTERM);
    return zf_test_reap(pid, zf_test_now_ms() + wait_ms) == 0 ? 0 : -1;
}

pid_t zf_test_up_start_devices(const char *zflow, const char *list, char *endpoint, size_t size,
                               int wait_ms)
{
    const char *up[] = {zflow, "up", "--port", "0", "--devices", list, NULL};
    return s_up_start(up, endpoint, size, wait_ms);
}
