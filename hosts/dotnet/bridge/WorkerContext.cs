// WorkerContext.cs — one loaded worker (DESIGN §5, issue 10): a nupkg's
// lib/<tfm>/ assemblies, or one bare assembly as `dotnet build` leaves it
// (issue 27: its PE bytes, told from a zip by their "MZ"), in a
// collectible AssemblyLoadContext of their own, the DevKit resolved to the host's shared copy so that IWorker is
// one type, and the package's one public non-abstract IWorker made.
// Unload() starts the context's unloading; the old contexts are watched
// through weak references and counted when collected.
using System;
using System.Collections.Generic;
using System.IO;
using System.IO.Compression;
using System.Linq;
using System.Reflection;
using System.Reflection.Metadata;
using System.Reflection.PortableExecutable;
using System.Runtime.CompilerServices;
using System.Runtime.Loader;
using System.Threading;
using Virtufin.Worker;

namespace Workmanager.Bridge;

internal sealed class WorkerContext
{
    // A package holds at most this many bytes uncompressed.
    private const long MaxUnpacked = 256L << 20;
    private static readonly List<WeakReference> unloading = new();
    private static int loads;

    internal WorkerContext(Context alc, IWorker worker)
    {
        Alc = alc;
        Worker = worker;
    }

    public Context Alc { get; }
    public IWorker Worker { get; }
    // Events in the worker at once: the Load's limits.concurrency.
    public SemaphoreSlim Gate { get; set; } = new(1);
    // Concurrency 1: its events run on the host's loop thread.
    public bool Inline { get; set; }

    // Contexts unloaded and not yet collected.
    public static int Unloading
    {
        get {
            lock (unloading) {
                unloading.RemoveAll(w => !w.IsAlive);
                return unloading.Count;
            }
        }
    }

    public void Unload()
    {
        Alc.Unload();
        lock (unloading)
            unloading.Add(new WeakReference(Alc));
        // Every few reloads, collect what is finished with.
        if (++loads % 8 == 0) {
            GC.Collect();
            GC.WaitForPendingFinalizers();
        }
    }

    // The target framework folder of DESIGN §5: the highest netN.M not
    // above this runtime, then netstandard2.1, then netstandard2.0.
    internal static string? PickTfm(IEnumerable<string> tfms)
    {
        var rt = new Version(Environment.Version.Major, Environment.Version.Minor);
        string? best = null;
        Version? bestV = null;
        foreach (var t in tfms) {
            if (!t.StartsWith("net", StringComparison.Ordinal) || t.StartsWith("netstandard") ||
                t.StartsWith("netcoreapp"))
                continue;
            if (!Version.TryParse(t.Substring(3), out var v) || v.Major < 5 || v > rt)
                continue;
            if (bestV is null || v > bestV) {
                best = t;
                bestV = v;
            }
        }
        if (best != null)
            return best;
        foreach (var t in new[] { "netstandard2.1", "netstandard2.0" })
            if (tfms.Contains(t))
                return t;
        return null;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static WorkerContext FromPackage(byte[] nupkg)
    {
        if (nupkg.Length >= 2 && nupkg[0] == (byte)'M' && nupkg[1] == (byte)'Z')
            return FromAssemblies(BareAssembly(nupkg), bare: true);
        var dlls = new Dictionary<string, byte[]>(StringComparer.OrdinalIgnoreCase);
        ZipArchive zip;
        try {
            zip = new ZipArchive(new MemoryStream(nupkg), ZipArchiveMode.Read);
        } catch (InvalidDataException e) {
            throw new LoadException($"the package is not a nupkg (zip): {e.Message}");
        }
        using (zip) {
            var byTfm = new Dictionary<string, List<ZipArchiveEntry>>();
            foreach (var e in zip.Entries) {
                var parts = e.FullName.Split('/');
                if (parts.Length != 3 || parts[0] != "lib" || parts[2].Length == 0)
                    continue;
                if (!byTfm.TryGetValue(parts[1], out var l))
                    byTfm[parts[1]] = l = new();
                l.Add(e);
            }
            var tfm = PickTfm(byTfm.Keys);
            if (tfm is null)
                throw new LoadException(byTfm.Count == 0
                    ? "the package has no lib/<tfm>/ folder"
                    : $"no lib/ folder of the package suits .NET {Environment.Version.Major}." +
                      $"{Environment.Version.Minor}: it has {string.Join(", ", byTfm.Keys.OrderBy(k => k))}");
            long total = 0;
            foreach (var e in byTfm[tfm]) {
                if (!e.Name.EndsWith(".dll", StringComparison.OrdinalIgnoreCase))
                    continue;
                total += e.Length;
                if (total > MaxUnpacked)
                    throw new LoadException($"lib/{tfm}/ holds more than {MaxUnpacked >> 20} MiB");
                using var s = e.Open();
                var ms = new MemoryStream();
                s.CopyTo(ms);
                dlls[Path.GetFileNameWithoutExtension(e.Name)] = ms.ToArray();
            }
            if (dlls.Count == 0)
                throw new LoadException($"lib/{tfm}/ holds no .dll");
        }
        return FromAssemblies(dlls, bare: false);
    }

    // A bare assembly under its own name, which is how the context finds
    // it when it resolves references.
    private static Dictionary<string, byte[]> BareAssembly(byte[] pe)
    {
        string name;
        try {
            using var reader = new PEReader(new MemoryStream(pe));
            if (!reader.HasMetadata)
                throw new LoadException("the .dll is a native library, not a .NET assembly");
            var md = reader.GetMetadataReader();
            if (!md.IsAssembly)
                throw new LoadException("the .dll is a .NET module without an assembly manifest");
            name = md.GetString(md.GetAssemblyDefinition().Name);
        } catch (BadImageFormatException e) {
            throw new LoadException($"the .dll is not a .NET assembly: {e.Message}");
        }
        return new Dictionary<string, byte[]>(StringComparer.OrdinalIgnoreCase) { [name] = pe };
    }

    private static WorkerContext FromAssemblies(Dictionary<string, byte[]> dlls, bool bare)
    {
        var alc = new Context(dlls);
        try {
            var assemblies = new List<Assembly>();
            foreach (var name in dlls.Keys.OrderBy(k => k, StringComparer.Ordinal)) {
                if (name.Equals(typeof(IWorker).Assembly.GetName().Name, StringComparison.OrdinalIgnoreCase))
                    continue; // the package's own DevKit copy: the host's serves
                try {
                    assemblies.Add(alc.LoadFromAssemblyName(new AssemblyName(name)));
                } catch (BadImageFormatException e) {
                    throw new LoadException($"{name}.dll is not a .NET assembly: {e.Message}");
                }
            }
            return new WorkerContext(alc, Instantiate(assemblies, bare
                ? " (a bare .dll brings none of its dependencies; the host serves only the " +
                  "DevKit: send the nupkg of `dotnet pack` instead)"
                : ""));
        } catch {
            alc.Unload();
            throw;
        }
    }

    // The one public non-abstract IWorker of the assemblies, made with its
    // parameterless constructor.
    // missing: said after the error when a referenced assembly is absent.
    internal static IWorker Instantiate(IEnumerable<Assembly> assemblies, string missing = "")
    {
        var found = new List<Type>();
        foreach (var a in assemblies) {
            Type[] types;
            try {
                types = a.GetExportedTypes();
            } catch (Exception e) when (e is ReflectionTypeLoadException or FileNotFoundException
                                         or TypeLoadException) {
                throw new LoadException($"{a.GetName().Name}: its types cannot be read: {e.Message}{missing}");
            }
            found.AddRange(types.Where(t => t.IsClass && !t.IsAbstract &&
                                            !t.ContainsGenericParameters &&
                                            typeof(IWorker).IsAssignableFrom(t)));
        }
        if (found.Count != 1)
            throw new LoadException(found.Count == 0
                ? "no public non-abstract class implements Virtufin.Worker.IWorker"
                : "more than one public class implements Virtufin.Worker.IWorker: " +
                  string.Join(", ", found.Select(t => t.FullName).OrderBy(n => n)));
        var type = found[0];
        if (type.GetConstructor(Type.EmptyTypes) is null)
            throw new LoadException($"{type.FullName} has no public parameterless constructor");
        try {
            return (IWorker)Activator.CreateInstance(type)!;
        } catch (TargetInvocationException e) {
            var inner = e.InnerException ?? e;
            throw new LoadException($"{type.FullName}'s constructor threw {inner.GetType().Name}: {inner.Message}");
        }
    }

    // A worker's collectible context: its package's assemblies from
    // memory, the DevKit from the host, the framework from the default.
    internal sealed class Context : AssemblyLoadContext
    {
        private readonly Dictionary<string, byte[]> dlls;

        public Context(Dictionary<string, byte[]> dlls) : base("worker", isCollectible: true)
        {
            this.dlls = dlls;
        }

        protected override Assembly? Load(AssemblyName name)
        {
            if (name.Name == typeof(IWorker).Assembly.GetName().Name)
                return typeof(IWorker).Assembly;
            if (name.Name != null && dlls.TryGetValue(name.Name, out var bytes))
                return LoadFromStream(new MemoryStream(bytes));
            return null;
        }
    }
}
