-- bench/wrk_post.lua — the wrk script of bench/run: every contender over
-- HTTP (the daemon's invoke route, uWSGI, gunicorn) gets the same POST from
-- the same load generator.  The body is the file WRK_BODY, its type
-- WRK_CTYPE (application/json when unset); WRK_AUTH, when set, is sent as
-- a bearer token (the daemon's TCP listener wants one).
-- done() prints one line of JSON that bench/suite.py reads: requests,
-- errors (non-2xx/3xx answers, socket errors, timeouts) and the latency
-- percentiles in microseconds.

local f = assert(io.open(os.getenv("WRK_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
local ctype = os.getenv("WRK_CTYPE")
wrk.headers["Content-Type"] = (ctype and ctype ~= "") and ctype
   or "application/json"
local auth = os.getenv("WRK_AUTH")
if auth and auth ~= "" then
   wrk.headers["Authorization"] = "Bearer " .. auth
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      '{"requests": %d, "duration_us": %d, "errors": %d, ' ..
      '"non2xx": %d, "p50_us": %d, "p99_us": %d, "p999_us": %d, ' ..
      '"mean_us": %.1f, "max_us": %d}\n',
      summary.requests, summary.duration,
      e.connect + e.read + e.write + e.timeout, e.status,
      latency:percentile(50), latency:percentile(99),
      latency:percentile(99.9), latency.mean, latency.max))
end
