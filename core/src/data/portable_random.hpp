#pragma once
#include <cstdint>
#include <random>

namespace trainbench::data {

// Random draws that are bit-identical on every standard library: std::mt19937_64's output is
// fixed by the standard, but std::uniform_*_distribution and std::normal_distribution are not,
// so the transforms from raw 64-bit words are our own.
class PortableRandom {
public:
    explicit PortableRandom(uint64_t seed) : engine_(seed) {}

    // Uniform in [0, 1) with 53 random bits.
    double uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

    double uniform(double low, double high) { return low + (high - low) * uniform01(); }

    // Unbiased integer in [0, bound): rejects the low words that would over-represent
    // small results under a plain modulo.
    uint64_t below(uint64_t bound);

    // Standard normal by Box-Muller (one value per call; the pair's second half is dropped to
    // keep the stream position independent of call history).
    double normal();

    double normal(double mean, double stddev) { return mean + stddev * normal(); }

private:
    std::mt19937_64 engine_;
};

// Decorrelates seeds derived from one user seed (SplitMix64 finaliser), so the generator of a
// synthetic set and the generator choosing its held-out rows do not share a stream.
uint64_t derive_seed(uint64_t seed, uint64_t purpose);

}  // namespace trainbench::data
