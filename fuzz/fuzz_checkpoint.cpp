// Resuming from a checkpoint (`trainbench-cli train --resume DIR`, train/run_checkpoint.cpp):
// the input is DIR/latest.safetensors, and the harness runs the real resume, train() with
// resume_dir, on a fixed small run (an fp16 MLP on spirals, so the loss scaler's state is read
// too). A checkpoint is refused with an Error or resumes and trains to the end of the run.
//
// TRAINBENCH_FUZZ_WRITE_SEED=DIR makes the harness write a checkpoint of that run into DIR
// (with the real writer, after 3 updates) and exit: the seed corpus's checkpoint.
#include <cstdlib>
#include <memory>

#include "fuzz_support.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

RunConfig the_run() {
    RunConfig config;
    config.dataset = "spirals";
    config.synthetic_samples = 48;
    config.val_fraction = 0.25;
    config.hidden = {4};
    config.batch_size = 8;
    config.step_size = 2;
    config.epochs = 2;
    config.threads = 1;
    config.precision = Precision::fp16;
    config.seed = 5;
    return config;
}

std::shared_ptr<const Dataset> the_data() {
    static const auto data = std::make_shared<const Dataset>(load_dataset("spirals", data_options_for(the_run())));
    return data;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // The CPU's peak is measured once per process; keep its cache file out of the user's home.
    setenv("XDG_CACHE_HOME", fuzz::scratch_folder().c_str(), 1);
    if (const char* seed_dir = std::getenv("TRAINBENCH_FUZZ_WRITE_SEED")) {
        RunConfig config = the_run();
        config.max_steps = 3;
        config.checkpoint_every = 3;
        config.checkpoint_dir = seed_dir;
        const RunResult result = train(config, {}, nullptr, the_data());
        std::fprintf(stderr, "wrote a checkpoint after 3 updates to %s (%s)\n", seed_dir, result.message.c_str());
        std::exit(result.reason == StopReason::max_steps ? 0 : 1);
    }
    // The first train() of a process measures the CPU's peak (seconds under ASan): do it here,
    // not in the first input, where it would count as a hang.
    RunConfig warm_up = the_run();
    warm_up.max_steps = 1;
    train(warm_up, {}, nullptr, the_data());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::write_scratch_file("latest.safetensors", fuzz::bytes_of(data, size));
    RunConfig config = the_run();
    config.resume_dir = fuzz::scratch_folder();
    RunResult result;
    try {
        result = train(config, {}, nullptr, the_data());
    } catch (const Error&) {
        return 0;  // refused before training: damaged, incompatible or another run's checkpoint
    }
    FUZZ_CHECK(result.reason != StopReason::max_steps && result.reason != StopReason::stopped);
    return 0;
}
