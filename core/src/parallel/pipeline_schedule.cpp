#include "parallel/pipeline_schedule.hpp"

#include <algorithm>

namespace trainbench {

int pipeline_in_flight(PipelineSchedule schedule, int stages, int stage, int64_t micro_batches) {
    if (stage + 1 == stages && schedule == PipelineSchedule::one_f_one_b) return 1;
    const int64_t most = schedule == PipelineSchedule::gpipe ? micro_batches : std::min<int64_t>(stages - stage, micro_batches);
    return static_cast<int>(std::max<int64_t>(most, 1));
}

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int stage, int64_t micro_batches) {
    std::vector<PipelineAction> actions;
    pipeline_actions(schedule, stages, stage, micro_batches, actions);
    return actions;
}

void pipeline_actions(PipelineSchedule schedule, int stages, int stage, int64_t micro_batches,
                      std::vector<PipelineAction>& actions) {
    actions.clear();
    const int slots = pipeline_in_flight(schedule, stages, stage, micro_batches);
    auto forward = [&](int64_t j) { return PipelineAction{true, j, static_cast<int>(j % slots)}; };
    auto backward = [&](int64_t j) { return PipelineAction{false, j, static_cast<int>(j % slots)}; };
    // Forwards run ahead of backwards by `warmup` micro-batches: all of them under GPipe, under
    // 1F1B the stages after this one (the pipeline's depth from here; none on the last stage).
    const int64_t warmup =
        schedule == PipelineSchedule::gpipe ? micro_batches : std::min<int64_t>(stages - 1 - stage, micro_batches);
    for (int64_t j = 0; j < warmup; ++j) actions.push_back(forward(j));
    for (int64_t j = 0; j + warmup < micro_batches; ++j) {
        actions.push_back(forward(j + warmup));
        actions.push_back(backward(j));
    }
    for (int64_t j = micro_batches - warmup; j < micro_batches; ++j) actions.push_back(backward(j));
}

}  // namespace trainbench
