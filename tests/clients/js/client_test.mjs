// client_test.mjs — the JavaScript client (clients/js) against a running
// daemon, driven by tests/integration/test_client_js.py:
//   node client_test.mjs CLIENT_DIR SOCKET URL TOKEN_FILE
// Each check is an assertion; the first that fails ends the run with
// status 1 and its message; all passed prints "ok".
import assert from 'node:assert/strict';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [dir, socket, url, tokenFile] = process.argv.slice(2);
const wm = await import(join(dir, 'src', 'index.js'));
const { WorkManagerClient, event } = wm;
const MIME = 'application/x-wm-test';

const c = new WorkManagerClient({ socket });

// The original's operations.
const tmp = await mkdtemp(join(tmpdir(), 'wmjs-'));
await writeFile(join(tmp, 'w.test'), 'echo\n');
const id = await c.createWorkerFromFile(join(tmp, 'w.test'), MIME, 'js-in',
  { name: 'js-life', tags: { a: '1' } });
try {
  assert.deepEqual((await c.listWorkers()).filter((w) => w.name === 'js-life').map((w) => w.id), [id]);
  await c.stopWorker('js-life');
  assert.equal((await c.getWorker(id)).status, 'stopped');
  await c.startWorker(id);
  assert.equal((await c.getWorker(id)).status, 'running');
  await c.loadCode(id, { content: Buffer.from('# v2\necho\n') });
  assert.deepEqual((await c.getWorkerHistory(id)).map((v) => v.version), [1, 2]);
  await c.setTag(id, 'b', '2');
  assert.deepEqual(await c.getTags(id), { a: '1', b: '2' });
  assert.equal(await c.getTag(id, 'missing'), null);
  await c.setTags(id, {});
  assert.deepEqual(await c.getTags(id), {});
  assert.equal(typeof await c.recoverWorkers(), 'number');

  // invoke: one output, several, none, a worker error.
  const out = await c.invoke(id, event('echo', { n: 1 }, { correlationid: 'c-1' }));
  assert.deepEqual([out.type, out.data, out.correlationid], ['echo.out', { n: 1 }, 'c-1']);
  assert.equal((await c.invoke(id, event('many:3'))).length, 3);
  assert.equal(await c.invoke(id, event('many:0')), null);
  await assert.rejects(c.invoke(id, event('fail')), (e) =>
    e instanceof wm.WorkerError && e.status === 422 && e.code === 'worker_error'
    && e.exceptionType === 'TestError');

  // publish and follow.
  const stream = await c.follow('js-in');
  assert.deepEqual(await c.publish('js-in', [event('a', undefined, { id: 'j1' }), event('b', undefined, { id: 'j2' })]), ['j1', 'j2']);
  const got = [];
  for await (const ev of stream) {
    got.push(ev.id);
    if (got.length === 2) break;
  }
  assert.deepEqual(got, ['j1', 'j2']);

  await assert.rejects(c.createWorker({ content: 'ZWNobw==' }, MIME, 't', { colour: 'red' }),
    (e) => e instanceof wm.InvalidArgumentError && e.body.unknown_members.includes('colour'));
  await assert.rejects(c.createWorkerFromFile(join(tmp, 'w.test')), /no MIME type for '.test'/);
} finally {
  await c.deleteWorker(id);
}
await assert.rejects(c.getWorker(id), (e) => e instanceof wm.NotFoundError && e.code === 'not_found' && e.status === 404);

// TCP with the token (fetch), a wrong token, an unreachable daemon.
const tcp = new WorkManagerClient({ url, tokenFile });
assert.ok(Array.isArray(await tcp.listWorkers()));
const fid = await tcp.createWorker(Buffer.from('echo'), MIME, 'js-tcp', { name: 'js-tcp' });
const s2 = await tcp.follow('js-tcp');
await tcp.publish('js-tcp', event('x', { k: 1 }, { id: 't1' }));
for await (const ev of s2) { assert.equal(ev.id, 't1'); break; }
await tcp.deleteWorker(fid);
await assert.rejects(new WorkManagerClient({ url, token: 'not-the-token-at-all' }).listWorkers(),
  (e) => e instanceof wm.UnauthorizedError && e.code === 'unauthorized' && e.status === 401);
await assert.rejects(new WorkManagerClient({ socket: join(tmp, 'nothing.sock') }).listWorkers(),
  (e) => e instanceof wm.DaemonUnavailable && e.code === 'unavailable' && /nothing\.sock/.test(e.message));
console.log('ok');
