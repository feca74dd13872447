"""C# source workers (text/x-csharp) on a real workmanagerd (issue 10;
spec: C# source worker execution): compiled in wm-host-dotnet with the
SDK's Roslyn against the reference pack and the DevKit, with the
implicit usings of DESIGN §5; compile errors reach the API caller with
line and column; warnings (CS8509) reach the log.
"""

import pytest

from dotnet_lib import daemon
from wm import b64

CS = "text/x-csharp"

WORKER = """\
using System.Text.Json.Nodes;

public enum Mode { upper, lower }

public sealed class Shout : WorkerBase
{
    public Shout() : base("shout.out", "dotnet/shout") { }

    public override Task<CloudEvent?> ProcessAsync(CloudEvent input)
    {
        var text = input.DataAsJson()?["text"]?.GetValue<string>() ?? "";
        var mode = input.Type == "lower" ? Mode.lower : Mode.upper;
        var s = mode switch { Mode.upper => text.ToUpperInvariant(),
                              Mode.lower => text.ToLowerInvariant() };
        return Task.FromResult<CloudEvent?>(
            Response(input, new JsonObject { ["text"] = s }));
    }
}
"""

STATIC = """\
public static class Echo
{
    public static CloudEvent Process(CloudEvent e) =>
        new CloudEvent { Type = "static.out", Source = "dotnet/static",
                         Data = e.Data, DataContentType = e.DataContentType };
}
"""


pytestmark = pytest.mark.wmd(make=daemon, shutdown_grace_ms=1000)


def create(d, source, expect=201):
    r = d.post("/v1/workers", {"mime_type": CS, "topic": "n",
                               "code": {"content": b64(source)}})
    assert r.status == expect, (r, d.log()[-3000:])
    return r


def test_source_worker_compiled_and_run(wmd):
    """Spec: C# source worker execution."""
    w = create(wmd, WORKER).json["id"]
    r = wmd.invoke(w, "upper", data={"text": "Hi"}, correlationid="c-1")
    assert r.status == 200, r
    assert r.json["data"] == {"text": "HI"} and r.json["correlationid"] == \
        "c-1"
    assert wmd.invoke(w, "lower", data={"text": "Hi"}).json["data"] == \
        {"text": "hi"}


def test_static_process_method(wmd):
    w = create(wmd, STATIC).json["id"]
    r = wmd.invoke(w, "x", data={"a": 1})
    assert r.status == 200 and r.json["type"] == "static.out", r
    assert r.json["data"] == {"a": 1}


def test_compile_error_with_line_and_column(wmd):
    bad = WORKER.replace('var mode = input.Type', 'var mode = input.Typo')
    r = create(wmd, bad, expect=422)
    assert r.code == "load_failed", r
    msg = r.json["error"]["message"]
    assert "the C# source does not compile" in msg, msg
    assert "worker.cs(12,26): error CS1061" in msg, msg


def test_unhandled_enum_value_warns_cs8509(wmd):
    """Spec: New enum value triggers compiler warning on the switch."""
    src = WORKER.replace("public enum Mode { upper, lower }",
                         "public enum Mode { upper, lower, title }")
    w = create(wmd, src).json["id"]
    wmd.wait_for(lambda: "warning CS8509" in wmd.log(), what="CS8509")
    assert "Mode.title" in wmd.log()
    assert wmd.invoke(w, "upper", data={"text": "a"}).status == 200


API_WORKER = """\
using System.Text.Json.Nodes;

public sealed class Counter : ApiWorker
{
    public Counter() : base("api.example", 6000, "count.out", "dotnet/count") { }

    protected override async Task<CloudEvent?> ProcessAsync(CloudEvent input, ApiClient api)
    {
        await api.InvokeAsync("workmanager.state", "put",
                              new JsonObject { ["key"] = "n", ["value"] = 7 });
        var got = await api.InvokeAsync("workmanager.state", "get",
                                        new JsonObject { ["key"] = "n" });
        string refused = "";
        try {
            await api.InvokeAsync("no.such", "call", null);
        } catch (GatewayException e) {
            refused = $"{e.Status}";
        }
        return Response(input, new JsonObject {
            ["value"] = got!["value"]!.DeepClone(), ["host"] = api.Host,
            ["port"] = api.Port, ["refused"] = refused });
    }
}
"""


def test_api_worker_with_its_client(wmd):
    """Spec: ApiWorker with pre-configured ApiClient (its calls go to the
    master's gateway services; an unknown service is a GatewayException
    with the status)."""
    w = create(wmd, API_WORKER).json["id"]
    r = wmd.invoke(w, "count")
    assert r.status == 200, r
    assert r.json["data"] == {"value": 7, "host": "api.example",
                              "port": 6000, "refused": "404"}, r.json
