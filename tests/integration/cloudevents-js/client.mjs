// client.mjs — the official CloudEvents JavaScript SDK (package.json pins
// it) as an independent client of workmanagerd, for
// tests/integration/test_cloudevents_sdk.py.
//
// Why this way: the SDK makes every request message (HTTP.binary,
// HTTP.structured, and the batch format of its CloudEvent.toJSON()) and
// parses every reply (HTTP.toEvent, which validates the events), so a
// reply the SDK cannot read fails the test; only the transport is Node's
// http module, since the daemon listens on a unix socket.
//
// Input (stdin, JSON): {socket, path, mode: "binary" | "structured" |
// "batch", events: [attributes...]}; an attribute set may carry
// data_bytes (base64) for binary data, and headers: extra request headers.
// Output (stdout, JSON): {status, headers, events: [the SDK's parsed
// events, data as data, or data_bytes (base64) for a Buffer] | null,
// error: the SDK's parse error | null, body: the raw body as text}.
import http from "node:http";
import { CloudEvent, HTTP } from "cloudevents";

function makeEvent(attrs) {
  const a = { ...attrs };
  delete a.headers;
  if (a.data_bytes !== undefined) {
    a.data = Buffer.from(a.data_bytes, "base64");
    delete a.data_bytes;
  }
  return new CloudEvent(a);
}

function message(spec) {
  const events = spec.events.map(makeEvent);
  let msg;
  if (spec.mode === "binary") {
    msg = HTTP.binary(events[0]);
  } else if (spec.mode === "structured") {
    msg = HTTP.structured(events[0]);
  } else {
    msg = {
      headers: { "content-type": "application/cloudevents-batch+json" },
      body: JSON.stringify(events.map((e) => e.toJSON())),
    };
  }
  return { ...msg, headers: { ...msg.headers, ...(spec.events[0].headers || {}) } };
}

function send(spec, msg) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath: spec.socket, path: spec.path, method: "POST",
        headers: msg.headers },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ res, body: Buffer.concat(chunks) }));
      });
    req.on("error", reject);
    req.end(msg.body === undefined ? undefined : msg.body);
  });
}

function plain(e) {
  const o = { ...e.toJSON() };
  delete o.data;
  if (e.data_base64 !== undefined)
    o.data_bytes = e.data_base64;
  else if (Buffer.isBuffer(e.data) || e.data instanceof Uint8Array)
    o.data_bytes = Buffer.from(e.data).toString("base64");
  else if (e.data !== undefined)
    o.data = e.data;
  return o;
}

const spec = JSON.parse(await new Promise((resolve) => {
  let s = "";
  process.stdin.on("data", (c) => (s += c));
  process.stdin.on("end", () => resolve(s));
}));
const { res, body } = await send(spec, message(spec));
const ct = res.headers["content-type"] || "";
const textual = /json|^text\//.test(ct) || ct === "";
const out = { status: res.statusCode, headers: res.headers, events: null,
              error: null, body: body.toString("utf8") };
if (res.statusCode === 200) {
  try {
    const got = HTTP.toEvent({ headers: res.headers,
                               body: textual ? body.toString("utf8") : body });
    out.events = (Array.isArray(got) ? got : [got]).map(plain);
  } catch (err) {
    out.error = String(err && err.message ? err.message : err);
  }
}
process.stdout.write(JSON.stringify(out));
