// The text corpus reader of `--dataset text:PATH` (data/text_corpus.cpp): the binary checks,
// the byte vocabulary, the 90/10 split, then what the GPT's data path does with a corpus that
// loaded (block-size check, windows, encode/decode).
#include <algorithm>
#include <vector>

#include "data/text_corpus.hpp"
#include "fuzz_support.hpp"

using namespace trainbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text = fuzz::bytes_of(data, size);
    data::TextCorpus corpus;
    try {
        corpus = data::text_corpus_from_file_bytes(text, "fuzz.txt", "text:fuzz.txt");
    } catch (const Error&) {
        return 0;
    }
    FUZZ_CHECK(corpus.characters == static_cast<int64_t>(size));
    FUZZ_CHECK(static_cast<int64_t>(corpus.train.size() + corpus.validation.size()) == corpus.characters);
    FUZZ_CHECK(corpus.vocab_size() >= 1 && corpus.vocab_size() <= 256);
    FUZZ_CHECK(std::is_sorted(corpus.vocabulary.begin(), corpus.vocabulary.end()));
    for (uint8_t id : corpus.train) FUZZ_CHECK(id < corpus.vocab_size());
    for (uint8_t id : corpus.validation) FUZZ_CHECK(id < corpus.vocab_size());
    (void)data::printable_vocabulary(corpus);

    // The text reads back from its tokens, and every character encodes.
    const std::vector<int32_t> ids = data::encode_text(corpus, text);
    FUZZ_CHECK(data::decode_tokens(corpus, ids) == text);

    // Block sizes around the split's length: the check either refuses or every window gathers.
    for (int64_t block_size : {int64_t{1}, int64_t{3}, static_cast<int64_t>(corpus.validation.size()) - 1,
                               static_cast<int64_t>(corpus.validation.size())}) {
        try {
            data::check_block_size(corpus, block_size);
        } catch (const Error&) {
            continue;
        }
        const int64_t windows = data::window_count(static_cast<int64_t>(corpus.train.size()), block_size);
        FUZZ_CHECK(windows >= 1);
        FUZZ_CHECK(data::window_count(static_cast<int64_t>(corpus.validation.size()), block_size) >= 1);
        std::vector<int64_t> order(static_cast<size_t>(windows));
        data::window_order(order, true, 7, 1);
        std::vector<int32_t> inputs(order.size() * static_cast<size_t>(block_size));
        std::vector<int32_t> targets(inputs.size());
        data::gather_windows(corpus.train, block_size, order.data(), windows, inputs.data(), targets.data());
    }
    return 0;
}
