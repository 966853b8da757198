#!/bin/sh
# check_sqlstates.sh: fails if a SQLSTATE is written as a string literal outside common/error.h.
#
# error.h holds the one list of SQLSTATEs, each named after PostgreSQL's condition
# (SQLSTATE_OBJECT_NOT_IN_STATE, not "55000"), so a code is chosen from the list, grep finds
# every place that raises it, and a comparison (http.c maps 55000 to 503) cannot drift from
# the code raised. Test files (*/tests/) are exempt: they state the code a client sees.
#
# A literal counts when it is five characters of [0-9A-Z] with a digit, in a SQLSTATE class
# PostgreSQL defines (errcodes.txt), so "10000" (a Kafka timeout) does not.
# Usage: check_sqlstates.sh SOURCE_ROOT. TAP output.
root=${1:-.}
cd "$root" || exit 2
classes='00|01|02|03|08|09|0A|0B|0F|0L|0P|0Z|20|21|22|23|24|25|26|27|28|2B|2D|2F|34|38|39|3B|3D|3F|40|42|44|53|54|55|57|58|72|F0|HV|P0|XX'
hits=$(grep -rnE --include='*.c' --include='*.h' --include='*.y' "\"($classes)[0-9A-Z]{3}\"" \
         common parser planner runtime storage server fuzz 2>/dev/null |
       grep -v '^common/error\.h:' | grep -v '/tests/' | grep -E "\"($classes)[0-9A-Z]{3}\"" |
       grep -E "\"[0-9A-Z]*[0-9][0-9A-Z]*\"" )
echo "1..1"
if [ -n "$hits" ]; then
    echo "not ok 1 - SQLSTATE literals outside common/error.h (use its SQLSTATE_* names):"
    echo "$hits" | sed 's/^/# /'
    exit 1
fi
echo "ok 1 - every SQLSTATE is named from common/error.h"
