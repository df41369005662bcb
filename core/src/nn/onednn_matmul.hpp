#pragma once
// Matrix products through oneDNN's matmul primitive (Debian's libdnnl 2.6), the CPU engine's
// products where they beat Eigen's: on CPUs with AMX or AVX512_BF16 its bf16 kernels multiply
// 16-bit operands with fp32 accumulation several times faster than fp32 products can
// (docs/ARCHITECTURE.md, "Products on the CPU", has the measurements), and its AVX-512 fp32
// kernels are faster than Eigen's as well.
//
// How it is driven, and why:
// - Each product is split by rows of its result across the engine's WorkerTeam, and every
//   member runs its slice as one single-threaded primitive on its own oneDNN stream. oneDNN's
//   own OpenMP threads would spin and fight the worker team (worker_team.hpp says why the
//   engine has its own team); with one OpenMP thread a primitive runs in the calling thread.
// - Primitives are created once per shape on the calling thread before a product is dispatched
//   (the first micro-batch of each size), then looked up: the update creates nothing.
// - The scratchpad is the engine's: user-managed, one region per member, sized by the planner
//   (onednn_scratchpad_bytes) and allocated with the engine's other buffers, so the memory plan
//   still equals what is allocated.
// - What oneDNN itself allocates per execution: dnnl_primitive_execute builds an argument map and
//   a scratchpad grantor on the heap (6 small blocks, freed before it returns; measured by
//   bench/gemm_libraries). Nothing in its public API avoids that. OnednnCallScope marks those
//   calls so that the tests can tell them from the engine's own allocations, of which there
//   are none.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace trainbench {

enum class MatmulOperands { f32, bf16 };

// C[m x n] (= or +=) A[m x k] B[k x n] (+ bias[n]): A and B of `operands` type, the bias fp32,
// accumulation in fp32, C fp32 or (bf16_result) the fp32 sum rounded once to bf16 codes.
// Element (i, j) of a matrix X sits at x + i * X_row + j * X_col; with batch > 1 there are
// `batch` such products, the b-th's matrices at x + b * X_batch (oneDNN's fast kernels want
// each matrix dense, or A dense and transposed).
struct MatmulShape {
    MatmulOperands operands = MatmulOperands::f32;
    int64_t m = 0, k = 0, n = 0;
    int64_t a_row = 0, a_col = 1;
    int64_t b_row = 0, b_col = 1;
    int64_t c_row = 0;  // C's columns are contiguous
    int64_t batch = 1, a_batch = 0, b_batch = 0, c_batch = 0;
    bool bias = false;
    bool accumulate = false;
    bool bf16_result = false;
    auto operator<=>(const MatmulShape&) const = default;
};

// Whether this CPU runs oneDNN's bf16 kernels natively (AMX or AVX512_BF16), and its AVX2 (or
// wider) fp32 kernels.
bool onednn_has_native_bf16();
bool onednn_has_avx2();
// oneDNN's name for the instructions its bf16 or fp32 products use here, for display
// ("avx512_core_amx", "avx512_core", ...).
const char* onednn_isa_name(bool bf16);

// Rows of the result each member of a team of `members` computes: [row_begin(i), row_begin(i+1)).
// Multiples of 16 (a tile of AMX's), so a product has at most two distinct slice shapes.
int64_t slice_row_begin(int64_t m, int member, int members);

// Scratchpad bytes one member needs to run `shape` split across `members`.
int64_t onednn_scratchpad_bytes(const MatmulShape& shape, int members);

// True while the calling thread is inside oneDNN's execution of a product (see the file
// comment); the tests' allocation counter reads it. And how many products oneDNN has run in
// this process.
bool inside_onednn_call();
int64_t onednn_executions();

// The primitives, streams and per-member scratchpads of one engine.
class OnednnProducts {
public:
    // scratchpad: `members` regions of scratchpad_bytes each, owned by the caller; `members` is
    // the largest team a product is split across.
    OnednnProducts(int members, void* scratchpad, int64_t scratchpad_bytes);
    ~OnednnProducts();
    OnednnProducts(const OnednnProducts&) = delete;
    OnednnProducts& operator=(const OnednnProducts&) = delete;

    // Creates what `shape` split across `members` needs, if it has not been made yet. Call on the
    // dispatching thread.
    void prepare(const MatmulShape& shape, int members);
    // Member `member`'s slice of a prepared product: rows [slice_row_begin(member), ...) of C,
    // on the calling thread (a WorkerTeam member). a, b, c and bias point at whole matrices.
    void run_slice(const MatmulShape& shape, int member, int members, const void* a, const void* b, const float* bias,
                   void* c) const;
    // The whole of a product prepared with members = 1, on member `member`'s stream and
    // scratchpad: for products each member runs on its own operands.
    void run(const MatmulShape& shape, int member, const void* a, const void* b, const float* bias, void* c) const;

private:
    struct Slice;
    struct Primitive;
    const Primitive& find(const MatmulShape& slice) const;
    void execute(const Primitive& primitive, int member, const void* a, const void* b, const float* bias, void* c) const;

    int members_;
    char* scratchpad_;
    int64_t scratchpad_bytes_;
    std::vector<void*> streams_;  // dnnl_stream_t per member
    std::map<MatmulShape, std::unique_ptr<Primitive>> primitives_;  // by slice shape
};

}  // namespace trainbench
