#pragma once
#include <QString>

namespace trainbench::ui {

class RunStore;

// A whole session (every run's settings, metrics, text samples and outcome) as one JSON file,
// so a set of experiments can be reopened, compared and exported later. Weights are not
// included: export them as safetensors. Keys added later ("samples", "epoch_ended",
// "tokens_per_second", "mfu") are optional on reading, so older sessions still open. Both throw
// Error with one line naming the problem.
void save_session(const QString& path, const RunStore& store);
// Adds the file's runs to `store` (after any runs already there); returns how many.
int load_session(const QString& path, RunStore& store);

}  // namespace trainbench::ui
