// CommandWorker.cs — the generic command workers (spec: Generic
// CommandWorker Base Class): data.command is the lowercase identifier of
// an enum value, parsed with Enum.TryParse<T>(ignoreCase: true) and
// dispatched to HandleAsync; the error texts are the spec's.
using System;
using System.Text.Json;
using System.Text.Json.Nodes;
using System.Threading.Tasks;

namespace Virtufin.Worker;

public abstract class CommandWorker<T> : WorkerBase where T : struct, Enum
{
    protected CommandWorker(string responseType, string source)
        : base(responseType, source) { }

    protected abstract Task<CloudEvent?> HandleAsync(CloudEvent input, T command, JsonNode node);

    // The wire name of a command: its identifier in lowercase.
    public static string WireName(T command) => command.ToString().ToLowerInvariant();

    public override async Task<CloudEvent?> ProcessAsync(CloudEvent input)
    {
        JsonNode? node;
        try {
            node = input.DataAsJson();
        } catch (JsonException) {
            return Error(input, "Failed to parse command JSON");
        }
        if (node is not JsonObject obj)
            return Error(input, "Failed to parse command JSON");
        if (!obj.TryGetPropertyValue("command", out var c) || c is null)
            return Error(input, "Missing 'command' field");
        string? wire;
        try {
            wire = c.GetValue<string>();
        } catch (Exception) {
            return Error(input, "Missing 'command' field");
        }
        // Names only: TryParse would also take "1" or "a, b" for a value.
        if (!Enum.TryParse<T>(wire, ignoreCase: true, out var cmd) ||
            !Enum.IsDefined(cmd) || !char.IsLetter(wire.Length > 0 ? wire[0] : '0') &&
            wire[0] != '_')
            return Error(input, $"Unknown command: {wire}");
        try {
            await BeforeHandleAsync(obj);
            return await HandleAsync(input, cmd, obj);
        } catch (Exception e) {
            return Error(input, $"Internal error: {e.Message}");
        }
    }

    // A hook for the API variant (the ApiClient's host and port).
    private protected virtual Task BeforeHandleAsync(JsonObject command) => Task.CompletedTask;
}

public abstract class ApiCommandWorker<T> : CommandWorker<T> where T : struct, Enum
{
    protected ApiCommandWorker(string apiHost, int apiPort, string responseType, string source)
        : base(responseType, source)
    {
        Api = new ApiClient(apiHost, apiPort);
    }

    // The client of the current command (reconfigured by its api_host and
    // api_port fields when present; port 5002 by default).
    public ApiClient Api { get; private set; }

    private protected override Task BeforeHandleAsync(JsonObject command)
    {
        if (command.TryGetPropertyValue("api_host", out var h) && h is JsonValue hv &&
            hv.TryGetValue<string>(out var host)) {
            int port = ApiClient.DefaultPort;
            if (command.TryGetPropertyValue("api_port", out var p) && p is JsonValue pv &&
                pv.TryGetValue<int>(out var pn))
                port = pn;
            if (host != Api.Host || port != Api.Port)
                Api = new ApiClient(host, port);
        }
        return Task.CompletedTask;
    }
}
