// Entry.cs — the bridge's UnmanagedCallersOnly entry points (issue 10):
// Init, Load, Process, GatewayReply and RunPosted, called by the C host on
// its loop thread.  Process copies the event.  A worker of concurrency 1
// runs there and then, on the loop thread, under LoopContext (below), so
// that its continuations come back to that thread rather than to the
// pool: an event costs no thread wake-up when the worker completes
// synchronously, awaits Task.Yield() or a gateway call (hosts/dotnet/
// host.c).  A worker of higher concurrency runs on the thread pool.
// Either way the outcome goes back through the host's completion callback
// with the Process's sequence number, so no thread ever blocks on a task.
// No exception escapes an entry point (one would end the process).
using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Virtufin.Worker;
using Virtufin.Worker.Hosting;

namespace Workmanager.Bridge;

internal static unsafe class Entry
{
    private static NativeCallbacks cb;
    private static WorkerContext? current;

    [UnmanagedCallersOnly]
    internal static int Init(NativeCallbacks* callbacks)
    {
        cb = *callbacks;
        SourceWorker.DevKitImage = new ReadOnlySpan<byte>(cb.DevKit, checked((int)cb.DevKitLen)).ToArray();
        GatewayTransport.Current = new Gateway();
        return 0;
    }

    // Loads the code (a nupkg for application/x-dotnet-dll) in place of
    // the current worker.  0, or -1 with the reason in err (NUL-ended).
    [UnmanagedCallersOnly]
    internal static int Load(NativeStr* mime, byte* code, long codeLen, int concurrency,
                             byte* err, int errCap)
    {
        try {
            string m = Str(mime) ?? "";
            var bytes = new ReadOnlySpan<byte>(code, checked((int)codeLen)).ToArray();
            var next = m switch {
                "application/x-dotnet-dll" => WorkerContext.FromPackage(bytes),
                "text/x-csharp" => SourceWorker.Load(bytes),
                _ => throw new LoadException($"this host has no loader for {m}"),
            };
            next.Gate = new SemaphoreSlim(Math.Max(1, concurrency));
            // As the host decides which Process to run on its loop thread
            // (host.c, load()).
            next.Inline = concurrency == 1;
            var old = current;
            current = next;
            old?.Unload();
            return 0;
        } catch (Exception e) {
            string msg = e is LoadException ? e.Message : $"{e.GetType().Name}: {e.Message}";
            var n = Encoding.UTF8.GetBytes(msg);
            int len = Math.Min(n.Length, errCap - 1);
            n.AsSpan(0, len).CopyTo(new Span<byte>(err, errCap));
            err[len] = 0;
            return -1;
        }
    }

    [UnmanagedCallersOnly]
    internal static void Process(ulong seq, NativeEvent* ev)
    {
        try {
            var input = ToManaged(ev);
            var w = current;
            if (w is null) {
                Fail(seq, "worker_error", "no worker is loaded", null, null);
                return;
            }
            if (w.Inline) {
                // The host runs one such event at a time: no gate.
                LoopContext.Run(static s => _ = Runner.RunHere(s.seq, s.w, s.input),
                                (seq, w: w.Worker, input));
                return;
            }
            // The worker's code, even its synchronous start, runs on the
            // pool: the loop thread only hands it over.
            ThreadPool.UnsafeQueueUserWorkItem(static s => _ = Runner.Run(s.seq, s.w, s.gate, s.input),
                                               (seq, w: w.Worker, gate: w.Gate, input),
                                               preferLocal: false);
        } catch (Exception e) {
            Fail(seq, "worker_error", $"{e.GetType().Name}: {e.Message}", null, null);
        }
    }

    [UnmanagedCallersOnly]
    internal static void GatewayReply(ulong token, int status, byte* body, long len)
    {
        try {
            Gateway.Reply(token, status, new ReadOnlySpan<byte>(body, checked((int)len)).ToArray());
        } catch (Exception) {
            // A reply to no call: nothing waits for it.
        }
    }

    // What was posted to LoopContext from elsewhere, once the host was
    // woken (Wake).
    [UnmanagedCallersOnly]
    internal static void RunPosted()
    {
        try {
            LoopContext.Run(static _ => { }, 0);
        } catch (Exception) {
            // LoopContext.Run catches what a callback throws.
        }
    }

    internal static void Wake() => cb.Wake();

    // ---- to and from the native views ------------------------------------

    internal static string? Str(NativeStr* s) =>
        s->Len < 0 ? null : Encoding.UTF8.GetString(s->Ptr, checked((int)s->Len));

    private static CloudEvent ToManaged(NativeEvent* ev)
    {
        var ce = new CloudEvent {
            Id = Str(ev->Field(0)) ?? "",
            Type = Str(ev->Field(1)) ?? "",
            Source = Str(ev->Field(2)) ?? "",
            SpecVersion = Str(ev->Field(3)) ?? "1.0",
            DataContentType = Str(ev->Field(4)),
            DataSchema = Str(ev->Field(5)),
            Subject = Str(ev->Field(6)),
            Time = Str(ev->Field(7)),
        };
        var d = ev->Field(8);
        if (d->Len >= 0)
            ce.Data = new ReadOnlySpan<byte>(d->Ptr, checked((int)d->Len)).ToArray();
        for (long i = 0; i < ev->NExt; i++)
            ce.Extensions.Add(new(Str(&ev->Ext[2 * i])!, Str(&ev->Ext[2 * i + 1])!));
        return ce;
    }

    // Pins every string of output and hands the views to the host, which
    // copies them before it returns.
    internal static void Complete(ulong seq, CloudEvent? output)
    {
        var err = stackalloc NativeStr[4];
        for (int i = 0; i < 4; i++)
            err[i].Len = -1;
        if (output is null) {
            cb.Complete(seq, null, err);
            return;
        }
        var parts = new List<byte[]?> {
            U(output.Id), U(output.Type), U(output.Source), U(output.SpecVersion),
            U(output.DataContentType), U(output.DataSchema), U(output.Subject),
            U(output.Time), output.Data,
        };
        foreach (var kv in output.Extensions) {
            parts.Add(U(kv.Key) ?? Array.Empty<byte>());
            parts.Add(U(kv.Value) ?? Array.Empty<byte>());
        }
        var handles = new GCHandle[parts.Count];
        var views = new NativeStr[parts.Count];
        try {
            for (int i = 0; i < parts.Count; i++) {
                if (parts[i] is null) {
                    views[i].Len = -1;
                    continue;
                }
                handles[i] = GCHandle.Alloc(parts[i], GCHandleType.Pinned);
                views[i].Ptr = (byte*)handles[i].AddrOfPinnedObject();
                views[i].Len = parts[i]!.Length;
            }
            NativeEvent ne;
            var f = (NativeStr*)ne.Raw;
            for (int i = 0; i < NativeEvent.Fields; i++)
                f[i] = views[i];
            ne.NExt = output.Extensions.Count;
            fixed (NativeStr* v = views) {
                ne.Ext = v + NativeEvent.Fields;
                cb.Complete(seq, &ne, err);
            }
        } finally {
            foreach (var h in handles)
                if (h.IsAllocated)
                    h.Free();
        }
    }

    internal static void Fail(ulong seq, string type, string message, string? excType, string? trace)
    {
        var parts = new[] { U(type), U(message), U(excType), U(trace) };
        var err = stackalloc NativeStr[4];
        fixed (byte* p0 = parts[0], p1 = parts[1], p2 = parts[2], p3 = parts[3]) {
            byte*[] ptrs = { p0, p1, p2, p3 };
            for (int i = 0; i < 4; i++) {
                err[i].Ptr = ptrs[i];
                err[i].Len = parts[i] is null ? -1 : parts[i]!.Length;
            }
            cb.Complete(seq, null, err);
        }
    }

    internal static void Log(int level, string message)
    {
        var b = Encoding.UTF8.GetBytes(message);
        fixed (byte* p = b) {
            var s = new NativeStr { Ptr = p, Len = b.Length };
            cb.Log(level, &s);
        }
    }

    private static byte[]? U(string? s) => s is null ? null : Encoding.UTF8.GetBytes(s);

    // ---- gateway calls -----------------------------------------------------

    private sealed class Gateway : IGatewayTransport
    {
        private static readonly object mu = new();
        private static readonly Dictionary<ulong, TaskCompletionSource<(int, byte[])>> calls = new();
        private static ulong next;

        public Task<(int Status, byte[] Body)> CallAsync(string service, string method, byte[] request)
        {
            var tcs = new TaskCompletionSource<(int, byte[])>(
                TaskCreationOptions.RunContinuationsAsynchronously);
            ulong token;
            lock (mu) {
                token = ++next;
                calls[token] = tcs;
            }
            var s = Encoding.UTF8.GetBytes(service);
            var m = Encoding.UTF8.GetBytes(method);
            fixed (byte* ps = s, pm = m, pr = request) {
                var vs = new NativeStr { Ptr = ps, Len = s.Length };
                var vm = new NativeStr { Ptr = pm, Len = m.Length };
                var vr = new NativeStr { Ptr = pr, Len = request.Length };
                cb.Gateway(token, &vs, &vm, &vr);
            }
            return tcs.Task;
        }

        public static void Reply(ulong token, int status, byte[] body)
        {
            TaskCompletionSource<(int, byte[])>? tcs;
            lock (mu) {
                if (calls.Remove(token, out tcs) == false)
                    return;
            }
            tcs!.TrySetResult((status, body));
        }
    }
}

// The worker's run, outside the unsafe class (no await in an unsafe
// context): its outcome goes to the host's completion callback.
internal static class Runner
{
    // A worker of concurrency 1 on the loop thread (LoopContext): its
    // awaits keep the context, so this ends there too, usually before
    // LoopContext.Run returns.
    internal static async Task RunHere(ulong seq, IWorker w, CloudEvent input)
    {
        CloudEvent? output;
        try {
            output = await w.ProcessAsync(input);
        } catch (Exception e) {
            Entry.Fail(seq, "exception", e.Message, e.GetType().FullName, e.ToString());
            return;
        }
        try {
            Entry.Complete(seq, output);
        } catch (Exception e) {
            Entry.Fail(seq, "worker_error", $"the output cannot be sent: {e.Message}", null, null);
        }
    }

    internal static async Task Run(ulong seq, IWorker w, SemaphoreSlim gate, CloudEvent input)
    {
        CloudEvent? output;
        // The worker's concurrency: waited for without a thread.
        await gate.WaitAsync().ConfigureAwait(false);
        try {
            output = await w.ProcessAsync(input).ConfigureAwait(false);
        } catch (Exception e) {
            Entry.Fail(seq, "exception", e.Message, e.GetType().FullName, e.ToString());
            return;
        } finally {
            gate.Release();
        }
        try {
            Entry.Complete(seq, output);
        } catch (Exception e) {
            Entry.Fail(seq, "worker_error", $"the output cannot be sent: {e.Message}", null, null);
        }
    }
}

// The loop thread's SynchronizationContext while it runs a worker of
// concurrency 1 (Entry.Process, RunPosted).  What the worker's awaits
// post from the loop thread itself runs there before Run returns (so
// Task.Yield() costs no hop); what other threads post (a timer, a task
// the worker's code left on the pool) while the loop thread is idle is
// queued and the host woken to run it (Wake, RunPosted).  What other
// threads post while the loop thread runs the worker goes to the pool
// instead, as it would without this context: the worker may be blocked
// on it (task.Result), and the pool is what workers were written for.
// A worker may also block the loop thread on a continuation it posted
// from there (a method of its own awaiting Task.Yield(), then .Result on
// its task), which would wait for the worker to return: a watchdog
// thread hands what is queued to the pool when the loop thread has been
// in one callback for a whole tick (Watch), so that waits a tick or two,
// not until the deadline.  It ticks only while events come, and waits
// untimed after IdleTicks ticks without one.  A thread of its own rather
// than a Timer: a Timer's tick wakes a pool thread, which then spins for
// a millisecond or more before it sleeps again (perf: 7% of the host's
// CPU at 20 ticks a second).
internal sealed class LoopContext : SynchronizationContext
{
    private const int TickMs = 50;
    private const int IdleTicks = 20;
    private static readonly LoopContext instance = new();
    private static readonly object mu = new();
    // Everything below under mu.  Posted from other threads while the
    // loop thread was idle.
    private static readonly Queue<(SendOrPostCallback, object?)> remote = new();
    // What the loop thread runs before Run returns.
    private static readonly Queue<(SendOrPostCallback, object?)> queue = new();
    private static bool inWorker;
    // Callbacks the loop thread started: the watchdog's measure of progress.
    private static long started;
    private static Thread? watchdog;
    private static int idle; // ticks without a Run
    private static bool parked; // the watchdog waits for a Run

    // The loop thread inside Run.
    [ThreadStatic] private static bool onLoop;

    public override void Post(SendOrPostCallback d, object? state)
    {
        lock (mu) {
            if (onLoop) {
                queue.Enqueue((d, state));
                return;
            }
            if (!inWorker) {
                remote.Enqueue((d, state));
                if (remote.Count == 1)
                    Entry.Wake();
                return;
            }
        }
        ToPool(d, state);
    }

    public override SynchronizationContext CreateCopy() => this;

    private static void ToPool(SendOrPostCallback d, object? state) =>
        ThreadPool.UnsafeQueueUserWorkItem(static s => s.d(s.state), (d, state), preferLocal: false);

    // Runs start(arg), then what it and the remote queue posted, until
    // nothing is left.  On the loop thread, the channel released (host.c).
    internal static void Run<T>(Action<T> start, T arg)
    {
        lock (mu) {
            inWorker = true;
            started++;
            while (remote.TryDequeue(out var r))
                queue.Enqueue(r);
            if (watchdog is null) {
                watchdog = new Thread(Watch) { IsBackground = true, Name = "wm LoopContext" };
                watchdog.Start();
            } else if (parked) {
                parked = false;
                Monitor.Pulse(mu);
            }
            idle = 0;
        }
        var outer = Current;
        SetSynchronizationContext(instance);
        onLoop = true;
        try {
            start(arg);
            for (;;) {
                (SendOrPostCallback, object?) p;
                lock (mu) {
                    if (!queue.TryDequeue(out p))
                        break;
                    started++;
                }
                try {
                    p.Item1(p.Item2);
                } catch (Exception e) {
                    // An async void method's exception: logged, where the
                    // pool would have ended the process.
                    Entry.Log(3, $"unhandled exception in a posted callback: {e}");
                }
            }
        } finally {
            onLoop = false;
            SetSynchronizationContext(outer);
            lock (mu)
                inWorker = false;
        }
    }

    // The watchdog's thread (see above).
    private static void Watch()
    {
        long seen = -1;
        lock (mu) {
            for (;;) {
                if (parked)
                    Monitor.Wait(mu);
                else
                    Monitor.Wait(mu, TickMs);
                if (!inWorker) {
                    if (++idle >= IdleTicks)
                        parked = true;
                    continue;
                }
                idle = 0;
                if (started != seen) {
                    seen = started;
                    continue;
                }
                while (queue.TryDequeue(out var p))
                    ToPool(p.Item1, p.Item2);
            }
        }
    }
}

internal sealed class LoadException : Exception
{
    public LoadException(string message) : base(message) { }
}
