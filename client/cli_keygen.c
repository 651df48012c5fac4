/* zflow keygen: writes CurveZMQ keypairs for a secure service. */
#include <stdio.h>
#include <string.h>

#include "client/cli.h"
#include "common/keys.h"

static const char s_usage[] =
    "usage: zflow keygen DIR [NAME]\n"
    "\n"
    "Writes a fresh CurveZMQ keypair as DIR/NAME.key (the secret key, mode\n"
    "0600) and DIR/NAME.pub (the public key), each one line of Z85 text,\n"
    "creating DIR (mode 0700) when needed. Without NAME, writes the keypair of\n"
    "every role: broker, scheduler, executor and client, which is a complete\n"
    "key directory for --keys DIR (or ZFLOW_KEYS=DIR). An existing .key file is\n"
    "never overwritten.\n"
    "\n"
    "More keys of a role are trusted when their NAME.pub is put in\n"
    "DIR/schedulers/, DIR/executors/ or DIR/clients/ (see docs/service.md,\n"
    "\"Security\").\n"
    "\n"
    "Exits 0 when the keys were written, 1 when they could not be, 2 on bad\n"
    "usage.\n";

static int s_keygen(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return zf_cli_usage_error("keygen", s_usage, "unknown option '%s'", argv[i]);
    if (argc < 2) return zf_cli_usage_error("keygen", s_usage, "need a key directory DIR");
    if (argc > 3) return zf_cli_usage_error("keygen", s_usage, "unexpected argument '%s'", argv[3]);
    zf_status_t s = argc == 3 ? zf_keygen(argv[1], argv[2]) : zf_keygen_cluster(argv[1]);
    if (!zf_ok(s)) return zf_cli_fail("keygen", &s);
    return 0;
}

const zf_cli_command_t zf_cli_keygen = {"keygen", "write CurveZMQ keypairs for --keys", s_keygen};
