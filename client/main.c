/* zflow: the command-line client. Dispatches to one module per command. */
#include <stdio.h>
#include <string.h>

#include "client/cli.h"
#include "common/log.h"

static const zf_cli_command_t *const s_commands[] = {
    &zf_cli_inspect,   &zf_cli_convert, &zf_cli_place,  &zf_cli_partition, &zf_cli_run,
    &zf_cli_executors, &zf_cli_up,      &zf_cli_submit, &zf_cli_wait,      &zf_cli_cancel,
    &zf_cli_keygen,
};

static void s_usage(FILE *out)
{
    fprintf(out, "usage: zflow <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        fprintf(out, "  %-10s %s\n", s_commands[i]->name, s_commands[i]->summary);
    fprintf(out, "\n'zflow <command> --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    zf_log_init("zflow");
    if (argc < 2) {
        s_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        s_usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (strcmp(argv[1], s_commands[i]->name) == 0)
            return s_commands[i]->run(argc - 1, argv + 1);
    fprintf(stderr, "zflow: unknown command '%s'\n", argv[1]);
    s_usage(stderr);
    return 2;
}
