#pragma once
// The default GPT corpus: the King James Bible as plain text, one verse per line without its
// reference (about 4.1 million characters, 63 symbols). Debian ships it as bible-kjv (the
// `bible` program) and bible-kjv-text (its compressed data); we run `bible` once and keep
// the text in the user's cache, so later runs read a plain file.
#include <cstdint>
#include <string>
#include <string_view>

namespace trainbench::data {

// $XDG_CACHE_HOME/trainbench/kjv.txt, or ~/.cache/trainbench/kjv.txt when XDG_CACHE_HOME is
// unset or not absolute (as the XDG spec asks). Throws Error when neither it nor HOME is set.
std::string default_kjv_cache_path();

// Returns `cache_path`, first extracting the text there when no non-empty file is there yet:
// runs `program -f Gen1:1-Rev22:21` (program searched on PATH unless it holds a '/'), checks
// its exit status, converts its output with kjv_text_from_bible_output and writes it under a
// temporary name in the same folder that is renamed into place, so an interrupted extraction
// never leaves a partial cache and processes extracting at once do not disturb each other.
// Throws Error naming the packages to install when `program` is missing, fails, or prints
// a text that does not end at Rev22:21.
std::string ensure_kjv_text(const std::string& cache_path, const std::string& program = "bible");

// The output of `bible -f RANGE` as plain text: each line starts with a verse reference
// ("Ge1:1 ", "1Chr3:4 ", "Psa117:2 ") that is dropped; a line without one continues the
// verse before it (bible wraps lines when given -l) and is joined to it with one space;
// blank lines are skipped. Every verse ends with '\n'; its text is otherwise kept as printed.
// Throws Error when the output does not start with a reference.
struct BibleText {
    std::string text;
    int64_t verses = 0;
    std::string last_reference;  // e.g. "Rev22:21"
};
BibleText kjv_text_from_bible_output(std::string_view output);

}  // namespace trainbench::data
