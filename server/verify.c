/*
 * verify.c: VERIFY MATERIALIZED VIEW v.
 */
#include "engine_int.h"
#include "pgwire.h"

int srv_verify_view(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: VERIFY MATERIALIZED VIEW");
}
