// IDX files as found on disk, plain or gzip-compressed: the input is the file's bytes (the
// seeds hold both kinds, so damaged gzip streams are tried too).
#include "fuzz_idx_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace trainbench::fuzz;
    read_as_idx_images_and_labels(write_scratch_file("input-idx3-ubyte", bytes_of(data, size)));
    return 0;
}
