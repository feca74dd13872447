// transport.js — one HTTP exchange with workmanagerd: over the control
// socket with node:http (fetch cannot reach a unix socket without a
// dependency), over http:// with fetch and the bearer token, over https://
// with node:https (Node's fetch cannot be given a CA or a client
// certificate without undici's options).  All give the same shape, so the
// client above knows no transport:
//   open(method, path, {body, headers}) -> {status, headers, chunks, close}
// with headers' names in lower case and chunks an async iterable of the
// body's bytes.  A failure to connect (a server certificate the CA does not
// sign included) is a DaemonUnavailable.
import http from 'node:http';
import https from 'node:https';
import { readFile } from 'node:fs/promises';
import { DaemonUnavailable } from './errors.js';

export const DEFAULT_SOCKET = '/run/workmanager/control.sock';

// The TLS options of an https:// address: ca (PEM text or bytes) or
// caFile ($WM_CA_FILE; Node's own CAs without either), and the client
// certificate cert/certFile with key/keyFile for a daemon that asks for one.
async function tlsOptions({ ca, caFile, cert, certFile, key, keyFile }) {
  caFile ??= ca === undefined ? process.env.WM_CA_FILE : undefined;
  const tls = {};
  if (ca !== undefined || caFile) tls.ca = ca ?? await readFile(caFile);
  if (cert !== undefined || certFile) tls.cert = cert ?? await readFile(certFile);
  if (key !== undefined || keyFile) tls.key = key ?? await readFile(keyFile);
  if (!tls.cert !== !tls.key)
    throw new TypeError('a client certificate takes cert (certFile) and key (keyFile) together');
  return tls;
}

// {socket} or {url, token}: without either, $WM_URL (with $WM_TOKEN_FILE's
// token), else $WM_SOCKET, else DEFAULT_SOCKET.  An https url takes the
// TLS options of tlsOptions().
export async function address(opts = {}) {
  let { socket, url, token, tokenFile } = opts;
  if (socket && url) throw new TypeError('give socket or url, not both');
  if (!socket && !url) {
    url = process.env.WM_URL;
    if (!url) socket = process.env.WM_SOCKET || DEFAULT_SOCKET;
  }
  if (url) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new TypeError(`url ${url}: expected http://host:port or https://host:port`);
    tokenFile ??= token === undefined ? process.env.WM_TOKEN_FILE : undefined;
    if (token === undefined && tokenFile)
      token = (await readFile(tokenFile, 'utf8')).replace(/[\r\n ]+$/, '');
    const addr = { url: u.origin, token, where: u.origin };
    if (u.protocol === 'http:' &&
        ['ca', 'caFile', 'cert', 'certFile', 'key', 'keyFile'].some((k) => opts[k] !== undefined))
      throw new TypeError('ca, caFile, cert, certFile, key and keyFile are for an https:// url');
    if (u.protocol === 'https:') {
      addr.https = { host: u.hostname.replace(/^\[|\]$/g, ''),
        port: u.port || 443, ...(await tlsOptions(opts)) };
    }
    return addr;
  }
  return { socket, where: socket };
}

// Over node:http to the control socket, or node:https to an https url.
function viaNode(addr, method, path, body, headers, signal) {
  return new Promise((resolve, reject) => {
    headers = { ...headers, 'Content-Length': body ? body.length : 0 };
    if (addr.https && addr.token) headers.Authorization = `Bearer ${addr.token}`;
    const req = addr.https
      ? https.request({ ...addr.https, method, path, headers, signal })
      : http.request({ socketPath: addr.socket, method, path, headers, signal });
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
  return (addr.socket || addr.https ? viaNode : viaFetch)(addr, method, path, body, headers, signal);
}

// The whole body of an answer as text.
export async function text(answer) {
  const parts = [];
  for await (const c of answer.chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString('utf8');
}
