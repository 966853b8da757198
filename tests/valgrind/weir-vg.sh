#!/bin/sh
# weir-vg.sh: runs $WEIR_VG_EXE (a weir binary) under valgrind with the given
# arguments, so sql-tests/slt_runner can start its broker and server through it
# (--weir tests/valgrind/weir-vg.sh). A memory error or a definite leak makes
# the process exit 99, which the runner reports as a failed shutdown.
# scripts/test.sh uses it; see tests/valgrind/README.md.
: "${WEIR_VG_EXE:?set WEIR_VG_EXE to the weir binary}"
exec valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --track-fds=no "$WEIR_VG_EXE" "$@"
