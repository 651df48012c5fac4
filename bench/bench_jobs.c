/* Throughput of independent one-shot jobs (the MLP example: SubmitJob then
 * WaitJob) from several concurrent clients against local clusters of 1, 2
 * and 4 CPU executors, in jobs/s and as a ratio to the 1-executor cluster
 * measured in the same run; then, on one executor, the broker's durable job
 * queue (--state in a directory of the disk that holds $TMPDIR, or /tmp)
 * against the same run with --state on a RAM disk (/dev/shm), which costs
 * no disk writes. Each client runs ZFLOW_BENCH_REPS jobs (default 60)
 * after a few to warm up; ZFLOW_BENCH_GRAPH names another graph with the
 * same feed and fetch. Starts the cluster's programs from the bin
 * directory next to this program's (build/bin), or ZFLOW_BIN_DIR. */
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graphdef_io.h"

#define S_CLIENTS 4
#define S_WARMUP  3

typedef struct {
    const char *endpoint;
    const Tensorflow__GraphDef *gd;
    int jobs;
    pthread_barrier_t *go;
    int failed;
    char error[256];
} s_client_arg_t;

static char s_bin[PATH_MAX];

/* One job: x = [[1, 2, 3, 4]] in, the softmax's two probabilities out. */
static zf_status_t s_job(zf_client_t *c, const Tensorflow__GraphDef *gd)
{
    zf_tensor_t *x = NULL;
    zf_shape_t shape = {.rank = 2, .dims = {1, 4}};
    ZF_TRY(zf_tensor_new(ZF_FLOAT, &shape, &x));
    float *v = zf_tensor_data(x);
    for (int i = 0; i < 4; i++) v[i] = (float)(i + 1);
    const char *feed_names[1] = {"x:0"}, *fetches[1] = {"probs:0"};
    zf_client_step_t step = {feed_names, &x, 1, fetches, 1, NULL, 0};
    zf_tensor_t *out[1] = {NULL};
    zf_status_t s = zf_client_run_job(c, gd, NULL, &step, 30000, out);
    if (zf_ok(s) && zf_tensor_num_elements(out[0]) != 2)
        s = zf_internal("the job returned %lld values, not 2",
                        (long long)zf_tensor_num_elements(out[0]));
    zf_tensor_unref(&out[0]);
    zf_tensor_unref(&x);
    return s;
}

static void *s_client(void *p)
{
    s_client_arg_t *a = p;
    zf_client_t *c = NULL;
    zf_status_t s = zf_client_connect(a->endpoint, &c);
    for (int i = 0; zf_ok(s) && i < S_WARMUP; i++) s = s_job(c, a->gd);
    pthread_barrier_wait(a->go);
    for (int i = 0; zf_ok(s) && i < a->jobs; i++) s = s_job(c, a->gd);
    pthread_barrier_wait(a->go);
    if (!zf_ok(s)) {
        a->failed = 1;
        snprintf(a->error, sizeof a->error, "%s: %s", zf_code_name(s.code), zf_status_msg(&s));
    }
    zf_status_clear(&s);
    zf_client_destroy(&c);
    return NULL;
}

/* Jobs per second with S_CLIENTS clients on a cluster of n executors whose
 * broker keeps its jobs in directory state (NULL: in memory); -1 when
 * something failed (said on stderr). */
static double s_throughput(int n_exec, const Tensorflow__GraphDef *gd, int jobs, const char *state)
{
    char devices[16];
    snprintf(devices, sizeof devices, "cpu:%d", n_exec);
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.devices = devices;
    o.bin_dir = s_bin;
    o.quiet = true;
    o.state = state;
    zf_cluster_t *cl = NULL;
    zf_status_t s = zf_cluster_start(&o, &cl);
    if (!zf_ok(s)) {
        fprintf(stderr, "bench_jobs: cluster of %d: %s\n", n_exec, zf_status_msg(&s));
        zf_status_clear(&s);
        return -1;
    }
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, S_CLIENTS + 1);
    s_client_arg_t args[S_CLIENTS];
    pthread_t threads[S_CLIENTS];
    for (int i = 0; i < S_CLIENTS; i++) {
        args[i] = (s_client_arg_t){zf_cluster_endpoint(cl), gd, jobs, &go, 0, ""};
        pthread_create(&threads[i], NULL, s_client, &args[i]);
    }
    pthread_barrier_wait(&go);
    double t0 = zf_bench_now();
    pthread_barrier_wait(&go);
    double dt = zf_bench_now() - t0;
    int failed = 0;
    for (int i = 0; i < S_CLIENTS; i++) {
        pthread_join(threads[i], NULL);
        if (args[i].failed && !failed++)
            fprintf(stderr, "bench_jobs: cluster of %d: %s\n", n_exec, args[i].error);
    }
    pthread_barrier_destroy(&go);
    zf_cluster_destroy(&cl);
    return failed ? -1 : (double)(S_CLIENTS * jobs) / dt;
}

/* Removes a state directory and the job store in it; any may be missing. */
static void s_remove_state(const char *dir)
{
    const char *files[] = {"jobs.db", "jobs.db-wal", "jobs.db-shm", "jobs.db-journal"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t size = strlen(dir) + strlen(files[i]) + 2;
        char *path = malloc(size);
        if (!path) continue;
        snprintf(path, size, "%s/%s", dir, files[i]);
        unlink(path);
        free(path);
    }
    rmdir(dir);
}

static void s_find_bin(const char *argv0)
{
    const char *env = getenv("ZFLOW_BIN_DIR");
    if (env && env[0]) {
        snprintf(s_bin, sizeof s_bin, "%s", env);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", s_bin, sizeof s_bin - 16);
    if (n <= 0)
        snprintf(s_bin, sizeof s_bin, "%s", argv0);
    else
        s_bin[n] = '\0';
    char *slash = strrchr(s_bin, '/');
    if (slash) strcpy(slash, "/../bin");
}

int main(int argc, char **argv)
{
    (void)argc;
    s_find_bin(argv[0]);
    /* the example next to this source: <root>/bench/bench_jobs.c */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *cut = strstr(path, "bench/bench_jobs.c");
    if (cut) snprintf(cut, sizeof path - (size_t)(cut - path), "examples/mlp.pbtxt");
    const char *env = getenv("ZFLOW_BENCH_GRAPH");
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_file(env && env[0] ? env : path, ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) {
        fprintf(stderr, "bench_jobs: %s\n", zf_status_msg(&s));
        zf_status_clear(&s);
        return 1;
    }
    int jobs = zf_bench_reps(60);
    const int sizes[3] = {1, 2, 4};
    double rate[3], durable[2] = {0, 0};
    const char *tmp = getenv("TMPDIR");
    char dirs[2][PATH_MAX];
    snprintf(dirs[0], sizeof dirs[0], "%s/zflow-bench-state-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    snprintf(dirs[1], sizeof dirs[1], "/dev/shm/zflow-bench-state-XXXXXX");
    bool ok = mkdtemp(dirs[0]) && mkdtemp(dirs[1]);
    for (int i = 0; ok && i < 3; i++) ok = (rate[i] = s_throughput(sizes[i], gd, jobs, NULL)) > 0;
    for (int i = 0; ok && i < 2; i++) ok = (durable[i] = s_throughput(1, gd, jobs, dirs[i])) > 0;
    for (int i = 0; i < 2; i++) s_remove_state(dirs[i]);
    zf_graphdef_free(&gd);
    if (!ok) return 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("one-shot jobs (MLP example), %d clients x %d jobs, %ld CPU cores\n", S_CLIENTS, jobs,
           cores);
    for (int i = 0; i < 3; i++)
        printf("  %d CPU executor%s   %8.1f jobs/s   %.2fx one executor\n", sizes[i],
               sizes[i] > 1 ? "s" : " ", rate[i], rate[i] / rate[0]);
    printf("durable job queue, 1 CPU executor (jobs in memory: %.1f jobs/s)\n", rate[0]);
    printf("  --state on disk      %8.1f jobs/s   %.2fx --state on a RAM disk\n", durable[0],
           durable[0] / durable[1]);
    printf("  --state in /dev/shm  %8.1f jobs/s\n", durable[1]);
    return 0;
}
