"""workmanager — the client library of workmanagerd, standard library only.

    from workmanager import Client, AsyncClient, event

Client talks to the daemon synchronously, AsyncClient with asyncio; both
reach it on its control socket (the default) or over TCP (http:// or
https://, with a CA file and an optional client certificate) with a bearer
token, through the public HTTP API only (workmanagerd(8)), and raise a
WorkManagerError subclass carrying the API's error code for every refusal.
The operations are the original clients' (create_worker, load_code,
start_worker, stop_worker, delete_worker, list_workers,
get_worker_history, recover_workers, the tags, create_worker_from_file)
and the daemon's own (invoke, publish, follow).  See
workmanager-clients(7) and README.md.
"""

from ._core import (DEFAULT_SOCKET, MIME_BY_EXTENSION, ConflictError,
                    DaemonUnavailable, InvalidArgumentError, LoadFailedError,
                    NotFoundError, PayloadTooLargeError,
                    SecurityRejectedError, UnauthorizedError,
                    UnavailableError, WorkerError, WorkManagerError, event,
                    tls_context)
from .aio import AsyncClient
from .client import Client, Follow

WorkManagerClient = AsyncClient  # the original Python client's name

__all__ = [
    "AsyncClient", "Client", "ConflictError", "DEFAULT_SOCKET",
    "DaemonUnavailable", "Follow", "InvalidArgumentError", "LoadFailedError",
    "MIME_BY_EXTENSION", "NotFoundError", "PayloadTooLargeError",
    "SecurityRejectedError", "UnauthorizedError", "UnavailableError",
    "WorkManagerClient", "WorkManagerError", "WorkerError", "event",
    "tls_context",
]
