/*
 * broker_main.c: weir-broker-test, a stand-alone `weir broker` for manual
 * checks and the kcat round-trip test (the real subcommand lives in the
 * server's main).
 */
#include "broker.h"

int main(int argc, char **argv)
{
    return rt_broker_main(argc, argv);
}
