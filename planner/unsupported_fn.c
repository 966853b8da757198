/*
 * unsupported_fn.c: functions users of PostgreSQL and Flink call that weir
 * does not have yet.
 *
 * A call the binder cannot resolve is "42883 function f(...) does not
 * exist", which reads as a typo or a missing cast. For the names below
 * (none of them exists in weir under any signature) the error is "0A000
 * feature not supported" with what to write instead, as the parser does
 * for syntax (parser/unsupported.c).
 */
#include "planner_int.h"

#include <string.h>
#include <strings.h>

typedef struct Missing {
    const char *name;
    const char *what;
    const char *hint;
} Missing;

#define SRF_HINT "A VALUES list gives a fixed set of rows; JSON arrays are read with -> and ->>."
#define ARRAY_HINT "Keep a list in a JSONB column ('[1, 2]'::jsonb) for now."
#define JSONB_HINT "A JSONB value can be built as text and cast: ('{\"a\": ' || x || '}')::jsonb."
#define GROUPS_HINT "Write one GROUP BY query per grouping set and combine them with UNION ALL."
#define LEGACY_HINT                                                                                                    \
    "Use the window table functions: SELECT window_start, window_end, ... FROM TUMBLE(src, ts, INTERVAL '1' "         \
    "MINUTE) GROUP BY window_start, window_end (HOP and SESSION likewise)."
#define ORDERED_HINT "percentile_cont, percentile_disc and mode are not available yet."

static const Missing MISSING[] = {
    {"generate_series", "set-returning functions (generate_series)", SRF_HINT},
    {"unnest", "set-returning functions (unnest)", SRF_HINT},
    {"jsonb_array_elements", "set-returning functions (jsonb_array_elements)", SRF_HINT},
    {"jsonb_array_elements_text", "set-returning functions (jsonb_array_elements_text)", SRF_HINT},
    {"jsonb_each", "set-returning functions (jsonb_each)", SRF_HINT},
    {"jsonb_each_text", "set-returning functions (jsonb_each_text)", SRF_HINT},
    {"jsonb_object_keys", "set-returning functions (jsonb_object_keys)", SRF_HINT},
    {"regexp_split_to_table", "set-returning functions (regexp_split_to_table)", SRF_HINT},
    {"rollup", "GROUP BY ROLLUP", GROUPS_HINT},
    {"cube", "GROUP BY CUBE", GROUPS_HINT},
    {"grouping", "grouping() and GROUPING SETS", GROUPS_HINT},
    {"array_agg", "arrays (array_agg)", "string_agg(x::text, ',') collects values as text."},
    {"array_length", "arrays (array_length)", ARRAY_HINT},
    {"array_position", "arrays (array_position)", ARRAY_HINT},
    {"cardinality", "arrays (cardinality)", ARRAY_HINT},
    {"array_to_string", "arrays (array_to_string)", ARRAY_HINT},
    {"string_to_array", "arrays (string_to_array)", "split_part(s, ',', n) takes one piece."},
    {"array_append", "arrays (array_append)", ARRAY_HINT},
    {"jsonb_agg", "jsonb_agg", "string_agg over the values' text builds a JSON array as text."},
    {"jsonb_object_agg", "jsonb_object_agg", JSONB_HINT},
    {"jsonb_build_object", "jsonb_build_object", JSONB_HINT},
    {"jsonb_build_array", "jsonb_build_array", JSONB_HINT},
    {"json_build_object", "json_build_object", JSONB_HINT},
    {"to_jsonb", "to_jsonb", JSONB_HINT},
    {"to_json", "to_json", JSONB_HINT},
    {"row_to_json", "row_to_json", JSONB_HINT},
    {"jsonb_set", "jsonb_set", JSONB_HINT},
    {"date_bin", "date_bin", "date_trunc rounds to a unit; TUMBLE windows give buckets of any size."},
    {"tumble", "Flink's legacy group windows (GROUP BY TUMBLE(...))", LEGACY_HINT},
    {"hop", "Flink's legacy group windows (GROUP BY HOP(...))", LEGACY_HINT},
    {"session", "Flink's legacy group windows (GROUP BY SESSION(...))", LEGACY_HINT},
    {"tumble_start", "Flink's legacy group windows (TUMBLE_START)", LEGACY_HINT},
    {"tumble_end", "Flink's legacy group windows (TUMBLE_END)", LEGACY_HINT},
    {"tumble_rowtime", "Flink's legacy group windows (TUMBLE_ROWTIME)", LEGACY_HINT},
    {"hop_start", "Flink's legacy group windows (HOP_START)", LEGACY_HINT},
    {"hop_end", "Flink's legacy group windows (HOP_END)", LEGACY_HINT},
    {"session_start", "Flink's legacy group windows (SESSION_START)", LEGACY_HINT},
    {"session_end", "Flink's legacy group windows (SESSION_END)", LEGACY_HINT},
    {"percentile_cont", "ordered-set aggregates (percentile_cont)", ORDERED_HINT},
    {"percentile_disc", "ordered-set aggregates (percentile_disc)", ORDERED_HINT},
    {"mode", "ordered-set aggregates (mode)", ORDERED_HINT},
};

bool plan_unsupported_function(const char *name, const char **what, const char **hint)
{
    for (size_t i = 0; i < sizeof MISSING / sizeof MISSING[0]; i++)
        if (!strcasecmp(name, MISSING[i].name)) {
            *what = MISSING[i].what;
            *hint = MISSING[i].hint;
            return true;
        }
    return false;
}
