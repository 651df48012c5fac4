/* What the programs' command lines share: strict parsing of whole-number
 * option values, and the signals that ask a program to stop. */
#ifndef ZF_CMDLINE_H
#define ZF_CMDLINE_H

#include <stdbool.h>

/* text as a whole number from min to max: all of it digits (after an
 * optional sign and leading blanks), in range; false otherwise, *out then
 * untouched. */
bool zf_parse_long(const char *text, long min, long max, long *out);

/* Calls handler (which must only set a flag or call async-signal-safe
 * functions) on SIGINT and SIGTERM. */
void zf_on_stop_signals(void (*handler)(int));

#endif
