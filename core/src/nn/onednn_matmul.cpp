#include "nn/onednn_matmul.hpp"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "trainbench/error.hpp"

namespace trainbench {
namespace {

thread_local bool g_inside_call = false;
std::atomic<int64_t> g_executions{0};

void check(dnnl_status_t status, const char* what) {
    if (status != dnnl_success)
        throw Error(std::string("oneDNN: ") + what + " failed (status " + std::to_string(static_cast<int>(status)) + ")");
}

// The process's CPU engine, made on first use.
dnnl_engine_t cpu_engine() {
    static dnnl_engine_t engine = [] {
        dnnl_engine_t e = nullptr;
        check(dnnl_engine_create(&e, dnnl_cpu, 0), "creating the CPU engine");
        return e;
    }();
    return engine;
}

bool has_isa(dnnl_cpu_isa_t wanted) {
    const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

int64_t element_bytes(MatmulOperands operands) { return operands == MatmulOperands::bf16 ? 2 : 4; }

// The descriptors of one (sliced) shape. The caller destroys the primitive descriptor.
dnnl_primitive_desc_t describe(const MatmulShape& s) {
    // A primitive fixes its thread count from the creating thread's OpenMP setting: one, as it
    // will run inside one member of the worker team.
    omp_set_num_threads(1);
    const dnnl_data_type_t type = s.operands == MatmulOperands::bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a, b, c, bias;
    const bool batched = s.batch > 1;
    if (batched && s.bias) throw std::logic_error("oneDNN: a batched product with a bias");
    const int dims = batched ? 3 : 2;
    auto shape_of = [&](int64_t rows, int64_t cols, int64_t batch_stride, int64_t row_stride, int64_t col_stride,
                        dnnl_dims_t sizes, dnnl_dims_t strides) {
        const int64_t given_sizes[3] = {s.batch, rows, cols}, given_strides[3] = {batch_stride, row_stride, col_stride};
        for (int d = 0; d < dims; ++d) {
            sizes[d] = given_sizes[d + (batched ? 0 : 1)];
            strides[d] = given_strides[d + (batched ? 0 : 1)];
        }
    };
    dnnl_dims_t a_dims, a_strides, b_dims, b_strides, c_dims, c_strides;
    shape_of(s.m, s.k, s.a_batch, s.a_row, s.a_col, a_dims, a_strides);
    shape_of(s.k, s.n, s.b_batch, s.b_row, s.b_col, b_dims, b_strides);
    shape_of(s.m, s.n, s.c_batch, s.c_row, 1, c_dims, c_strides);
    dnnl_dims_t bias_dims = {1, s.n}, bias_strides = {s.n, 1};
    check(dnnl_memory_desc_init_by_strides(&a, dims, a_dims, type, a_strides), "describing A");
    check(dnnl_memory_desc_init_by_strides(&b, dims, b_dims, type, b_strides), "describing B");
    check(dnnl_memory_desc_init_by_strides(&c, dims, c_dims, s.bf16_result ? dnnl_bf16 : dnnl_f32, c_strides),
          "describing C");
    check(dnnl_memory_desc_init_by_strides(&bias, 2, bias_dims, dnnl_f32, bias_strides), "describing the bias");
    dnnl_matmul_desc_t desc;
    check(dnnl_matmul_desc_init(&desc, &a, &b, s.bias ? &bias : nullptr, &c), "describing the product");
    dnnl_primitive_attr_t attr = nullptr;
    check(dnnl_primitive_attr_create(&attr), "creating attributes");
    dnnl_post_ops_t post_ops = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_status_t status = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (status == dnnl_success && s.accumulate) {  // C = A B + 1.0 * C
        status = dnnl_post_ops_create(&post_ops);
        if (status == dnnl_success) status = dnnl_post_ops_append_sum(post_ops, 1.0f);
        if (status == dnnl_success) status = dnnl_primitive_attr_set_post_ops(attr, post_ops);
    }
    if (status == dnnl_success) status = dnnl_primitive_desc_create(&pd, &desc, attr, cpu_engine(), nullptr);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    dnnl_primitive_attr_destroy(attr);
    check(status, "choosing an implementation of the product");
    return pd;
}

int64_t scratchpad_of(dnnl_primitive_desc_t pd) {
    const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? static_cast<int64_t>(dnnl_memory_desc_get_size(md)) : 0;
}

// Member `member`'s slice of `shape` (m = its rows), or m = 0 when it has none.
MatmulShape slice_of(const MatmulShape& shape, int member, int members) {
    MatmulShape slice = shape;
    slice.m = slice_row_begin(shape.m, member + 1, members) - slice_row_begin(shape.m, member, members);
    return slice;
}

}  // namespace

bool onednn_has_native_bf16() { return has_isa(dnnl_cpu_isa_avx512_core_bf16); }
bool onednn_has_avx2() { return has_isa(dnnl_cpu_isa_avx2); }

const char* onednn_isa_name(bool bf16) {
    if (bf16 && has_isa(dnnl_cpu_isa_avx512_core_amx)) return "avx512_core_amx";
    if (bf16 && has_isa(dnnl_cpu_isa_avx512_core_bf16)) return "avx512_core_bf16";
    if (has_isa(dnnl_cpu_isa_avx512_core)) return "avx512_core";
    if (has_isa(dnnl_cpu_isa_avx2)) return "avx2";
    return "sse41";
}

int64_t slice_row_begin(int64_t m, int member, int members) {
    const int64_t per_member = (m + members - 1) / members;
    const int64_t chunk = (per_member + 15) / 16 * 16;
    return std::min(m, chunk * member);
}

int64_t onednn_scratchpad_bytes(const MatmulShape& shape, int members) {
    // Planning asks again for every shape of every op: remember the answers.
    static std::mutex mutex;
    static std::map<std::pair<MatmulShape, int>, int64_t> known;
    const std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_pair(shape, members);
    if (const auto it = known.find(key); it != known.end()) return it->second;
    int64_t bytes = 0;
    for (int member = 0; member < members; ++member) {
        const MatmulShape slice = slice_of(shape, member, members);
        if (slice.m == 0) continue;
        dnnl_primitive_desc_t pd = describe(slice);
        bytes = std::max(bytes, scratchpad_of(pd));
        dnnl_primitive_desc_destroy(pd);
    }
    known[key] = bytes;
    return bytes;
}

bool inside_onednn_call() { return g_inside_call; }
int64_t onednn_executions() { return g_executions.load(std::memory_order_relaxed); }

struct OnednnProducts::Primitive {
    dnnl_primitive_t primitive = nullptr;
    struct Memories {
        dnnl_memory_t a = nullptr, b = nullptr, c = nullptr, bias = nullptr, scratchpad = nullptr;
    };
    std::vector<Memories> members;  // one set per member: members may run the same shape at once

    ~Primitive() {
        for (Memories& m : members)
            for (dnnl_memory_t memory : {m.a, m.b, m.c, m.bias, m.scratchpad})
                if (memory) dnnl_memory_destroy(memory);
        if (primitive) dnnl_primitive_destroy(primitive);
    }
};

OnednnProducts::OnednnProducts(int members, void* scratchpad, int64_t scratchpad_bytes)
    : members_(members), scratchpad_(static_cast<char*>(scratchpad)), scratchpad_bytes_(scratchpad_bytes) {
    for (int m = 0; m < members; ++m) {
        dnnl_stream_t stream = nullptr;
        check(dnnl_stream_create(&stream, cpu_engine(), dnnl_stream_default_flags), "creating a stream");
        streams_.push_back(stream);
    }
}

OnednnProducts::~OnednnProducts() {
    primitives_.clear();
    for (void* stream : streams_) dnnl_stream_destroy(static_cast<dnnl_stream_t>(stream));
}

void OnednnProducts::prepare(const MatmulShape& shape, int members) {
    if (members > members_) throw std::logic_error("oneDNN product split across more members than planned");
    for (int member = 0; member < members; ++member) {
        const MatmulShape slice = slice_of(shape, member, members);
        if (slice.m == 0 || primitives_.count(slice)) continue;
        dnnl_primitive_desc_t pd = describe(slice);
        auto made = std::make_unique<Primitive>();
        try {
            const int64_t scratch = scratchpad_of(pd);
            if (scratch > scratchpad_bytes_)
                throw std::logic_error("oneDNN wants " + std::to_string(scratch) + " bytes of scratchpad for a product of " +
                                       std::to_string(slice.m) + "x" + std::to_string(slice.k) + "x" +
                                       std::to_string(slice.n) + ", the plan has " + std::to_string(scratchpad_bytes_));
            check(dnnl_primitive_create(&made->primitive, pd), "creating a product");
            auto md = [pd](dnnl_query_t what) { return dnnl_primitive_desc_query_md(pd, what, 0); };
            for (int m = 0; m < members_; ++m) {
                Primitive::Memories memories;
                check(dnnl_memory_create(&memories.a, md(dnnl_query_src_md), cpu_engine(), DNNL_MEMORY_NONE), "A");
                check(dnnl_memory_create(&memories.b, md(dnnl_query_weights_md), cpu_engine(), DNNL_MEMORY_NONE), "B");
                check(dnnl_memory_create(&memories.c, md(dnnl_query_dst_md), cpu_engine(), DNNL_MEMORY_NONE), "C");
                if (slice.bias)
                    check(dnnl_memory_create(&memories.bias, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1),
                                             cpu_engine(), DNNL_MEMORY_NONE),
                          "the bias");
                if (scratch > 0)
                    check(dnnl_memory_create(&memories.scratchpad, md(dnnl_query_scratchpad_md), cpu_engine(),
                                             scratchpad_ + m * scratchpad_bytes_),
                          "the scratchpad");
                made->members.push_back(memories);
            }
        } catch (...) {
            dnnl_primitive_desc_destroy(pd);
            throw;
        }
        dnnl_primitive_desc_destroy(pd);
        primitives_.emplace(slice, std::move(made));
    }
}

const OnednnProducts::Primitive& OnednnProducts::find(const MatmulShape& slice) const {
    const auto it = primitives_.find(slice);
    if (it == primitives_.end()) throw std::logic_error("oneDNN product run before prepare()");
    return *it->second;
}

void OnednnProducts::run_slice(const MatmulShape& shape, int member, int members, const void* a, const void* b,
                               const float* bias, void* c) const {
    const MatmulShape slice = slice_of(shape, member, members);
    if (slice.m == 0) return;
    const int64_t row = slice_row_begin(shape.m, member, members);
    const char* a_rows = static_cast<const char*>(a) + row * shape.a_row * element_bytes(shape.operands);
    char* c_rows = static_cast<char*>(c) + row * shape.c_row * (shape.bf16_result ? 2 : 4);
    execute(find(slice), member, a_rows, b, bias, c_rows);
}

void OnednnProducts::run(const MatmulShape& shape, int member, const void* a, const void* b, const float* bias,
                         void* c) const {
    if (shape.m == 0) return;
    execute(find(shape), member, a, b, bias, c);
}

void OnednnProducts::execute(const Primitive& p, int member, const void* a, const void* b, const float* bias,
                             void* c) const {
    const Primitive::Memories& memory = p.members[static_cast<size_t>(member)];
    auto stream = static_cast<dnnl_stream_t>(streams_[static_cast<size_t>(member)]);
    // One OpenMP thread: the primitive runs on this thread (the worker team is the parallelism).
    omp_set_num_threads(1);
    check(dnnl_memory_set_data_handle_v2(memory.a, const_cast<void*>(a), stream), "binding A");
    check(dnnl_memory_set_data_handle_v2(memory.b, const_cast<void*>(b), stream), "binding B");
    check(dnnl_memory_set_data_handle_v2(memory.c, c, stream), "binding C");
    dnnl_exec_arg_t args[5];
    int count = 0;
    args[count++] = {DNNL_ARG_SRC, memory.a};
    args[count++] = {DNNL_ARG_WEIGHTS, memory.b};
    args[count++] = {DNNL_ARG_DST, memory.c};
    if (memory.bias) {
        check(dnnl_memory_set_data_handle_v2(memory.bias, const_cast<float*>(bias), stream), "binding the bias");
        args[count++] = {DNNL_ARG_BIAS, memory.bias};
    }
    if (memory.scratchpad) args[count++] = {DNNL_ARG_SCRATCHPAD, memory.scratchpad};
    g_inside_call = true;
    const dnnl_status_t status = dnnl_primitive_execute(p.primitive, stream, count, args);
    g_inside_call = false;
    g_executions.fetch_add(1, std::memory_order_relaxed);
    check(status, "running a product");
}

}  // namespace trainbench
