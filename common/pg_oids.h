/*
 * pg_oids.h: the PostgreSQL type OIDs weir sends, reads and shows, in one
 * table (PostgreSQL's pg_type.dat values; a client's driver decodes a column
 * by them, so they are fixed forever).
 *
 * types.c maps each weir type to its OID (type_oid()); the wire protocol
 * (server/pgwire.c, pgbinary.c), the system catalogs (server/pgcatalog*.c)
 * and the result descriptions of weir's own commands (ANALYZE, VERIFY) name
 * them from here.
 */
#ifndef WEIR_COMMON_PG_OIDS_H
#define WEIR_COMMON_PG_OIDS_H

#define PG_OID_BOOL        16
#define PG_OID_BYTEA       17
#define PG_OID_CHAR        18    /* "char": one byte */
#define PG_OID_NAME        19
#define PG_OID_INT8        20
#define PG_OID_INT2        21
#define PG_OID_INT2VECTOR  22
#define PG_OID_INT4        23
#define PG_OID_REGPROC     24
#define PG_OID_TEXT        25
#define PG_OID_OID         26
#define PG_OID_XID         28
#define PG_OID_OIDVECTOR   30
#define PG_OID_JSON        114
#define PG_OID_PG_NODE_TREE 194
#define PG_OID_FLOAT4      700
#define PG_OID_FLOAT8      701
#define PG_OID_UNKNOWN     705
#define PG_OID_INET        869
#define PG_OID_CHAR_ARRAY  1002
#define PG_OID_INT2_ARRAY  1005
#define PG_OID_TEXT_ARRAY  1009
#define PG_OID_OID_ARRAY   1028
#define PG_OID_ACLITEM_ARRAY 1034
#define PG_OID_BPCHAR      1042
#define PG_OID_VARCHAR     1043
#define PG_OID_DATE        1082
#define PG_OID_TIME        1083
#define PG_OID_TIMESTAMP   1114
#define PG_OID_TIMESTAMPTZ 1184
#define PG_OID_INTERVAL    1186
#define PG_OID_NUMERIC     1700
#define PG_OID_JSONB       3802

#endif
