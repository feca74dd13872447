// Program.cs — WorkManagerClient (clients/dotnet) against a running
// daemon, driven by tests/integration/test_client_dotnet.py:
//   ClientTest SOCKET URL TOKEN
//   ClientTest tls URL TOKEN CA CERT KEY OTHER_CA
// (the second: a create and an invoke over https with the daemon's CA and
// a client certificate, then a client of another CA refusing the daemon).
// Each check throws on failure (exit status 1 with its message); all
// passed prints "ok".
using System;
using System.Collections.Generic;
using System.Linq;
using System.Security.Authentication;
using System.Text;
using System.Text.Json.Nodes;
using System.Threading.Tasks;
using Virtufin.WorkManager.Client;

static class Program
{
    const string Mime = "application/x-wm-test";

    static void Check(bool ok, string what)
    {
        if (!ok)
            throw new Exception("check failed: " + what);
    }

    static async Task<T> Throws<T>(Func<Task> f) where T : Exception
    {
        try {
            await f();
        } catch (T e) {
            return e;
        }
        throw new Exception($"expected {typeof(T).Name}");
    }

    static async Task<int> Tls(string url, string token, string ca, string cert, string key, string otherCa)
    {
        var u = new Uri(url);
        await using (var wm = new WorkManagerClient(u, token, ca, cert, key)) {
            string id = await wm.CreateWorkerAsync(CodeSource.FromContent(Encoding.UTF8.GetBytes("echo")), Mime,
                                                   "cs-tls", extra: new JsonObject { ["name"] = "cs-tls" });
            try {
                var outs = await wm.InvokeAsync(id, WorkManagerClient.Event("echo", new JsonObject { ["n"] = 1 }));
                Check(outs.Count == 1 && (int?)outs[0]["data"]?["n"] == 1, "invoke over https");
            } finally {
                await wm.DeleteWorkerAsync(id);
            }
        }
        await using (var stranger = new WorkManagerClient(u, token, otherCa, cert, key)) {
            var e = await Throws<WorkManagerUnavailableException>(() => stranger.ListWorkersAsync());
            Check(e.Code == "unavailable" && e.InnerException?.InnerException is AuthenticationException,
                  "a daemon another CA signed is refused: " + e);
        }
        try {
            _ = new WorkManagerClient(new Uri("http://127.0.0.1:1"), token, ca);
            throw new Exception("expected ArgumentException");
        } catch (ArgumentException a) {
            Check(a.Message.Contains("for an https:// url"), "a CA file is for https");
        }
        Console.WriteLine("ok");
        return 0;
    }

    static async Task<int> Main(string[] args)
    {
        if (args[0] == "tls")
            return await Tls(args[1], args[2], args[3], args[4], args[5], args[6]);
        string socket = args[0], url = args[1], token = args[2];
        await using var wm = new WorkManagerClient(socket);
        var extra = new JsonObject { ["name"] = "cs-life", ["tags"] = new JsonObject { ["a"] = "1" } };
        string id = await wm.CreateWorkerAsync(CodeSource.FromContent(Encoding.UTF8.GetBytes("echo")), Mime, "cs-in",
                                               extra: extra);
        try {
            Check((await wm.ListWorkersAsync()).Any(w => (string?)w["id"] == id), "listed");
            await wm.StopWorkerAsync("cs-life");
            Check((string?)(await wm.GetWorkerAsync(id))["status"] == "stopped", "stopped");
            await wm.StartWorkerAsync(id);
            await wm.LoadCodeAsync(id, CodeSource.FromContent(Encoding.UTF8.GetBytes("# v2\necho\n")));
            Check((await wm.GetWorkerHistoryAsync(id)).Count == 2, "two versions");
            await wm.SetTagAsync(id, "b", "2");
            var tags = await wm.GetTagsAsync(id);
            Check(tags.Count == 2 && tags["a"] == "1" && tags["b"] == "2", "tags");
            Check(await wm.GetTagAsync(id, "missing") is null, "no tag");
            await wm.SetTagsAsync(id, new Dictionary<string, string>());
            Check((await wm.GetTagsAsync(id)).Count == 0, "tags cleared");
            Check(await wm.RecoverWorkersAsync() >= 0, "recover");

            var ev = WorkManagerClient.Event("echo", new JsonObject { ["n"] = 1 });
            ev["correlationid"] = "c-1";
            var outs = await wm.InvokeAsync(id, ev);
            Check(outs.Count == 1 && (string?)outs[0]["type"] == "echo.out"
                  && (string?)outs[0]["correlationid"] == "c-1", "invoke echo");
            Check((await wm.InvokeAsync(id, WorkManagerClient.Event("many:3"))).Count == 3, "invoke many");
            Check((await wm.InvokeAsync(id, WorkManagerClient.Event("many:0"))).Count == 0, "invoke none");
            var fail = await Throws<WorkerFailedException>(() => wm.InvokeAsync(id, WorkManagerClient.Event("fail")));
            Check(fail.Status == 422 && fail.Code == "worker_error" && fail.ExceptionType == "TestError", "worker error");

            await using (var follow = await wm.FollowAsync("cs-in")) {
                var ids = await wm.PublishAsync("cs-in", WorkManagerClient.Event("a", id: "d1"),
                                                WorkManagerClient.Event("b", id: "d2"));
                Check(ids.SequenceEqual(new[] { "d1", "d2" }), "published ids");
                var got = new List<string>();
                await foreach (var e in follow) {
                    got.Add((string)e["id"]!);
                    if (got.Count == 2)
                        break;
                }
                Check(got.SequenceEqual(new[] { "d1", "d2" }), "followed");
            }
            var bad = await Throws<WorkManagerArgumentException>(() => wm.CreateWorkerAsync(
                CodeSource.FromContent(new byte[] { 1 }), Mime, "t", extra: new JsonObject { ["colour"] = "red" }));
            Check(bad.Code == "invalid_argument" && bad.Body["unknown_members"]![0]!.GetValue<string>() == "colour",
                  "unknown member");
            var engine = await Throws<EngineNotFoundException>(() => wm.CreateWorkerAsync(
                CodeSource.FromContent(new byte[] { 1 }), "text/x-nothing", "t"));
            Check(engine.Code == "unknown_mime_type", "unknown mime type");
        } finally {
            await wm.DeleteWorkerAsync(id);
        }
        var nf = await Throws<WorkerNotFoundException>(() => wm.GetWorkerAsync(id));
        Check(nf.Status == 404 && nf.Code == "not_found", "not found");

        var u = new Uri(url);
        await using (var tcp = new WorkManagerClient(u.Host, u.Port, token))
            Check((await tcp.ListWorkersAsync()) is not null, "tcp list");
        await using (var wrong = new WorkManagerClient(u.Host, u.Port, "not-the-token-at-all")) {
            var e = await Throws<WorkManagerUnauthorizedException>(() => wrong.ListWorkersAsync());
            Check(e.Status == 401 && e.Code == "unauthorized", "unauthorized");
        }
        await using (var none = new WorkManagerClient(socket + ".nothing")) {
            var e = await Throws<WorkManagerUnavailableException>(() => none.ListWorkersAsync());
            Check(e.Status == 0 && e.Code == "unavailable" && e.Message.Contains(".nothing"), "unreachable");
        }
        Console.WriteLine("ok");
        return 0;
    }
}
