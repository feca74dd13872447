"""workmanager._core — what the synchronous and the asyncio clients share:
where the daemon is, the typed errors, and every operation as a request
and the conversion of its answer.

Why this way: an operation is written once, in Operations, as "this
request, then this conversion"; Client._call performs the request and
returns the converted value, AsyncClient._call returns a coroutine that
does.  So the two clients cannot drift apart, and neither knows a route.

Invariants: only the public HTTP API (workmanagerd(8), Routes) is used;
every answer other than 2xx becomes a WorkManagerError (or the subclass
of its error code) carrying the status, the code and the message; a
daemon that cannot be reached is a DaemonUnavailable.
"""

import base64
import json
import os
import ssl
import uuid
from pathlib import Path
from urllib.parse import quote, urlsplit

DEFAULT_SOCKET = "/run/workmanager/control.sock"
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"

# The MIME type of a code file by its extension, as `wmctl create` has it.
MIME_BY_EXTENSION = {
    ".py": "text/x-python",
    ".cs": "text/x-csharp",
    ".nupkg": "application/x-dotnet-dll",
    ".dll": "application/x-dotnet-dll",
    ".zip": "application/x-native-dll",
}


# ---- errors ---------------------------------------------------------------

class WorkManagerError(Exception):
    """An answer of the daemon other than 2xx: status (the HTTP status),
    code (the API's error code, e.g. "not_found"), message (the daemon's
    text) and body (the whole error object)."""

    def __init__(self, status, code, message, body=None):
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}


class InvalidArgumentError(WorkManagerError):
    """400 invalid_argument, invalid_json, unknown_mime_type."""


class UnauthorizedError(WorkManagerError):
    """401: over TCP, no token or not the daemon's token_file."""


class SecurityRejectedError(WorkManagerError):
    """403 security_rejected."""


class NotFoundError(WorkManagerError):
    """404 not_found: no such worker (or route)."""


class ConflictError(WorkManagerError):
    """409 conflict: e.g. a name taken, a worker not running."""


class PayloadTooLargeError(WorkManagerError):
    """413 payload_too_large."""


class WorkerError(WorkManagerError):
    """422 worker_error: the worker failed on the event; error_type and
    exception_type as the daemon reported them."""

    @property
    def error_type(self):
        return self.body.get("error_type")

    @property
    def exception_type(self):
        return self.body.get("exception_type")


class LoadFailedError(WorkManagerError):
    """422 load_failed: the host could not load the code."""


class UnavailableError(WorkManagerError):
    """503: subscriber_full, backlog_full, recovering, engine_unavailable;
    retry_after is the seconds the daemon asked to wait, or None."""

    def __init__(self, status, code, message, body=None, retry_after=None):
        super().__init__(status, code, message, body)
        self.retry_after = retry_after


class DaemonUnavailable(WorkManagerError):
    """The daemon could not be reached (no socket, refused, reset)."""

    def __init__(self, where, cause):
        super().__init__(0, "unavailable",
                         f"cannot reach workmanagerd at {where}: {cause}")


_BY_CODE = {
    "invalid_argument": InvalidArgumentError,
    "invalid_json": InvalidArgumentError,
    "unknown_mime_type": InvalidArgumentError,
    "unauthorized": UnauthorizedError,
    "security_rejected": SecurityRejectedError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "worker_error": WorkerError,
    "load_failed": LoadFailedError,
}


def error_from(status, headers, body):
    """The exception for an answer of status >= 400."""
    try:
        obj = json.loads(body or b"{}").get("error") or {}
    except (ValueError, AttributeError):
        obj = {}
    code = obj.get("code") or f"http_{status}"
    message = obj.get("message") or (body or b"").decode("utf-8", "replace")
    if status == 503 or code in ("subscriber_full", "backlog_full",
                                 "recovering", "engine_unavailable"):
        ra = headers.get("retry-after")
        return UnavailableError(status, code, message, obj,
                                int(ra) if ra and ra.isdigit() else None)
    return _BY_CODE.get(code, WorkManagerError)(status, code, message, obj)


# ---- where the daemon is --------------------------------------------------

def tls_context(ca_file=None, cert_file=None, key_file=None):
    """The TLS context of an https:// address: the system's CAs, or only
    those of ca_file (PEM); with cert_file (and key_file, when the key is
    not in cert_file) the client certificate the daemon may ask for.  The
    server's name and certificate are always verified."""
    ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file
                                     else None)
    if cert_file:
        ctx.load_cert_chain(str(cert_file),
                            str(key_file) if key_file else None)
    elif key_file:
        raise ValueError("key_file needs cert_file")
    return ctx


class Address:
    """socket: the control socket's path, or url: http://host:port or
    https://host:port with a bearer token (token, or the text of
    token_file).  Without either: $WM_URL (with $WM_TOKEN_FILE), else
    $WM_SOCKET, else DEFAULT_SOCKET.  An https URL verifies the daemon's
    certificate against ca_file ($WM_CA_FILE; the system's CAs without
    one) or uses ssl_context as given; cert_file and key_file are the
    client certificate for tls_client_cert = optional or required."""

    def __init__(self, socket=None, url=None, token=None, token_file=None,
                 ca_file=None, cert_file=None, key_file=None,
                 ssl_context=None):
        if socket and url:
            raise ValueError("give socket or url, not both")
        if not socket and not url:
            url = os.environ.get("WM_URL")
            socket = None if url else os.environ.get("WM_SOCKET",
                                                     DEFAULT_SOCKET)
        self.socket = str(socket) if socket else None
        self.host = self.port = self.ssl = None
        self.scheme = "http"
        if url:
            u = urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"url {url!r}: expected http://host:port "
                                 "or https://host:port")
            self.scheme = u.scheme
            self.host = u.hostname
            self.port = u.port or (443 if u.scheme == "https" else 80)
        if self.scheme == "https":
            self.ssl = ssl_context or tls_context(
                ca_file or os.environ.get("WM_CA_FILE"), cert_file,
                key_file)
        elif ca_file or cert_file or key_file or ssl_context:
            raise ValueError("ca_file, cert_file, key_file and ssl_context "
                             "are for an https:// url")
        token_file = token_file or (os.environ.get("WM_TOKEN_FILE")
                                    if url and token is None else None)
        if token is None and token_file:
            token = Path(token_file).read_text().rstrip("\r\n ")
        self.token = token

    def __str__(self):
        return self.socket or f"{self.scheme}://{self.host}:{self.port}"

    def headers(self, extra=None):
        h = {"Host": "localhost" if self.socket
             else f"{self.host}:{self.port}"}
        if self.token and not self.socket:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h


# ---- requests -------------------------------------------------------------

class Request:
    """One HTTP request and how its answer becomes the operation's value:
    convert(status, headers, body) -> value, called for 2xx only.  A
    convert that returns another Request chains it (set_tag reads, then
    writes)."""

    def __init__(self, method, path, body=None, content_type=None,
                 convert=None):
        self.method = method
        self.path = path
        self.headers = {}
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
            content_type = content_type or "application/json"
        self.body = body
        if content_type:
            self.headers["Content-Type"] = content_type
        self.convert = convert or _json


def _json(status, headers, body):
    return json.loads(body) if body else None


def _member(name):
    return lambda status, headers, body: json.loads(body)[name]


def _events(status, headers, body):
    """An invoke's outcome: None (204), one event, or a list of them."""
    if status == 204 or not body:
        return None
    return json.loads(body)


def _path(*segments):
    return "/v1/" + "/".join(quote(str(s), safe="") for s in segments)


def code_of(code_source):
    """The API's `code` object from the original's CodeSource dict:
    {"content": bytes or base64 text} or {"url": ..., "sha256" or
    "contentSha256": hex}."""
    if isinstance(code_source, (bytes, bytearray)):
        return {"content": base64.b64encode(code_source).decode()}
    if not isinstance(code_source, dict):
        raise TypeError("code_source: a dict with content or url, or bytes")
    src = dict(code_source)
    if isinstance(src.get("content"), (bytes, bytearray)):
        src["content"] = base64.b64encode(src["content"]).decode()
    for alias in ("contentSha256", "content_sha256"):
        if alias in src:
            src["sha256"] = src.pop(alias)
    return src


def event(type_, data=None, source="workmanager-client", id_=None, **ext):
    """A structured CloudEvent dict: a random id unless id_ is given; ext
    are its extensions (e.g. correlationid="...")."""
    ev = {"specversion": "1.0", "id": id_ or str(uuid.uuid4()),
          "source": source, "type": type_}
    if isinstance(data, (bytes, bytearray)):
        ev["data_base64"] = base64.b64encode(data).decode()
    elif data is not None:
        ev["data"] = data
    ev.update(ext)
    return ev


class Operations:
    """The operations, each one request; subclasses define _call(req).
    Both clients take the same arguments: where the daemon is (Address)
    and each call's timeout in seconds."""

    def __init__(self, socket=None, url=None, token=None, token_file=None,
                 timeout=30, ca_file=None, cert_file=None, key_file=None,
                 ssl_context=None):
        self.address = Address(socket, url, token, token_file, ca_file,
                               cert_file, key_file, ssl_context)
        self.timeout = timeout

    def create_worker(self, code_source, mime_type, topic, group=None,
                      *, name=None, tenant=None, config=None, tags=None,
                      limits=None, start=None, **fields):
        """Creates a worker; its id.  fields are further members of the
        create's body (isolation, idle_timeout_s)."""
        body = {"mime_type": mime_type, "topic": topic,
                "code": code_of(code_source)}
        for k, v in (("group", group), ("name", name), ("tenant", tenant),
                     ("config", config), ("tags", tags), ("limits", limits),
                     ("start", start)):
            if v not in (None, ""):
                body[k] = v
        body.update(fields)
        return self._call(Request("POST", "/v1/workers", body,
                                  convert=_member("id")))

    def create_worker_from_file(self, path, mime_type=None, topic="default",
                                group=None, **kw):
        """create_worker with the file's bytes as content; the MIME type by
        its extension (MIME_BY_EXTENSION) unless given."""
        p = Path(path)
        if mime_type is None:
            mime_type = MIME_BY_EXTENSION.get(p.suffix.lower())
            if mime_type is None:
                raise ValueError(f"{p}: no MIME type for {p.suffix!r}; give "
                                 f"mime_type (one of "
                                 f"{', '.join(sorted(set(MIME_BY_EXTENSION.values())))})")
        return self.create_worker({"content": p.read_bytes()}, mime_type,
                                  topic, group, **kw)

    def load_code(self, worker, code_source):
        """Hot reload: the worker's new version (the worker object)."""
        return self._call(Request("PUT", _path("workers", worker, "code"),
                                  {"code": code_of(code_source)}))

    def get_worker(self, worker):
        return self._call(Request("GET", _path("workers", worker)))

    def list_workers(self):
        return self._call(Request("GET", "/v1/workers",
                                  convert=_member("workers")))

    def delete_worker(self, worker):
        return self._call(Request("DELETE", _path("workers", worker)))

    def start_worker(self, worker):
        return self._call(Request("POST", _path("workers", worker, "start")))

    def stop_worker(self, worker):
        return self._call(Request("POST", _path("workers", worker, "stop")))

    def suspend_worker(self, worker):
        return self._call(Request("POST",
                                  _path("workers", worker, "suspend")))

    def resume_worker(self, worker):
        return self._call(Request("POST", _path("workers", worker, "resume")))

    def get_worker_history(self, worker):
        """The versions, oldest first."""
        return self._call(Request("GET", _path("workers", worker, "history"),
                                  convert=_member("versions")))

    def recover_workers(self):
        """Runs recovery; the number of workers recovered."""
        return self._call(Request("POST", "/v1/recover",
                                  convert=_member("recovered")))

    def get_tags(self, worker):
        return self._call(Request("GET", _path("workers", worker, "tags"),
                                  convert=_member("tags")))

    def set_tags(self, worker, tags):
        """Replaces the whole map (an empty one clears it)."""
        return self._call(Request("PUT", _path("workers", worker, "tags"),
                                  {"tags": dict(tags)},
                                  convert=_member("tags")))

    def set_tag(self, worker, key, value):
        """Sets one tag, keeping the others (a read, then a replace: a
        concurrent change of another tag between the two is lost)."""
        path = _path("workers", worker, "tags")

        def put(status, headers, body):
            tags = json.loads(body)["tags"]
            tags[key] = value
            return Request("PUT", path, {"tags": tags},
                           convert=_member("tags"))
        return self._call(Request("GET", path, convert=put))

    def get_tag(self, worker, key):
        """The tag's value, or None."""
        def one(status, headers, body):
            return json.loads(body)["tags"].get(key)
        return self._call(Request("GET", _path("workers", worker, "tags"),
                                  convert=one))

    def invoke(self, worker, ev):
        """Processes the structured CloudEvent ev (a dict; see event()) on
        the worker now: None when it output nothing, the output event, or a
        list of them.  A failure of the worker raises WorkerError."""
        return self._call(Request("POST", _path("workers", worker, "invoke"),
                                  json.dumps(ev).encode(), STRUCTURED,
                                  convert=_events))

    def publish(self, topic, events, tenant=None):
        """Publishes one event (a dict) or a list of them (a batch,
        accepted whole or not at all); their ids."""
        batch = isinstance(events, (list, tuple))
        path = _path("topics", topic, "events")
        if tenant:
            path += "?tenant=" + quote(tenant, safe="")
        return self._call(Request("POST", path,
                                  json.dumps(list(events) if batch
                                             else events).encode(),
                                  BATCH if batch else STRUCTURED,
                                  convert=_member("ids")))


def follow_path(topic, tenant=None):
    path = _path("topics", topic, "events")
    return path + ("?tenant=" + quote(tenant, safe="") if tenant else "")


class SSEParser:
    """Server-Sent Events: feed() lines, get each event's data as parsed
    JSON (comments and other fields are skipped)."""

    def __init__(self):
        self.data = []

    def feed(self, line):
        """line without its end; the event when line ends one, else None."""
        if line == "":
            data, self.data = self.data, []
            return json.loads("\n".join(data)) if data else None
        if line.startswith("data:"):
            self.data.append(line[6:] if line[5:6] == " " else line[5:])
        return None
