// CommandSample.cs — a CommandWorker<T>: the wire command is the enum
// value's lowercase identifier; HandleAsync's switch covers every value.
using System.Text.Json.Nodes;
using System.Threading.Tasks;
using Virtufin.Worker;

namespace Samples;

public enum SessionCommand
{
    create,
    close,
}

public sealed class SessionWorker : CommandWorker<SessionCommand>
{
    public SessionWorker() : base("session.result", "dotnet/session") { }

    protected override Task<CloudEvent?> HandleAsync(CloudEvent input, SessionCommand command,
                                                     JsonNode node) =>
        Task.FromResult<CloudEvent?>(command switch {
            SessionCommand.create => Response(input, new JsonObject {
                ["created"] = node["name"]?.GetValue<string>(),
                ["command"] = WireName(command),
            }),
            SessionCommand.close => Response(input, new JsonObject { ["closed"] = true }),
        });
}
