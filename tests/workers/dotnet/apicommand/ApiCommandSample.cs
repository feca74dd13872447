// ApiCommandSample.cs — an ApiCommandWorker<T>: its Api (reconfigured by
// a command's api_host/api_port) calls the master's workmanager.state
// service, once by InvokeAsync and once through the dynamic Gateway.
using System.Text.Json.Nodes;
using System.Threading.Tasks;
using Virtufin.Worker;

namespace Samples;

public enum StoreCommand
{
    put,
    get,
}

public sealed class StoreWorker : ApiCommandWorker<StoreCommand>
{
    public StoreWorker() : base("localhost", ApiClient.DefaultPort, "store.result", "dotnet/store") { }

    protected override async Task<CloudEvent?> HandleAsync(CloudEvent input, StoreCommand command,
                                                           JsonNode node)
    {
        switch (command) {
        case StoreCommand.put:
            await Api.InvokeAsync("workmanager.state", "put",
                                  new JsonObject { ["key"] = node["key"]!.GetValue<string>(),
                                                   ["value"] = node["value"]!.DeepClone() });
            return Response(input, new JsonObject { ["stored"] = true, ["host"] = Api.Host,
                                                    ["port"] = Api.Port });
        case StoreCommand.get: {
            dynamic gateway = Api.Gateway;
            JsonNode? got = await gateway.workmanager.state.get(
                new JsonObject { ["key"] = node["key"]!.GetValue<string>() });
            return Response(input, new JsonObject { ["value"] = got!["value"]!.DeepClone() });
        }
        default:
            return Error(input, $"unhandled {command}");
        }
    }
}
