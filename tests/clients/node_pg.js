// node_pg.js: node-postgres (the `pg` package) against weir: connect, a parameterized query
// ($1, extended protocol), a named prepared statement run twice, a plain query, results in binary
// (binary: true), and an error with its SQLSTATE. Prints one JSON line per check; clients_test.py compares them.
// usage: NODE_PATH=<dir>/node_modules node node_pg.js PORT
const { Client } = require('pg');

(async () => {
  const c = new Client({ host: '127.0.0.1', port: Number(process.argv[2]), user: 'weir', database: 'weir' });
  await c.connect();
  const out = (name, v) => console.log(JSON.stringify({ name, v }));
  const a = await c.query('SELECT k, total FROM mv WHERE k = $1', [2]);
  out('param', a.rows);
  const q = { name: 'by_total', text: 'SELECT count(*) AS n FROM mv WHERE total > $1' };
  out('prepared1', (await c.query({ ...q, values: [15] })).rows);
  out('prepared2', (await c.query({ ...q, values: [25] })).rows);
  out('plain', (await c.query('SELECT k, total FROM mv ORDER BY k')).rows);
  out('types', (await c.query('SELECT k, total FROM mv LIMIT 1')).fields.map((f) => f.dataTypeID));
  // binary: true asks for every result column in binary (Bind's result format 1). node-postgres
  // decodes each field as UTF-8 before its binary parser runs (brianc/node-postgres#3495), so
  // only values whose bytes are all ASCII survive: small integers and booleans.
  const b = await c.query({ text: 'SELECT k, total, total > 15 AS big FROM mv WHERE k = $1', values: [2], binary: true });
  out('binary', b.rows);
  out('binary_formats', b.fields.map((f) => f.format));
  try {
    await c.query('SELECT * FROM no_such_view WHERE k = $1', [1]);
    out('error', null);
  } catch (e) {
    out('error', e.code);
  }
  await c.end();
})().catch((e) => {
  console.error('node_pg.js:', e.message);
  process.exit(1);
});
