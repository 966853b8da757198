/*
 * sink_kafka_util.c: the two sink.h helpers that runtime/op_sink.c provides
 * in the server, for linking test_sink_kafka without the sink operator.
 */
#include <strings.h>

#include "sink.h"

const char *rt_sink_option(const RtSinkSpec *spec, const char *key)
{
    for (int i = 0; i < spec->n_options; i++)
        if (strcasecmp(spec->options[i].key, key) == 0)
            return spec->options[i].value;
    return NULL;
}

const RtSinkConnector *rt_sink_connector(const char *name)
{
    return strcasecmp(name, rt_sink_kafka.name) == 0 ? &rt_sink_kafka : NULL;
}
