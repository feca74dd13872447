// Hosting.cs — what the host's bridge plugs into the DevKit: the transport
// of gateway calls.  Not for workers.
using System.Threading.Tasks;

namespace Virtufin.Worker.Hosting;

public interface IGatewayTransport
{
    // The service's status and response (or error text) for request.
    Task<(int Status, byte[] Body)> CallAsync(string service, string method, byte[] request);
}

public static class GatewayTransport
{
    public static IGatewayTransport? Current { get; set; }
}
