// The CUDA engine's matrix products alone, through its own GemmRunner (cuBLASLt), timed with
// CUDA events on random data: an 8192^3 square product per precision (the engine's GEMM peak,
// beside torch.matmul's in torch_mlp_bench.py), and the exact products of one update of the
// benchmark MLP (forward with its bias/ReLU epilogue, dW accumulated in fp32, dX in fp32), so that the
// share of the peak the products reach can be told apart from the rest of an update.
// Usage: cuda_products [--batch 4096] [--sizes 784,4096,4096,4096,10] [--out FILE.json]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/gemm.hpp"
#include "backend/cuda/kernels.hpp"
#include "backend/cuda/linear_products.hpp"
#include "trainbench/error.hpp"

using namespace trainbench;
using namespace trainbench::cuda;

namespace {

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;

struct DeviceBuffer {
    void* ptr = nullptr;
    explicit DeviceBuffer(size_t bytes) { TRAINBENCH_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Uniform in [-1, 1) from a fixed xorshift: never zeros, which can run faster than real data.
void fill_random(DeviceBuffer& target, StorageType type, int64_t n, uint64_t seed, cudaStream_t stream) {
    std::vector<float> host(static_cast<size_t>(n));
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& v : host) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        v = static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    DeviceBuffer staging(static_cast<size_t>(n) * 4);
    TRAINBENCH_CUDA_CHECK(cudaMemcpy(staging.ptr, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    convert_from_f32(static_cast<const float*>(staging.ptr), target.ptr, type, n, stream);
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Median milliseconds of one call, each repeat timed on its own between events.
double median_ms(GemmRunner& gemm, const GemmCall& call, cudaStream_t stream) {
    std::vector<float> times = time_gemm_ms(gemm, call, stream, kWarmup, kRepeats);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

std::vector<int64_t> parse_sizes(const std::string& text) {
    std::vector<int64_t> sizes;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = text.find(',', start);
        sizes.push_back(std::stoll(text.substr(start, comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return sizes;
}

struct Result {
    std::string precision;
    double square_tflops = 0.0;
    double update_products_ms = 0.0;
    double update_products_tflops = 0.0;
    double forward_ms = 0.0, weight_grad_ms = 0.0, input_grad_ms = 0.0;
};

Result measure(StorageType type, const char* name, const std::vector<int64_t>& sizes, int64_t batch,
               int64_t square, cudaStream_t stream) {
    GemmRunner gemm;
    DeviceBuffer workspace(GemmRunner::kWorkspaceBytes);
    gemm.set_workspace(workspace.ptr, GemmRunner::kWorkspaceBytes);
    const cudaDataType_t storage = cuda_data_type(type);
    const int64_t element = storage_bytes(type);
    Result result;
    result.precision = name;

    {  // square product, output in the input type as torch.matmul's
        DeviceBuffer a(square * square * element), b(square * square * element), d(square * square * element);
        fill_random(a, type, square * square, 1, stream);
        fill_random(b, type, square * square, 2, stream);
        GemmCall call;
        call.m = call.n = call.k = square;
        call.a = a.ptr;
        call.b = b.ptr;
        call.d = d.ptr;
        call.lda = call.ldb = call.ldd = square;
        call.input_type = call.output_type = storage;
        const double ms = median_ms(gemm, call, stream);
        result.square_tflops = 2.0 * square * square * square / (ms * 1e-3) / 1e12;
    }

    // One update's products, as the engine issues them (backend/cuda/linear_products.hpp); dW
    // adds to its output, as every micro-batch after an update's first does.
    const int64_t widest = *std::max_element(sizes.begin(), sizes.end());
    DeviceBuffer weights(widest * widest * element), activations(widest * batch * element),
        upstream(widest * batch * element), output(widest * batch * element),
        input_grads(widest * batch * 4), weight_grads(widest * widest * 4), bias(widest * element);
    fill_random(weights, type, widest * widest, 3, stream);
    fill_random(activations, type, widest * batch, 4, stream);
    fill_random(upstream, type, widest * batch, 5, stream);
    fill_random(bias, type, widest, 6, stream);
    fill_random(weight_grads, StorageType::f32, widest * widest, 7, stream);
    double flops = 0.0;
    const int layers = static_cast<int>(sizes.size()) - 1;
    for (int layer = 1; layer <= layers; ++layer) {
        const int64_t in = sizes[layer - 1], out = sizes[layer];
        const GemmEpilogue epilogue = layer < layers ? GemmEpilogue::relu_bias : GemmEpilogue::bias;
        result.forward_ms += median_ms(
            gemm,
            linear_forward_product(in, out, batch, weights.ptr, activations.ptr, output.ptr, storage,
                                   bias.ptr, epilogue),
            stream);
        result.weight_grad_ms += median_ms(gemm,
            linear_weight_grad_product(in, out, batch, activations.ptr, upstream.ptr,
                                       static_cast<float*>(weight_grads.ptr), storage, true),
            stream);
        flops += 4.0 * batch * in * out;
        if (layer == 1) continue;  // no gradient for the input
        result.input_grad_ms += median_ms(
            gemm,
            linear_input_grad_product(in, out, batch, weights.ptr, upstream.ptr, static_cast<float*>(input_grads.ptr), storage),
            stream);
        flops += 2.0 * batch * in * out;
    }
    result.update_products_ms = result.forward_ms + result.weight_grad_ms + result.input_grad_ms;
    result.update_products_tflops = flops / (result.update_products_ms * 1e-3) / 1e12;
    return result;
}

}  // namespace

int main(int argc, char** argv) {
    int64_t batch = 4096, square = 8192;
    std::vector<int64_t> sizes{784, 4096, 4096, 4096, 10};
    std::string out;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--batch") batch = std::stoll(argv[i + 1]);
        else if (flag == "--sizes") sizes = parse_sizes(argv[i + 1]);
        else if (flag == "--square") square = std::stoll(argv[i + 1]);
        else if (flag == "--out") out = argv[i + 1];
        else {
            std::fprintf(stderr, "cuda_products: unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    try {
        cudaStream_t stream;
        TRAINBENCH_CUDA_CHECK(cudaStreamCreate(&stream));
        cudaDeviceProp properties{};
        TRAINBENCH_CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
        std::vector<Result> results;
        results.push_back(measure(StorageType::f32, "fp32", sizes, batch, square, stream));
        results.push_back(measure(StorageType::bf16, "bf16", sizes, batch, square, stream));
        results.push_back(measure(StorageType::f16, "fp16", sizes, batch, square, stream));
        std::printf("%s: GemmRunner (cuBLASLt, fp32 accumulation), median of %d timed calls\n",
                    properties.name, kRepeats);
        std::printf("| precision | %lld^3 TFLOP/s | update products ms (fwd / dW / dX) "
                    "| products TFLOP/s | %% of own %lld^3 |\n",
                    static_cast<long long>(square), static_cast<long long>(square));
        std::printf("| --- | ---: | ---: | ---: | ---: |\n");
        for (const Result& r : results) {
            std::printf("| %s | %.1f | %.3f (%.3f / %.3f / %.3f) | %.1f | %.0f%% |\n", r.precision.c_str(),
                        r.square_tflops, r.update_products_ms, r.forward_ms, r.weight_grad_ms,
                        r.input_grad_ms, r.update_products_tflops,
                        100.0 * r.update_products_tflops / r.square_tflops);
        }
        if (!out.empty()) {
            std::FILE* file = std::fopen(out.c_str(), "w");
            if (!file) throw Error("cannot write " + out);
            std::fprintf(file, "{\"device\": \"%s\", \"batch\": %lld, \"square\": %lld, \"results\": {",
                         properties.name, static_cast<long long>(batch), static_cast<long long>(square));
            for (size_t i = 0; i < results.size(); ++i) {
                const Result& r = results[i];
                std::fprintf(file,
                             "%s\"%s\": {\"square_tflops\": %.6g, \"update_products_ms\": %.6g, "
                             "\"forward_ms\": %.6g, \"weight_grad_ms\": %.6g, \"input_grad_ms\": %.6g, "
                             "\"update_products_tflops\": %.6g}",
                             i ? ", " : "", r.precision.c_str(), r.square_tflops, r.update_products_ms,
                             r.forward_ms, r.weight_grad_ms, r.input_grad_ms, r.update_products_tflops);
            }
            std::fprintf(file, "}}\n");
            std::fclose(file);
        }
        cudaStreamDestroy(stream);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "cuda_products: %s\n", error.what());
        return 1;
    }
    return 0;
}
