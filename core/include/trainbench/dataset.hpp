#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench {

// language_model: a sample is a window of block_size + 1 tokens of a text; each of its first
// block_size tokens is an input whose target is the token after it.
enum class Task { classification, regression, language_model };

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
    std::vector<uint8_t> tokens;       // language_model: the split's token ids; count = its windows
};

struct Dataset {
    std::string name;                  // as given, e.g. "spirals", "csv:/tmp/x.csv"
    Task task = Task::classification;
    int64_t num_classes = 0;           // classification; 0 for regression
    int64_t features = 0;
    DataSplit train;
    DataSplit validation;              // may have count 0 (val_fraction 0)
    std::string validation_source;     // "test set" or "10% held out" (for display)
    // language_model: num_classes is the vocabulary size, features the context length
    // (block_size, tokens per sample); vocabulary[i] is the byte token id i stands for.
    std::vector<uint8_t> vocabulary;
    std::string note;                  // what loading changed that a user should know, else empty
    // Image sets (fashion-mnist, idx:DIR): each sample is one channel of image_height rows of
    // image_width pixels, row after row; 0 for other sets.
    int64_t image_height = 0, image_width = 0;
    int64_t output_width() const { return task == Task::regression ? 1 : num_classes; }
    // Loss terms per sample: one prediction per input token for a language model.
    int64_t targets_per_sample() const { return task == Task::language_model ? features : 1; }
};

struct DataOptions {
    uint64_t seed = 0;
    double val_fraction = 0.1;     // share of rows held out where the data has no test set
    bool shuffle = true;           // false: held-out rows are the last ones, order kept
    int64_t synthetic_samples = 4000;
    int64_t block_size = 128;      // text corpora: tokens per sample (the GPT's context length)
    // Text corpora: tokenize with this vocabulary (the initial weights' own, so that a model
    // continues or fine-tunes on another text with the token ids it learnt); empty: the text's.
    std::vector<uint8_t> vocabulary;
};

// Loads "spirals", "moons", "blobs", "sine", "fashion-mnist", "csv:PATH", "idx:DIR", or a
// text for a language model: "kjv" or "text:PATH" (data/text_corpus.hpp: byte vocabulary,
// first 90% of the tokens train, windows of options.block_size + 1).
// Throws Error with one line naming the problem (missing file and the Debian package that
// provides it, malformed row with its line number, ...).
Dataset load_dataset(const std::string& spec, const DataOptions& options);

// Writes windows indices[0..n) of a language-model split as rows of block_size input tokens
// and their targets (the next token at each position); each buffer holds n * block_size.
void gather_token_windows(const DataSplit& split, int64_t block_size, const int64_t* indices, int64_t n,
                          int32_t* tokens_out, int32_t* targets_out);

// Writes samples indices[0..n) of `split` as columns of x_out ([features x n], column-major),
// and their labels or targets. x_out must hold features * n floats.
void gather_samples(const DataSplit& split, const int64_t* indices, int64_t n, float* x_out,
                    int32_t* labels_out, float* targets_out);

// Deterministic Fisher-Yates permutation of [0, n) from a seed (identical on every platform).
void seeded_permutation(std::vector<int64_t>& order, uint64_t seed);

}  // namespace trainbench
