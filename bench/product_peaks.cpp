// The machine's measured matrix-product peak for each kernel the CPU engine can multiply with
// (Eigen's fp32 product on packed weights; oneDNN's fp32 and bf16 ones, nn/onednn_linear.hpp),
// and the share of that peak the engine's own products reach on the Linear layers of the two
// benchmark models: the GPT L4 H4 C128 T128 at 32 windows (4096 rows) and the 784-1024-1024-10
// MLP at 256 samples, every product of one update (forward, input gradient where the layer
// needs one, weight gradient), split across the worker team as the engine splits them.
// Peaks are the best of large square products (1024^3, 2048^3), each the best of several
// timed calls; nothing is taken from a data sheet. Output: a line per kernel, or JSON lines.
// --per-layer adds, for the oneDNN kernels, each layer's forward and backward (input and weight
// gradients together, as the engine calls them) timed on its own: which products hold the share down.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "nn/onednn_linear.hpp"
#include "nn/packed_weights.hpp"
#include "parallel/worker_team.hpp"
#include "plan/graph_plan.hpp"
#include "precision/half_float.hpp"

using namespace trainbench;

namespace {

using Clock = std::chrono::steady_clock;

// Best seconds of `repeats` calls after one untimed call.
double best_seconds(const std::function<void()>& call, int repeats) {
    call();
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto start = Clock::now();
        call();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return best;
}

struct Layer {
    int64_t in, out;
    bool input_grad;  // the first layer of the MLP needs none (its input is the data)
};
struct Model {
    const char* name;
    int64_t rows;
    std::vector<Layer> layers;
};

// Operands of one layer in fp32 and as bf16 codes, with the engine's result and gradient buffers.
struct Buffers {
    std::vector<float> x, w, bias, y, dy, dx, dw, db, scratch;
    std::vector<uint16_t> x16, w16;
    Buffers(const Layer& l, int64_t rows, MatmulOperands operands, int threads)
        : x(size_t(rows * l.in)), w(size_t(l.out * l.in)), bias(size_t(l.out), 0.01f), y(size_t(rows * l.out)),
          dy(size_t(rows * l.out)), dx(size_t(rows * l.in)), dw(size_t(l.out * l.in)), db(size_t(l.out)),
          scratch(size_t(onednn_linear_scratch_floats(operands, l.in, l.out, rows, threads))), x16(x.size()), w16(w.size()) {
        for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < w.size(); ++i) w[i] = float((i * 104729) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < dy.size(); ++i) dy[i] = float((i * 15485863) % 1000) / 1000.0f - 0.5f;
        round_to_16bit(Precision::bf16, dy.data(), int64_t(dy.size()));
        store_16bit(Precision::bf16, x.data(), x16.data(), int64_t(x.size()));
        store_16bit(Precision::bf16, w.data(), w16.data(), int64_t(w.size()));
    }
};

struct Result {
    std::string kernel;
    double peak = 0.0;                 // FLOP/s
    std::vector<double> model_rates;   // FLOP/s of one update's products, per model
};

// FLOP/s of the forward product of a square n^3 problem with `kernel`.
double square_rate(ProductKernel kernel, int64_t n, int threads, int repeats) {
    const Layer layer{n, n, true};
    Buffers b(layer, n, MatmulOperands::f32, threads);
    const double flops = 2.0 * double(n) * double(n) * double(n);
    if (kernel == ProductKernel::eigen) {
        const PackedLayout layout = make_packed_layout(PackedOperand::weights, n, n, threads);
        struct AlignedDelete {
            void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
        };
        const std::unique_ptr<float[], AlignedDelete> packed(new (std::align_val_t(64)) float[size_t(layout.total_floats())]);
        pack_weights(layout, b.w.data(), packed.get());
        return flops / best_seconds([&] { packed_linear_forward(layout, packed.get(), nullptr, b.x.data(), b.y.data(), n); },
                                    repeats);
    }
    const bool bf16 = kernel == ProductKernel::onednn_bf16;
    const MatmulOperands operands = bf16 ? MatmulOperands::bf16 : MatmulOperands::f32;
    const int64_t scratchpad = onednn_linear_scratchpad_bytes(operands, n, n, n, false, false, threads);
    std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
    OnednnProducts products(threads, scratchpads.data(), scratchpad);
    const void* x = bf16 ? static_cast<const void*>(b.x16.data()) : b.x.data();
    const void* w = bf16 ? static_cast<const void*>(b.w16.data()) : b.w.data();
    return flops / best_seconds([&] { onednn_linear_forward(products, operands, x, w, nullptr, b.y.data(), n, n, n); },
                                repeats);
}

// FLOP/s of every oneDNN product of one update of `model` (the engine's Eigen path packs its
// weights once per update and is timed here through its own square peak only).
double model_rate(ProductKernel kernel, const Model& model, int threads, int repeats, bool per_layer) {
    const bool bf16 = kernel == ProductKernel::onednn_bf16;
    const MatmulOperands operands = bf16 ? MatmulOperands::bf16 : MatmulOperands::f32;
    int64_t scratchpad = 0;
    std::vector<Buffers> buffers;
    double flops = 0.0;
    for (const Layer& l : model.layers) {
        buffers.emplace_back(l, model.rows, operands, threads);
        scratchpad = std::max(scratchpad, onednn_linear_scratchpad_bytes(operands, l.in, l.out, model.rows, true,
                                                                         l.input_grad, threads));
        flops += double(l.input_grad ? 6 : 4) * double(l.in) * double(l.out) * double(model.rows);
    }
    std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
    OnednnProducts products(threads, scratchpads.data(), scratchpad);
    // The operands as `kernel` reads them: bf16 codes or fp32.
    auto x_of = [&](const Buffers& b) { return bf16 ? static_cast<const void*>(b.x16.data()) : b.x.data(); };
    auto w_of = [&](const Buffers& b) { return bf16 ? static_cast<const void*>(b.w16.data()) : b.w.data(); };
    auto forward = [&](size_t i) {
        const Layer& l = model.layers[i];
        Buffers& b = buffers[i];
        onednn_linear_forward(products, operands, x_of(b), w_of(b), b.bias.data(), b.y.data(), l.in, l.out, model.rows);
    };
    auto backward = [&](size_t i) {
        const Layer& l = model.layers[i];
        Buffers& b = buffers[i];
        onednn_linear_backward(products, operands, x_of(b), w_of(b), b.dy.data(), b.dw.data(), b.db.data(),
                               l.input_grad ? b.dx.data() : nullptr, l.in, l.out, model.rows, GradientWrite::overwrite,
                               b.scratch.data());
    };
    if (per_layer)
        for (size_t i = 0; i < model.layers.size(); ++i) {
            const Layer& l = model.layers[i];
            const double pass = 2.0 * double(l.in) * double(l.out) * double(model.rows);
            const double forward_s = best_seconds([&] { forward(i); }, repeats);
            const double backward_s = best_seconds([&] { backward(i); }, repeats);
            std::printf("  %s layer %zu (%lld -> %lld, %lld rows): forward %7.1f GFLOP/s (%.3f ms), backward %7.1f GFLOP/s (%.3f ms)\n",
                        model.name, i, static_cast<long long>(l.in), static_cast<long long>(l.out),
                        static_cast<long long>(model.rows), pass / forward_s / 1e9, forward_s * 1e3,
                        pass * (l.input_grad ? 2 : 1) / backward_s / 1e9, backward_s * 1e3);
        }
    auto update = [&] {
        for (size_t i = 0; i < model.layers.size(); ++i) {
            forward(i);
            backward(i);
        }
    };
    return flops / best_seconds(update, repeats);
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, repeats = 10;
    bool json = false, per_layer = false;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (flag == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
        else if (flag == "--json") json = true;
        else if (flag == "--per-layer") per_layer = true;
        else {
            std::fprintf(stderr, "usage: %s [--threads N (2)] [--repeats N (10)] [--json] [--per-layer]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || repeats < 1) {
        std::fprintf(stderr, "--threads and --repeats must be >= 1\n");
        return 2;
    }
    WorkerTeam::shared().resize(threads);
    const std::vector<Model> models = {
        {"gpt", 32 * 128, {{128, 384, true}, {128, 128, true}, {128, 512, true}, {512, 128, true},
                           {128, 384, true}, {128, 128, true}, {128, 512, true}, {512, 128, true},
                           {128, 384, true}, {128, 128, true}, {128, 512, true}, {512, 128, true},
                           {128, 384, true}, {128, 128, true}, {128, 512, true}, {512, 128, true},
                           {128, 65, true}}},
        {"mlp", 256, {{784, 1024, false}, {1024, 1024, true}, {1024, 10, true}}},
    };
    std::vector<ProductKernel> kernels = {ProductKernel::eigen, ProductKernel::onednn_f32};
    if (onednn_has_native_bf16()) kernels.push_back(ProductKernel::onednn_bf16);
    for (ProductKernel kernel : kernels) {
        Result r{describe(kernel)};
        for (int64_t n : {int64_t{1024}, int64_t{2048}}) r.peak = std::max(r.peak, square_rate(kernel, n, threads, repeats));
        if (kernel != ProductKernel::eigen)
            for (const Model& m : models) r.model_rates.push_back(model_rate(kernel, m, threads, repeats, per_layer && !json));
        if (json) {
            std::printf("{\"bench\":\"product_peaks\",\"kernel\":\"%s\",\"threads\":%d,\"peak_gflops\":%.1f", r.kernel.c_str(),
                        threads, r.peak / 1e9);
            for (size_t i = 0; i < r.model_rates.size(); ++i)
                std::printf(",\"%s_update_products_gflops\":%.1f,\"%s_share_of_peak\":%.3f", models[i].name,
                            r.model_rates[i] / 1e9, models[i].name, r.model_rates[i] / r.peak);
            std::printf("}\n");
        } else {
            std::printf("%-32s peak %7.1f GFLOP/s on %d threads", r.kernel.c_str(), r.peak / 1e9, threads);
            for (size_t i = 0; i < r.model_rates.size(); ++i)
                std::printf("; %s update's products %7.1f GFLOP/s (%.0f%% of peak)", models[i].name, r.model_rates[i] / 1e9,
                            100.0 * r.model_rates[i] / r.peak);
            std::printf("\n");
        }
    }
    if (!onednn_has_native_bf16())
        std::printf("%s\n", json ? "{\"bench\":\"product_peaks\",\"kernel\":\"oneDNN bf16\",\"skipped\":\"no native bf16 products on this CPU\"}"
                                 : "oneDNN bf16: not measured, this CPU does not multiply bf16 natively (no AMX or AVX512_BF16)");
    return 0;
}
