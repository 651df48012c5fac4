/* zflow cancel: cancels a job `zflow submit` started. */
#include <stdio.h>
#include <string.h>

#include "client/cli.h"
#include "client/zflow_client.h"
#include "common/keys.h"

static const char s_usage[] =
    "usage: zflow cancel JOB [--broker ENDPOINT] [--keys DIR]\n"
    "\n"
    "Cancels job JOB (an id `zflow submit` printed) on the service whose\n"
    "broker is at ENDPOINT (default: $ZFLOW_BROKER, else " ZF_CLI_DEFAULT_BROKER "):\n"
    "a queued job never runs; a running one stops in its current step, every\n"
    "executor dropping its part, and runs no further step. Its result, the\n"
    "error CANCELLED, is collected by `zflow wait JOB` as any result is.\n"
    "\n"
    "  --keys DIR        CurveZMQ client keys for a secure service (default:\n"
    "                    $ZFLOW_KEYS)\n"
    "\n"
    "Exits 0 when the cancel was taken, 1 when the job is unknown or has\n"
    "finished already (its result waits), 2 on bad usage.\n";

static int s_cancel(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    const char *job = NULL, *broker = zf_cli_default_broker(), *keys = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool valued = strcmp(arg, "--broker") == 0 || strcmp(arg, "--keys") == 0;
        if (valued && i + 1 == argc)
            return zf_cli_usage_error("cancel", s_usage, "%s needs a value", arg);
        if (strcmp(arg, "--broker") == 0)
            broker = argv[++i];
        else if (strcmp(arg, "--keys") == 0)
            keys = argv[++i];
        else if (arg[0] == '-' && arg[1] != '\0')
            return zf_cli_usage_error("cancel", s_usage, "unknown option '%s'", arg);
        else if (!job)
            job = arg;
        else
            return zf_cli_usage_error("cancel", s_usage, "unexpected argument '%s'", arg);
    }
    if (!job) return zf_cli_usage_error("cancel", s_usage, "need a JOB id");
    zf_client_t *c = NULL;
    zf_status_t s = zf_client_connect_keys(broker, zf_keys_dir_from(keys), &c);
    if (zf_ok(s)) s = zf_client_cancel_job(c, job);
    zf_client_destroy(&c);
    if (!zf_ok(s)) return zf_cli_fail("cancel", &s);
    printf("cancelled %s\n", job);
    return 0;
}

const zf_cli_command_t zf_cli_cancel = {"cancel", "cancel a submitted job", s_cancel};
