/*
 * test_worker_api_cxx.cc — include/workmanager/worker_api.h compiled as
 * C++ (-std=c++11 -pedantic -Wall -Wextra -Werror, its rule in
 * tests/workers/native/Makefile.inc) and held to the official FlatBuffers
 * C++ runtime, with code flatc generates from
 * tests/fixtures/original_worker_api.fbs (the original's schema, not
 * the schemas of ipc/):
 *
 *   - responses built by the helpers pass flatbuffers::Verifier and read
 *     back through the generated accessors;
 *   - events built by flatbuffers::FlatBufferBuilder (which lays a buffer
 *     out back to front, the reverse of the helpers) read back through the
 *     helpers, and their echo verifies.
 *
 * Exit status 0 when every check holds; each failure is printed.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "original_worker_api_generated.h"
#include "workmanager/worker_api.h"

namespace fb = Virtufin::Worker::FlatBuffers;

static int failures;
static int checks;

#define CHECK(cond)                                                            \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__,        \
                         __LINE__, #cond);                                     \
        }                                                                      \
    } while (0)

static std::string
str(struct virtufin_str s)
{
    return s.ptr != nullptr ? std::string(s.ptr, s.len) : std::string("<absent>");
}

static std::string
str(const flatbuffers::String *s)
{
    return s != nullptr ? s->str() : std::string("<absent>");
}

/* An exact-size heap copy: AddressSanitizer sees reads past the end. */
static uint8_t *
dup(const uint8_t *p, size_t n)
{
    uint8_t *d = static_cast<uint8_t *>(std::malloc(n ? n : 1));
    if (d == nullptr)
        std::abort();
    std::memcpy(d, p, n);
    return d;
}

/* Verifies a helper-built response with the official verifier and
 * returns its root (valid while buf lives), or nullptr. */
static const fb::WorkerResponse *
verified(const uint8_t *buf, int32_t len)
{
    if (buf == nullptr || len <= 0)
        return nullptr;
    flatbuffers::Verifier v(buf, static_cast<size_t>(len));
    if (!v.VerifyBuffer<fb::WorkerResponse>(nullptr))
        return nullptr;
    return flatbuffers::GetRoot<fb::WorkerResponse>(buf);
}

static void
test_error_response()
{
    uint8_t *out = nullptr;
    int32_t len = 0;

    CHECK(virtufin_response_error("asked to fail", &out, &len) == VIRTUFIN_OK);
    const fb::WorkerResponse *r = verified(out, len);
    CHECK(r != nullptr);
    if (r != nullptr) {
        CHECK(r->result_event() == nullptr);
        CHECK(str(r->error_message()) == "asked to fail");
    }
    virtufin_response_free(out);
}

static void
test_event_response()
{
    static const uint8_t data[] = { 0, 1, 2, 0xff, 0 };
    struct virtufin_extension exts[2];
    struct virtufin_event ev;
    uint8_t *out = nullptr;
    int32_t len = 0;

    virtufin_event_init(&ev);
    ev.id = virtufin_str_c("id-1");
    ev.type = virtufin_str_c("t.out");
    ev.source = virtufin_str_c("/src");
    ev.specversion = virtufin_str_c("1.0");
    ev.time = virtufin_str_c("");
    ev.data.ptr = data;
    ev.data.len = sizeof data;
    exts[0].name = virtufin_str_c("correlationid");
    exts[0].value = virtufin_str_c("c-1");
    exts[1].name = virtufin_str_c("n");
    exts[1].value = virtufin_str_c("12345");
    ev.extensions = exts;
    ev.n_extensions = 2;
    CHECK(virtufin_response_event(&ev, &out, &len) == VIRTUFIN_OK);
    const fb::WorkerResponse *r = verified(out, len);
    CHECK(r != nullptr);
    if (r == nullptr)
        return;
    CHECK(r->error_message() == nullptr);
    const fb::CloudEvent *e = r->result_event();
    CHECK(e != nullptr);
    if (e != nullptr) {
        CHECK(str(e->id()) == "id-1");
        CHECK(str(e->type()) == "t.out");
        CHECK(str(e->source()) == "/src");
        CHECK(str(e->specversion()) == "1.0");
        CHECK(e->datacontenttype() == nullptr && e->dataschema() == nullptr &&
              e->subject() == nullptr);
        CHECK(e->time() != nullptr && e->time()->size() == 0);
        CHECK(e->data() != nullptr && e->data()->size() == sizeof data &&
              std::memcmp(e->data()->data(), data, sizeof data) == 0);
        CHECK(e->extensions() != nullptr && e->extensions()->size() == 2);
        if (e->extensions() != nullptr && e->extensions()->size() == 2) {
            CHECK(str(e->extensions()->Get(0)->name()) == "correlationid");
            CHECK(str(e->extensions()->Get(0)->value()) == "c-1");
            CHECK(str(e->extensions()->Get(1)->value()) == "12345");
        }
    }
    virtufin_response_free(out);
}

/* Every length of each string mod 4, with and without extensions: the
 * official verifier's alignment rules hold for each layout. */
static void
test_response_layouts()
{
    std::string s(64, 'x');
    for (unsigned n = 0; n < 16; n++) {
        struct virtufin_extension ext;
        struct virtufin_event ev;
        uint8_t *out = nullptr;
        int32_t len = 0;

        virtufin_event_init(&ev);
        ev.id.ptr = s.data();
        ev.id.len = n;
        ev.type.ptr = s.data();
        ev.type.len = n / 2;
        ev.data.ptr = reinterpret_cast<const uint8_t *>(s.data());
        ev.data.len = n / 3;
        ext.name.ptr = s.data();
        ext.name.len = n % 5;
        ext.value.ptr = s.data();
        ext.value.len = n;
        ev.extensions = &ext;
        ev.n_extensions = n % 2;
        CHECK(virtufin_response_event(&ev, &out, &len) == VIRTUFIN_OK);
        const fb::WorkerResponse *r = verified(out, len);
        CHECK(r != nullptr && r->result_event() != nullptr &&
              r->result_event()->id()->size() == n);
        virtufin_response_free(out);
    }
}

static void
test_read_official_event()
{
    flatbuffers::FlatBufferBuilder b;
    std::vector<uint8_t> data = { 'x', 0, 'y' };
    std::vector<flatbuffers::Offset<fb::Extension>> exts = {
        fb::CreateExtensionDirect(b, "correlationid", "c-9"),
        fb::CreateExtensionDirect(b, "b", ""),
        fb::CreateExtensionDirect(b, "a", "v"),
    };
    b.Finish(fb::CreateCloudEventDirect(
        b, "id-9", "com.example.t", "/s", "1.0", "text/plain", "schema",
        "subj", "2024-01-01T00:00:00Z", &data, &exts));
    uint8_t *buf = dup(b.GetBufferPointer(), b.GetSize());
    int32_t len = static_cast<int32_t>(b.GetSize());
    struct virtufin_event ev;

    CHECK(virtufin_event_read(buf, len, &ev) == VIRTUFIN_OK);
    CHECK(str(ev.id) == "id-9");
    CHECK(str(ev.type) == "com.example.t");
    CHECK(str(ev.source) == "/s");
    CHECK(str(ev.specversion) == "1.0");
    CHECK(str(ev.datacontenttype) == "text/plain");
    CHECK(str(ev.dataschema) == "schema");
    CHECK(str(ev.subject) == "subj");
    CHECK(str(ev.time) == "2024-01-01T00:00:00Z");
    CHECK(ev.data.len == 3 && std::memcmp(ev.data.ptr, "x\0y", 3) == 0);
    CHECK(ev.n_extensions == 3);
    struct virtufin_extension e;
    CHECK(virtufin_event_extension_at(&ev, 0, &e) == VIRTUFIN_OK &&
          str(e.name) == "correlationid");
    CHECK(virtufin_event_extension_at(&ev, 2, &e) == VIRTUFIN_OK &&
          str(e.name) == "a" && str(e.value) == "v");
    CHECK(str(virtufin_event_extension(&ev, "correlationid")) == "c-9");
    CHECK(str(virtufin_event_extension(&ev, "b")).empty());
    CHECK(virtufin_event_extension(&ev, "c").ptr == nullptr);

    /* The echo verifies and carries everything, extensions in order. */
    uint8_t *out = nullptr;
    int32_t olen = 0;
    CHECK(virtufin_response_event(&ev, &out, &olen) == VIRTUFIN_OK);
    const fb::WorkerResponse *r = verified(out, olen);
    CHECK(r != nullptr && r->result_event() != nullptr);
    if (r != nullptr && r->result_event() != nullptr) {
        const fb::CloudEvent *o = r->result_event();
        CHECK(str(o->subject()) == "subj");
        CHECK(o->data()->size() == 3);
        CHECK(o->extensions()->size() == 3);
        CHECK(str(o->extensions()->Get(0)->value()) == "c-9");
        CHECK(str(o->extensions()->Get(2)->name()) == "a");
    }
    virtufin_response_free(out);

    /* Every truncation of the official buffer is refused by both. */
    for (int32_t n = 0; n < len; n++) {
        uint8_t *cut = dup(buf, static_cast<size_t>(n));
        flatbuffers::Verifier v(cut, static_cast<size_t>(n));
        bool theirs = fb::VerifyCloudEventBuffer(v);
        bool mine = virtufin_event_read(cut, n, &ev) == VIRTUFIN_OK;
        if (mine != theirs) {
            failures++;
            std::fprintf(stderr, "truncation to %d: helpers %d, official %d\n",
                         static_cast<int>(n), mine, theirs);
        }
        std::free(cut);
    }
    std::free(buf);
}

static void
test_read_official_minimal()
{
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::CreateCloudEventDirect(b, "i", "t", "s", "1.0"));
    uint8_t *buf = dup(b.GetBufferPointer(), b.GetSize());
    struct virtufin_event ev;

    CHECK(virtufin_event_read(buf, static_cast<int32_t>(b.GetSize()), &ev) ==
          VIRTUFIN_OK);
    CHECK(str(ev.id) == "i" && ev.subject.ptr == nullptr &&
          ev.data.ptr == nullptr && ev.n_extensions == 0);
    std::free(buf);
}

int
main()
{
    test_error_response();
    test_event_response();
    test_response_layouts();
    test_read_official_event();
    test_read_official_minimal();
    std::printf("%d checks, %d failed: the header builds as C++ and agrees "
                "with the official FlatBuffers runtime\n",
                checks, failures);
    return failures != 0 ? 1 : 0;
}
