/*
 * crashpoint.h: named places where a test can make the process die.
 *
 * The crash tests need kills at exact moments (mid-checkpoint, between the
 * LMDB commit and a sink's commit, during recovery), which random SIGKILLs
 * hit too rarely. With WEIR_CRASH_AT=name:N in the environment, the Nth
 * time crashpoint("name") is reached the process kills itself with
 * SIGKILL, exactly as `kill -9` would. Without the variable a crashpoint
 * is one predictable branch.
 */
#ifndef WEIR_COMMON_CRASHPOINT_H
#define WEIR_COMMON_CRASHPOINT_H

void crashpoint(const char *name);

#endif
