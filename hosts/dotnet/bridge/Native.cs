// Native.cs — the structures and callbacks shared with the C host
// (hosts/dotnet/bridge.h mirrors them field for field): an event as
// pointer/length views, and the host's completion, log, gateway and
// wake callbacks.  Strings are UTF-8; a length of -1 means absent.
using System;
using System.Runtime.InteropServices;

namespace Workmanager.Bridge;

[StructLayout(LayoutKind.Sequential)]
internal unsafe struct NativeStr
{
    public byte* Ptr;
    public long Len;
}

// Fields 0..8: id, type, source, specversion, datacontenttype,
// dataschema, subject, time, data; then next extensions as name/value
// pairs in ext[0 .. 2*next).
[StructLayout(LayoutKind.Sequential)]
internal unsafe struct NativeEvent
{
    public const int Fields = 9;
    public fixed byte Raw[Fields * 16];
    public long NExt;
    public NativeStr* Ext;

    public NativeStr* Field(int i)
    {
        fixed (byte* p = Raw)
            return (NativeStr*)p + i;
    }
}

[StructLayout(LayoutKind.Sequential)]
internal unsafe struct NativeCallbacks
{
    // (seq, output or NULL, error[4]: type, message, exception type,
    // traceback; error[0].Len == -1 when none)
    public delegate* unmanaged<ulong, NativeEvent*, NativeStr*, void> Complete;
    // (level 0..4, message)
    public delegate* unmanaged<int, NativeStr*, void> Log;
    // (token, service, method, request)
    public delegate* unmanaged<ulong, NativeStr*, NativeStr*, NativeStr*, void> Gateway;
    // () the loop thread is to call RunPosted
    public delegate* unmanaged<void> Wake;
    // The DevKit's image, for compiling C# source workers against it.
    public byte* DevKit;
    public long DevKitLen;
}
