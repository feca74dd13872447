// WorkManagerClient.cs — the .NET client of workmanagerd (issue 25): the
// original client's async methods (CreateWorkerAsync, LoadCodeAsync,
// StartWorkerAsync, StopWorkerAsync, DeleteWorkerAsync, ListWorkersAsync,
// GetWorkerHistoryAsync, RecoverWorkersAsync, the tags) and the daemon's
// own (InvokeAsync, PublishAsync, FollowAsync), over the public HTTP API
// only (workmanagerd(8)): the control socket, or TCP (http or https, with a
// CA file and a client certificate) with a bearer token.
//
// Why this way: one HttpClient per client (SocketsHttpHandler; its
// ConnectCallback reaches the unix socket), each operation one request
// (SendAsync) whose refusal becomes the typed exception of its error code
// (Errors.cs).  Events are JsonObjects in the structured form.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Http;
using System.Net.Http.Headers;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using System.Threading;
using System.Threading.Tasks;

namespace Virtufin.WorkManager.Client;

// The original's CodeSource: the code's bytes, or a URL (with its
// optional SHA-256).
public sealed record CodeSource(byte[]? Content = null, Uri? Url = null, string? ContentSha256 = null)
{
    public static CodeSource FromContent(byte[] content) => new(Content: content);
    public static CodeSource FromUrl(Uri url, string? sha256 = null) => new(Url: url, ContentSha256: sha256);

    internal JsonObject ToJson()
    {
        if (Content is not null)
            return new JsonObject { ["content"] = Convert.ToBase64String(Content) };
        if (Url is null)
            throw new ArgumentException("a CodeSource needs Content or Url");
        var o = new JsonObject { ["url"] = Url.ToString() };
        if (ContentSha256 is not null)
            o["sha256"] = ContentSha256;
        return o;
    }
}

public sealed class WorkManagerClient : IDisposable, IAsyncDisposable
{
    public const string DefaultSocket = "/run/workmanager/control.sock";

    private readonly HttpClient http;
    private readonly string where;

    // The control socket: socketPath, else $WM_SOCKET, else DefaultSocket.
    public WorkManagerClient(string? socketPath = null)
    {
        string path = socketPath ?? Environment.GetEnvironmentVariable("WM_SOCKET") ?? DefaultSocket;
        var handler = new SocketsHttpHandler {
            ConnectCallback = async (ctx, ct) => {
                var s = new Socket(AddressFamily.Unix, SocketType.Stream, ProtocolType.Unspecified);
                try {
                    await s.ConnectAsync(new UnixDomainSocketEndPoint(path), ct).ConfigureAwait(false);
                    return new NetworkStream(s, ownsSocket: true);
                } catch {
                    s.Dispose();
                    throw;
                }
            },
        };
        http = new HttpClient(handler) { BaseAddress = new Uri("http://localhost"), Timeout = Timeout.InfiniteTimeSpan };
        where = path;
    }

    // TCP, as the original's (host, port), with the daemon's bearer token
    // (its token_file's text).
    public WorkManagerClient(string host, int port, string? token = null)
    {
        http = new HttpClient { BaseAddress = new Uri($"http://{host}:{port}"), Timeout = Timeout.InfiniteTimeSpan };
        if (token is not null)
            http.DefaultRequestHeaders.Authorization = new AuthenticationHeaderValue("Bearer", token);
        where = $"http://{host}:{port}";
    }

    // TCP at url, http:// or https://, with the daemon's bearer token.  An
    // https url verifies the daemon's certificate: against caFile (PEM)
    // only when given, else against the system's CAs; clientCertFile and
    // clientKeyFile (PEM) are the client certificate a daemon with
    // tls_client_cert = optional or required asks for.
    public WorkManagerClient(Uri url, string? token = null, string? caFile = null,
                             string? clientCertFile = null, string? clientKeyFile = null)
    {
        if (url.Scheme != Uri.UriSchemeHttp && url.Scheme != Uri.UriSchemeHttps)
            throw new ArgumentException($"url {url}: expected http://host:port or https://host:port");
        bool tls = url.Scheme == Uri.UriSchemeHttps;
        if (!tls && (caFile ?? clientCertFile ?? clientKeyFile) is not null)
            throw new ArgumentException("caFile, clientCertFile and clientKeyFile are for an https:// url");
        if ((clientCertFile is null) != (clientKeyFile is null))
            throw new ArgumentException("a client certificate takes clientCertFile and clientKeyFile together");
        var handler = new SocketsHttpHandler();
        if (tls)
            handler.SslOptions = TlsOptions(caFile, clientCertFile, clientKeyFile);
        http = new HttpClient(handler) {
            BaseAddress = new Uri(url.GetLeftPart(UriPartial.Authority)), Timeout = Timeout.InfiniteTimeSpan,
        };
        if (token is not null)
            http.DefaultRequestHeaders.Authorization = new AuthenticationHeaderValue("Bearer", token);
        where = url.GetLeftPart(UriPartial.Authority);
    }

    private static SslClientAuthenticationOptions TlsOptions(string? caFile, string? certFile, string? keyFile)
    {
        var o = new SslClientAuthenticationOptions();
        if (certFile is not null)
            o.ClientCertificates = new X509CertificateCollection {
                X509Certificate2.CreateFromPemFile(certFile, keyFile),
            };
        if (caFile is not null) {
            var roots = new X509Certificate2Collection();
            roots.ImportFromPemFile(caFile);
            o.RemoteCertificateValidationCallback = (_, cert, _, errors) => SignedBy(roots, cert, errors);
        }
        return o;
    }

    // Whether cert chains to one of roots alone (the system's CAs are not
    // asked) and names the host (no other policy error).
    private static bool SignedBy(X509Certificate2Collection roots, X509Certificate? cert, SslPolicyErrors errors)
    {
        if (cert is not X509Certificate2 leaf ||
            (errors & ~SslPolicyErrors.RemoteCertificateChainErrors) != SslPolicyErrors.None)
            return false;
        using var chain = new X509Chain();
        chain.ChainPolicy.TrustMode = X509ChainTrustMode.CustomRootTrust;
        chain.ChainPolicy.CustomTrustStore.AddRange(roots);
        chain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
        return chain.Build(leaf);
    }

    // Each call's limit (default 30 s); FollowAsync has none.
    public TimeSpan CallTimeout { get; set; } = TimeSpan.FromSeconds(30);

    public static JsonObject Event(string type, JsonNode? data = null, string? id = null,
                                   string source = "workmanager-client")
    {
        var ev = new JsonObject {
            ["specversion"] = "1.0", ["id"] = id ?? Guid.NewGuid().ToString(),
            ["source"] = source, ["type"] = type,
        };
        if (data is not null)
            ev["data"] = data;
        return ev;
    }

    private static string W(string id, string? rest = null) =>
        "/v1/workers/" + Uri.EscapeDataString(id) + (rest is null ? "" : "/" + rest);

    private async Task<(int, string)> SendAsync(HttpMethod method, string path, JsonNode? body = null,
                                                string contentType = "application/json",
                                                CancellationToken ct = default)
    {
        using var cts = CancellationTokenSource.CreateLinkedTokenSource(ct);
        cts.CancelAfter(CallTimeout);
        using var req = new HttpRequestMessage(method, path);
        if (body is not null)
            req.Content = new StringContent(body.ToJsonString(), Encoding.UTF8, contentType);
        HttpResponseMessage res;
        try {
            res = await http.SendAsync(req, cts.Token).ConfigureAwait(false);
        } catch (HttpRequestException e) {
            throw new WorkManagerUnavailableException(0, "unavailable",
                $"cannot reach workmanagerd at {where}: {e.Message}", null, null, e);
        }
        using (res) {
            string text = await res.Content.ReadAsStringAsync(cts.Token).ConfigureAwait(false);
            int status = (int)res.StatusCode;
            if (status >= 400) {
                int? ra = res.Headers.RetryAfter?.Delta is TimeSpan d ? (int)d.TotalSeconds : null;
                throw WorkManagerException.From(status, text, ra);
            }
            return (status, text);
        }
    }

    private async Task<JsonNode?> JsonAsync(HttpMethod m, string path, JsonNode? body = null,
                                            string contentType = "application/json")
    {
        var (_, text) = await SendAsync(m, path, body, contentType).ConfigureAwait(false);
        return text.Length == 0 ? null : JsonNode.Parse(text);
    }

    // Creates a worker; its id.  More members of the create's body (name,
    // tenant, config, tags, limits, start ...) in extra.
    public async Task<string> CreateWorkerAsync(CodeSource code, string mimeType, string topic,
                                                string? group = null, JsonObject? extra = null)
    {
        var body = new JsonObject { ["mime_type"] = mimeType, ["topic"] = topic, ["code"] = code.ToJson() };
        if (!string.IsNullOrEmpty(group))
            body["group"] = group;
        foreach (var (k, v) in extra ?? new JsonObject())
            body[k] = v?.DeepClone();
        var w = await JsonAsync(HttpMethod.Post, "/v1/workers", body).ConfigureAwait(false);
        return w!["id"]!.GetValue<string>();
    }

    public Task LoadCodeAsync(string id, CodeSource code) =>
        JsonAsync(HttpMethod.Put, W(id, "code"), new JsonObject { ["code"] = code.ToJson() });

    public async Task<JsonObject> GetWorkerAsync(string id) =>
        (JsonObject)(await JsonAsync(HttpMethod.Get, W(id)).ConfigureAwait(false))!;

    public async Task<IReadOnlyList<JsonObject>> ListWorkersAsync()
    {
        var r = await JsonAsync(HttpMethod.Get, "/v1/workers").ConfigureAwait(false);
        var list = new List<JsonObject>();
        foreach (var w in r!["workers"]!.AsArray())
            list.Add((JsonObject)w!);
        return list;
    }

    public Task DeleteWorkerAsync(string id) => JsonAsync(HttpMethod.Delete, W(id));
    public Task StartWorkerAsync(string id) => JsonAsync(HttpMethod.Post, W(id, "start"));
    public Task StopWorkerAsync(string id) => JsonAsync(HttpMethod.Post, W(id, "stop"));
    public Task SuspendWorkerAsync(string id) => JsonAsync(HttpMethod.Post, W(id, "suspend"));
    public Task ResumeWorkerAsync(string id) => JsonAsync(HttpMethod.Post, W(id, "resume"));

    // The versions, oldest first.
    public async Task<JsonArray> GetWorkerHistoryAsync(string id) =>
        (await JsonAsync(HttpMethod.Get, W(id, "history")).ConfigureAwait(false))!["versions"]!.AsArray();

    // Runs recovery; the number of workers recovered.
    public async Task<int> RecoverWorkersAsync() =>
        (await JsonAsync(HttpMethod.Post, "/v1/recover").ConfigureAwait(false))!["recovered"]!.GetValue<int>();

    public async Task<Dictionary<string, string>> GetTagsAsync(string id)
    {
        var r = await JsonAsync(HttpMethod.Get, W(id, "tags")).ConfigureAwait(false);
        var tags = new Dictionary<string, string>();
        foreach (var (k, v) in r!["tags"]!.AsObject())
            tags[k] = v!.GetValue<string>();
        return tags;
    }

    // Replaces the whole map (an empty one clears it).
    public Task SetTagsAsync(string id, IReadOnlyDictionary<string, string> tags)
    {
        var o = new JsonObject();
        foreach (var (k, v) in tags)
            o[k] = v;
        return JsonAsync(HttpMethod.Put, W(id, "tags"), new JsonObject { ["tags"] = o });
    }

    public async Task<string?> GetTagAsync(string id, string key) =>
        (await GetTagsAsync(id).ConfigureAwait(false)).TryGetValue(key, out var v) ? v : null;

    // Sets one tag, keeping the others (a read, then a replace).
    public async Task SetTagAsync(string id, string key, string value)
    {
        var tags = await GetTagsAsync(id).ConfigureAwait(false);
        tags[key] = value;
        await SetTagsAsync(id, tags).ConfigureAwait(false);
    }

    // Processes the structured event on the worker now: no output (an
    // empty list), one or several; WorkerFailedException when it failed.
    public async Task<IReadOnlyList<JsonObject>> InvokeAsync(string id, JsonObject ev)
    {
        var r = await JsonAsync(HttpMethod.Post, W(id, "invoke"), ev, "application/cloudevents+json")
            .ConfigureAwait(false);
        var outs = new List<JsonObject>();
        if (r is JsonArray a)
            foreach (var e in a)
                outs.Add((JsonObject)e!);
        else if (r is JsonObject o)
            outs.Add(o);
        return outs;
    }

    // Publishes the events (several: a batch, accepted whole or not at
    // all); their ids.
    public async Task<IReadOnlyList<string>> PublishAsync(string topic, params JsonObject[] events)
    {
        JsonNode body = events.Length == 1 ? events[0] : new JsonArray(Array.ConvertAll(events, e => (JsonNode?)e));
        var r = await JsonAsync(HttpMethod.Post, $"/v1/topics/{Uri.EscapeDataString(topic)}/events", body,
                                events.Length == 1 ? "application/cloudevents+json"
                                                   : "application/cloudevents-batch+json").ConfigureAwait(false);
        var ids = new List<string>();
        foreach (var i in r!["ids"]!.AsArray())
            ids.Add(i!.GetValue<string>());
        return ids;
    }

    // Follows a topic from now on ("*": every topic); enumerate the
    // TopicFollow, dispose it to end the stream.
    public async Task<TopicFollow> FollowAsync(string topic, CancellationToken ct = default)
    {
        var req = new HttpRequestMessage(HttpMethod.Get, $"/v1/topics/{Uri.EscapeDataString(topic)}/events");
        req.Headers.Accept.ParseAdd("text/event-stream");
        HttpResponseMessage res;
        try {
            res = await http.SendAsync(req, HttpCompletionOption.ResponseHeadersRead, ct).ConfigureAwait(false);
        } catch (HttpRequestException e) {
            throw new WorkManagerUnavailableException(0, "unavailable",
                $"cannot reach workmanagerd at {where}: {e.Message}", null, null, e);
        }
        if ((int)res.StatusCode >= 400) {
            string text = await res.Content.ReadAsStringAsync(ct).ConfigureAwait(false);
            res.Dispose();
            throw WorkManagerException.From((int)res.StatusCode, text, null);
        }
        return new TopicFollow(res, await res.Content.ReadAsStreamAsync(ct).ConfigureAwait(false));
    }

    public void Close() => http.Dispose();
    public Task CloseAsync() { Close(); return Task.CompletedTask; }
    public void Dispose() => Close();
    public ValueTask DisposeAsync() { Close(); return ValueTask.CompletedTask; }
}

// The events of a followed topic, in order (Server-Sent Events whose data
// lines are the structured events).
public sealed class TopicFollow : IAsyncEnumerable<JsonObject>, IAsyncDisposable
{
    private readonly HttpResponseMessage res;
    private readonly StreamReader reader;

    internal TopicFollow(HttpResponseMessage res, Stream body)
    {
        this.res = res;
        reader = new StreamReader(body, Encoding.UTF8);
    }

    public async IAsyncEnumerator<JsonObject> GetAsyncEnumerator(CancellationToken ct = default)
    {
        var data = new StringBuilder();
        while (await reader.ReadLineAsync(ct).ConfigureAwait(false) is string line) {
            if (line.Length == 0) {
                if (data.Length > 0 && JsonNode.Parse(data.ToString()) is JsonObject ev)
                    yield return ev;
                data.Clear();
            } else if (line.StartsWith("data:", StringComparison.Ordinal)) {
                if (data.Length > 0)
                    data.Append('\n');
                data.Append(line.AsSpan(line.Length > 5 && line[5] == ' ' ? 6 : 5));
            }
        }
    }

    public ValueTask DisposeAsync()
    {
        reader.Dispose();
        res.Dispose();
        return ValueTask.CompletedTask;
    }
}
