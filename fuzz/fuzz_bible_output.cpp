// The converter of the `bible` program's output into the KJV corpus (data/kjv_corpus.cpp):
// its input comes from another program, so it gets the same treatment as a file.
#include "data/kjv_corpus.hpp"
#include "fuzz_support.hpp"

using namespace trainbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    data::BibleText bible;
    try {
        bible = data::kjv_text_from_bible_output(fuzz::bytes_of(data, size));
    } catch (const Error&) {
        return 0;
    }
    FUZZ_CHECK(bible.verses >= 0);
    FUZZ_CHECK(bible.text.size() <= size + static_cast<size_t>(bible.verses));
    FUZZ_CHECK(bible.verses == 0 || bible.text.back() == '\n');
    return 0;
}
