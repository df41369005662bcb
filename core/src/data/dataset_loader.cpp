#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "data/csv_reader.hpp"
#include "data/holdout_split.hpp"
#include "data/idx_reader.hpp"
#include "data/portable_random.hpp"
#include "data/synthetic_sets.hpp"
#include "data/text_corpus.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

constexpr const char* fashion_mnist_directory = "/usr/share/datasets/fashion-mnist";
constexpr uint64_t synthetic_seed_purpose = 1;

constexpr const char* idx_file_names[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// The split, and its images' height and width.
DataSplit read_idx_split(const std::string& images_path, const std::string& labels_path, int64_t& height,
                         int64_t& width) {
    data::IdxImages images = data::read_idx_images(images_path);
    height = images.rows;
    width = images.columns;
    std::vector<int32_t> labels = data::read_idx_labels(labels_path);
    if (static_cast<int64_t>(labels.size()) != images.count) {
        throw Error("IDX files disagree: " + images_path + " holds " +
                    std::to_string(images.count) + " images but " + labels_path + " holds " +
                    std::to_string(labels.size()) + " labels; use files from the same release");
    }
    DataSplit split;
    split.count = images.count;
    split.features = images.rows * images.columns;
    split.pixels_u8 = std::move(images.pixels);
    split.labels = std::move(labels);
    return split;
}

// An MNIST-format folder: its test set is the validation split.
Dataset load_idx_directory(const std::string& name, const std::string& directory,
                           const std::string& missing_hint) {
    std::string paths[4];
    for (int i = 0; i < 4; ++i) {
        paths[i] = data::find_idx_file(directory, idx_file_names[i]);
        if (paths[i].empty()) {
            throw Error("data set '" + name + "': " + directory + " has no " + idx_file_names[i] +
                        " (or " + idx_file_names[i] + ".gz); " + missing_hint);
        }
    }
    Dataset dataset;
    dataset.name = name;
    dataset.task = Task::classification;
    int64_t test_height = 0, test_width = 0;
    dataset.train = read_idx_split(paths[0], paths[1], dataset.image_height, dataset.image_width);
    dataset.validation = read_idx_split(paths[2], paths[3], test_height, test_width);
    if (dataset.image_height != test_height || dataset.image_width != test_width) {
        throw Error("IDX files disagree: " + paths[0] + " has images of " +
                    std::to_string(dataset.image_height) + "x" + std::to_string(dataset.image_width) + " pixels but " +
                    paths[2] + " of " + std::to_string(test_height) + "x" + std::to_string(test_width) +
                    "; use files from the same release");
    }
    dataset.features = dataset.train.features;
    const int32_t largest_label =
        std::max(*std::max_element(dataset.train.labels.begin(), dataset.train.labels.end()),
                 *std::max_element(dataset.validation.labels.begin(), dataset.validation.labels.end()));
    dataset.num_classes = largest_label + 1;
    dataset.validation_source = "test set";
    return dataset;
}

void check_options(const std::string& spec, const DataOptions& options) {
    if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", options.val_fraction);
        throw Error("val_fraction is " + std::string(value) + " for data set '" +
                    spec + "'; it must be at least 0 and below 1 (e.g. 0.1)");
    }
}

DataSplit token_split(std::vector<uint8_t> tokens, int64_t block_size) {
    DataSplit split;
    split.count = data::window_count(static_cast<int64_t>(tokens.size()), block_size);
    split.features = block_size;
    split.tokens = std::move(tokens);
    return split;
}

// A text for a language model: one sample per window of block_size + 1 tokens.
Dataset load_text_dataset(const std::string& spec, int64_t block_size, const std::vector<uint8_t>& vocabulary) {
    std::string note;
    data::TextCorpus corpus = data::load_text_corpus(spec, block_size, vocabulary, &note);
    Dataset dataset;
    dataset.note = std::move(note);
    dataset.name = spec;
    dataset.task = Task::language_model;
    dataset.num_classes = corpus.vocab_size();
    dataset.features = block_size;
    dataset.vocabulary = std::move(corpus.vocabulary);
    dataset.train = token_split(std::move(corpus.train), block_size);
    dataset.validation = token_split(std::move(corpus.validation), block_size);
    dataset.validation_source = "last 10% of the text";
    return dataset;
}

// Reads one byte of every page of a split's arrays. On the 2-vCPU PVM guests we measure on, the
// first read of each page of freshly loaded data cost about 4 microseconds (52 ms for
// Fashion-MNIST's 11,484 pages of training images, 2026-11-28), even though the loader had just
// written it; a later read costs nothing. Unread, those costs fell on the first epoch's batch
// gathers (0.4 of a 5 ms bf16 MLP update), so the first epoch timed slower than the rest and a
// comparison's first run slower than the runs after it on the same data. Here they are paid once
// while loading. Elsewhere this is a quick pass over data in memory.
template <class T>
void read_every_page(const std::vector<T>& values) {
    constexpr size_t kPageBytes = 4096;
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    unsigned sum = 0;
    for (size_t at = 0; at < values.size() * sizeof(T); at += kPageBytes) sum += bytes[at];
    asm volatile("" : : "r"(sum));  // the sum is used: the reads are not optimised away
}

void read_every_page(const DataSplit& split) {
    read_every_page(split.values_f32);
    read_every_page(split.pixels_u8);
    read_every_page(split.labels);
    read_every_page(split.targets);
    read_every_page(split.tokens);
}

Dataset read_dataset(const std::string& spec, const DataOptions& options) {
    if (spec == "fashion-mnist") {
        return load_idx_directory(spec, fashion_mnist_directory,
                                  "install the Debian package dataset-fashion-mnist "
                                  "(apt-get install dataset-fashion-mnist)");
    }
    if (data::is_text_corpus_spec(spec)) return load_text_dataset(spec, options.block_size, options.vocabulary);
    if (spec.rfind("idx:", 0) == 0) {
        const std::string directory = spec.substr(4);
        if (!std::filesystem::is_directory(directory)) {
            throw Error("data set '" + spec + "': " + directory +
                        " is not a folder; give idx:DIR with the four MNIST-format files");
        }
        return load_idx_directory(spec, directory,
                                  "an idx:DIR folder needs train-images-idx3-ubyte, "
                                  "train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
                                  "t10k-labels-idx1-ubyte");
    }

    Dataset dataset;
    dataset.name = spec;
    if (data::is_synthetic_set(spec)) {
        data::split_holdout(
            data::make_synthetic_set(spec, options.synthetic_samples,
                                     data::derive_seed(options.seed, synthetic_seed_purpose)),
            options, dataset);
        return dataset;
    }
    if (spec.rfind("csv:", 0) == 0) {
        data::split_holdout(data::read_csv_table(spec.substr(4)), options, dataset);
        return dataset;
    }
    throw Error("unknown data set '" + spec +
                "'; use spirals, moons, blobs, sine, fashion-mnist, csv:PATH, idx:DIR, kjv or text:PATH");
}

}  // namespace

Dataset load_dataset(const std::string& spec, const DataOptions& options) {
    check_options(spec, options);
    Dataset dataset = read_dataset(spec, options);
    read_every_page(dataset.train);
    read_every_page(dataset.validation);
    return dataset;
}

}  // namespace trainbench
