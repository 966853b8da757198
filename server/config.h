/*
 * config.h: where the server's settings come from. Every command-line flag
 * may also be given as --name=value, in a configuration file (--config FILE)
 * and in the environment (WEIR_NAME, the flag's name in capitals with
 * underscores: --data-dir is WEIR_DATA_DIR). The command line wins over the
 * environment, which wins over the file. docs/configuration.md lists them.
 */
#ifndef WEIR_SERVER_CONFIG_H
#define WEIR_SERVER_CONFIG_H

#include "error.h"

/* Flags without a value (given as name = true/false in a file or the environment). */
extern const char *const CONFIG_SWITCHES[];
/* Flags with a value. */
extern const char *const CONFIG_SETTINGS[];

/* Builds the argument list serve() parses: the file's settings, then the
 * environment's, then argv (minus --config), each "--name=value" split in
 * two. The list and its strings are allocated for the process's life (the
 * server keeps pointers into them). Returns 0,
 * or -1 with err (22023): an unreadable file, a line that is not
 * name = value, an unknown name, a switch whose value is not a boolean. */
int config_args(int argc, char **argv, int *out_argc, char ***out_argv, WError *err);

/* The last list config_args handed out (reachable for the process's life:
 * not a leak to LeakSanitizer at exit). */
extern char **config_kept_args;

#endif
