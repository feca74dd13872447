// EchoWorker.cs — the .NET test worker: what it does comes from the
// event's type (echo, sync, none, throw, failfast, overflow, loop, gateway,
// gateway_sync, thread, yield_block, heap, contexts, context, busy,
// escape).  Built by tests/integration/test_dotnet_*.py and make
// bench-dotnet.
using System;
using System.Runtime.Loader;
using System.Text.Json.Nodes;
using System.Threading.Tasks;
using Virtufin.Worker;

namespace Samples;

public sealed class EchoWorker : WorkerBase
{
    public EchoWorker() : base("echo.out", "dotnet/echo") { }

    public override async Task<CloudEvent?> ProcessAsync(CloudEvent input)
    {
        switch (input.Type) {
        case "none":
            return null;
        case "throw":
            throw new InvalidOperationException("asked to throw");
        case "failfast":
            Environment.FailFast("asked to fail fast");
            return null;
        case "overflow":
            return Response(input, new JsonObject { ["depth"] = Depth(0) });
        case "loop":
            for (;;) { }
        case "gateway": {
            var api = new ApiClient();
            await api.InvokeAsync("workmanager.state", "put",
                                  new JsonObject { ["key"] = "k", ["value"] = 41 });
            dynamic gw = api.Gateway;
            JsonNode? got = await gw.workmanager.state.get(new JsonObject { ["key"] = "k" });
            return Response(input, new JsonObject { ["value"] = (int)got!["value"]! + 1 });
        }
        case "gateway_sync": {
            // Blocking on the calls, as a worker written without await
            // would: once on this thread, once on the pool's.
            var api = new ApiClient();
            api.InvokeAsync("workmanager.state", "put",
                            new JsonObject { ["key"] = "s", ["value"] = 41 }).GetAwaiter().GetResult();
            JsonNode? got = api.InvokeAsync("workmanager.state", "get",
                                            new JsonObject { ["key"] = "s" }).Result;
            JsonNode? again = Task.Run(() => api.InvokeAsync("workmanager.state", "get",
                                                             new JsonObject { ["key"] = "s" })).Result;
            return Response(input, new JsonObject { ["value"] = (int)got!["value"]! + 1,
                                                    ["again"] = (int)again!["value"]! });
        }
        case "thread": {
            int before = Environment.CurrentManagedThreadId;
            await Task.Yield();
            return Response(input, new JsonObject {
                ["before"] = before,
                ["after"] = Environment.CurrentManagedThreadId,
                ["context"] = System.Threading.SynchronizationContext.Current?.GetType().Name,
            });
        }
        case "yield_block":
            // Blocks on a method of its own whose continuation this thread
            // posted (Task.Yield()).
            return Response(input, new JsonObject { ["got"] = YieldThen(7).Result });
        case "sync":
            // Completes synchronously: the echo without the Task.Yield().
            return Echo(input);
        case "busy": {
            int now = System.Threading.Interlocked.Increment(ref inside);
            lock (Lock)
                most = Math.Max(most, now);
            await Task.Delay(300);
            System.Threading.Interlocked.Decrement(ref inside);
            lock (Lock)
                return Response(input, new JsonObject { ["most"] = most });
        }
        case "escape":
            return Response(input, new JsonObject {
                ["spawn"] = Try(() => System.Diagnostics.Process.Start("/bin/true")?.WaitForExit()),
                ["write"] = Try(() => System.IO.File.WriteAllText("/etc/wm-dotnet-test", "x")),
                ["read"] = Try(() => System.IO.File.ReadAllText("/etc/passwd")),
                ["socket"] = Try(() => new System.Net.Sockets.TcpClient().Connect("127.0.0.1", 1)),
            });
        case "heap":
            return Response(input, new JsonObject {
                ["limit"] = GC.GetGCMemoryInfo().TotalAvailableMemoryBytes,
            });
        case "contexts": {
            for (int i = 0; i < 3; i++) {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            int n = 0;
            foreach (var alc in AssemblyLoadContext.All)
                if (alc.Name == "worker" && alc != AssemblyLoadContext.GetLoadContext(GetType().Assembly))
                    n++;
            return Response(input, new JsonObject { ["unloading"] = n });
        }
        case "context":
            return Response(input, new JsonObject {
                ["context"] = AssemblyLoadContext.GetLoadContext(GetType().Assembly)?.Name,
                ["collectible"] = GetType().Assembly.IsCollectible,
                ["devkit_shared"] = AssemblyLoadContext.GetLoadContext(typeof(IWorker).Assembly)
                                    == AssemblyLoadContext.Default,
            });
        default:
            await Task.Yield();
            return Echo(input);
        }
    }

    private static async Task<int> YieldThen(int n)
    {
        await Task.Yield();
        return n;
    }

    private CloudEvent Echo(CloudEvent input)
    {
        var output = new CloudEvent { Type = ResponseType, Source = Source,
                                      Data = input.Data,
                                      DataContentType = input.DataContentType };
        output.SetExtension("version", Version);
        return output.WithCorrelationId(input);
    }

    // Events inside at once ("busy"), and the most seen.
    private static int inside, most;
    private static readonly object Lock = new();

    // Replaced by the reload test's builds.
    private const string Version = "v1";

    // "ok", or the exception's type.
    private static string Try(Action a)
    {
        try {
            a();
            return "ok";
        } catch (Exception e) {
            return e.GetType().Name;
        }
    }

    // Not a tail call: each level keeps its frame.
    private static long Depth(long n) => n == long.MaxValue ? n : Depth(n + 1) + 1;
}
