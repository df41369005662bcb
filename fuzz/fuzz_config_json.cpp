// The run configuration's JSON reader (`trainbench-cli --config`, the app's presets and config
// import; io/config_json.cpp), then validate(). A configuration that validates must survive a
// write and a read unchanged.
#include "fuzz_support.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/run_config.hpp"

using namespace trainbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    RunConfig config;
    try {
        config = config_from_json(std::string(fuzz::bytes_of(data, size)));
    } catch (const Error&) {
        return 0;
    }
    try {
        validate(config);
    } catch (const Error&) {
        return 0;
    }
    const std::string written = config_to_json(config);
    RunConfig reread;
    try {
        reread = config_from_json(written);
    } catch (const Error& e) {
        std::fprintf(stderr, "a valid configuration's JSON is refused: %s\n%s\n", e.what(), written.c_str());
        FUZZ_CHECK(!"the JSON of a valid configuration reads back");
    }
    FUZZ_CHECK(config_to_json(reread) == written);
    return 0;
}
