/* Whole-number option values and stop signals for the programs' mains. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"

bool zf_parse_long(const char *text, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!text[0] || end == text || *end || errno || v < min || v > max) return false;
    *out = v;
    return true;
}

int zf_cmdline_parse(const char *prog, const char *usage, int argc, char **argv,
                     zf_cmdline_option_fn fn, void *arg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n%s", prog, a, usage);
            return 2;
        }
        int r = fn(a, argv[++i], arg);
        if (r == ZF_CMDLINE_UNKNOWN) {
            fprintf(stderr, "%s: unknown option '%s'\n%s", prog, a, usage);
            return 2;
        }
        if (r != ZF_CMDLINE_TAKEN) return 2;
    }
    return 0;
}

void zf_on_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
