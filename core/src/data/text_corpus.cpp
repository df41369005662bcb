#include "data/text_corpus.hpp"

#include <array>
#include <cassert>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/kjv_corpus.hpp"
#include "train/micro_batch_stream.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/error.hpp"

namespace trainbench::data {
namespace {

constexpr std::string_view text_prefix = "text:";

bool is_text_control(uint8_t byte) {
    if (byte == '\t' || byte == '\n' || byte == '\v' || byte == '\f' || byte == '\r' || byte == 0x1B)
        return false;
    return byte < 0x20 || byte == 0x7F;
}

// Names the kind of a binary file whose first bytes say it, so the fix is plain. Only
// signatures that no text starts with (each holds a control byte or is 0xFD "7zXZ").
std::string binary_kind(std::string_view bytes) {
    if (bytes.size() >= 2 && uint8_t(bytes[0]) == 0x1F && uint8_t(bytes[1]) == 0x8B)
        return "is gzip-compressed; decompress it first (gunzip)";
    if (bytes.substr(0, 5) == "\xFD" "7zXZ")
        return "is xz-compressed; decompress it first (unxz)";
    if (bytes.substr(0, 4) == "PK\x03\x04") return "is a zip archive; extract the text from it first";
    if (bytes.substr(0, 4) == "\x7F" "ELF") return "is a program (ELF), not text; give a text file";
    return {};
}

void check_is_text(const std::string& path, std::string_view bytes) {
    const std::string kind = binary_kind(bytes);
    if (!kind.empty()) throw Error("text file " + path + " " + kind);
    int64_t controls = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto byte = static_cast<uint8_t>(bytes[i]);
        if (byte == 0) {
            throw Error("text file " + path + " looks binary: it holds a NUL byte at offset " +
                        std::to_string(i) + "; give a plain text file (e.g. UTF-8)");
        }
        controls += is_text_control(byte);
    }
    if (controls * 100 > static_cast<int64_t>(bytes.size())) {
        throw Error("text file " + path + " looks binary: " + std::to_string(controls) + " of its " +
                    std::to_string(bytes.size()) +
                    " bytes are control characters (more than 1%); give a plain text file (e.g. UTF-8)");
    }
}

std::string read_whole_file(const std::string& path) {
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (!std::filesystem::exists(status)) {
        throw Error("text file " + path + " does not exist; check the path after 'text:'");
    }
    if (std::filesystem::is_directory(status)) {
        throw Error(path + " is a folder, not a text file; give text:PATH of a file");
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) throw Error("cannot open text file " + path + "; check that it is readable");
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (file.bad()) throw Error("cannot read text file " + path + "; check the file and the disk");
    return bytes;
}

// Appended rather than "'" + symbol + "'", which GCC 12 inlines into a false -Wrestrict warning.
std::string quoted_symbol(uint8_t byte) {
    std::string quoted(1, '\'');
    quoted += printable_symbol(byte);
    quoted += '\'';
    return quoted;
}

}  // namespace

bool is_text_corpus_spec(const std::string& spec) {
    return spec == "kjv" || spec.rfind(text_prefix, 0) == 0;
}

TextCorpus load_text_corpus(const std::string& spec, int64_t block_size, const std::vector<uint8_t>& vocabulary,
                            std::string* note) {
    TextCorpus corpus;
    if (spec == "kjv") {
        corpus = read_text_corpus(ensure_kjv_text(default_kjv_cache_path()), spec);
    } else if (spec.rfind(text_prefix, 0) == 0) {
        const std::string path = spec.substr(text_prefix.size());
        if (path.empty()) throw Error("data set 'text:' names no file; give text:PATH");
        corpus = read_text_corpus(path, spec);
    } else {
        throw Error("unknown text corpus '" + spec + "'; use kjv or text:PATH");
    }
    if (!vocabulary.empty()) {
        const std::string left_out = adopt_vocabulary(corpus, vocabulary);
        if (note) *note = left_out;
    }
    check_block_size(corpus, block_size);
    return corpus;
}

std::string adopt_vocabulary(TextCorpus& corpus, const std::vector<uint8_t>& vocabulary) {
    std::array<int, 256> id_of;
    id_of.fill(-1);
    for (size_t id = 0; id < vocabulary.size(); ++id) id_of[vocabulary[id]] = static_cast<int>(id);
    std::vector<uint8_t> kept;
    kept.reserve(static_cast<size_t>(corpus.characters));
    std::array<int64_t, 256> dropped{};
    for (const std::vector<uint8_t>* split : {&corpus.train, &corpus.validation})
        for (uint8_t token : *split) {
            const uint8_t byte = corpus.vocabulary[token];
            if (id_of[byte] < 0) ++dropped[byte];
            else kept.push_back(static_cast<uint8_t>(id_of[byte]));
        }
    if (kept.empty())
        throw Error("data set '" + corpus.name + "' has no character of the vocabulary of the weights it starts from (" +
                    std::to_string(vocabulary.size()) + " symbols); fine-tune on a text in the same alphabet");
    corpus.vocabulary = vocabulary;
    corpus.characters = static_cast<int64_t>(kept.size());
    const auto train_count = static_cast<std::ptrdiff_t>(train_token_count(corpus.characters));
    corpus.train.assign(kept.begin(), kept.begin() + train_count);
    corpus.validation.assign(kept.begin() + train_count, kept.end());
    int64_t bytes = 0;
    std::string symbols;
    int listed = 0, lacking = 0;
    for (int byte = 0; byte < 256; ++byte) {
        if (dropped[byte] == 0) continue;
        bytes += dropped[byte];
        ++lacking;
        if (listed++ < 10) symbols += (symbols.empty() ? "" : ", ") + quoted_symbol(static_cast<uint8_t>(byte));
    }
    if (lacking == 0) return {};
    if (lacking > listed) symbols += ", ...";
    return "'" + corpus.name + "' tokenized with the vocabulary of the initial weights (" +
           std::to_string(vocabulary.size()) + " symbols): left out " + std::to_string(bytes) + " bytes of " +
           std::to_string(lacking) + (lacking == 1 ? " symbol" : " symbols") + " it lacks (" + symbols + ")";
}

TextCorpus read_text_corpus(const std::string& path, const std::string& name) {
    return text_corpus_from_file_bytes(read_whole_file(path), path, name);
}

TextCorpus text_corpus_from_file_bytes(std::string_view bytes, const std::string& path,
                                       const std::string& name) {
    if (bytes.empty()) {
        throw Error("text file " + path + " is empty; give a file with the text to learn from");
    }
    check_is_text(path, bytes);
    return corpus_from_text(bytes, name, path);
}

TextCorpus corpus_from_text(std::string_view text, const std::string& name, const std::string& path) {
    std::array<bool, 256> present{};
    for (char c : text) present[static_cast<uint8_t>(c)] = true;
    std::array<uint8_t, 256> id_of{};
    TextCorpus corpus;
    corpus.name = name;
    corpus.path = path;
    corpus.characters = static_cast<int64_t>(text.size());
    for (int byte = 0; byte < 256; ++byte) {
        if (!present[byte]) continue;
        id_of[byte] = static_cast<uint8_t>(corpus.vocabulary.size());
        corpus.vocabulary.push_back(static_cast<uint8_t>(byte));
    }
    const auto train_count = static_cast<size_t>(train_token_count(corpus.characters));
    corpus.train.resize(train_count);
    corpus.validation.resize(text.size() - train_count);
    for (size_t i = 0; i < train_count; ++i) corpus.train[i] = id_of[static_cast<uint8_t>(text[i])];
    for (size_t i = train_count; i < text.size(); ++i)
        corpus.validation[i - train_count] = id_of[static_cast<uint8_t>(text[i])];
    return corpus;
}

void check_block_size(const TextCorpus& corpus, int64_t block_size) {
    if (block_size < 1) {
        throw Error("block size is " + std::to_string(block_size) +
                    "; it must be at least 1 (--block-size)");
    }
    const auto train = static_cast<int64_t>(corpus.train.size());
    const auto validation = static_cast<int64_t>(corpus.validation.size());
    const std::string window = "one window of block size " + std::to_string(block_size) +
                               " needs " + std::to_string(block_size + 1) + " tokens";
    // The validation split, ceil(n / 10) tokens, is never the longer one, so it bounds the
    // block size that fits both, and n = 10 * block_size + 1 is the shortest text that fits.
    const std::string longer = "a text of at least " + std::to_string(10 * block_size + 1) + " characters";
    const std::string fix = validation >= 2
        ? "lower --block-size to at most " + std::to_string(validation - 1) + " or use " + longer
        : "use " + longer;
    if (train < block_size + 1) {
        throw Error("data set '" + corpus.name + "' is too short: its " + std::to_string(corpus.characters) +
                    " tokens give " + std::to_string(train) + " for training (the first 90%) but " +
                    window + "; " + fix);
    }
    if (validation < block_size + 1) {
        throw Error("data set '" + corpus.name + "': its validation split (the last 10%) is too short, " +
                    std::to_string(validation) + " tokens of " + std::to_string(corpus.characters) +
                    ", but " + window + "; " + fix);
    }
}

int64_t train_token_count(int64_t characters) { return characters * 9 / 10; }

int64_t window_count(int64_t token_count, int64_t block_size) {
    if (token_count < 1 || block_size < 1) return 0;
    return (token_count - 1) / block_size;
}

void window_order(std::vector<int64_t>& order, bool shuffle, uint64_t seed, int64_t epoch) {
    if (shuffle) {
        seeded_permutation(order, epoch_shuffle_seed(seed, epoch));
    } else {
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    }
}

void gather_windows(std::span<const uint8_t> tokens, int64_t block_size, const int64_t* windows,
                    int64_t count, int32_t* inputs, int32_t* targets) {
    [[maybe_unused]] const int64_t windows_in_split = window_count(static_cast<int64_t>(tokens.size()), block_size);
    for (int64_t row = 0; row < count; ++row) {
        const int64_t window = windows[row];
        assert(window >= 0 && window < windows_in_split);
        const uint8_t* source = tokens.data() + window * block_size;
        int32_t* input = inputs + row * block_size;
        int32_t* target = targets + row * block_size;
        for (int64_t t = 0; t < block_size; ++t) {
            input[t] = source[t];
            target[t] = source[t + 1];
        }
    }
}

std::string decode_tokens(const TextCorpus& corpus, std::span<const int32_t> ids) {
    std::string text(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= corpus.vocab_size()) {
            throw Error("token id " + std::to_string(ids[i]) + " is outside the vocabulary of '" +
                        corpus.name + "' (ids 0.." + std::to_string(corpus.vocab_size() - 1) +
                        "); the model and the corpus do not match");
        }
        text[i] = static_cast<char>(corpus.vocabulary[static_cast<size_t>(ids[i])]);
    }
    return text;
}

std::vector<int32_t> encode_text(const TextCorpus& corpus, std::string_view text) {
    std::array<int32_t, 256> id_of;
    id_of.fill(-1);
    for (size_t id = 0; id < corpus.vocabulary.size(); ++id) id_of[corpus.vocabulary[id]] = static_cast<int32_t>(id);
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<uint8_t>(text[i]);
        if (id_of[byte] < 0) {
            throw Error("character " + quoted_symbol(byte) + " at position " + std::to_string(i) +
                        " does not occur in '" + corpus.name +
                        "', so it has no token; use only characters of the corpus");
        }
        ids[i] = id_of[byte];
    }
    return ids;
}

std::string printable_symbol(uint8_t byte) {
    switch (byte) {
        case '\n': return "\\n";
        case '\t': return "\\t";
        case '\r': return "\\r";
        case '\\': return "\\\\";
        default: break;
    }
    if (byte >= 0x20 && byte < 0x7F) return std::string(1, static_cast<char>(byte));
    char text[8];
    std::snprintf(text, sizeof text, "\\x%02X", byte);
    return text;
}

std::string printable_vocabulary(const TextCorpus& corpus) {
    std::string text;
    for (uint8_t byte : corpus.vocabulary) text += printable_symbol(byte);
    return text;
}

}  // namespace trainbench::data
