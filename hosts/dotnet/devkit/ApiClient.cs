// ApiClient.cs — a worker's calls to the gateway services (master/broker/gateway.h:
// workmanager.publish, workmanager.state): InvokeAsync(service, method,
// args) and the `dynamic Gateway` form gateway.<service>.<method>(args).
// Calls travel as GatewayCall frames through the host (IGatewayTransport,
// set by the bridge); apiHost and apiPort are kept for the original's API
// and name no socket here.
using System;
using System.Dynamic;
using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using System.Threading.Tasks;

namespace Virtufin.Worker;

// A service's answer other than 200.
public sealed class GatewayException : Exception
{
    public GatewayException(int status, string message)
        : base($"gateway status {status}: {message}") { Status = status; }
    public int Status { get; }
}

public sealed class ApiClient
{
    public const int DefaultPort = 5002;

    public ApiClient(string host = "localhost", int port = DefaultPort)
    {
        Host = host;
        Port = port;
    }

    public string Host { get; }
    public int Port { get; }

    // Calls service.method with args as its JSON request; the response's
    // JSON, or a GatewayException for a status other than 200.
    public async Task<JsonNode?> InvokeAsync(string service, string method, object? args)
    {
        var transport = Hosting.GatewayTransport.Current
            ?? throw new InvalidOperationException("no gateway: not running in a host");
        byte[] req = args switch {
            null => Encoding.UTF8.GetBytes("{}"),
            JsonNode n => Encoding.UTF8.GetBytes(n.ToJsonString()),
            string s => Encoding.UTF8.GetBytes(s),
            _ => JsonSerializer.SerializeToUtf8Bytes(args),
        };
        var (status, body) = await transport.CallAsync(service, method, req).ConfigureAwait(false);
        if (status != 200)
            throw new GatewayException(status, Encoding.UTF8.GetString(body));
        return body.Length == 0 ? null : JsonNode.Parse(body);
    }

    // gateway.<service>.<method>(args): a Task<JsonNode?>.  A service name
    // with dots is written as members: gateway.workmanager.state.get(...).
    public dynamic Gateway => new ServiceClient(this, null);
}

public sealed class ServiceClient : DynamicObject
{
    private readonly ApiClient api;

    internal ServiceClient(ApiClient api, string? name)
    {
        this.api = api;
        Name = name;
    }

    public string? Name { get; }

    public override bool TryGetMember(GetMemberBinder binder, out object? result)
    {
        result = new ServiceClient(api, Name is null ? binder.Name : $"{Name}.{binder.Name}");
        return true;
    }

    public override bool TryInvokeMember(InvokeMemberBinder binder, object?[]? args, out object? result)
    {
        if (Name is null || args is null || args.Length > 1) {
            result = null;
            return false;
        }
        result = api.InvokeAsync(Name, binder.Name, args.Length == 1 ? args[0] : null);
        return true;
    }
}

// ApiWorker: a worker given an ApiClient for each event.
public abstract class ApiWorker : WorkerBase
{
    protected ApiWorker(string apiHost, int apiPort, string responseType, string source)
        : base(responseType, source)
    {
        Api = new ApiClient(apiHost, apiPort);
    }

    public ApiClient Api { get; }

    public sealed override Task<CloudEvent?> ProcessAsync(CloudEvent input) => ProcessAsync(input, Api);

    protected abstract Task<CloudEvent?> ProcessAsync(CloudEvent input, ApiClient api);
}
