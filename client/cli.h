/* The zflow CLI's commands: each is a name, a one-line summary and a run
 * function taking the command's own argv (argv[0] is the command name).
 * Exit codes: 0 success, 1 the operation failed, 2 bad usage. */
#ifndef ZF_CLI_H
#define ZF_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/status.h"
#include "scheduler/placer.h"

typedef struct zf_cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} zf_cli_command_t;

extern const zf_cli_command_t zf_cli_inspect;
extern const zf_cli_command_t zf_cli_convert;
extern const zf_cli_command_t zf_cli_place;
extern const zf_cli_command_t zf_cli_partition;
extern const zf_cli_command_t zf_cli_run;
extern const zf_cli_command_t zf_cli_executors;
extern const zf_cli_command_t zf_cli_up;
extern const zf_cli_command_t zf_cli_submit;
extern const zf_cli_command_t zf_cli_wait;

/* True when argv holds --help or -h; used by every command. */
bool zf_cli_wants_help(int argc, char **argv);

/* Prints "zflow <command>: <CODE>: <message>" to stderr, clears *s and
 * returns 1 (the failure exit code). */
int zf_cli_fail(const char *command, zf_status_t *s);

/* Applies one --load DEV=N option: DEV is a device name or type:id
 * ("gpu:1") naming exactly one device of devices; sets its load to N.
 * INVALID_ARGUMENT naming the option otherwise. */
zf_status_t zf_cli_apply_load(const char *item, zf_placer_device_t *devices, int n);

/* The devices of a --devices LIST (zf_device_list_parse) with the loads of
 * --load DEV=N options applied. *out is owned by the caller (free()). */
zf_status_t zf_cli_placer_devices(const char *list, const char *const *loads, int n_loads,
                                  zf_placer_device_t **out, int *n);

/* ---- feeds, fetches, jobs (zflow run, submit, wait) ---------------------- */

/* The broker of `zflow submit`/`wait` without --broker. */
#define ZF_CLI_DEFAULT_BROKER "tcp://127.0.0.1:5555"

/* $ZFLOW_BROKER when set and not empty, else ZF_CLI_DEFAULT_BROKER. */
const char *zf_cli_default_broker(void);

/* The dtype of tensor `name` of the graph behind arg; ZF_INVALID when it
 * does not know. */
typedef zf_dtype_t (*zf_cli_dtype_fn)(void *arg, const char *name);

/* A zf_cli_dtype_fn over a zf_graph_t (graph may be NULL). */
zf_dtype_t zf_cli_graph_dtype(void *graph, const char *name);

/* Parses one --feed NAME[:DTYPE]=VALUE: VALUE is @FILE.npy or a literal
 * (3, [1,2], [[1,2],[3,4]], true); a literal's dtype is DTYPE, else
 * dtype_of's (may be NULL), else guessed (bool, int32, float). *name
 * (free()) and *out (zf_tensor_unref) are the caller's, also on error.
 * *usage says whether an error is the spec's text (exit 2) rather than a
 * file's. Errors: INVALID_ARGUMENT naming the spec; npy's. */
zf_status_t zf_cli_feed_parse(const char *spec, zf_cli_dtype_fn dtype_of, void *arg, char **name,
                              zf_tensor_t **out, bool *usage);

/* *out = text as a number from 1 to max; INVALID_ARGUMENT "<option> must
 * be a number from 1 to <max>, not '<text>'" otherwise. */
zf_status_t zf_cli_parse_count(const char *option, const char *text, long max, long *out);

/* Prints each fetch as "NAME =\n<NumPy text>\n" on stdout (unless quiet)
 * and writes out_dir/<name>.npy when out_dir is set (created if missing;
 * '/' and ':' in names become '_'). */
zf_status_t zf_cli_print_fetches(const char *const *names, zf_tensor_t *const *tensors, int n,
                                 const char *out_dir, bool quiet);

/* The one-line status of a job: "<id>: step 3/10, 2/3 partitions running,
 * 1.4 s" (also "queued", "placing", "done, N/N steps"). */
void zf_cli_progress_format(char *buf, size_t size, const char *job_id,
                            const zf_client_job_progress_t *p);

/* Whether to draw progress: not quiet, and stderr is a terminal. */
bool zf_cli_progress_wanted(bool quiet);

/* A progress line on stderr, redrawn in place. */
typedef struct zf_cli_progress {
    bool drawn;
} zf_cli_progress_t;

/* A zf_client_progress_fn; arg is a zf_cli_progress_t. */
void zf_cli_progress_draw(void *arg, const char *job_id, const zf_client_job_progress_t *p);

/* Erases the line when one was drawn, before results are printed. */
void zf_cli_progress_end(zf_cli_progress_t *pr);

#endif
