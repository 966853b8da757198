/*
 * nexmark_cli.h: `weir nexmark` (nexmark_cli.c), the Nexmark generator's
 * events on stdout as JSON lines or CSV.
 */
#ifndef WEIR_SERVER_NEXMARK_CLI_H
#define WEIR_SERVER_NEXMARK_CLI_H

/* argv[0] is "nexmark"; returns the exit status (2 on bad options). */
int weir_nexmark_main(int argc, char **argv);

#endif
