/* Whole-number option values and stop signals for the programs' mains. */
#include <errno.h>
#include <signal.h>
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

void zf_on_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
