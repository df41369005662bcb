#include <numeric>
#include <utility>

#include "data/portable_random.hpp"
#include "trainbench/dataset.hpp"

namespace trainbench {

void seeded_permutation(std::vector<int64_t>& order, uint64_t seed) {
    std::iota(order.begin(), order.end(), int64_t{0});
    data::PortableRandom random(seed);
    for (size_t i = order.size(); i > 1; --i) {
        const size_t j = static_cast<size_t>(random.below(i));
        std::swap(order[i - 1], order[j]);
    }
}

}  // namespace trainbench
