// SourceWorker.cs — text/x-csharp workers (DESIGN §5, issue 10): the
// source compiled in the host with Roslyn: the packaged runtime's
// (<root>/roslyn/, scripts/dotnet-runtime, issue 26) or else the SDK's
// (<root>/sdk/<version>/Roslyn/bincore/), loaded once into the default
// context, against the reference pack (<root>/packs/
// Microsoft.NETCore.App.Ref/<version>/ref/net<N>.0/) and the DevKit;
// the implicit usings of DESIGN §5; the assembly loaded into the worker's
// collectible context.  The worker is its one public IWorker class, or
// its one public static Process(CloudEvent) / ProcessAsync(CloudEvent).
// Errors, with line and column, fail the load; warnings go to the log.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Runtime.Loader;
using System.Text;
using System.Threading.Tasks;
using Microsoft.CodeAnalysis;
using Microsoft.CodeAnalysis.CSharp;
using Virtufin.Worker;

namespace Workmanager.Bridge;

internal static class SourceWorker
{
    private const string Implicit =
        "global using System;\n" +
        "global using System.Linq;\n" +
        "global using System.Text.Json;\n" +
        "global using System.Threading.Tasks;\n" +
        "global using Virtufin.Worker;\n";

    private static List<MetadataReference>? references;
    private static string? roslynDir;

    // The DevKit's image (the host's embedded copy): set by Entry.Init.
    internal static byte[] DevKitImage = Array.Empty<byte>();

    // The .NET root this runtime runs from (…/shared/Microsoft.NETCore.App/<v>/).
    private static string Root() =>
        Path.GetFullPath(Path.Combine(RuntimeEnvironment.GetRuntimeDirectory(), "..", "..", ".."));

    private static string Highest(string dir, string what)
    {
        if (!Directory.Exists(dir))
            throw new LoadException($"C# source workers need the .NET SDK or the workmanager-dotnet package: {dir} is missing ({what})");
        var best = Directory.GetDirectories(dir)
            .Select(d => (d, v: Version.TryParse(Path.GetFileName(d).Split('-')[0], out var v) ? v : null))
            .Where(x => x.v != null).OrderByDescending(x => x.v).Select(x => x.d).FirstOrDefault();
        return best ?? throw new LoadException($"C# source workers need the .NET SDK or the workmanager-dotnet package: no version in {dir} ({what})");
    }

    // Roslyn's folder, with the default context resolving its assemblies
    // from there.
    private static void FindRoslyn()
    {
        if (roslynDir != null)
            return;
        var dir = Path.Combine(Root(), "roslyn");
        if (!File.Exists(Path.Combine(dir, "Microsoft.CodeAnalysis.CSharp.dll")))
            dir = Path.Combine(Highest(Path.Combine(Root(), "sdk"), "the compiler"), "Roslyn", "bincore");
        if (!File.Exists(Path.Combine(dir, "Microsoft.CodeAnalysis.CSharp.dll")))
            throw new LoadException($"C# source workers need the .NET SDK's compiler or the workmanager-dotnet package's: {dir} has no Microsoft.CodeAnalysis.CSharp.dll");
        roslynDir = dir;
        AssemblyLoadContext.Default.Resolving += (ctx, name) => {
            var p = Path.Combine(dir, name.Name + ".dll");
            return File.Exists(p) ? ctx.LoadFromAssemblyPath(p) : null;
        };
    }

    public static WorkerContext Load(byte[] source)
    {
        FindRoslyn();
        return Compile(source);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WorkerContext Compile(byte[] source)
    {
        var text = Encoding.UTF8.GetString(source);
        var parse = new CSharpParseOptions(LanguageVersion.Latest);
        var trees = new[] {
            CSharpSyntaxTree.ParseText(text, parse, path: "worker.cs"),
            CSharpSyntaxTree.ParseText(Implicit, parse, path: "implicit-usings.cs"),
        };
        var compilation = CSharpCompilation.Create(
            "worker_" + Guid.NewGuid().ToString("N"), trees, References(),
            new CSharpCompilationOptions(OutputKind.DynamicallyLinkedLibrary,
                                         nullableContextOptions: NullableContextOptions.Enable,
                                         optimizationLevel: OptimizationLevel.Release));
        using var image = new MemoryStream();
        var result = compilation.Emit(image);
        var errors = result.Diagnostics.Where(d => d.Severity == DiagnosticSeverity.Error).ToList();
        if (!result.Success || errors.Count > 0)
            throw new LoadException("the C# source does not compile: " +
                                    string.Join("; ", errors.Take(20).Select(d => d.ToString())));
        foreach (var w in result.Diagnostics.Where(d => d.Severity == DiagnosticSeverity.Warning))
            Entry.Log(3, $"C# source: {w}");
        var alc = new WorkerContext.Context(new Dictionary<string, byte[]>());
        try {
            image.Position = 0;
            var asm = alc.LoadFromStream(image);
            return new WorkerContext(alc, Instantiate(asm));
        } catch {
            alc.Unload();
            throw;
        }
    }

    private static List<MetadataReference> References()
    {
        if (references != null)
            return references;
        int major = Environment.Version.Major, minor = Environment.Version.Minor;
        var pack = Highest(Path.Combine(Root(), "packs", "Microsoft.NETCore.App.Ref"), "the reference assemblies");
        var refDir = Directory.GetDirectories(Path.Combine(pack, "ref"))
            .Select(d => (d, v: Version.TryParse(Path.GetFileName(d).Substring(3), out var v) ? v : null))
            .Where(x => x.v != null && x.v <= new Version(major, minor))
            .OrderByDescending(x => x.v).Select(x => x.d).FirstOrDefault()
            ?? throw new LoadException($"{pack}/ref has no net{major}.{minor} or lower");
        var list = Directory.GetFiles(refDir, "*.dll")
            .Select(f => (MetadataReference)MetadataReference.CreateFromFile(f)).ToList();
        list.Add(MetadataReference.CreateFromImage(DevKitImage));
        return references = list;
    }

    // The one public IWorker class, else the one public static
    // Process/ProcessAsync(CloudEvent).
    private static IWorker Instantiate(Assembly asm)
    {
        bool hasWorker = asm.GetExportedTypes().Any(t => t.IsClass && !t.IsAbstract &&
                                                         typeof(IWorker).IsAssignableFrom(t));
        if (hasWorker)
            return WorkerContext.Instantiate(new[] { asm });
        var methods = asm.GetExportedTypes()
            .SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.Static))
            .Where(m => (m.Name == "Process" || m.Name == "ProcessAsync") &&
                        m.GetParameters().Length == 1 &&
                        m.GetParameters()[0].ParameterType == typeof(CloudEvent) &&
                        (m.ReturnType == typeof(CloudEvent) || m.ReturnType == typeof(Task<CloudEvent>) ||
                         m.ReturnType == typeof(Task<CloudEvent?>)))
            .ToList();
        if (methods.Count != 1)
            throw new LoadException(methods.Count == 0
                ? "the C# source has no public IWorker class nor a public static Process(CloudEvent) or ProcessAsync(CloudEvent)"
                : "the C# source has more than one public static Process/ProcessAsync(CloudEvent): " +
                  string.Join(", ", methods.Select(m => $"{m.DeclaringType!.FullName}.{m.Name}")));
        return new StaticWorker(methods[0]);
    }

    // A static Process/ProcessAsync as an IWorker.
    private sealed class StaticWorker : IWorker
    {
        private readonly Func<CloudEvent, Task<CloudEvent?>> call;

        public StaticWorker(MethodInfo m)
        {
            if (m.ReturnType == typeof(CloudEvent)) {
                var f = m.CreateDelegate<Func<CloudEvent, CloudEvent?>>();
                call = e => Task.FromResult(f(e));
            } else {
                call = m.CreateDelegate<Func<CloudEvent, Task<CloudEvent?>>>();
            }
        }

        public Task<CloudEvent?> ProcessAsync(CloudEvent input) => call(input);
    }
}
