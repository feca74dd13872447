// transport.js — one HTTP exchange with workmanagerd: over the control
// socket with node:http (fetch cannot reach a unix socket without a
// dependency), over TCP with fetch and the bearer token.  Both give the
// same shape, so the client above knows no transport:
//   open(method, path, {body, headers}) -> {status, headers, chunks, close}
// with headers' names in lower case and chunks an async iterable of the
// body's bytes.  A failure to connect is a DaemonUnavailable.
import http from 'node:http';
import { DaemonUnavailable } from './errors.js';

export const DEFAULT_SOCKET = '/run/workmanager/control.sock';

// {socket} or {url, token}: without either, $WM_URL (with $WM_TOKEN_FILE's
// token), else $WM_SOCKET, else DEFAULT_SOCKET.
export async function address({ socket, url, token, tokenFile } = {}) {
  if (socket && url) throw new TypeError('give socket or url, not both');
  if (!socket && !url) {
    url = process.env.WM_URL;
    if (!url) socket = process.env.WM_SOCKET || DEFAULT_SOCKET;
  }
  if (url) {
    const u = new URL(url);
    if (u.protocol !== 'http:')
      throw new TypeError(`url ${url}: expected http://host:port (https once the daemon serves TLS)`);
    tokenFile ??= token === undefined ? process.env.WM_TOKEN_FILE : undefined;
    if (token === undefined && tokenFile) {
      const { readFile } = await import('node:fs/promises');
      token = (await readFile(tokenFile, 'utf8')).replace(/[\r\n ]+$/, '');
    }
    return { url: u.origin, token, where: u.origin };
  }
  return { socket, where: socket };
}

function viaSocket(addr, method, path, body, headers, signal) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: addr.socket, method, path,
      headers: { ...headers, 'Content-Length': body ? body.length : 0 }, signal });
    req.on('error', (e) => reject(e.name === 'AbortError' ? e : new DaemonUnavailable(addr.where, e)));
    req.on('response', (res) => resolve({
      status: res.statusCode, headers: res.headers, chunks: res,
      close: () => res.destroy() }));
    req.end(body);
  });
}

async function viaFetch(addr, method, path, body, headers, signal) {
  const ctl = new AbortController();
  signal?.addEventListener('abort', () => ctl.abort());
  if (addr.token) headers = { ...headers, Authorization: `Bearer ${addr.token}` };
  let res;
  try {
    res = await fetch(addr.url + path, { method, headers, body, signal: ctl.signal });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new DaemonUnavailable(addr.where, e.cause ?? e);
  }
  const hdrs = {};
  res.headers.forEach((v, k) => { hdrs[k] = v; });
  const chunks = res.body ?? (async function* () {})();
  return { status: res.status, headers: hdrs, chunks, close: () => ctl.abort() };
}

export function open(addr, method, path, { body, headers = {}, signal } = {}) {
  return (addr.socket ? viaSocket : viaFetch)(addr, method, path, body, headers, signal);
}

// The whole body of an answer as text.
export async function text(answer) {
  const parts = [];
  for await (const c of answer.chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString('utf8');
}
