-- pgcatalog.sql: the schema and the fixed rows of the emulated pg_catalog and
-- information_schema, run by pgcatalog.c into a fresh in-memory SQLite
-- database whose attached schemas are named pg_catalog and information_schema.
-- Rows that describe weir's objects (pg_class, pg_attribute, ...) are added
-- by pgcatalog.c; information_schema is derived from pg_catalog at the end
-- (pgcatalog_derive.sql part, below the marker line).
--
-- Column declared types name the Postgres type reported in RowDescription
-- (see DECLTYPES in pgcatalog.c) and are spelled so that SQLite's affinity is
-- right: "name_text" is name (19) stored as TEXT, "oid_int" is oid (26)
-- stored as INTEGER, "bool" stores 0/1 and prints t/f. Arrays are stored in
-- Postgres' text form ('{a,b}').

CREATE TABLE pg_catalog.pg_namespace (
  oid oid_int PRIMARY KEY, nspname name_text, nspowner oid_int DEFAULT 10, nspacl aclitem_array_text);
INSERT INTO pg_catalog.pg_namespace (oid, nspname) VALUES
  (11, 'pg_catalog'), (99, 'pg_toast'), (2200, 'public'), (13000, 'information_schema');

CREATE TABLE pg_catalog.pg_class (
  oid oid_int PRIMARY KEY, relname name_text, relnamespace oid_int, reltype oid_int DEFAULT 0,
  reloftype oid_int DEFAULT 0, relowner oid_int DEFAULT 10, relam oid_int DEFAULT 0,
  relfilenode oid_int DEFAULT 0, reltablespace oid_int DEFAULT 0, relpages int4 DEFAULT 0,
  reltuples float4 DEFAULT -1, relallvisible int4 DEFAULT 0, reltoastrelid oid_int DEFAULT 0,
  relhasindex bool DEFAULT 0, relisshared bool DEFAULT 0, relpersistence char_text DEFAULT 'p',
  relkind char_text, relnatts int2 DEFAULT 0, relchecks int2 DEFAULT 0, relhasrules bool DEFAULT 0,
  relhastriggers bool DEFAULT 0, relhassubclass bool DEFAULT 0, relrowsecurity bool DEFAULT 0,
  relforcerowsecurity bool DEFAULT 0, relispopulated bool DEFAULT 1, relreplident char_text DEFAULT 'd',
  relispartition bool DEFAULT 0, relrewrite oid_int DEFAULT 0, relfrozenxid xid_int DEFAULT 0,
  relminmxid xid_int DEFAULT 0, relacl aclitem_array_text, reloptions text_array,
  relpartbound pg_node_tree_text);

CREATE TABLE pg_catalog.pg_attribute (
  attrelid oid_int, attname name_text, atttypid oid_int, attstattarget int4 DEFAULT -1,
  attlen int2 DEFAULT -1, attnum int2, attndims int4 DEFAULT 0, attcacheoff int4 DEFAULT -1,
  atttypmod int4 DEFAULT -1, attbyval bool DEFAULT 0, attalign char_text DEFAULT 'i',
  attstorage char_text DEFAULT 'p', attcompression char_text DEFAULT '', attnotnull bool DEFAULT 0,
  atthasdef bool DEFAULT 0, atthasmissing bool DEFAULT 0, attidentity char_text DEFAULT '',
  attgenerated char_text DEFAULT '', attisdropped bool DEFAULT 0, attislocal bool DEFAULT 1,
  attinhcount int4 DEFAULT 0, attcollation oid_int DEFAULT 0, attacl aclitem_array_text,
  attoptions text_array, attfdwoptions text_array, attmissingval text,
  PRIMARY KEY (attrelid, attnum));

CREATE TABLE pg_catalog.pg_type (
  oid oid_int PRIMARY KEY, typname name_text, typnamespace oid_int DEFAULT 11, typowner oid_int DEFAULT 10,
  typlen int2, typbyval bool, typtype char_text DEFAULT 'b', typcategory char_text,
  typispreferred bool DEFAULT 0, typisdefined bool DEFAULT 1, typdelim char_text DEFAULT ',',
  typrelid oid_int DEFAULT 0, typsubscript regproc_text DEFAULT '-', typelem oid_int DEFAULT 0,
  typarray oid_int DEFAULT 0, typinput regproc_text DEFAULT '-', typoutput regproc_text DEFAULT '-',
  typreceive regproc_text DEFAULT '-', typsend regproc_text DEFAULT '-', typmodin regproc_text DEFAULT '-',
  typmodout regproc_text DEFAULT '-', typanalyze regproc_text DEFAULT '-', typalign char_text DEFAULT 'i',
  typstorage char_text DEFAULT 'p', typnotnull bool DEFAULT 0, typbasetype oid_int DEFAULT 0,
  typtypmod int4 DEFAULT -1, typndims int4 DEFAULT 0, typcollation oid_int DEFAULT 0,
  typdefaultbin pg_node_tree_text, typdefault text, typacl aclitem_array_text);
INSERT INTO pg_catalog.pg_type (oid, typname, typlen, typbyval, typcategory, typelem, typarray, typalign, typcollation) VALUES
  (16, 'bool', 1, 1, 'B', 0, 1000, 'c', 0),
  (17, 'bytea', -1, 0, 'U', 0, 1001, 'i', 0),
  (18, 'char', 1, 1, 'Z', 0, 1002, 'c', 0),
  (19, 'name', 64, 0, 'S', 18, 1003, 'c', 950),
  (20, 'int8', 8, 1, 'N', 0, 1016, 'd', 0),
  (21, 'int2', 2, 1, 'N', 0, 1005, 's', 0),
  (22, 'int2vector', -1, 0, 'A', 21, 1006, 'i', 0),
  (23, 'int4', 4, 1, 'N', 0, 1007, 'i', 0),
  (24, 'regproc', 4, 1, 'N', 0, 1008, 'i', 0),
  (25, 'text', -1, 0, 'S', 0, 1009, 'i', 100),
  (26, 'oid', 4, 1, 'N', 0, 1028, 'i', 0),
  (28, 'xid', 4, 1, 'U', 0, 1011, 'i', 0),
  (30, 'oidvector', -1, 0, 'A', 26, 1013, 'i', 0),
  (114, 'json', -1, 0, 'U', 0, 199, 'i', 0),
  (194, 'pg_node_tree', -1, 0, 'Z', 0, 0, 'i', 100),
  (700, 'float4', 4, 1, 'N', 0, 1021, 'i', 0),
  (701, 'float8', 8, 1, 'N', 0, 1022, 'd', 0),
  (705, 'unknown', -2, 0, 'X', 0, 0, 'c', 0),
  (869, 'inet', -1, 0, 'I', 0, 1041, 'i', 0),
  (1041, '_inet', -1, 0, 'A', 869, 0, 'i', 0),
  (1000, '_bool', -1, 0, 'A', 16, 0, 'i', 0),
  (1001, '_bytea', -1, 0, 'A', 17, 0, 'i', 0),
  (1002, '_char', -1, 0, 'A', 18, 0, 'i', 0),
  (1003, '_name', -1, 0, 'A', 19, 0, 'i', 950),
  (1005, '_int2', -1, 0, 'A', 21, 0, 'i', 0),
  (1007, '_int4', -1, 0, 'A', 23, 0, 'i', 0),
  (1009, '_text', -1, 0, 'A', 25, 0, 'i', 100),
  (1015, '_varchar', -1, 0, 'A', 1043, 0, 'i', 100),
  (1016, '_int8', -1, 0, 'A', 20, 0, 'd', 0),
  (1021, '_float4', -1, 0, 'A', 700, 0, 'i', 0),
  (1022, '_float8', -1, 0, 'A', 701, 0, 'd', 0),
  (1028, '_oid', -1, 0, 'A', 26, 0, 'i', 0),
  (1033, 'aclitem', 12, 0, 'U', 0, 1034, 'i', 0),
  (1034, '_aclitem', -1, 0, 'A', 1033, 0, 'i', 0),
  (1043, 'varchar', -1, 0, 'S', 0, 1015, 'i', 100),
  (1082, 'date', 4, 1, 'D', 0, 1182, 'i', 0),
  (1114, 'timestamp', 8, 1, 'D', 0, 1115, 'd', 0),
  (1115, '_timestamp', -1, 0, 'A', 1114, 0, 'd', 0),
  (1182, '_date', -1, 0, 'A', 1082, 0, 'i', 0),
  (1184, 'timestamptz', 8, 1, 'D', 0, 1185, 'd', 0),
  (1185, '_timestamptz', -1, 0, 'A', 1184, 0, 'd', 0),
  (1186, 'interval', 16, 0, 'T', 0, 1187, 'd', 0),
  (1187, '_interval', -1, 0, 'A', 1186, 0, 'd', 0),
  (1700, 'numeric', -1, 0, 'N', 0, 1231, 'i', 0),
  (1231, '_numeric', -1, 0, 'A', 1700, 0, 'i', 0),
  (2205, 'regclass', 4, 1, 'N', 0, 2210, 'i', 0),
  (2206, 'regtype', 4, 1, 'N', 0, 2211, 'i', 0),
  (2249, 'record', -1, 0, 'P', 0, 2287, 'd', 0),
  (2278, 'void', 4, 1, 'P', 0, 0, 'i', 0),
  (3802, 'jsonb', -1, 0, 'U', 0, 3807, 'i', 0),
  (3807, '_jsonb', -1, 0, 'A', 3802, 0, 'i', 0),
  (4089, 'regnamespace', 4, 1, 'N', 0, 4090, 'i', 0),
  (4096, 'regrole', 4, 1, 'N', 0, 4097, 'i', 0);
UPDATE pg_catalog.pg_type SET typtype = 'p' WHERE typcategory = 'P';
UPDATE pg_catalog.pg_type SET typinput = typname || 'in', typoutput = typname || 'out',
  typreceive = typname || 'recv', typsend = typname || 'send' WHERE typcategory <> 'A';
UPDATE pg_catalog.pg_type SET typinput = 'array_in', typoutput = 'array_out', typreceive = 'array_recv',
  typsend = 'array_send', typsubscript = 'array_subscript_handler' WHERE typcategory = 'A';

CREATE TABLE pg_catalog.pg_database (
  oid oid_int PRIMARY KEY, datname name_text, datdba oid_int DEFAULT 10, encoding int4 DEFAULT 6,
  datlocprovider char_text DEFAULT 'c', datistemplate bool DEFAULT 0, datallowconn bool DEFAULT 1,
  datconnlimit int4 DEFAULT -1, datfrozenxid xid_int DEFAULT 0, datminmxid xid_int DEFAULT 1,
  dattablespace oid_int DEFAULT 1663, datcollate text DEFAULT 'C.UTF-8', datctype text DEFAULT 'C.UTF-8',
  daticulocale text, datcollversion text, datacl aclitem_array_text);
INSERT INTO pg_catalog.pg_database (oid, datname) VALUES (5, 'weir');

CREATE TABLE pg_catalog.pg_am (oid oid_int PRIMARY KEY, amname name_text, amhandler regproc_text, amtype char_text);
INSERT INTO pg_catalog.pg_am VALUES (2, 'heap', 'heap_tableam_handler', 't'), (403, 'btree', 'bthandler', 'i');

CREATE TABLE pg_catalog.pg_tablespace (
  oid oid_int PRIMARY KEY, spcname name_text, spcowner oid_int DEFAULT 10, spcacl aclitem_array_text,
  spcoptions text_array);
INSERT INTO pg_catalog.pg_tablespace (oid, spcname) VALUES (1663, 'pg_default'), (1664, 'pg_global');

CREATE TABLE pg_catalog.pg_collation (
  oid oid_int PRIMARY KEY, collname name_text, collnamespace oid_int DEFAULT 11, collowner oid_int DEFAULT 10,
  collprovider char_text DEFAULT 'c', collisdeterministic bool DEFAULT 1, collencoding int4 DEFAULT -1,
  collcollate text, collctype text, colliculocale text, collversion text);
INSERT INTO pg_catalog.pg_collation (oid, collname, collprovider, collcollate, collctype) VALUES
  (100, 'default', 'd', NULL, NULL), (950, 'C', 'c', 'C', 'C');

-- Roles: oid 10 is the bootstrap superuser (weir); users created with CREATE
-- USER are added by pgcatalog.c. Passwords are never shown.
CREATE TABLE pg_catalog.pg_roles (
  rolname name_text, rolsuper bool DEFAULT 0, rolinherit bool DEFAULT 1, rolcreaterole bool DEFAULT 0,
  rolcreatedb bool DEFAULT 0, rolcanlogin bool DEFAULT 1, rolreplication bool DEFAULT 0,
  rolconnlimit int4 DEFAULT -1, rolpassword text DEFAULT '********', rolvaliduntil timestamptz_text,
  rolbypassrls bool DEFAULT 0, rolconfig text_array, oid oid_int PRIMARY KEY);
CREATE TABLE pg_catalog.pg_auth_members (
  oid oid_int, roleid oid_int, member oid_int, grantor oid_int, admin_option bool);

CREATE TABLE pg_catalog.pg_description (objoid oid_int, classoid oid_int, objsubid int4, description text);
CREATE TABLE pg_catalog.pg_shdescription (objoid oid_int, classoid oid_int, description text);
CREATE TABLE pg_catalog.pg_attrdef (oid oid_int, adrelid oid_int, adnum int2, adbin pg_node_tree_text);
CREATE TABLE pg_catalog.pg_index (
  indexrelid oid_int, indrelid oid_int, indnatts int2, indnkeyatts int2, indisunique bool,
  indnullsnotdistinct bool, indisprimary bool, indisexclusion bool, indimmediate bool,
  indisclustered bool, indisvalid bool, indcheckxmin bool, indisready bool, indislive bool,
  indisreplident bool, indkey i2vector_text, indcollation oidvector_text, indclass oidvector_text,
  indoption i2vector_text, indexprs pg_node_tree_text, indpred pg_node_tree_text);
CREATE TABLE pg_catalog.pg_constraint (
  oid oid_int, conname name_text, connamespace oid_int, contype char_text, condeferrable bool,
  condeferred bool, convalidated bool, conrelid oid_int, contypid oid_int, conindid oid_int,
  conparentid oid_int, confrelid oid_int, confupdtype char_text, confdeltype char_text,
  confmatchtype char_text, conislocal bool, coninhcount int4, connoinherit bool,
  conkey i2array_text, confkey i2array_text, conbin pg_node_tree_text);
CREATE TABLE pg_catalog.pg_inherits (inhrelid oid_int, inhparent oid_int, inhseqno int4, inhdetachpending bool);
CREATE TABLE pg_catalog.pg_policy (
  oid oid_int, polname name_text, polrelid oid_int, polcmd char_text, polpermissive bool,
  polroles oid_array_text, polqual pg_node_tree_text, polwithcheck pg_node_tree_text);
CREATE TABLE pg_catalog.pg_statistic_ext (
  oid oid_int, stxrelid oid_int, stxname name_text, stxnamespace oid_int, stxowner oid_int,
  stxstattarget int4, stxkeys i2vector_text, stxkind char_array_text, stxexprs pg_node_tree_text);
CREATE TABLE pg_catalog.pg_publication (
  oid oid_int, pubname name_text, pubowner oid_int, puballtables bool, pubinsert bool, pubupdate bool,
  pubdelete bool, pubtruncate bool, pubviaroot bool);
CREATE TABLE pg_catalog.pg_publication_namespace (oid oid_int, pnpubid oid_int, pnnspid oid_int);
CREATE TABLE pg_catalog.pg_publication_rel (
  oid oid_int, prpubid oid_int, prrelid oid_int, prqual pg_node_tree_text, prattrs i2vector_text);
CREATE TABLE pg_catalog.pg_rewrite (
  oid oid_int, rulename name_text, ev_class oid_int, ev_type char_text, ev_enabled char_text,
  is_instead bool, ev_qual pg_node_tree_text, ev_action pg_node_tree_text);
CREATE TABLE pg_catalog.pg_trigger (
  oid oid_int, tgrelid oid_int, tgparentid oid_int, tgname name_text, tgfoid oid_int, tgtype int2,
  tgenabled char_text, tgisinternal bool, tgconstrrelid oid_int, tgconstrindid oid_int,
  tgconstraint oid_int, tgdeferrable bool, tginitdeferred bool, tgnargs int2);
CREATE TABLE pg_catalog.pg_proc (
  oid oid_int PRIMARY KEY, proname name_text, pronamespace oid_int, proowner oid_int, prolang oid_int,
  prokind char_text, proretset bool, provolatile char_text, pronargs int2, prorettype oid_int,
  proargtypes oidvector_text, prosrc text);
CREATE TABLE pg_catalog.pg_extension (
  oid oid_int, extname name_text, extowner oid_int, extnamespace oid_int, extrelocatable bool,
  extversion text, extconfig oid_array_text, extcondition text_array);
CREATE TABLE pg_catalog.pg_foreign_data_wrapper (
  oid oid_int PRIMARY KEY, fdwname name_text, fdwowner oid_int DEFAULT 10, fdwhandler oid_int DEFAULT 0,
  fdwvalidator oid_int DEFAULT 0, fdwacl aclitem_array_text, fdwoptions text_array);
CREATE TABLE pg_catalog.pg_foreign_server (
  oid oid_int PRIMARY KEY, srvname name_text, srvowner oid_int DEFAULT 10, srvfdw oid_int,
  srvtype text, srvversion text, srvacl aclitem_array_text, srvoptions text_array);
CREATE TABLE pg_catalog.pg_foreign_table (ftrelid oid_int PRIMARY KEY, ftserver oid_int, ftoptions text_array);
CREATE TABLE pg_catalog.pg_sequence (
  seqrelid oid_int, seqtypid oid_int, seqstart int8, seqincrement int8, seqmax int8, seqmin int8,
  seqcache int8, seqcycle bool);
CREATE TABLE pg_catalog.pg_enum (oid oid_int, enumtypid oid_int, enumsortorder float4, enumlabel name_text);
CREATE TABLE pg_catalog.pg_range (rngtypid oid_int, rngsubtype oid_int, rngmultitypid oid_int);
CREATE TABLE pg_catalog.pg_depend (
  classid oid_int, objid oid_int, objsubid int4, refclassid oid_int, refobjid oid_int,
  refobjsubid int4, deptype char_text);

-- Catalogs weir has nothing for: empty, so that clients listing them get no rows.
CREATE TABLE pg_catalog.pg_language (oid oid_int, lanname name_text, lanowner oid_int, lanispl bool,
  lanpltrusted bool, lanplcallfoid oid_int, laninline oid_int, lanvalidator oid_int, lanacl aclitem_array_text);
CREATE TABLE pg_catalog.pg_conversion (oid oid_int, conname name_text, connamespace oid_int, conowner oid_int,
  conforencoding int4, contoencoding int4, conproc regproc_text, condefault bool);
CREATE TABLE pg_catalog.pg_cast (oid oid_int, castsource oid_int, casttarget oid_int, castfunc oid_int,
  castcontext char_text, castmethod char_text);
CREATE TABLE pg_catalog.pg_operator (oid oid_int, oprname name_text, oprnamespace oid_int, oprowner oid_int,
  oprkind char_text, oprcanmerge bool, oprcanhash bool, oprleft oid_int, oprright oid_int,
  oprresult oid_int, oprcom oid_int, oprnegate oid_int, oprcode regproc_text);
CREATE TABLE pg_catalog.pg_subscription (oid oid_int, subdbid oid_int, subname name_text, subowner oid_int,
  subenabled bool, subconninfo text, subslotname name_text, subpublications text_array);
CREATE TABLE pg_catalog.pg_ts_config (oid oid_int, cfgname name_text, cfgnamespace oid_int, cfgowner oid_int,
  cfgparser oid_int);
CREATE TABLE pg_catalog.pg_db_role_setting (setdatabase oid_int, setrole oid_int, setconfig text_array);
CREATE TABLE pg_catalog.pg_largeobject_metadata (oid oid_int, lomowner oid_int, lomacl aclitem_array_text);
CREATE TABLE pg_catalog.pg_default_acl (oid oid_int, defaclrole oid_int, defaclnamespace oid_int,
  defaclobjtype char_text, defaclacl aclitem_array_text);
CREATE TABLE pg_catalog.pg_event_trigger (oid oid_int, evtname name_text, evtevent name_text, evtowner oid_int,
  evtfoid oid_int, evtenabled char_text, evttags text_array);
CREATE TABLE pg_catalog.pg_opclass (oid oid_int, opcmethod oid_int, opcname name_text, opcnamespace oid_int,
  opcowner oid_int, opcfamily oid_int, opcintype oid_int, opcdefault bool, opckeytype oid_int);
CREATE TABLE pg_catalog.pg_opfamily (oid oid_int, opfmethod oid_int, opfname name_text, opfnamespace oid_int,
  opfowner oid_int);

-- pg_settings: the session's settings, filled per statement by pgcatalog.c.
CREATE TABLE pg_catalog.pg_settings (
  name text, setting text, unit text, category text, short_desc text, extra_desc text,
  context text, vartype text, source text, min_val text, max_val text, enumvals text_array,
  boot_val text, reset_val text, sourcefile text, sourceline int4, pending_restart bool);

-- Views over weir objects, filled by pgcatalog.c (definition = the query text).
CREATE TABLE pg_catalog.pg_matviews (
  schemaname name_text, matviewname name_text, matviewowner name_text, tablespace name_text,
  hasindexes bool, ispopulated bool, definition text);
CREATE TABLE pg_catalog.pg_views (schemaname name_text, viewname name_text, viewowner name_text, definition text);
CREATE TABLE pg_catalog.pg_tables (
  schemaname name_text, tablename name_text, tableowner name_text, tablespace name_text,
  hasindexes bool, hasrules bool, hastriggers bool, rowsecurity bool);
CREATE TABLE pg_catalog.pg_user (
  usename name_text, usesysid oid_int, usecreatedb bool, usesuper bool, userepl bool,
  usebypassrls bool, passwd text, valuntil timestamptz_text, useconfig text_array);
-- pg_stat_activity: the open sessions, filled per statement by pgcatalog.c.
CREATE TABLE pg_catalog.pg_stat_activity (
  datid oid_int, datname name_text, pid int4, leader_pid int4, usesysid oid_int, usename name_text,
  application_name text, client_addr inet_text, client_hostname text, client_port int4,
  backend_start timestamptz_text, xact_start timestamptz_text, query_start timestamptz_text,
  state_change timestamptz_text, wait_event_type text, wait_event text, state text,
  backend_xid xid_int, backend_xmin xid_int, query_id int8, query text, backend_type text);

CREATE TABLE information_schema.schemata (
  catalog_name name_text, schema_name name_text, schema_owner name_text,
  default_character_set_catalog name_text, default_character_set_schema name_text,
  default_character_set_name name_text, sql_path varchar);
CREATE TABLE information_schema.tables (
  table_catalog name_text, table_schema name_text, table_name name_text, table_type varchar,
  self_referencing_column_name name_text, reference_generation varchar,
  user_defined_type_catalog name_text, user_defined_type_schema name_text,
  user_defined_type_name name_text, is_insertable_into varchar, is_typed varchar, commit_action varchar);
CREATE TABLE information_schema.views (
  table_catalog name_text, table_schema name_text, table_name name_text, view_definition varchar,
  check_option varchar, is_updatable varchar, is_insertable_into varchar,
  is_trigger_updatable varchar, is_trigger_deletable varchar, is_trigger_insertable_into varchar);
CREATE TABLE information_schema.columns (
  table_catalog name_text, table_schema name_text, table_name name_text, column_name name_text,
  ordinal_position int4, column_default varchar, is_nullable varchar, data_type varchar,
  character_maximum_length int4, character_octet_length int4, numeric_precision int4,
  numeric_precision_radix int4, numeric_scale int4, datetime_precision int4, interval_type varchar,
  interval_precision int4, character_set_catalog name_text, character_set_schema name_text,
  character_set_name name_text, collation_catalog name_text, collation_schema name_text,
  collation_name name_text, domain_catalog name_text, domain_schema name_text, domain_name name_text,
  udt_catalog name_text, udt_schema name_text, udt_name name_text, scope_catalog name_text,
  scope_schema name_text, scope_name name_text, maximum_cardinality int4, dtd_identifier name_text,
  is_self_referencing varchar, is_identity varchar, identity_generation varchar,
  identity_start varchar, identity_increment varchar, identity_maximum varchar,
  identity_minimum varchar, identity_cycle varchar, is_generated varchar,
  generation_expression varchar, is_updatable varchar);
CREATE TABLE information_schema.table_constraints (
  constraint_catalog name_text, constraint_schema name_text, constraint_name name_text,
  table_catalog name_text, table_schema name_text, table_name name_text, constraint_type varchar,
  is_deferrable varchar, initially_deferred varchar, enforced varchar, nulls_distinct varchar);
CREATE TABLE information_schema.key_column_usage (
  constraint_catalog name_text, constraint_schema name_text, constraint_name name_text,
  table_catalog name_text, table_schema name_text, table_name name_text, column_name name_text,
  ordinal_position int4, position_in_unique_constraint int4);

-- ---- derive: run after the weir objects are in pg_class / pg_attribute ----

INSERT INTO pg_catalog.pg_user
  SELECT rolname, oid, rolcreatedb, rolsuper, rolreplication, rolbypassrls, '********', rolvaliduntil, rolconfig
  FROM pg_catalog.pg_roles WHERE rolcanlogin;

INSERT INTO information_schema.schemata
  SELECT 'weir', nspname, pg_get_userbyid(nspowner), NULL, NULL, NULL, NULL FROM pg_catalog.pg_namespace;

INSERT INTO information_schema.tables
  SELECT 'weir', n.nspname, c.relname,
         CASE c.relkind WHEN 'r' THEN 'BASE TABLE' WHEN 'f' THEN 'FOREIGN' ELSE 'VIEW' END,
         NULL, NULL, NULL, NULL, NULL, CASE c.relkind WHEN 'r' THEN 'YES' ELSE 'NO' END, 'NO', NULL
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'v', 'm', 'f');

INSERT INTO information_schema.views
  SELECT 'weir', n.nspname, c.relname, v.definition, 'NONE', 'NO', 'NO', 'NO', 'NO', 'NO'
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN (SELECT schemaname, matviewname AS name, definition FROM pg_catalog.pg_matviews
                  UNION ALL SELECT schemaname, viewname, definition FROM pg_catalog.pg_views) v
         ON v.schemaname = n.nspname AND v.name = c.relname
  WHERE c.relkind IN ('v', 'm');

INSERT INTO information_schema.columns (table_catalog, table_schema, table_name, column_name,
    ordinal_position, is_nullable, data_type, numeric_precision, numeric_precision_radix, numeric_scale,
    datetime_precision, udt_catalog, udt_schema, udt_name, dtd_identifier, is_self_referencing,
    is_identity, is_generated, is_updatable)
  SELECT 'weir', n.nspname, c.relname, a.attname, a.attnum,
         CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END,
         CASE WHEN t.typcategory = 'A' THEN 'ARRAY' ELSE format_type(a.atttypid, -1) END,
         CASE a.atttypid WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53 END,
         CASE WHEN a.atttypid IN (21, 23, 20, 700, 701) THEN 2 END,
         CASE WHEN a.atttypid IN (21, 23, 20) THEN 0 END,
         CASE WHEN a.atttypid IN (1082) THEN 0 WHEN a.atttypid IN (1114, 1184, 1186) THEN 6 END,
         'weir', 'pg_catalog', t.typname, a.attnum, 'NO', 'NO', 'NEVER',
         CASE c.relkind WHEN 'r' THEN 'YES' ELSE 'NO' END
  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'm', 'f');
