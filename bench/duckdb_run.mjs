// bench/duckdb_run.mjs: one query of bench/side_by_side.py in DuckDB, load + query timed together.
//
//   node duckdb_run.mjs SPEC.json
//
// SPEC: {"tables": [[name, "CREATE TABLE ...", "file.csv"], ...], "query": "SELECT ...",
//        "out": "result.csv"}. A fresh in-memory database with one thread (SET threads = 1):
// the timed part loads each CSV (COPY, the types of the CREATE TABLE) and materializes the
// answer (CREATE TABLE r AS query), as a user computing it once would; then, untimed, writes r
// to "out" as CSV for the comparison. Prints one JSON line: wall and CPU seconds of the timed part
// (process.cpuUsage: user + system of this process, which with one thread is DuckDB's work), the
// rows of the answer and DuckDB's version. The package comes from bench/node_modules
// (bench/side_by_side.sh installs it from the npm registry).
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const inst = await DuckDBInstance.create(':memory:');
const c = await inst.connect();
await c.run('SET threads = 1');
const quote = (s) => "'" + s.replaceAll("'", "''") + "'";

const cpu0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
for (const [name, create, file] of spec.tables) {
    await c.run(create);
    await c.run(`COPY ${name} FROM ${quote(file)} (FORMAT csv, HEADER false)`);
}
await c.run(`CREATE TABLE r AS ${spec.query}`);
const t1 = process.hrtime.bigint();
const cpu = process.cpuUsage(cpu0);

const rows = await c.runAndReadAll('SELECT count(*) FROM r');
await c.run(`COPY r TO ${quote(spec.out)} (FORMAT csv, HEADER false)`);
const version = (await c.runAndReadAll('SELECT version()')).getRows()[0][0];
console.log(JSON.stringify({
    wall: Number(t1 - t0) / 1e9,
    cpu: (cpu.user + cpu.system) / 1e6,
    rows: Number(rows.getRows()[0][0]),
    version,
}));
