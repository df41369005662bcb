// IDX files behind a valid gzip stream: the input is the decompressed content, which this
// harness compresses (zlib) before the reader sees it, so the mutations reach the header and
// payload checks through zlib's decompression rather than dying at the gzip CRC.
#include <zlib.h>

#include "fuzz_idx_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace trainbench::fuzz;
    const std::string path = scratch_folder() + "/input-idx3-ubyte.gz";
    gzFile file = gzopen(path.c_str(), "wb1");
    FUZZ_CHECK(file != nullptr);
    FUZZ_CHECK(size == 0 || gzwrite(file, data, static_cast<unsigned>(size)) == static_cast<int>(size));
    FUZZ_CHECK(gzclose(file) == Z_OK);
    read_as_idx_images_and_labels(path);
    return 0;
}
