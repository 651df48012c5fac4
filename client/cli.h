/* The zflow CLI's commands: each is a name, a one-line summary and a run
 * function taking the command's own argv (argv[0] is the command name).
 * Exit codes: 0 success, 1 the operation failed, 2 bad usage. */
#ifndef ZF_CLI_H
#define ZF_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/status.h"
#include "scheduler/graph/placer.h"

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
extern const zf_cli_command_t zf_cli_keygen;
extern const zf_cli_command_t zf_cli_cancel;

/* True when argv holds --help or -h; used by every command. */
bool zf_cli_wants_help(int argc, char **argv);

/* Prints "zflow <command>: <CODE>: <message>" to stderr, clears *s and
 * returns 1 (the failure exit code). */
int zf_cli_fail(const char *command, zf_status_t *s);

/* Catches the first SIGINT (Ctrl-C) from now on: the flag it returns
 * becomes non-zero (for zf_client_set_interrupt) and a second SIGINT
 * kills as usual. */
const volatile sig_atomic_t *zf_cli_catch_interrupt(void);

/* The exit code of a command whose call ended with s after a caught
 * SIGINT: 130, as a shell reports a process killed by it, when s is the
 * CANCELLED it asked for; 0 when the command had not been interrupted. */
int zf_cli_interrupted_rc(const zf_status_t *s);

/* Prints "zflow <command>: <message>\n" and then usage to stderr; returns 2
 * (the bad-usage exit code). */
int zf_cli_usage_error(const char *command, const char *usage, const char *fmt, ...)
    ZF_PRINTF(3, 4);

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

/* ---- the step of `zflow run` and `zflow submit` ------------------------- */

/* The options both commands share: GRAPH, --feed, --fetch T [T...],
 * --target, --init, --place, --allow-soft-placement and --steps. The
 * strings point into argv; the arrays are the struct's. */
typedef struct zf_cli_step_args {
    const char *graph, *place, *steps_text;
    long steps; /* 1 unless --steps; set by zf_cli_step_args_check */
    /* --checkpoint-every N --checkpoint-dir DIR (jobs; 0: none) */
    const char *checkpoint_every_text, *checkpoint_dir;
    long checkpoint_every;
    const char **feed_specs, **fetches, **targets, **inits;
    int n_feeds, n_fetches, n_targets, n_inits;
    bool soft_placement;
    int opt_level;            /* --opt-level L0|L1: -1 or 0 */
    bool bf16;                /* --bf16 */
    bool recv_scheduling;     /* --recv-scheduling */
    bool place_pruned;        /* --place-pruned-graph */
    const char *partition_by; /* --partition-by device|task (NULL: device) */
} zf_cli_step_args_t;

/* Sizes the arrays of *a for argc arguments. false when out of memory
 * (free *a with zf_cli_step_args_free either way). */
bool zf_cli_step_args_init(zf_cli_step_args_t *a, int argc);

/* Frees the arrays of *a; safe on a zeroed or half-built one. */
void zf_cli_step_args_free(zf_cli_step_args_t *a);

/* A command's options beside the step's. */
typedef struct zf_cli_own_options {
    const char *const *flags;  /* NULL-terminated; options without a value */
    const char *const *valued; /* NULL-terminated; options with one */
    /* Stores option opt of the lists (value NULL for a flag); an error is
     * reported as bad usage with its message. */
    zf_status_t (*set)(void *arg, const char *opt, const char *value);
    void *arg;
} zf_cli_own_options_t;

/* Parses argv (argv[0] is the command) into *a and, through own, the
 * command's own options; needs GRAPH. Returns 0, or 2 after printing the
 * error and usage as zf_cli_usage_error does. */
int zf_cli_step_args_parse(const char *command, const char *usage, int argc, char **argv,
                           const zf_cli_own_options_t *own, zf_cli_step_args_t *a);

/* The checks after parsing: --steps is a count (sets a->steps), --place is
 * first or balanced, and there is a fetch or a target. Returns 0, or 2 as
 * zf_cli_step_args_parse does. */
int zf_cli_step_args_check(const char *command, const char *usage, zf_cli_step_args_t *a);

/* The feeds of a step, parsed from its --feed specs. */
typedef struct zf_cli_feeds {
    char **names;
    zf_tensor_t **values;
    int n;
} zf_cli_feeds_t;

/* Parses every --feed of a with zf_cli_feed_parse (dtype_of, arg as
 * there). *f is the caller's (zf_cli_feeds_free), also on error; *usage
 * says whether an error is a spec's text (exit 2). */
zf_status_t zf_cli_feeds_parse(const zf_cli_step_args_t *a, zf_cli_dtype_fn dtype_of, void *arg,
                               zf_cli_feeds_t *f, bool *usage);

/* Frees the names and values of *f and zeroes it. */
void zf_cli_feeds_free(zf_cli_feeds_t *f);

/* The step of a with feeds f (borrowing both). */
zf_client_step_t zf_cli_client_step(const zf_cli_step_args_t *a, const zf_cli_feeds_t *f);

/* The session options that --place and --allow-soft-placement ask for. */
zf_client_session_options_t zf_cli_session_options(const zf_cli_step_args_t *a);

/* The job options of --steps and --init (borrowing a's inits). */
zf_client_job_options_t zf_cli_job_options(const zf_cli_step_args_t *a);

/* Reads the GraphDef at path (format, or ZF_FORMAT_AUTO), inlines its
 * functions and lowers its functional control flow as sessions do
 * (scheduler/graph/functions.h), and builds the graph, which owns its
 * GraphDef. Errors name the path. */
zf_status_t zf_cli_load_graph(const char *path, zf_graph_format_t format, zf_graph_t **g);

/* The graph of gd for feed dtypes only, or NULL when it does not build
 * (the service reports bad graphs). */
zf_graph_t *zf_cli_graph_for_dtypes(Tensorflow__GraphDef *gd);

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

/* Writes the kernel runs of a traced step (between start_us and end_us) to
 * path as Chrome trace-event JSON (cli_trace.c). */
struct Zflow__NodeRun;
zf_status_t zf_cli_write_trace(const char *path, struct Zflow__NodeRun *const *runs, size_t n,
                               int64_t start_us, int64_t end_us);

/* Writes a plan's cost model (zflow run --cost-graph) to path as
 * tab-separated lines: a header, then one line per node and device, the
 * most expensive first (cli_trace.c). */
struct Zflow__CostNode;
zf_status_t zf_cli_write_cost_graph(const char *path, struct Zflow__CostNode *const *nodes,
                                    size_t n);

/* Makes dir unless it exists (NOT_FOUND when it cannot; INVALID_ARGUMENT
 * when it is no directory). */
zf_status_t zf_cli_make_dir(const char *dir);
/* DIR/<device with [^A-Za-z0-9_.-] as '_'><ext>; caller frees; NULL when
 * out of memory. */
char *zf_cli_file_path(const char *dir, const char *device, const char *ext);
/* Writes each partition as DIR/<its device>.pbtxt (zflow run
 * --partition-graphs), making DIR. */
zf_status_t zf_cli_write_partition_graphs(const char *dir,
                                          struct Tensorflow__GraphDef *const *graphs, size_t n);

#endif
