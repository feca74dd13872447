/*
 * echo_worker.cc — the native engine's test worker (DESIGN §4), built with
 * the official FlatBuffers C++ runtime from code that flatc generates out
 * of tests/fixtures/original_worker_api.fbs (the original's field list,
 * transcribed independently of the ipc/ schemas).  That it talks to
 * wm-host-native is the acceptance of the ABI: a drift of our codec from
 * the original shows here.
 *
 * Process() acts on the input event's type:
 *
 *   echo (and any type not below)  result_event = the input, type + ".out",
 *       same id, source, specversion, optional strings, data and
 *       extensions (correlationid first), plus extensions pid (getpid(),
 *       read once: the library lives in one process)
 *       and worker ($VIRTUFIN_WORKER_ID or "")
 *   error     error_message "asked to fail"
 *   none      returns 0, no reply (*out_buf NULL)
 *   fail      returns 7, *out_buf NULL
 *   garbage   returns 0 with 64 malloc'd bytes of 0xAB (not a FlatBuffer):
 *             the engine must report worker_error and still FreeResult it
 *   crash     SIGSEGV (handler reset to SIG_DFL first); abort: abort()
 *   overflow  overflows its thread's stack: unbounded recursion through
 *             frames the compiler can neither drop nor turn into a loop
 *             (SIGSEGV on the guard page; handler reset to SIG_DFL first)
 *   loop      never returns
 *   log       host->log(INFO, "hello from native"), then echoes
 *   gateway   workmanager.state put {"key":"n","value":1}, then get
 *             {"key":"n"}; echoes with data = the get's response
 *   sleep     sleeps extension ms (default 100) milliseconds, then echoes
 *   counts    echoes with data {"outputs": N, "freed": M}: the non-NULL
 *             outputs returned before this call and the FreeResult calls
 *             so far
 *
 * The entry points ProcessV1 ... ProcessV9 are Process whose echoes also
 * carry the extension codeversion = "1" ... "9": a package whose manifest
 * names one of them as its entry_point marks every output with it, so that
 * a test can tell which code processed an event (reload under load).
 *
 * Invariants: every output is one malloc'd copy of a finished builder (no
 * file identifier, no size prefix) and FreeResult is free(); the only
 * shared state is two atomic counters, so Process may run on several
 * threads at once.  An input that fails the FlatBuffers verifier gets an
 * error_message, never a crash.
 */
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

#include <flatbuffers/flatbuffers.h>

#include "original_worker_api_generated.h"
#include "workmanager/worker_api.h"

namespace fb = Virtufin::Worker::FlatBuffers;

extern "C" {
int32_t Process(const VirtufinHost *host, const uint8_t *in_buf,
                int32_t in_len, uint8_t **out_buf, int32_t *out_len);
void FreeResult(uint8_t *buf);
}

/* ProcessV1 ... ProcessV9: Process, its echoes tagged codeversion = N. */
#define ECHO_TAGGED_ENTRIES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
#define ECHO_DECLARE_TAGGED(n)                                             \
    extern "C" int32_t ProcessV##n(const VirtufinHost *host,               \
                                   const uint8_t *in_buf, int32_t in_len,  \
                                   uint8_t **out_buf, int32_t *out_len);   \
    static_assert(std::is_same<decltype(&ProcessV##n),                     \
                               virtufin_process_fn>::value,                \
                  "ProcessV" #n " does not match virtufin_process_fn");
ECHO_TAGGED_ENTRIES(ECHO_DECLARE_TAGGED)

/* Checked at compile time against the ABI's function-pointer types. */
static_assert(std::is_same<decltype(&Process), virtufin_process_fn>::value,
              "Process does not match virtufin_process_fn");
static_assert(std::is_same<decltype(&FreeResult),
                           virtufin_free_result_fn>::value,
              "FreeResult does not match virtufin_free_result_fn");

static std::atomic<long> outputs_returned{0};
static std::atomic<long> results_freed{0};

/* The `garbage` reply's size and byte: not a valid WorkerResponse (its
 * root offset points far outside the buffer). */
static const size_t GARBAGE_LEN = 64;
static const uint8_t GARBAGE_BYTE = 0xAB;
/* Longest `sleep` honoured: beyond any test's timeout, short of forever. */
static const long SLEEP_MAX_MS = 600000;
static const long SLEEP_DEFAULT_MS = 100;
/* `overflow`: bytes of each recursive frame; small enough that the frames'
 * writes cannot step over a guard page (4 KiB) without touching it. */
static const size_t OVERFLOW_FRAME = 512;
/* The recursion's way out, never reached: volatile, so that the compiler
 * can neither prove the recursion endless nor bound it. */
static volatile unsigned long overflow_depth_max = ~0UL;

/* The copy of an optional string: absent stays absent. */
static flatbuffers::Offset<flatbuffers::String>
copy_str(flatbuffers::FlatBufferBuilder &b, const flatbuffers::String *s)
{
    return s != nullptr ? b.CreateString(s) : 0;
}

static std::string
ext_value(const fb::CloudEvent *ev, const char *name)
{
    if (ev->extensions() == nullptr)
        return std::string();
    for (const fb::Extension *e : *ev->extensions()) {
        if (e->name() != nullptr && e->name()->str() == name)
            return e->value() != nullptr ? e->value()->str() : std::string();
    }
    return std::string();
}

/* getpid() as text, computed once (thread-safe: a function-local static):
 * a system call per echo would be a good part of the echo's cost in the
 * benchmarks, and the library never changes process. */
static const std::string &
pid_text()
{
    static const std::string pid = std::to_string(static_cast<long>(getpid()));
    return pid;
}

/* Copies the finished builder into a malloc'd buffer for the engine. */
static int32_t
finish_output(flatbuffers::FlatBufferBuilder &b, uint8_t **out_buf,
              int32_t *out_len)
{
    uint8_t *p = static_cast<uint8_t *>(malloc(b.GetSize()));

    if (p == nullptr)
        return ENOMEM;
    memcpy(p, b.GetBufferPointer(), b.GetSize());
    *out_buf = p;
    *out_len = static_cast<int32_t>(b.GetSize());
    outputs_returned.fetch_add(1);
    return 0;
}

static int32_t
reply_error(const std::string &msg, uint8_t **out_buf, int32_t *out_len)
{
    flatbuffers::FlatBufferBuilder b;

    b.Finish(fb::CreateWorkerResponse(b, 0, b.CreateString(msg)));
    return finish_output(b, out_buf, out_len);
}

/*
 * Echoes ev with type + ".out"; data replaces the input's data when
 * `data` is non-null (then datacontenttype becomes application/json: the
 * replacements are JSON); a non-null tag adds the extension codeversion.
 */
static int32_t
reply_echo(const fb::CloudEvent *ev, const std::string *data,
           const char *tag, uint8_t **out_buf, int32_t *out_len)
{
    flatbuffers::FlatBufferBuilder b;
    std::vector<std::pair<std::string, std::string>> exts;

    /* correlationid first, as the original orders it; then the others in
     * their order; pid and worker are ours and replace any input's. */
    if (ev->extensions() != nullptr) {
        for (const fb::Extension *e : *ev->extensions()) {
            if (e->name() != nullptr && e->name()->str() == "correlationid")
                exts.emplace_back("correlationid",
                                  e->value() ? e->value()->str() : "");
        }
        for (const fb::Extension *e : *ev->extensions()) {
            std::string name = e->name() ? e->name()->str() : "";
            if (name == "correlationid" || name == "pid" ||
                name == "worker" || name == "codeversion")
                continue;
            exts.emplace_back(name, e->value() ? e->value()->str() : "");
        }
    }
    const char *worker = getenv("VIRTUFIN_WORKER_ID");
    exts.emplace_back("pid", pid_text());
    exts.emplace_back("worker", worker != nullptr ? worker : "");
    if (tag != nullptr)
        exts.emplace_back("codeversion", tag);

    std::vector<flatbuffers::Offset<fb::Extension>> ext_offs;
    for (const auto &kv : exts)
        ext_offs.push_back(fb::CreateExtensionDirect(b, kv.first.c_str(),
                                                     kv.second.c_str()));

    std::string type = (ev->type() ? ev->type()->str() : "") + ".out";
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data_off;
    flatbuffers::Offset<flatbuffers::String> ctype;
    if (data != nullptr) {
        data_off = b.CreateVector(
            reinterpret_cast<const uint8_t *>(data->data()), data->size());
        ctype = b.CreateString("application/json");
    } else {
        ctype = copy_str(b, ev->datacontenttype());
    }
    if (data == nullptr && ev->data() != nullptr) {
        data_off = b.CreateVector(ev->data()->data(), ev->data()->size());
    }

    auto ev_off = fb::CreateCloudEvent(
        b, copy_str(b, ev->id()), b.CreateString(type),
        copy_str(b, ev->source()), copy_str(b, ev->specversion()), ctype,
        copy_str(b, ev->dataschema()), copy_str(b, ev->subject()),
        copy_str(b, ev->time()), data_off, b.CreateVector(ext_offs));
    b.Finish(fb::CreateWorkerResponse(b, ev_off));
    return finish_output(b, out_buf, out_len);
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/*
 * Recurses until the stack runs out.  Each frame writes both ends of a
 * volatile array and adds to the callee's result after it returns: no
 * tail call, nothing to optimise away.
 */
static unsigned long __attribute__((noinline))
overflow(unsigned long depth)
{
    volatile char frame[OVERFLOW_FRAME];

    frame[0] = static_cast<char>(depth);
    frame[OVERFLOW_FRAME - 1] = static_cast<char>(depth >> 8);
    if (depth >= overflow_depth_max)
        return frame[0];
    return overflow(depth + 1) + frame[0] + frame[OVERFLOW_FRAME - 1];
}

/* A gateway call whose response (or error text) lands in *resp. */
static int32_t
gateway(const VirtufinHost *host, const char *method, const std::string &req,
        std::string *resp)
{
    uint8_t *r = nullptr;
    int32_t rlen = 0;
    int32_t rc = host->gateway_call(
        host->engine_ptr, "workmanager.state", method,
        reinterpret_cast<const uint8_t *>(req.data()),
        static_cast<int32_t>(req.size()), &r, &rlen);

    resp->clear();
    if (r != nullptr) {
        /* a response is rlen bytes; an error's text may come without a
         * length, NUL-terminated */
        const char *t = reinterpret_cast<const char *>(r);
        if (rlen > 0)
            resp->assign(t, static_cast<size_t>(rlen));
        else if (rc != 0)
            resp->assign(t);
        host->free_response(host->engine_ptr, r);
    }
    return rc;
}

/* The ABI's VirtufinHost, as the original laid it out (DESIGN §4): the
 * engine pointer, abi_version, then log, gateway_call and free_response —
 * checked here against the header at compile time, and what the engine
 * passes at run time on every call (a wrong one is answered as an error). */
static_assert(sizeof(VirtufinHost) == 40, "VirtufinHost is 40 bytes");
static_assert(offsetof(VirtufinHost, engine_ptr) == 0, "engine_ptr first");
static_assert(offsetof(VirtufinHost, abi_version) == 8, "abi_version second");
static_assert(offsetof(VirtufinHost, log) == 16, "log third");
static_assert(offsetof(VirtufinHost, gateway_call) == 24, "gateway_call");
static_assert(offsetof(VirtufinHost, free_response) == 32, "free_response");

static bool
host_valid(const VirtufinHost *host)
{
    return host != nullptr && host->engine_ptr != nullptr &&
           host->abi_version == 1 && host->log != nullptr &&
           host->gateway_call != nullptr && host->free_response != nullptr;
}

/* Process and ProcessV<n>: tag is NULL for Process, "n" for the others. */
static int32_t
process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len, const char *tag)
{
    *out_buf = nullptr;
    *out_len = 0;

    if (!host_valid(host))
        return reply_error("the VirtufinHost passed is not ABI 1's", out_buf,
                           out_len);
    if (in_buf == nullptr || in_len <= 0)
        return reply_error("empty input", out_buf, out_len);
    flatbuffers::Verifier v(in_buf, static_cast<size_t>(in_len));
    if (!fb::VerifyCloudEventBuffer(v))
        return reply_error("input is not a CloudEvent", out_buf, out_len);
    const fb::CloudEvent *ev = fb::GetCloudEvent(in_buf);
    std::string type = ev->type() != nullptr ? ev->type()->str() : "";

    if (type == "error")
        return reply_error("asked to fail", out_buf, out_len);
    if (type == "none")
        return 0;
    if (type == "fail")
        return 7;
    if (type == "garbage") {
        uint8_t *p = static_cast<uint8_t *>(malloc(GARBAGE_LEN));
        if (p == nullptr)
            return ENOMEM;
        memset(p, GARBAGE_BYTE, GARBAGE_LEN);
        *out_buf = p;
        *out_len = static_cast<int32_t>(GARBAGE_LEN);
        outputs_returned.fetch_add(1);
        return 0;
    }
    if (type == "crash") {
        /* SIG_DFL first: the host may have a handler that would turn the
         * crash into something gentler than the death being tested. */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        return 1;
    }
    if (type == "abort")
        abort();
    if (type == "overflow") {
        signal(SIGSEGV, SIG_DFL);
        return overflow(0) != 0 ? 1 : 2;
    }
    if (type == "loop") {
        /* volatile: an endless loop without side effects is undefined
         * behaviour in C++ and may be optimised away */
        volatile unsigned long spin = 0;
        for (;;)
            spin = spin + 1;
    }
    if (type == "log") {
        host->log(host->engine_ptr, VIRTUFIN_LOG_INFO, "hello from native");
        return reply_echo(ev, nullptr, tag, out_buf, out_len);
    }
    if (type == "gateway") {
        std::string put, got;
        if (gateway(host, "put", "{\"key\":\"n\",\"value\":1}", &put) != 0)
            return reply_error("gateway put failed: " + put, out_buf,
                               out_len);
        if (gateway(host, "get", "{\"key\":\"n\"}", &got) != 0)
            return reply_error("gateway get failed: " + got, out_buf,
                               out_len);
        return reply_echo(ev, &got, tag, out_buf, out_len);
    }
    if (type == "sleep") {
        std::string s = ext_value(ev, "ms");
        long ms = SLEEP_DEFAULT_MS;
        if (!s.empty()) {
            char *end = nullptr;
            errno = 0;
            long n = strtol(s.c_str(), &end, 10);
            if (errno == 0 && end != s.c_str() && *end == '\0' && n >= 0)
                ms = n < SLEEP_MAX_MS ? n : SLEEP_MAX_MS;
        }
        sleep_ms(ms);
        return reply_echo(ev, nullptr, tag, out_buf, out_len);
    }
    if (type == "counts") {
        std::string data = "{\"outputs\": " +
                           std::to_string(outputs_returned.load()) +
                           ", \"freed\": " +
                           std::to_string(results_freed.load()) + "}";
        return reply_echo(ev, &data, tag, out_buf, out_len);
    }
    return reply_echo(ev, nullptr, tag, out_buf, out_len);
}

int32_t
Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len)
{
    return process(host, in_buf, in_len, out_buf, out_len, nullptr);
}

#define ECHO_DEFINE_TAGGED(n)                                              \
    int32_t ProcessV##n(const VirtufinHost *host, const uint8_t *in_buf,   \
                        int32_t in_len, uint8_t **out_buf,                 \
                        int32_t *out_len)                                  \
    {                                                                      \
        return process(host, in_buf, in_len, out_buf, out_len, #n);        \
    }
ECHO_TAGGED_ENTRIES(ECHO_DEFINE_TAGGED)

void
FreeResult(uint8_t *buf)
{
    results_freed.fetch_add(1);
    free(buf);
}
