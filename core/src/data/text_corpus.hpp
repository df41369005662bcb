#pragma once
// Character-level text for a GPT language model, nanoGPT's shakespeare_char convention: the
// vocabulary is the sorted set of distinct bytes of the text, a token is the index of its byte
// in that set, the first 90% of the tokens train and the last 10% validate.
//
// A sample is a window of block_size + 1 consecutive tokens: the first block_size are the
// input, and at each position the next token is the target. An epoch is the non-overlapping
// windows tokens[i*T : i*T+T+1] for i = 0 .. (n - 1) / T - 1 (neighbours share one token, the
// last target of one is the first input of the next), in that order or in a seeded
// permutation of it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainbench::data {

struct TextCorpus {
    std::string name;                 // as given: "kjv" or "text:PATH"
    std::string path;                 // the file the text was read from (for kjv: the cache)
    int64_t characters = 0;           // bytes of text, = train.size() + validation.size()
    std::vector<uint8_t> vocabulary;  // sorted distinct bytes; token id i stands for vocabulary[i]
    std::vector<uint8_t> train;       // token ids of the first n * 9 / 10 bytes
    std::vector<uint8_t> validation;  // token ids of the rest
    int64_t vocab_size() const { return static_cast<int64_t>(vocabulary.size()); }
};

// True for the specs load_text_corpus reads: "kjv" and "text:PATH".
bool is_text_corpus_spec(const std::string& spec);

// Loads "kjv" (the King James Bible, extracted once from Debian's bible-kjv into the user's
// cache, see kjv_corpus.hpp) or "text:PATH", and checks that both splits hold at least one
// window of `block_size`. Throws Error with one line naming the problem: a missing, empty,
// binary or too short file, or a validation split too short for one window.
// With a `vocabulary` (a pretrained model's, see adopt_vocabulary) the text is tokenized with
// it instead of its own; `note` then says what that left out.
TextCorpus load_text_corpus(const std::string& spec, int64_t block_size, const std::vector<uint8_t>& vocabulary = {},
                            std::string* note = nullptr);

// Re-tokenizes `corpus` with `vocabulary` (sorted distinct bytes, e.g. those of the text a model
// was pretrained on), so that a model fine-tuned on it reads its token ids as it learnt them.
// Bytes the vocabulary lacks are left out of the text (a character-level model has no token for
// them) and the splits are cut again, 90/10. Returns a note naming what was left out, empty when
// nothing was; throws Error when no byte of the text is in the vocabulary.
std::string adopt_vocabulary(TextCorpus& corpus, const std::vector<uint8_t>& vocabulary);

// Reads a text file into a corpus named `name` (no block-size check). A file is rejected as
// binary when it starts with a gzip, xz, zip or ELF signature, holds a NUL byte, or more than
// 1% of its bytes are control characters other than tab, newline, vertical tab, form feed,
// carriage return and escape: that refuses compressed files, programs, images and random
// bytes, yet takes any UTF-8, Latin-1 or other 8-bit text.
TextCorpus read_text_corpus(const std::string& path, const std::string& name);
// The same for a file's bytes held in memory (the same checks); `path` is only recorded and
// named in messages.
TextCorpus text_corpus_from_file_bytes(std::string_view bytes, const std::string& path,
                                       const std::string& name);

// Tokenizes text held in memory (no checks of its content); `path` is only recorded.
TextCorpus corpus_from_text(std::string_view text, const std::string& name,
                            const std::string& path = {});

// Throws Error unless block_size >= 1 and each split holds block_size + 1 tokens.
void check_block_size(const TextCorpus& corpus, int64_t block_size);

// Tokens of the training split for a text of `characters` bytes: n * 9 / 10 rounded down,
// which equals nanoGPT's int(n * 0.9) for every n below 2^50.
int64_t train_token_count(int64_t characters);

// Windows of block_size + 1 tokens in a split of `token_count` tokens: (token_count - 1) /
// block_size, 0 when the split is shorter than one window.
int64_t window_count(int64_t token_count, int64_t block_size);

// The order of an epoch's windows: 0, 1, 2, ... without shuffle, otherwise the seeded
// permutation of the training stream (seeded_permutation with epoch_shuffle_seed(seed,
// epoch)), so a resumed run rebuilds it. `order` must already hold window_count entries.
void window_order(std::vector<int64_t>& order, bool shuffle, uint64_t seed, int64_t epoch);

// Writes windows[0..count) of `tokens` as rows: inputs[r*T + t] = tokens[w*T + t] and
// targets[r*T + t] = tokens[w*T + t + 1] for window w = windows[r], T = block_size. Each
// buffer must hold count * block_size ints; every window must be below window_count.
// Allocates nothing.
void gather_windows(std::span<const uint8_t> tokens, int64_t block_size, const int64_t* windows,
                    int64_t count, int32_t* inputs, int32_t* targets);

// Token ids back to the bytes they stand for (for printing generated samples). Throws Error
// on an id outside the vocabulary.
std::string decode_tokens(const TextCorpus& corpus, std::span<const int32_t> ids);

// Text to token ids (e.g. a prompt); throws Error naming a character the vocabulary lacks.
std::vector<int32_t> encode_text(const TextCorpus& corpus, std::string_view text);

// One symbol for display: printable ASCII as itself except the backslash, written "\\";
// "\n", "\t", "\r"; any other byte "\xHH". Every symbol thus reads back unambiguously.
std::string printable_symbol(uint8_t byte);

// The whole vocabulary in id order, each symbol as printable_symbol writes it, e.g.
// "\n !'(),-.:;?ABC...xyz".
std::string printable_vocabulary(const TextCorpus& corpus);

}  // namespace trainbench::data
