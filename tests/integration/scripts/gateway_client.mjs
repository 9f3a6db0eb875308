// A gateway client in another language: Node.js with only its built-in fetch, no packages.
//
// Produces COUNT messages (single and batch routes), fetches and acks them, resets the group to
// the committed offsets the lag report gave (sent back as the strings it got), and sends a few
// bad requests. Checks on the way that every id and offset is a JSON string of decimal digits
// that round-trips exactly (a JSON number would be rounded to a double here), and that every
// error body parses as {"error": {code, message, retriable}}. Prints one JSON summary line for
// the Python test to check again; exits non-zero on the first failed check.
//
// usage: node gateway_client.mjs BASE_URL ADMIN_KEY TOPIC GROUP COUNT

import assert from "node:assert/strict";

const [base, adminKey, topic, group, countText] = process.argv.slice(2);
const count = Number.parseInt(countText, 10);
const auth = { Authorization: `Bearer ${adminKey}` };
const DIGITS = /^(0|[1-9][0-9]*)$/;
const TWO_53 = 2n ** 53n;

async function call(method, path, body, headers = auth) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const response = await fetch(base + path, init);
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${method} ${path} -> ${response.status}: not JSON: ${text.slice(0, 200)}`);
  }
  return { status: response.status, json, type: response.headers.get("content-type") };
}

function int64Text(value, what) {
  assert.equal(typeof value, "string", `${what} is ${typeof value}, not a string`);
  assert.match(value, DIGITS, `${what} ${value} is not decimal digits`);
  return BigInt(value);
}

// 1. produce: one by one, then a batch
const produced = new Map(); // value -> message_id text
for (let i = 0; i < count / 2; i++) {
  const value = `node-${i}`;
  const r = await call("POST", `/v1/topics/${topic}/messages`, { value });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  int64Text(r.json.message_id, "message_id");
  int64Text(r.json.append_offset, "append_offset");
  assert.equal(typeof r.json.append_time, "number");
  produced.set(value, r.json.message_id);
}
const rest = [];
for (let i = count / 2; i < count; i++) rest.push({ value: `node-${i}` });
const batch = await call("POST", `/v1/topics/${topic}/messages/batch`, { messages: rest });
assert.equal(batch.status, 200, JSON.stringify(batch.json));
for (const item of batch.json.results) {
  int64Text(item.message_id, "batch message_id");
  int64Text(item.append_offset, "batch append_offset");
  produced.set(rest[item.index].value, item.message_id);
}

// 2. fetch and ack until every message came back; ids must match what produce said exactly
const delivered = new Map();
let acked = 0;
const deadline = Date.now() + 90_000;
while (delivered.size < count) {
  assert.ok(Date.now() < deadline, `only ${delivered.size} of ${count} delivered`);
  const r = await call("POST", `/v1/groups/${group}/fetch`, { wait_ms: 1000 });
  if (r.status === 503 && r.json.error.retriable) continue; // a partition briefly refused
  assert.equal(r.status, 200, JSON.stringify(r.json));
  if (r.json.status !== "ok") continue;
  for (const m of r.json.messages) {
    int64Text(m.message_id, "fetched message_id");
    delivered.set(m.value, m.message_id);
  }
  const ack = await call("POST", `/v1/leases/${r.json.lease.token}/ack`);
  assert.equal(ack.status, 200, JSON.stringify(ack.json));
  assert.equal(ack.json.result, "acked");
  acked += 1;
}
for (const [value, id] of produced) {
  assert.equal(delivered.get(value), id, `${value}: produced as ${id}, fetched as ${delivered.get(value)}`);
}
const ids = [...produced.values()].map((id) => BigInt(id));
const beyond = ids.filter((id) => id > TWO_53).length;
// What JSON numbers would have done to these ids here: read (JSON.parse) and written back
// (JSON.stringify, e.g. in an ack or a log), an id comes back as other digits.
const changedAsNumbers = [...produced.values()].filter(
  (id) => JSON.stringify(JSON.parse(id)) !== id,
).length;
const collisions = ids.length - new Set(ids.map((id) => JSON.parse(String(id)))).size;

// 3. offsets: the lag report's strings go back into a reset unchanged
const lag = await call("GET", `/v1/groups/${group}/lag`);
assert.equal(lag.status, 200, JSON.stringify(lag.json));
int64Text(lag.json.total_lag_bytes, "total_lag_bytes");
const to = {};
for (const p of lag.json.partitions) {
  if (p.committed === null) continue;
  int64Text(p.committed, "committed");
  int64Text(p.max, "max");
  int64Text(p.lag_bytes, "lag_bytes");
  to[p.partition_key] = p.committed;
}
assert.ok(Object.keys(to).length > 0, "no committed partition in the lag report");
const reset = await call("POST", `/v1/groups/${group}/offsets/reset`, { to });
assert.equal(reset.status, 200, JSON.stringify(reset.json));
for (const p of reset.json.partitions) {
  int64Text(p.old, "reset old");
  assert.equal(p.new, to[p.partition_key], `reset of ${p.partition_key}`);
  assert.equal(p.old, to[p.partition_key], `nothing moved at ${p.partition_key}`);
}

// 4. every error body parses and has the documented shape
const mistakes = [
  ["POST", `/v1/groups/${group}/fetch`, "{not json", auth, 422],
  ["POST", `/v1/groups/${group}/fetch`, { wait_ms: "soon" }, auth, 422],
  ["POST", `/v1/groups/${group}/offsets/reset`, { to: { "1:x:0": "1e3" } }, auth, 422],
  ["POST", "/v1/groups/no-such-group/fetch", {}, auth, 404],
  ["POST", "/v1/leases/t1.forged/ack", undefined, auth, 400],
  ["POST", `/v1/groups/${group}/fetch`, {}, {}, 401],
  ["GET", "/v1/no/such/route", undefined, auth, 404],
];
const errors = [];
for (const [method, path, body, headers, status] of mistakes) {
  const r = await call(method, path, body, headers);
  assert.equal(r.status, status, `${method} ${path}: ${JSON.stringify(r.json)}`);
  assert.match(r.type, /^application\/json/);
  assert.deepEqual(Object.keys(r.json), ["error"]);
  assert.deepEqual(Object.keys(r.json.error).sort(), ["code", "message", "retriable"]);
  assert.equal(typeof r.json.error.code, "string");
  assert.equal(typeof r.json.error.message, "string");
  assert.equal(typeof r.json.error.retriable, "boolean");
  errors.push([status, r.json.error.code]);
}

console.log(
  JSON.stringify({
    produced: Object.fromEntries(produced),
    delivered: Object.fromEntries(delivered),
    acked,
    beyond_2_53: beyond,
    changed_as_numbers: changedAsNumbers,
    collisions,
    reset_to: to,
    errors,
  }),
);
