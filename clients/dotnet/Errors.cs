// Errors.cs — the typed exceptions of WorkManagerClient: every answer of
// the daemon other than 2xx is a WorkManagerException (or the subclass of
// its error code) carrying Status, Code (the API's, e.g. "not_found"),
// the daemon's message and the error object; a daemon that cannot be
// reached is a WorkManagerUnavailableException with Code "unavailable".
using System;
using System.Text.Json.Nodes;

namespace Virtufin.WorkManager.Client;

public class WorkManagerException : Exception
{
    public WorkManagerException(int status, string code, string message, JsonObject? body = null, Exception? inner = null)
        : base($"{code} ({status}): {message}", inner)
    {
        Status = status;
        Code = code;
        Detail = message;
        Body = body ?? new JsonObject();
    }

    public int Status { get; }
    public string Code { get; }
    public string Detail { get; }
    public JsonObject Body { get; }

    // The exception for an answer of status >= 400.
    internal static WorkManagerException From(int status, string text, int? retryAfter)
    {
        JsonObject? obj = null;
        try { obj = JsonNode.Parse(text)?["error"] as JsonObject; } catch (System.Text.Json.JsonException) { }
        string code = obj?["code"]?.GetValue<string>() ?? $"http_{status}";
        string msg = obj?["message"]?.GetValue<string>() ?? text;
        if (status == 503)
            return new WorkManagerUnavailableException(status, code, msg, obj, retryAfter);
        return code switch {
            "not_found" => new WorkerNotFoundException(status, code, msg, obj),
            "unknown_mime_type" => new EngineNotFoundException(status, code, msg, obj),
            "invalid_argument" or "invalid_json" => new WorkManagerArgumentException(status, code, msg, obj),
            "unauthorized" => new WorkManagerUnauthorizedException(status, code, msg, obj),
            "conflict" => new WorkManagerConflictException(status, code, msg, obj),
            "worker_error" => new WorkerFailedException(status, code, msg, obj),
            "load_failed" => new LoadFailedException(status, code, msg, obj),
            _ => new WorkManagerException(status, code, msg, obj),
        };
    }
}

// 404 not_found, as the original's WorkerNotFoundException.
public sealed class WorkerNotFoundException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b);

// 400 unknown_mime_type, as the original's EngineNotFoundException.
public sealed class EngineNotFoundException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b);

// 400 invalid_argument or invalid_json: the message names what is wrong.
public sealed class WorkManagerArgumentException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b);

// 401 unauthorized: over TCP, no token or not the daemon's.
public sealed class WorkManagerUnauthorizedException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b);

// 409 conflict: e.g. a name taken, a worker not running.
public sealed class WorkManagerConflictException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b);

// 422 load_failed: the host could not load the code.
public sealed class LoadFailedException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b);

// 422 worker_error: the worker failed on the event.
public sealed class WorkerFailedException(int s, string c, string m, JsonObject? b)
    : WorkManagerException(s, c, m, b)
{
    public string? ErrorType => Body["error_type"]?.GetValue<string>();
    public string? ExceptionType => Body["exception_type"]?.GetValue<string>();
}

// 503 (subscriber_full, recovering, ...; RetryAfter in seconds), or the
// daemon unreachable (Status 0, Code "unavailable").
public sealed class WorkManagerUnavailableException : WorkManagerException
{
    public WorkManagerUnavailableException(int s, string c, string m, JsonObject? b, int? retryAfter, Exception? inner = null)
        : base(s, c, m, b, inner) { RetryAfter = retryAfter; }
    public int? RetryAfter { get; }
}
