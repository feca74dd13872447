// Worker.cs — the worker contract (spec: Worker Contract (IWorker)):
// IWorker's asynchronous ProcessAsync, and WorkerBase, whose response type
// and source come through its constructor, with the Response and Error
// helpers that propagate the correlation id.
using System;
using System.Text.Json.Nodes;
using System.Threading.Tasks;

namespace Virtufin.Worker;

public interface IWorker
{
    // The output event, or null for none.  Awaited by the host without
    // blocking a thread.
    Task<CloudEvent?> ProcessAsync(CloudEvent input);
}

public abstract class WorkerBase : IWorker
{
    protected WorkerBase(string responseType, string source)
    {
        ResponseType = responseType ?? throw new ArgumentNullException(nameof(responseType));
        Source = source ?? throw new ArgumentNullException(nameof(source));
    }

    public string ResponseType { get; }
    public string Source { get; }

    public abstract Task<CloudEvent?> ProcessAsync(CloudEvent input);

    // A response of ResponseType from Source whose data is `data` as JSON,
    // carrying the input's correlation id.
    protected CloudEvent Response(CloudEvent input, object? data) =>
        new CloudEvent { Type = ResponseType, Source = Source }
            .SetJsonData(data).WithCorrelationId(input);

    // An error response: ResponseType, data {"error": message}.
    protected CloudEvent Error(CloudEvent input, string message) =>
        Response(input, new JsonObject { ["error"] = message });
}
