// client_tls_test.mjs — the JavaScript client (clients/js) over https://,
// driven by tests/integration/test_client_js.py:
//   node client_tls_test.mjs CLIENT_DIR URL TOKEN CA CERT KEY OTHER_CA
// A create and an invoke with the daemon's CA and a client certificate;
// then a client whose CA did not sign the daemon's certificate refuses it.
// The first failed assertion ends the run with status 1; all passed
// prints "ok".
import assert from 'node:assert/strict';
import { join } from 'node:path';

const [dir, url, token, caFile, certFile, keyFile, otherCa] = process.argv.slice(2);
const wm = await import(join(dir, 'src', 'index.js'));
const { WorkManagerClient, event } = wm;
const MIME = 'application/x-wm-test';

const c = new WorkManagerClient({ url, token, caFile, certFile, keyFile });
const id = await c.createWorker({ content: Buffer.from('echo') }, MIME, 'js-tls', { name: 'js-tls' });
try {
  const out = await c.invoke(id, event('echo', { n: 1 }));
  assert.deepEqual(out.data, { n: 1 });
} finally {
  await c.deleteWorker(id);
}

const stranger = new WorkManagerClient({ url, token, caFile: otherCa, certFile, keyFile });
await assert.rejects(stranger.listWorkers(), (e) =>
  e instanceof wm.DaemonUnavailable && e.code === 'unavailable' &&
  /CERT|SIGNATURE/.test(e.cause?.code ?? ''));
await assert.rejects(
  new WorkManagerClient({ url: url.replace('https:', 'http:'), caFile }).listWorkers(),
  /for an https:\/\/ url/);
console.log('ok');
