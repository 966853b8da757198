/*
 * sink_test_util.c: rt_sink_option() and rt_sink_connector() for the sink
 * writer tests, with the semantics of runtime/op_sink.c (which the server
 * links instead), so the writers can be tested without the runtime.
 */
#include <stddef.h>
#include <strings.h>

#include "sink.h"

const char *rt_sink_option(const RtSinkSpec *spec, const char *key)
{
    for (int i = 0; i < spec->n_options; i++)
        if (spec->options[i].key && !strcasecmp(spec->options[i].key, key))
            return spec->options[i].value;
    return NULL;
}

const RtSinkConnector *rt_sink_connector(const char *name)
{
    if (!strcasecmp(name, "postgres"))
        return &rt_sink_postgres;
    if (!strcasecmp(name, "sqlite"))
        return &rt_sink_sqlite;
    return NULL;
}
