#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench {

enum class Task { classification, regression };

// One split of a data set. Sample i's features are contiguous (features * i ...), so a
// micro-batch gathers into a [features x count] column-major matrix, one column per sample.
// Image sets keep raw bytes (pixels_u8) and scale them to [0,1] when a batch is gathered, as
// a real input pipeline decodes per batch; other sets keep floats (values_f32).
struct DataSplit {
    int64_t count = 0;
    int64_t features = 0;
    std::vector<float> values_f32;     // count * features, or empty when pixels_u8 is used
    std::vector<uint8_t> pixels_u8;    // count * features, scaled by 1/255 when gathered
    std::vector<int32_t> labels;       // classification: class index per sample
    std::vector<float> targets;        // regression: one target per sample
};

struct Dataset {
    std::string name;                  // as given, e.g. "spirals", "csv:/tmp/x.csv"
    Task task = Task::classification;
    int64_t num_classes = 0;           // classification; 0 for regression
    int64_t features = 0;
    DataSplit train;
    DataSplit validation;              // may have count 0 (val_fraction 0)
    std::string validation_source;     // "test set" or "10% held out" (for display)
    int64_t output_width() const { return task == Task::classification ? num_classes : 1; }
};

struct DataOptions {
    uint64_t seed = 0;
    double val_fraction = 0.1;     // share of rows held out where the data has no test set
    bool shuffle = true;           // false: held-out rows are the last ones, order kept
    int64_t synthetic_samples = 4000;
};

// Loads "spirals", "moons", "blobs", "sine", "fashion-mnist", "csv:PATH" or "idx:DIR".
// Throws Error with one line naming the problem (missing file and the Debian package that
// provides it, malformed row with its line number, ...).
Dataset load_dataset(const std::string& spec, const DataOptions& options);

// Writes samples indices[0..n) of `split` as columns of x_out ([features x n], column-major),
// and their labels or targets. x_out must hold features * n floats.
void gather_samples(const DataSplit& split, const int64_t* indices, int64_t n, float* x_out,
                    int32_t* labels_out, float* targets_out);

// Deterministic Fisher-Yates permutation of [0, n) from a seed (identical on every platform).
void seeded_permutation(std::vector<int64_t>& order, uint64_t seed);

}  // namespace trainbench
