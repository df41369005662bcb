// Which Debian library should run the CPU engine's fp32 and bf16 matrix products?
//
// For each shape C[M x N] = A[M x K] * B[K x N] (row-major, fp32 accumulation) this times
// Eigen 3.4, OpenBLAS (cblas_sgemm; cblas_sbgemm if the build exports it), oneDNN's matmul
// primitive (C API) and libxsmm's JIT kernels (on the operands as they are, and on operands
// packed into blocks for its batch-reduce kernel), on 1 thread and on 2 threads, and prints one
// CSV line per (shape, library, type, threading): GFLOP/s of the median call, heap allocations
// per call in steady state, max relative error against a double-precision reference, and the
// implementation the library picked. "2 std::threads" splits N in halves, one per thread, the
// way the engine's WorkerTeam splits a product ("M-split": halves of M); "2 omp"/"2 internal"
// lets the library run its own threads. First it prints one core's measured instruction peaks
// (fp32 FMA, AVX512_BF16, AMX). summarize.py turns several runs into tables; run.sh does it all.
//
// Heap allocations are counted by interposing malloc & co. below (the executable's definitions
// win over libc's for every shared library); mmap is counted too (OpenBLAS, libxsmm's JIT).
// GEMMLIB_TRACE_ALLOCS=1 prints a backtrace of every allocation of one steady-state call.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>
#include <cblas.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <immintrin.h>
#include <libxsmm.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// ---------------------------------------------------------------- allocation counting
// With GEMMLIB_TRACE_ALLOCS=1 the allocations of one steady-state call per path are printed to
// stderr with their size and a backtrace (where they come from).
static std::atomic<long> g_allocs{0}, g_mmaps{0};
static std::atomic<bool> g_trace{false};
static thread_local bool t_in_trace = false;
static void trace(const char* what, size_t n) {
    if (!g_trace.load(std::memory_order_relaxed) || t_in_trace) return;
    t_in_trace = true;
    char line[96];
    const int len = std::snprintf(line, sizeof line, "-- %s(%zu) on thread %ld\n", what, n, long(syscall(SYS_gettid)));
    if (write(2, line, len) < 0) {}
    void* frames[12];
    backtrace_symbols_fd(frames, backtrace(frames, 12), 2);
    t_in_trace = false;
}
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
void __libc_free(void*);
#define COUNT(what, n) (g_allocs.fetch_add(1, std::memory_order_relaxed), trace(what, n))
void* malloc(size_t n) { COUNT("malloc", n); return __libc_malloc(n); }
void* calloc(size_t n, size_t s) { COUNT("calloc", n * s); return __libc_calloc(n, s); }
void* realloc(void* p, size_t n) { COUNT("realloc", n); return __libc_realloc(p, n); }
void* memalign(size_t a, size_t n) { COUNT("memalign", n); return __libc_memalign(a, n); }
void* aligned_alloc(size_t a, size_t n) { COUNT("aligned_alloc", n); return __libc_memalign(a, n); }
void* valloc(size_t n) { COUNT("valloc", n); return __libc_valloc(n); }
void* pvalloc(size_t n) { COUNT("pvalloc", n); return __libc_pvalloc(n); }
void free(void* p) { __libc_free(p); }
int posix_memalign(void** out, size_t a, size_t n) {
    COUNT("posix_memalign", n);
    if (a < sizeof(void*) || (a & (a - 1)) != 0) return EINVAL;
    void* p = __libc_memalign(a, n);
    if (p == nullptr) return ENOMEM;
    *out = p;
    return 0;
}
void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
    g_mmaps.fetch_add(1, std::memory_order_relaxed);
    trace("mmap", len);
    return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
}

namespace {

// ---------------------------------------------------------------- helpers
using bf16 = uint16_t;
bf16 to_bf16(float f) {  // round to nearest even (inputs are finite)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<bf16>(u >> 16);
}
float from_bf16(bf16 h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
template <class T> T* alloc_array(size_t n) { return static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64)); }
struct FreeDeleter { void operator()(void* p) const { std::free(p); } };
template <class T> using Buffer = std::unique_ptr<T[], FreeDeleter>;
template <class T> Buffer<T> make_buffer(size_t n) { return Buffer<T>(alloc_array<T>(n)); }

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Two members, the caller and one helper, like the engine's WorkerTeam: the helper spins
// briefly after a task, then sleeps on a futex (std::atomic::wait), so it does not steal the
// second core from single-threaded measurements. A dispatch allocates nothing.
class Team2 {
public:
    Team2() : helper_([this] { loop(); }) {}
    ~Team2() {
        stop_ = true;
        gen_.fetch_add(1, std::memory_order_release);
        gen_.notify_one();
        helper_.join();
    }
    void run(const std::function<void(int part, int parts)>& f) {
        task_ = &f;
        done_.store(0, std::memory_order_relaxed);
        gen_.fetch_add(1, std::memory_order_release);
        gen_.notify_one();
        f(0, 2);
        while (done_.load(std::memory_order_acquire) == 0) _mm_pause();
    }

private:
    void loop() {
        unsigned seen = 0;
        for (;;) {
            for (int spin = 0; gen_.load(std::memory_order_acquire) == seen; ++spin) {
                if (spin < 20000) _mm_pause();
                else gen_.wait(seen, std::memory_order_acquire);
            }
            seen = gen_.load(std::memory_order_acquire);
            if (stop_) return;
            (*task_)(1, 2);
            done_.store(1, std::memory_order_release);
        }
    }
    std::atomic<unsigned> gen_{0};
    std::atomic<int> done_{0};
    const std::function<void(int, int)>* task_ = nullptr;
    bool stop_ = false;
    std::thread helper_;
};

struct Shape { int M, K, N; const char* group; };
const Shape kShapes[] = {
    {1024, 1024, 1024, "square"},
    {4096, 128, 384, "gpt"}, {4096, 128, 128, "gpt"}, {4096, 128, 512, "gpt"}, {4096, 512, 128, "gpt"},
    {128, 4096, 384, "gpt dW"}, {512, 4096, 128, "gpt dW"},
    {256, 784, 1024, "mlp"}, {256, 1024, 1024, "mlp"}, {256, 1024, 10, "mlp"},
    {1024, 256, 1024, "mlp dW"}, {1024, 256, 784, "mlp dW"},
};

// One shape's operands: fp32 inputs, their bf16 roundings, B in VNNI pairs for libxsmm, outputs
// and double-precision references of both input sets.
struct Operands {
    int M, K, N;
    Buffer<float> a, b, c;
    Buffer<bf16> a16, b16, b_vnni, c16;
    std::vector<double> ref32, ref16;
    explicit Operands(const Shape& s) : M(s.M), K(s.K), N(s.N) {
        const size_t mk = size_t(M) * K, kn = size_t(K) * N, mn = size_t(M) * N;
        a = make_buffer<float>(mk); b = make_buffer<float>(kn); c = make_buffer<float>(mn);
        a16 = make_buffer<bf16>(mk); b16 = make_buffer<bf16>(kn); b_vnni = make_buffer<bf16>(kn); c16 = make_buffer<bf16>(mn);
        std::mt19937 rng(42);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        for (size_t i = 0; i < mk; ++i) { a[i] = u(rng); a16[i] = to_bf16(a[i]); }
        for (size_t i = 0; i < kn; ++i) { b[i] = u(rng); b16[i] = to_bf16(b[i]); }
        ref32 = reference([&](size_t i) { return double(a[i]); }, [&](size_t i) { return double(b[i]); });
        ref16 = reference([&](size_t i) { return double(from_bf16(a16[i])); }, [&](size_t i) { return double(from_bf16(b16[i])); });
    }
    template <class FA, class FB> std::vector<double> reference(FA fa, FB fb) const {
        std::vector<double> r(size_t(M) * N, 0.0), brow(N);
        for (int k = 0; k < K; ++k) {
            for (int j = 0; j < N; ++j) brow[j] = fb(size_t(k) * N + j);
            for (int i = 0; i < M; ++i) {
                const double x = fa(size_t(i) * K + k);
                double* ri = &r[size_t(i) * N];
                for (int j = 0; j < N; ++j) ri[j] += x * brow[j];
            }
        }
        return r;
    }
};

// B [K x N] row-major -> VNNI pairs [K/2][N][2]: what libxsmm's bf16 kernels need for their
// "A" operand (the row-major B seen column-major), and what AVX512_BF16's vdpbf16ps consumes.
void pack_vnni(const bf16* b, int K, int N, bf16* out) {
    for (int k = 0; k < K; k += 2)
        for (int j = 0; j < N; ++j) {
            out[(size_t(k) / 2 * N + j) * 2 + 0] = b[size_t(k) * N + j];
            out[(size_t(k) / 2 * N + j) * 2 + 1] = b[size_t(k + 1) * N + j];
        }
}

// One library/path on one shape. body(part, parts) computes columns [N*part/parts, N*(part+1)/parts).
struct Path {
    std::string lib, dtype, threads, impl;
    std::function<void(int, int)> body;
    std::function<void()> prepare;  // thread-count settings, run once before measuring
    bool two_std_threads = false;
    enum Out { F32, BF16 } out = F32;
    bool bf16_inputs = false;
};

struct Options {
    double min_time = 0.2;
    int min_reps = 7;
    bool dnnl_user_scratchpad = true;
    int xsmm_bm = 32, xsmm_bn = 128;  // "plain" path's C tile (libxsmm's column-major view: m = N, n = M)
    int tile_m = 32, tile_n = 64, tile_k = 128;  // "packed" path's C tile (rows x columns) and k block
    std::string only_lib, only_shape;
    bool peaks = true;  // off: the program never asks for AMX itself (oneDNN then has to)
};

// ---------------------------------------------------------------- Eigen
void add_eigen(std::vector<Path>& paths, Operands& o) {
    using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using In = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
    using Out = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
    auto body = [&o](int p, int parts) {
        const int n0 = o.N * p / parts, nn = o.N * (p + 1) / parts - n0;
        In a(o.a.get(), o.M, o.K, Eigen::OuterStride<>(o.K));
        In b(o.b.get() + n0, o.K, nn, Eigen::OuterStride<>(o.N));
        Out c(o.c.get() + n0, o.M, nn, Eigen::OuterStride<>(o.N));
        c.noalias() = a * b;
    };
#ifdef EIGEN_VECTORIZE_AVX512
    const char* isa = "Eigen gebp, AVX-512 fp32 FMA";
#else
    const char* isa = "Eigen gebp, not AVX-512";
#endif
    paths.push_back({"eigen", "f32", "1", isa, body, [] {}, false});
    paths.push_back({"eigen", "f32", "2 std::threads", isa, body, [] {}, true});
}

// ---------------------------------------------------------------- OpenBLAS
using sbgemm_fn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                           const bf16*, blasint, const bf16*, blasint, float, float*, blasint);

void add_openblas(std::vector<Path>& paths, Operands& o) {
    const std::string core = std::string("OpenBLAS core ") + openblas_get_corename();
    auto sgemm = [&o](int p, int parts) {
        const int n0 = o.N * p / parts, nn = o.N * (p + 1) / parts - n0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o.M, nn, o.K, 1.f, o.a.get(), o.K, o.b.get() + n0, o.N,
                    0.f, o.c.get() + n0, o.N);
    };
    paths.push_back({"openblas", "f32", "1", core, sgemm, [] { openblas_set_num_threads(1); }, false});
    paths.push_back({"openblas", "f32", "2 internal", core, sgemm, [] { openblas_set_num_threads(2); }, false});
    paths.push_back({"openblas", "f32", "2 std::threads", core, sgemm, [] { openblas_set_num_threads(1); }, true});
    // Declared in cblas.h, but only present when OpenBLAS was built with BUILD_BFLOAT16=1.
    if (auto sb = reinterpret_cast<sbgemm_fn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"))) {
        auto body = [&o, sb](int p, int parts) {
            const int n0 = o.N * p / parts, nn = o.N * (p + 1) / parts - n0;
            sb(CblasRowMajor, CblasNoTrans, CblasNoTrans, o.M, nn, o.K, 1.f, o.a16.get(), o.K, o.b16.get() + n0, o.N,
               0.f, o.c.get() + n0, o.N);
        };
        Path p{"openblas", "bf16->f32", "1", core, body, [] { openblas_set_num_threads(1); }, false};
        p.bf16_inputs = true;
        paths.push_back(p);
    }
}

// ---------------------------------------------------------------- oneDNN (C API)
#define DNNL_CHECK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { std::fprintf(stderr, "%s failed: %d\n", #x, int(s_)); std::exit(1); } } while (0)

struct DnnlState {
    dnnl_engine_t engine = nullptr;
    dnnl_stream_t stream = nullptr;
    DnnlState() {
        DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
        DNNL_CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    }
};

// A primitive for one half (of N or M) or for the whole product, created once, with per-part
// memory objects and (in user scratchpad mode) per-part scratchpads, so that two threads can
// execute it at once. In library scratchpad mode (--dnnl-scratchpad library) the primitive's
// one scratchpad is shared and the 2 std::threads paths give wrong results, as oneDNN's
// documentation warns (attributes_scratchpad.md): the engine must use user mode.
struct DnnlMatmul {
    dnnl_primitive_t prim = nullptr;
    std::string impl;
    struct Part { dnnl_memory_t a, b, c, s; Buffer<char> scratch; };
    std::vector<Part> parts;
};

// split_m: the parts are halves of M (dense row blocks of A and C) instead of halves of N
// (column blocks of B and C with row stride N).
std::shared_ptr<DnnlMatmul> make_dnnl(DnnlState& d, const Operands& o, dnnl_data_type_t in, dnnl_data_type_t out,
                                      int parts, bool split_m, int create_threads, bool user_scratchpad) {
    omp_set_num_threads(create_threads);  // the primitive fixes its thread count at creation
    const int nn = split_m ? o.N : o.N / parts, mm = split_m ? o.M / parts : o.M;
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_dims_t ad = {mm, o.K}, as = {o.K, 1}, bd = {o.K, nn}, bs = {o.N, 1}, cd = {mm, nn}, cs = {o.N, 1};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&a_md, 2, ad, in, as));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&b_md, 2, bd, in, bs));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&c_md, 2, cd, out, cs));
    dnnl_matmul_desc_t desc;
    DNNL_CHECK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, nullptr, &c_md));
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    if (user_scratchpad) DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &desc, attr, d.engine, nullptr));
    auto m = std::make_shared<DnnlMatmul>();
    const char* impl = nullptr;
    DNNL_CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    m->impl = impl;
    const dnnl_memory_desc_t* s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const size_t s_size = s_md ? dnnl_memory_desc_get_size(s_md) : 0;
    DNNL_CHECK(dnnl_primitive_create(&m->prim, pd));
    for (int p = 0; p < parts; ++p) {
        DnnlMatmul::Part part{};
        DNNL_CHECK(dnnl_memory_create(&part.a, &a_md, d.engine, DNNL_MEMORY_NONE));
        DNNL_CHECK(dnnl_memory_create(&part.b, &b_md, d.engine, DNNL_MEMORY_NONE));
        DNNL_CHECK(dnnl_memory_create(&part.c, &c_md, d.engine, DNNL_MEMORY_NONE));
        part.s = nullptr;
        if (user_scratchpad && s_size > 0) {
            part.scratch = make_buffer<char>(s_size);
            DNNL_CHECK(dnnl_memory_create(&part.s, s_md, d.engine, part.scratch.get()));
        }
        m->parts.push_back(std::move(part));
    }
    m->impl += " scratchpad=" + std::to_string(s_size) + "B";
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return m;
}

void add_dnnl(std::vector<Path>& paths, Operands& o, DnnlState& d, const Options& opt) {
    struct Variant { const char* name; dnnl_data_type_t in, out; };
    const Variant variants[] = {{"f32", dnnl_f32, dnnl_f32}, {"bf16->f32", dnnl_bf16, dnnl_f32}, {"bf16->bf16", dnnl_bf16, dnnl_bf16}};
    struct Threading { const char* name; int parts, create_threads; bool std_threads, split_m; };
    const Threading threadings[] = {{"1", 1, 1, false, false}, {"2 omp", 1, 2, false, false},
                                    {"2 std::threads", 2, 1, true, false}, {"2 std::threads M-split", 2, 1, true, true}};
    for (const auto& v : variants)
        for (const auto& t : threadings) {
            auto m = make_dnnl(d, o, v.in, v.out, t.parts, t.split_m, t.create_threads, opt.dnnl_user_scratchpad);
            const bool in16 = v.in == dnnl_bf16, out16 = v.out == dnnl_bf16;
            const int omp_threads = t.std_threads ? 1 : t.create_threads;
            const bool split_m = t.split_m;
            auto body = [&o, &d, m, in16, out16, omp_threads, split_m](int p, int parts) {
                omp_set_num_threads(omp_threads);  // per-thread ICV
                const size_t a0 = split_m ? size_t(o.M) * p / parts * o.K : 0;   // element offsets of this part
                const size_t b0 = split_m ? 0 : size_t(o.N) * p / parts;
                const size_t c0 = split_m ? size_t(o.M) * p / parts * o.N : b0;
                auto& part = m->parts[p];
                DNNL_CHECK(dnnl_memory_set_data_handle_v2(part.a, in16 ? (void*)(o.a16.get() + a0) : (void*)(o.a.get() + a0), d.stream));
                DNNL_CHECK(dnnl_memory_set_data_handle_v2(part.b, in16 ? (void*)(o.b16.get() + b0) : (void*)(o.b.get() + b0), d.stream));
                DNNL_CHECK(dnnl_memory_set_data_handle_v2(part.c, out16 ? (void*)(o.c16.get() + c0) : (void*)(o.c.get() + c0), d.stream));
                dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, part.a}, {DNNL_ARG_WEIGHTS, part.b}, {DNNL_ARG_DST, part.c}, {DNNL_ARG_SCRATCHPAD, part.s}};
                DNNL_CHECK(dnnl_primitive_execute(m->prim, d.stream, part.s ? 4 : 3, args));
            };
            Path path{"onednn", v.name, t.name, m->impl, body, [omp_threads] { omp_set_num_threads(omp_threads); }, t.std_threads};
            path.bf16_inputs = in16;
            path.out = out16 ? Path::BF16 : Path::F32;
            paths.push_back(path);
        }
}

// ---------------------------------------------------------------- libxsmm
// libxsmm is column-major: row-major C = A B is column-major C' = B' A' with m = N, n = M, and
// "A" = the row-major B (ld N), "B" = the row-major A (ld K). The C tile is bm x bn (m x n in
// that view); each tile is one JIT kernel call over the full K. For bf16 the "A" operand must be
// VNNI-packed ([K/2][N][2], flag LIBXSMM_GEMM_FLAG_VNNI_A, K even); the "B" operand (row-major
// A) already has k-pairs adjacent, as the kernel's 32-bit broadcasts need.
struct XsmmKernels {
    libxsmm_xmmfunction k[2][2] = {};  // [m tile full/remainder][n tile full/remainder]
    int tm = 0, tn = 0;                // full tile sizes
    bool ok = true;
};

std::shared_ptr<XsmmKernels> make_xsmm(const Operands& o, bool in16, int parts, int bm, int bn) {
    auto ks = std::make_shared<XsmmKernels>();
    const libxsmm_blasint lda = o.N, ldb = o.K, ldc = o.N;
    const float alpha = 1.f, beta = 0.f;
    const int flags = in16 ? LIBXSMM_GEMM_FLAG_VNNI_A : LIBXSMM_GEMM_FLAG_NONE;
    const int nn = o.N / parts;
    ks->tm = std::min(bm, nn);
    ks->tn = std::min(bn, o.M);
    const int ms[2] = {ks->tm, nn > bm ? nn % bm : 0}, ns[2] = {ks->tn, o.M > bn ? o.M % bn : 0};
    for (int x = 0; x < 2; ++x)
        for (int y = 0; y < 2; ++y) {
            if (ms[x] == 0 || ns[y] == 0) continue;
            libxsmm_xmmfunction& f = ks->k[x][y];
            if (in16) f.bsmm = libxsmm_bsmmdispatch(ms[x], ns[y], o.K, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
            else f.smm = libxsmm_smmdispatch(ms[x], ns[y], o.K, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
            if (f.xmm == nullptr) ks->ok = false;
        }
    return ks;
}

void add_xsmm(std::vector<Path>& paths, Operands& o, const Options& opt) {
    const std::string isa = std::string("libxsmm JIT target ") + libxsmm_get_target_arch() + " tile " +
                            std::to_string(opt.xsmm_bm) + "x" + std::to_string(opt.xsmm_bn);
    for (bool in16 : {false, true})
        for (int parts : {1, 2}) {
            auto ks = make_xsmm(o, in16, parts, opt.xsmm_bm, opt.xsmm_bn);
            if (!ks->ok) {
                std::printf("# libxsmm dispatch failed for %dx%dx%d %s\n", o.M, o.K, o.N, in16 ? "bf16" : "f32");
                continue;
            }
            // Kernels are dispatched once here; the body only picks from a 2x2 table of
            // function pointers (full tile / remainder tile in each direction).
            const int bm = opt.xsmm_bm, bn = opt.xsmm_bn;
            auto body = [&o, ks, in16, bm, bn](int p, int parts) {
                const int n0 = o.N * p / parts, n1 = o.N * (p + 1) / parts;
                for (int j = 0; j < o.M; j += bn) {
                    const int y = std::min(bn, o.M - j) == ks->tn ? 0 : 1;
                    for (int i = n0; i < n1; i += bm) {
                        const libxsmm_xmmfunction f = ks->k[std::min(bm, n1 - i) == ks->tm ? 0 : 1][y];
                        float* c = o.c.get() + size_t(j) * o.N + i;
                        if (in16) f.bsmm(o.b_vnni.get() + size_t(i) * 2, o.a16.get() + size_t(j) * o.K, c);
                        else f.smm(o.b.get() + i, o.a.get() + size_t(j) * o.K, c);
                    }
                }
            };
            Path path{"libxsmm", in16 ? "bf16->f32" : "f32", parts == 1 ? "1" : "2 std::threads", isa, body, [] {}, parts == 2};
            path.bf16_inputs = in16;
            paths.push_back(path);
        }
}

// The way libxsmm is meant to be used on large operands: copy both operands into small
// contiguous blocks and let one batch-reduce kernel (libxsmm_?smmdispatch_reducebatch_strd)
// sum a C tile over all k blocks. Per part (half of N), per call:
//   B columns -> Bp[n tile][k block] = [tile_k][tile_n] (f32) or VNNI [tile_k/2][tile_n][2] (bf16),
//   per M tile: A rows -> Ap[k block] = [tile_m][tile_k] (k pairs already adjacent for bf16),
// with K zero-padded to a multiple of tile_k. The packing is part of the timed call, into
// buffers allocated once here (the engine would keep them in its workspace).
struct XsmmPacked {
    int tm, tn, tk, kp, nn;
    libxsmm_xmmfunction k[2][2] = {};  // [N tile full/remainder][M tile full/remainder]
    std::vector<Buffer<char>> bp, ap;  // per part
    bool ok = true;
};

template <class T>
void xsmm_packed_part(const XsmmPacked& x, const T* a, const T* b, float* c, int M, int K, int N, int p, int parts, bool vnni) {
    const int n0 = N * p / parts, n1 = N * (p + 1) / parts;
    T* bp = reinterpret_cast<T*>(x.bp[p].get());
    T* ap = reinterpret_cast<T*>(x.ap[p].get());
    const size_t bblock = size_t(x.tk) * x.tn, ablock = size_t(x.tm) * x.tk;
    for (int t = 0, n = n0; n < n1; ++t, n += x.tn) {
        const int w = std::min(x.tn, n1 - n);
        for (int k = 0; k < x.kp; ++k) {
            T* dst = bp + (size_t(t) * (x.kp / x.tk) + k / x.tk) * bblock;
            const int kk = k % x.tk;
            if (k >= K) { for (int j = 0; j < w; ++j) dst[vnni ? (kk / 2 * x.tn + j) * 2 + kk % 2 : kk * x.tn + j] = T(0); continue; }
            const T* src = b + size_t(k) * N + n;
            if (vnni) for (int j = 0; j < w; ++j) dst[(kk / 2 * x.tn + j) * 2 + kk % 2] = src[j];
            else std::memcpy(dst + size_t(kk) * x.tn, src, w * sizeof(T));
        }
    }
    const unsigned long long count = x.kp / x.tk;
    for (int m = 0; m < M; m += x.tm) {
        const int h = std::min(x.tm, M - m);
        for (int kb = 0; kb < x.kp; kb += x.tk) {
            T* dst = ap + size_t(kb / x.tk) * ablock;
            const int w = std::min(x.tk, K - kb);
            for (int r = 0; r < h; ++r) {
                std::memcpy(dst + size_t(r) * x.tk, a + size_t(m + r) * K + kb, std::max(w, 0) * sizeof(T));
                for (int z = std::max(w, 0); z < x.tk; ++z) dst[size_t(r) * x.tk + z] = T(0);
            }
        }
        const int y = h == std::min(x.tm, M) ? 0 : 1;
        for (int t = 0, n = n0; n < n1; ++t, n += x.tn) {
            const libxsmm_xmmfunction f = x.k[std::min(x.tn, n1 - n) == std::min(x.tn, x.nn) ? 0 : 1][y];
            const T* bt = bp + size_t(t) * (x.kp / x.tk) * bblock;
            if constexpr (std::is_same_v<T, float>) f.smrs(bt, ap, c + size_t(m) * N + n, &count);
            else f.bsmrs(bt, ap, c + size_t(m) * N + n, &count);
        }
    }
}

void add_xsmm_packed(std::vector<Path>& paths, Operands& o, const Options& opt) {
    for (bool in16 : {false, true})
        for (int parts : {1, 2}) {
            auto x = std::make_shared<XsmmPacked>();
            x->tm = opt.tile_m; x->tn = opt.tile_n; x->tk = opt.tile_k;
            x->kp = (o.K + x->tk - 1) / x->tk * x->tk;
            x->nn = o.N / parts;
            const size_t es = in16 ? 2 : 4;
            for (int p = 0; p < parts; ++p) {
                x->bp.push_back(make_buffer<char>(size_t((x->nn + x->tn - 1) / x->tn) * x->tn * x->kp * es));
                x->ap.push_back(make_buffer<char>(size_t(x->tm) * x->kp * es));
            }
            const libxsmm_blasint lda = x->tn, ldb = x->tk, ldc = o.N;
            const float alpha = 1.f, beta = 0.f;
            const int flags = in16 ? LIBXSMM_GEMM_FLAG_VNNI_A : LIBXSMM_GEMM_FLAG_NONE;
            const libxsmm_blasint sa = libxsmm_blasint(x->tk) * x->tn * es, sb = libxsmm_blasint(x->tm) * x->tk * es;
            const int ns[2] = {std::min(x->tn, x->nn), x->nn > x->tn ? x->nn % x->tn : 0};
            const int ms[2] = {std::min(x->tm, o.M), o.M > x->tm ? o.M % x->tm : 0};
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j) {
                    if (ns[i] == 0 || ms[j] == 0) continue;
                    auto& f = x->k[i][j];
                    if (in16) f.bsmrs = libxsmm_bsmmdispatch_reducebatch_strd(ns[i], ms[j], x->tk, sa, sb, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
                    else f.smrs = libxsmm_smmdispatch_reducebatch_strd(ns[i], ms[j], x->tk, sa, sb, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
                    if (f.xmm == nullptr) x->ok = false;
                }
            if (!x->ok) { std::printf("# libxsmm packed dispatch failed for %dx%dx%d\n", o.M, o.K, o.N); continue; }
            auto body = [&o, x, in16](int p, int parts) {
                if (in16) xsmm_packed_part(*x, o.a16.get(), o.b16.get(), o.c.get(), o.M, o.K, o.N, p, parts, true);
                else xsmm_packed_part(*x, o.a.get(), o.b.get(), o.c.get(), o.M, o.K, o.N, p, parts, false);
            };
            const std::string isa = std::string("libxsmm brgemm target ") + libxsmm_get_target_arch() + ", packing included, tile " +
                                    std::to_string(x->tm) + "x" + std::to_string(x->tn) + "x" + std::to_string(x->tk);
            Path path{"libxsmm packed", in16 ? "bf16->f32" : "f32", parts == 1 ? "1" : "2 std::threads", isa, body, [] {}, parts == 2};
            path.bf16_inputs = in16;
            paths.push_back(path);
        }
}

// ---------------------------------------------------------------- measurement
struct Result { double median_s; double allocs, mmaps; double err; };

Result measure(Path& p, Operands& o, Team2& team, const Options& opt) {
    p.prepare();
    auto call = [&] { if (p.two_std_threads) team.run(p.body); else p.body(0, 1); };
    for (int i = 0; i < 3; ++i) call();
    // Steady-state allocations per call.
    const int counted = 10;
    const long a0 = g_allocs.load(), m0 = g_mmaps.load();
    for (int i = 0; i < counted; ++i) call();
    const double allocs = double(g_allocs.load() - a0) / counted, mmaps = double(g_mmaps.load() - m0) / counted;
    static const bool trace_allocs = std::getenv("GEMMLIB_TRACE_ALLOCS") != nullptr;
    if (trace_allocs && allocs + mmaps > 0) {
        std::fprintf(stderr, "==== %s %s %s, %dx%dx%d: one call's allocations\n", p.lib.c_str(), p.dtype.c_str(), p.threads.c_str(), o.M, o.K, o.N);
        g_trace = true;
        call();
        g_trace = false;
    }
    // Error of the last result.
    const auto& ref = p.bf16_inputs ? o.ref16 : o.ref32;
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double c = p.out == Path::BF16 ? from_bf16(o.c16[i]) : o.c[i];
        max_ref = std::max(max_ref, std::fabs(ref[i]));
        max_diff = std::max(max_diff, std::fabs(c - ref[i]));
    }
    std::vector<double> t;
    t.reserve(10000);
    const double start = now();
    while ((int(t.size()) < opt.min_reps || now() - start < opt.min_time) && t.size() < 10000) {
        const double t0 = now();
        call();
        t.push_back(now() - t0);
    }
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return {t[t.size() / 2], allocs, mmaps, max_diff / max_ref};
}

// Instruction-level peaks, registers/tiles only (no memory traffic): 16 independent
// vfmadd231ps zmm, 16 independent vdpbf16ps zmm (AVX512_BF16), and 4 independent AMX tdpbf16ps
// on 16x32 bf16 tiles; on one core, then fp32 and AMX on both cores at once. The ceilings the
// libraries' numbers are read against (on a VM they can move while the host's load changes).
// 16 named accumulators: with an array GCC spills them to the stack each iteration.
#define X16(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15)
#define DECL(i) __m512 acc##i = _mm512_set1_ps(float(i));  // distinct, or GCC merges the chains
#define FMA(i) acc##i = _mm512_fmadd_ps(a, b, acc##i);
#define DP(i) acc##i = _mm512_dpbf16_ps(acc##i, ah, bh);
#define SUM(i) s += _mm512_cvtss_f32(acc##i);
double fma_peak(long n) {
    __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
    X16(DECL)
    const double t0 = now();
    for (long i = 0; i < n; ++i) { X16(FMA) asm volatile("" : "+v"(a)); }
    const double t = now() - t0;
    float s = 0;
    X16(SUM)
    if (s == 1.f) std::puts("");
    return 16 * 32.0 * n / t / 1e9;
}
double dpbf16_peak(long n) {
    __m512bh ah = (__m512bh)_mm512_set1_epi32(0x3f803f80), bh = ah;
    X16(DECL)
    const double t0 = now();
    for (long i = 0; i < n; ++i) { X16(DP) asm volatile("" : "+v"(ah)); }
    const double t = now() - t0;
    float s = 0;
    X16(SUM)
    if (s == 1.f) std::puts("");
    return 16 * 64.0 * n / t / 1e9;
}
#undef X16
#undef DECL
#undef FMA
#undef DP
#undef SUM
// Linux: the process must have asked for the AMX tile state first (ARCH_REQ_XCOMP_PERM), which
// the kernel refuses on a CPU without AMX. Compiled for AMX whatever -march=native says, so the
// program builds on such CPUs too (an AMD EPYC with AVX512_BF16 only) and skips this peak there.
__attribute__((target("amx-tile,amx-bf16"))) double amx_peak(long n) {
    alignas(64) unsigned char cfg[64] = {};
    cfg[0] = 1;  // palette 1: 8 tiles, each 16 rows x 64 bytes
    for (int t = 0; t < 8; ++t) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    alignas(64) bf16 data[16 * 32];
    for (auto& x : data) x = 0x3f80;
    _tile_loadconfig(cfg);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, data, 64); _tile_loadd(5, data, 64); _tile_loadd(6, data, 64); _tile_loadd(7, data, 64);
    const double t0 = now();
    for (long i = 0; i < n; ++i) { _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); }
    const double t = now() - t0;
    _tile_release();
    return 4 * 16 * 16 * 32 * 2.0 * n / t / 1e9;
}
void print_isa_peaks() {
    auto both = [](double (*f)(long), long n) {
        double other = 0;
        std::thread t([&] { other = f(n); });
        const double mine = f(n);
        t.join();
        return std::to_string(int(mine)) + " + " + std::to_string(int(other));
    };
    const bool amx = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
    std::printf("# peaks GFLOP/s: one core: fp32 FMA %.0f, AVX512_BF16 %.0f, AMX %.0f; both cores at once: fp32 FMA %s, AMX %s\n",
                fma_peak(30000000), dpbf16_peak(30000000), amx ? amx_peak(3000000) : 0.0, both(fma_peak, 30000000).c_str(),
                amx ? both(amx_peak, 3000000).c_str() : "(AMX permission refused)");
}

std::string load_line() {
    char buf[128] = {0};
    if (FILE* f = std::fopen("/proc/loadavg", "r")) { if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0; std::fclose(f); }
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    const int compilers = std::system("pgrep -x cc1plus > /dev/null 2>&1") == 0 ? 1 : 0;
    return "loadavg " + s + (compilers ? " (cc1plus running)" : " (no cc1plus)");
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--min-time") opt.min_time = std::atof(next().c_str());
        else if (a == "--min-reps") opt.min_reps = std::atoi(next().c_str());
        else if (a == "--dnnl-scratchpad") opt.dnnl_user_scratchpad = next() != "library";
        else if (a == "--xsmm-tile") { const auto t = next(); std::sscanf(t.c_str(), "%dx%d", &opt.xsmm_bm, &opt.xsmm_bn); }
        else if (a == "--xsmm-packed-tile") { const auto t = next(); std::sscanf(t.c_str(), "%dx%dx%d", &opt.tile_m, &opt.tile_n, &opt.tile_k); }
        else if (a == "--lib") opt.only_lib = next();
        else if (a == "--no-peaks") opt.peaks = false;
        else if (a == "--shape") opt.only_shape = next();
        else {
            std::fprintf(stderr, "usage: %s [--min-time S (0.2)] [--min-reps N (7)] [--dnnl-scratchpad user|library]\n"
                                 "  [--xsmm-tile BMxBN (32x128)] [--xsmm-packed-tile MxNxK (32x64x128)]\n"
                                 "  [--lib eigen|openblas|onednn|libxsmm|libxsmm-packed] [--shape MxKxN] [--no-peaks]\n", argv[0]);
            return 2;
        }
    }
    { void* f[2]; backtrace(f, 2); }  // loads libgcc_s now, not inside a traced allocation
    libxsmm_init();
    DnnlState dnnl;
    Team2 team;
    std::printf("# %s\n", load_line().c_str());
    if (opt.peaks) print_isa_peaks();
    std::printf("# OpenBLAS %s, core %s, cblas_sbgemm %s\n", openblas_get_config(), openblas_get_corename(),
                dlsym(RTLD_DEFAULT, "cblas_sbgemm") ? "exported" : "NOT exported by this build");
    std::printf("# oneDNN effective ISA %d (dnnl_cpu_isa_t), scratchpad mode %s; libxsmm target %s\n",
                int(dnnl_get_effective_cpu_isa()), opt.dnnl_user_scratchpad ? "user" : "library", libxsmm_get_target_arch());
    std::printf("shape,group,lib,dtype,threads,gflops,median_ms,allocs_per_call,mmaps_per_call,max_rel_err,impl\n");
    for (const Shape& s : kShapes) {
        const std::string sname = std::to_string(s.M) + "x" + std::to_string(s.K) + "x" + std::to_string(s.N);
        if (!opt.only_shape.empty() && opt.only_shape != sname) continue;
        Operands o(s);
        const double t0 = now();
        pack_vnni(o.b16.get(), o.K, o.N, o.b_vnni.get());
        const double pack_ms = (now() - t0) * 1e3;
        std::vector<Path> paths;
        const bool all = opt.only_lib.empty();
        if (all || opt.only_lib == "eigen") add_eigen(paths, o);
        if (all || opt.only_lib == "openblas") add_openblas(paths, o);
        if (all || opt.only_lib == "onednn") add_dnnl(paths, o, dnnl, opt);
        if (all || opt.only_lib == "libxsmm") add_xsmm(paths, o, opt);
        if (all || opt.only_lib == "libxsmm" || opt.only_lib == "libxsmm-packed") add_xsmm_packed(paths, o, opt);
        const double flops = 2.0 * s.M * s.K * s.N;
        for (auto& p : paths) {
            std::replace(p.impl.begin(), p.impl.end(), ',', ';');  // one CSV field
            const Result r = measure(p, o, team, opt);
            std::printf("%s,%s,%s,%s,%s,%.1f,%.4f,%.2f,%.2f,%.2e,%s\n", sname.c_str(), s.group, p.lib.c_str(), p.dtype.c_str(),
                        p.threads.c_str(), flops / r.median_s / 1e9, r.median_s * 1e3, r.allocs, r.mmaps, r.err, p.impl.c_str());
            std::fflush(stdout);
            openblas_set_num_threads(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(150));  // let spinning pool threads go to sleep
        }
        if (all || opt.only_lib == "libxsmm") {
            // The VNNI reformat of B (libxsmm bf16's layout requirement), single-threaded, median of 7.
            std::vector<double> t;
            for (int i = 0; i < 7; ++i) { const double t1 = now(); pack_vnni(o.b16.get(), o.K, o.N, o.b_vnni.get()); t.push_back(now() - t1); }
            std::nth_element(t.begin(), t.begin() + 3, t.end());
            std::printf("%s,%s,libxsmm,vnni-pack B,1,,%.4f,,,,first %.3f ms\n", sname.c_str(), s.group, t[3] * 1e3, pack_ms);
        }
    }
    std::printf("# %s\n", load_line().c_str());
    return 0;
}
