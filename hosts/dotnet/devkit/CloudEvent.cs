// CloudEvent.cs — the event a .NET worker receives and returns (DESIGN §5):
// the CloudEvents attributes, the data as bytes and the extensions in their
// order, with the correlation id rule of the spec (WithCorrelationId).
using System;
using System.Collections.Generic;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;

namespace Virtufin.Worker;

public sealed class CloudEvent
{
    private string? id;

    // A new version 4 UUID unless set, made when first read: an event
    // whose id is set at once (the host's input, WithCorrelationId's
    // caller) costs none.
    public string Id
    {
        get => id ??= NewId();
        set => id = value;
    }
    public string Type { get; set; } = "";
    public string Source { get; set; } = "";
    public string SpecVersion { get; set; } = "1.0";
    public string? DataContentType { get; set; }
    public string? DataSchema { get; set; }
    public string? Subject { get; set; }
    public string? Time { get; set; }
    public byte[]? Data { get; set; }

    // Random bytes for ids, drawn 4 KiB at a time: Guid.NewGuid() reads
    // the kernel's random source for every id, a system call each.
    [ThreadStatic] private static byte[]? random;
    [ThreadStatic] private static int randomUsed;

    private static string NewId()
    {
        var r = random ??= new byte[4096];
        if (randomUsed == 0 || randomUsed == r.Length) {
            RandomNumberGenerator.Fill(r);
            randomUsed = 0;
        }
        Span<byte> b = stackalloc byte[16];
        r.AsSpan(randomUsed, 16).CopyTo(b);
        randomUsed += 16;
        b[7] = (byte)((b[7] & 0x0F) | 0x40); // version 4 (Guid's bytes: _c little-endian)
        b[8] = (byte)((b[8] & 0x3F) | 0x80); // RFC 4122 variant
        return new Guid(b).ToString();
    }

    // Extension attributes by name ([a-z0-9]{1,20}), in insertion order.
    public List<KeyValuePair<string, string>> Extensions { get; } = new();

    public string? GetExtension(string name)
    {
        foreach (var kv in Extensions)
            if (kv.Key == name)
                return kv.Value;
        return null;
    }

    public CloudEvent SetExtension(string name, string value)
    {
        for (int i = 0; i < Extensions.Count; i++) {
            if (Extensions[i].Key == name) {
                Extensions[i] = new(name, value);
                return this;
            }
        }
        Extensions.Add(new(name, value));
        return this;
    }

    public string? CorrelationId => GetExtension("correlationid");

    // The data as UTF-8 text, or null.
    public string? DataAsString => Data is null ? null : Encoding.UTF8.GetString(Data);

    // The data parsed as JSON; null when absent or `null`.  Throws
    // JsonException when it is not JSON.
    public JsonNode? DataAsJson() =>
        Data is null || Data.Length == 0 ? null : JsonNode.Parse(Data);

    // Sets the data to value serialised as JSON (application/json).
    public CloudEvent SetJsonData(object? value)
    {
        Data = value is JsonNode n
            ? Encoding.UTF8.GetBytes(n.ToJsonString())
            : JsonSerializer.SerializeToUtf8Bytes(value);
        DataContentType = "application/json";
        return this;
    }
}

public static class CloudEventExtensions
{
    // Copies the input's correlationid extension onto output (as its first
    // extension, the ABI's rule); a no-op when the input has none.
    public static CloudEvent WithCorrelationId(this CloudEvent output, CloudEvent input)
    {
        var id = input.GetExtension("correlationid");
        if (id is null)
            return output;
        output.Extensions.RemoveAll(kv => kv.Key == "correlationid");
        output.Extensions.Insert(0, new("correlationid", id));
        return output;
    }
}
