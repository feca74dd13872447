// errors.js — the typed errors of the client: every answer of the daemon
// other than 2xx is a WorkManagerError (or the subclass of its error code)
// carrying status, code (the API's, e.g. "not_found"), message and body
// (the error object); a daemon that cannot be reached is DaemonUnavailable.

export class WorkManagerError extends Error {
  constructor(status, code, message, body = {}) {
    super(`${code} (${status}): ${message}`);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.detail = message;
    this.body = body;
  }
}

export class InvalidArgumentError extends WorkManagerError {}
export class UnauthorizedError extends WorkManagerError {}
export class SecurityRejectedError extends WorkManagerError {}
export class NotFoundError extends WorkManagerError {}
export class ConflictError extends WorkManagerError {}
export class PayloadTooLargeError extends WorkManagerError {}
export class LoadFailedError extends WorkManagerError {}

// 422 worker_error: errorType and exceptionType as the daemon reported.
export class WorkerError extends WorkManagerError {
  get errorType() { return this.body.error_type; }
  get exceptionType() { return this.body.exception_type; }
}

// 503: subscriber_full, backlog_full, recovering, engine_unavailable;
// retryAfter is the seconds the daemon asked to wait, or null.
export class UnavailableError extends WorkManagerError {
  constructor(status, code, message, body, retryAfter = null) {
    super(status, code, message, body);
    this.retryAfter = retryAfter;
  }
}

export class DaemonUnavailable extends WorkManagerError {
  constructor(where, cause) {
    super(0, 'unavailable', `cannot reach workmanagerd at ${where}: ${cause.message ?? cause}`);
    this.cause = cause;
  }
}

const BY_CODE = {
  invalid_argument: InvalidArgumentError,
  invalid_json: InvalidArgumentError,
  unknown_mime_type: InvalidArgumentError,
  unauthorized: UnauthorizedError,
  security_rejected: SecurityRejectedError,
  not_found: NotFoundError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  worker_error: WorkerError,
  load_failed: LoadFailedError,
};

// The error of an answer of status >= 400 (headers: lower-case names).
export function errorFrom(status, headers, text) {
  let obj = {};
  try { obj = JSON.parse(text || '{}').error ?? {}; } catch { obj = {}; }
  const code = obj.code ?? `http_${status}`;
  const message = obj.message ?? text;
  if (status === 503) {
    const ra = Number.parseInt(headers['retry-after'] ?? '', 10);
    return new UnavailableError(status, code, message, obj, Number.isNaN(ra) ? null : ra);
  }
  const Type = BY_CODE[code] ?? WorkManagerError;
  return new Type(status, code, message, obj);
}
