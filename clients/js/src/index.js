// index.js — WorkManagerClient, the JavaScript client of workmanagerd
// (Node 18+, no dependency): the original clients' operations in camelCase
// (createWorker, loadCode, startWorker, stopWorker, deleteWorker,
// listWorkers, getWorkerHistory, recoverWorkers, the tags,
// createWorkerFromFile) and the daemon's own (invoke, publish, follow),
// over the public HTTP API only (workmanagerd(8)).
//
// Why this way: each operation is one request and one conversion of its
// answer (#call), over the transport of transport.js; every refusal is a
// typed error of errors.js carrying the API's error code.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { errorFrom } from './errors.js';
import { address, open, text, DEFAULT_SOCKET } from './transport.js';

export * from './errors.js';
export { DEFAULT_SOCKET };

export const STRUCTURED = 'application/cloudevents+json';
export const BATCH = 'application/cloudevents-batch+json';

// The MIME type of a code file by its extension, as `wmctl create` has it.
export const MIME_BY_EXTENSION = {
  '.py': 'text/x-python',
  '.cs': 'text/x-csharp',
  '.nupkg': 'application/x-dotnet-dll',
  '.dll': 'application/x-dotnet-dll',
  '.zip': 'application/x-native-dll',
};

// A structured CloudEvent: a random id unless given; extensions in ext.
// Bytes (a Uint8Array) travel as data_base64.
export function event(type, data, { source = 'workmanager-client', id, ...ext } = {}) {
  const ev = { specversion: '1.0', id: id ?? randomUUID(), source, type };
  if (data instanceof Uint8Array) ev.data_base64 = Buffer.from(data).toString('base64');
  else if (data !== undefined) ev.data = data;
  return Object.assign(ev, ext);
}

// The API's `code` object from the original's CodeSource: {content: bytes
// or base64 text} or {url, sha256 | contentSha256}, or bytes alone.
export function codeOf(src) {
  if (src instanceof Uint8Array) src = { content: src };
  if (typeof src !== 'object' || src === null)
    throw new TypeError('codeSource: {content} or {url}, or bytes');
  const out = { ...src };
  if (out.content instanceof Uint8Array) out.content = Buffer.from(out.content).toString('base64');
  if ('contentSha256' in out) { out.sha256 = out.contentSha256; delete out.contentSha256; }
  return out;
}

const seg = (s) => encodeURIComponent(String(s));
const worker = (id, ...rest) => ['/v1/workers', seg(id), ...rest].join('/');
const json = (t) => (t ? JSON.parse(t) : null);

export class WorkManagerClient {
  #opts;
  #addr;

  // {socket} (default: $WM_SOCKET or /run/workmanager/control.sock) or
  // {url: 'http://host:port', token | tokenFile} or an https url with
  // caFile (or ca), and certFile and keyFile (or cert and key) for a client
  // certificate; timeout in ms per call.
  constructor(opts = {}) {
    this.#opts = opts;
    this.timeout = opts.timeout ?? 30000;
  }

  async #address() {
    this.#addr ??= await address(this.#opts);
    return this.#addr;
  }

  async #call(method, path, body, contentType, convert = json) {
    const addr = await this.#address();
    const headers = { Host: 'localhost' };
    let data;
    if (body !== undefined) {
      data = Buffer.from(JSON.stringify(body));
      headers['Content-Type'] = contentType ?? 'application/json';
    }
    const signal = AbortSignal.timeout(this.timeout);
    const ans = await open(addr, method, path, { body: data, headers, signal });
    const t = await text(ans);
    if (ans.status >= 400) throw errorFrom(ans.status, ans.headers, t);
    return convert(t, ans.status);
  }

  // Creates a worker; its id.  opts: group, name, tenant, config, tags,
  // limits, start and any further member of the create's body.
  async createWorker(codeSource, mimeType, topic, opts = {}) {
    const body = { mime_type: mimeType, topic, code: codeOf(codeSource) };
    for (const [k, v] of Object.entries(opts)) if (v !== undefined && v !== '') body[k] = v;
    return this.#call('POST', '/v1/workers', body, undefined, (t) => JSON.parse(t).id);
  }

  // createWorker with the file's bytes; the MIME type by its extension
  // unless given.
  async createWorkerFromFile(path, mimeType, topic = 'default', opts = {}) {
    mimeType ??= MIME_BY_EXTENSION[extname(path).toLowerCase()];
    if (!mimeType)
      throw new TypeError(`${path}: no MIME type for '${extname(path)}'; give mimeType (one of ${[...new Set(Object.values(MIME_BY_EXTENSION))].join(', ')})`);
    return this.createWorker({ content: await readFile(path) }, mimeType, topic, opts);
  }

  loadCode(id, codeSource) { return this.#call('PUT', worker(id, 'code'), { code: codeOf(codeSource) }); }
  getWorker(id) { return this.#call('GET', worker(id)); }
  listWorkers() { return this.#call('GET', '/v1/workers', undefined, undefined, (t) => JSON.parse(t).workers); }
  deleteWorker(id) { return this.#call('DELETE', worker(id)); }
  startWorker(id) { return this.#call('POST', worker(id, 'start')); }
  stopWorker(id) { return this.#call('POST', worker(id, 'stop')); }
  suspendWorker(id) { return this.#call('POST', worker(id, 'suspend')); }
  resumeWorker(id) { return this.#call('POST', worker(id, 'resume')); }
  // The versions, oldest first.
  getWorkerHistory(id) { return this.#call('GET', worker(id, 'history'), undefined, undefined, (t) => JSON.parse(t).versions); }
  // Runs recovery; the number of workers recovered.
  recoverWorkers() { return this.#call('POST', '/v1/recover', undefined, undefined, (t) => JSON.parse(t).recovered); }
  getTags(id) { return this.#call('GET', worker(id, 'tags'), undefined, undefined, (t) => JSON.parse(t).tags); }
  // Replaces the whole map (an empty one clears it).
  setTags(id, tags) { return this.#call('PUT', worker(id, 'tags'), { tags }, undefined, (t) => JSON.parse(t).tags); }
  async getTag(id, key) { return (await this.getTags(id))[key] ?? null; }
  // Sets one tag, keeping the others (a read, then a replace).
  async setTag(id, key, value) { return this.setTags(id, { ...(await this.getTags(id)), [key]: value }); }

  // Processes the structured event on the worker now: null when it output
  // nothing, the output event, or an array of them; WorkerError when the
  // worker failed.
  invoke(id, ev) {
    return this.#call('POST', worker(id, 'invoke'), ev, STRUCTURED,
      (t, status) => (status === 204 || !t ? null : JSON.parse(t)));
  }

  // Publishes one event or an array of them (a batch, accepted whole or
  // not at all); their ids.
  publish(topic, events, { tenant } = {}) {
    const q = tenant ? `?tenant=${seg(tenant)}` : '';
    return this.#call('POST', `/v1/topics/${seg(topic)}/events${q}`, events,
      Array.isArray(events) ? BATCH : STRUCTURED, (t) => JSON.parse(t).ids);
  }

  // Follows a topic: an async iterable of the structured events published
  // from now on (topic '*': every topic); close() or break ends it.
  async follow(topic, { tenant } = {}) {
    const addr = await this.#address();
    const q = tenant ? `?tenant=${seg(tenant)}` : '';
    const ans = await open(addr, 'GET', `/v1/topics/${seg(topic)}/events${q}`,
      { headers: { Host: 'localhost', Accept: 'text/event-stream' } });
    if (ans.status >= 400) throw errorFrom(ans.status, ans.headers, await text(ans));
    return new Follow(ans);
  }
}

// The events of a followed topic (Server-Sent Events, data lines as JSON).
export class Follow {
  #ans;
  constructor(ans) { this.#ans = ans; }

  async *[Symbol.asyncIterator]() {
    const decoder = new TextDecoder();
    let buf = '';
    let data = [];
    try {
      for await (const chunk of this.#ans.chunks) {
        buf += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (line === '') {
            if (data.length) yield JSON.parse(data.join('\n'));
            data = [];
          } else if (line.startsWith('data:')) {
            data.push(line.slice(line[5] === ' ' ? 6 : 5));
          }
        }
      }
    } catch (e) {
      if (e.name !== 'AbortError' && e.code !== 'ECONNRESET' && e.code !== 'ERR_STREAM_PREMATURE_CLOSE') throw e;
    } finally {
      this.close();
    }
  }

  close() { this.#ans.close(); }
}
