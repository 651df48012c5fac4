/* What the programs' command lines share: the loop over "--flag value"
 * arguments, strict parsing of whole-number option values, and the signals
 * that ask a program to stop. */
#ifndef ZF_CMDLINE_H
#define ZF_CMDLINE_H

#include <stdbool.h>

/* text as a whole number from min to max: all of it digits (after an
 * optional sign and leading blanks), in range; false otherwise, *out then
 * untouched. */
bool zf_parse_long(const char *text, long min, long max, long *out);

/* What a program's option handler returns for one flag and its value. */
enum {
    ZF_CMDLINE_TAKEN = 0,   /* the value was stored */
    ZF_CMDLINE_UNKNOWN = 1, /* not a flag of this program */
    ZF_CMDLINE_BAD = 2,     /* a bad value; the handler printed why */
};
typedef int (*zf_cmdline_option_fn)(const char *flag, const char *value, void *arg);

/* The loop over argv[1..argc) where every argument is a flag followed by its
 * value, passed to fn with arg. "--help" or "-h" prints usage to stdout and
 * exits with 0. Returns 0 when every flag was taken, else 2 after printing
 * to stderr "<prog>: unknown or incomplete option '<flag>'" and the usage
 * for a last argument without a value, "<prog>: unknown option '<flag>'" and
 * the usage for a flag fn does not know, or nothing more for a value fn
 * refused. */
int zf_cmdline_parse(const char *prog, const char *usage, int argc, char **argv,
                     zf_cmdline_option_fn fn, void *arg);

/* Calls handler (which must only set a flag or call async-signal-safe
 * functions) on SIGINT and SIGTERM. */
void zf_on_stop_signals(void (*handler)(int));

#endif
