#include "data/portable_random.hpp"

#include <cmath>
#include <numbers>

namespace trainbench::data {

uint64_t PortableRandom::below(uint64_t bound) {
    if (bound <= 1) return 0;
    // 2^64 mod bound: words below this threshold would make the modulo uneven.
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        const uint64_t word = engine_();
        if (word >= threshold) return word % bound;
    }
}

double PortableRandom::normal() {
    const double u1 = 1.0 - uniform01();  // (0, 1]: keeps log finite
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t derive_seed(uint64_t seed, uint64_t purpose) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (purpose + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace trainbench::data
