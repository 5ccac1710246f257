// get.mjs measures LangGraph's own PostgresStore get (the JS package, not a
// copy of its SQL) at a given concurrency on a given database: the
// reference issue 9 names for contextd's item GET ("≥ 0.7 × LangGraph's
// PostgresStore get on the same database"). `contextd bench --only get`
// measures a stricter floor in-process (LangGraph's SQL through pgx); this
// is the library itself, with its pool, its query and its result mapping.
//
// It works in a schema of its own (langgraph_ref), which it creates, fills
// with --items items of ~500 B (the size of the bench corpus's items), and
// drops at the end, so it leaves the database as it found it.
//
//   node get.mjs --database-url postgres://postgres@127.0.0.1:5432/benchw \
//       [--duration 20] [--clients 8] [--items 21000] [--json]
//
// `make bench-get-reference` runs it in turns with `contextd bench --only
// get`, because on a shared two-core machine only figures taken close
// together compare.
import { PostgresStore } from "@langchain/langgraph-checkpoint-postgres/store";

function flag(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = process.argv[i + 1];
  if (v === undefined || v.startsWith("--")) throw new Error(`--${name} needs a value`);
  return v;
}

const url = flag("database-url", process.env.DATABASE_URL);
if (!url) {
  console.error("get.mjs: give --database-url (or DATABASE_URL): the database contextd bench --only get used");
  process.exit(2);
}
const duration = Number(flag("duration", "20"));
const clients = Number(flag("clients", "8"));
const items = Number(flag("items", "21000"));
const asJSON = process.argv.includes("--json");
for (const [n, v] of [["duration", duration], ["clients", clients], ["items", items]]) {
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${n} must be a positive number`);
}

const SCHEMA = "langgraph_ref";
const NS = ["bench", "items"];
const keyOf = (i) => "item-" + String(i).padStart(6, "0");
const filler = ("Retries back off exponentially and give up after the deadline the caller set; " +
  "the client keeps one connection per host and reuses it while it is healthy. ").repeat(4).slice(0, 480);

// connectionOptions as an object goes to new pg.Pool as it is: one
// connection per client, as contextd's pool has at least as many.
const store = new PostgresStore({ connectionOptions: { connectionString: url, max: clients }, schema: SCHEMA });
const pool = store.core.pool;

try {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await pool.query(`CREATE SCHEMA ${SCHEMA}`);
  await store.setup();

  const chunks = [];
  for (let s = 0; s < items; s += 500) {
    const ops = [];
    for (let i = s; i < Math.min(s + 500, items); i++) {
      ops.push({ namespace: NS, key: keyOf(i), value: { kind: "knowledge", title: `Item ${i}`, content: `${i} ${filler}`, priority: 50 } });
    }
    chunks.push(ops);
  }
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < chunks.length) await store.batch(chunks[next++]);
  }));
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.store`);
  if (rows[0].n !== items) throw new Error(`seeded ${rows[0].n} items, not ${items}`);
  await pool.query(`VACUUM ANALYZE ${SCHEMA}.store`);

  const run = async (seconds, lat) => {
    const end = performance.now() + seconds * 1000;
    let ops = 0, errors = 0;
    await Promise.all(Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        const k = keyOf(Math.floor(Math.random() * items));
        const t = performance.now();
        try {
          const item = await store.get(NS, k);
          if (item?.key === k) ops++;
          else errors++;
        } catch {
          errors++;
        }
        lat?.push(performance.now() - t);
      }
    }));
    return { ops, errors };
  };

  await run(2); // warm-up: connections open, plans cached
  const lat = [];
  const t0 = performance.now();
  const r = await run(duration, lat);
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const pct = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  const out = {
    operation: "langgraph PostgresStore get",
    clients, items, ops: r.ops, errors: r.errors, seconds: secs,
    ops_per_sec: r.ops / secs, p50_ms: pct(0.5), p99_ms: pct(0.99),
  };
  if (asJSON) console.log(JSON.stringify(out));
  else {
    console.log(`langgraph get   ${String(r.ops).padStart(8)} ${out.ops_per_sec.toFixed(1).padStart(9)}   p50 ${out.p50_ms.toFixed(2)} ms  p99 ${out.p99_ms.toFixed(2)} ms  errors ${r.errors}`);
    console.log(`note            @langchain/langgraph-checkpoint-postgres PostgresStore.get, ${clients} clients on ${clients} pooled connections, ${items} items in schema ${SCHEMA} (dropped at the end)`);
  }
  if (r.errors > 0) process.exitCode = 1;
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
  await store.stop();
}
