// A streaming consumer in another language: Node.js with only its built-in fetch, no packages.
//
// Opens GET /v1/groups/GROUP/stream, parses the Server-Sent Events, acks each batch through
// POST /v1/leases/{token}/ack and stops (aborting the request) once COUNT messages came. Checks
// on the way that every message id is a JSON string of decimal digits and every ack answers
// {"result": "acked"}. Prints "open" once the stream answered, then one JSON summary line.
//
// usage: node gateway_stream.mjs BASE_URL API_KEY GROUP COUNT

import assert from "node:assert/strict";

const [base, key, group, countText] = process.argv.slice(2);
const count = Number.parseInt(countText, 10);
const auth = { Authorization: `Bearer ${key}` };
const DIGITS = /^(0|[1-9][0-9]*)$/;

const values = [];
const events = {};
let acked = 0;
const controller = new AbortController();
const deadline = setTimeout(() => controller.abort(new Error("no stream end in 60 s")), 60000);

const response = await fetch(`${base}/v1/groups/${group}/stream?window=2`, {
  headers: { ...auth, Accept: "text/event-stream" },
  signal: controller.signal,
});
assert.equal(response.status, 200);
assert.match(response.headers.get("content-type"), /^text\/event-stream/);
console.log("open");

async function handle(event, data) {
  events[event] = (events[event] ?? 0) + 1;
  if (event !== "batch") return;
  assert.equal(typeof data.lease.token, "string");
  for (const m of data.messages) {
    assert.match(m.message_id, DIGITS, `message_id ${m.message_id}`);
    values.push(m.value);
  }
  const r = await fetch(`${base}/v1/leases/${data.lease.token}/ack`, {
    method: "POST",
    headers: auth,
  });
  assert.deepEqual(await r.json(), { result: "acked" });
  acked += 1;
}

const decoder = new TextDecoder();
let buffer = "";
try {
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) await handle(event, JSON.parse(data.join("\n")));
    }
    if (values.length >= count) break;
  }
} finally {
  clearTimeout(deadline);
  controller.abort();
}
console.log(JSON.stringify({ values, acked, events }));
