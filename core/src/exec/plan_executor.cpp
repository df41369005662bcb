#include "exec/plan_executor.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "trainbench/error.hpp"

namespace trainbench {

PlanExecutor::PlanExecutor(GraphPlan plan) : plan_(std::move(plan)), buffers_(plan_) {}

EvalTotals PlanExecutor::evaluate(const MicroBatch& batch) {
    const ModelDesc& m = plan_.model;
    EvalTotals totals;
    for (int64_t start = 0; start < batch.count; start += plan_.micro_batch) {
        MicroBatch chunk;
        chunk.count = std::min(plan_.micro_batch, batch.count - start);
        chunk.x = batch.x ? batch.x + start * m.input_per_sample : nullptr;
        chunk.tokens = batch.tokens ? batch.tokens + start * m.input_per_sample : nullptr;
        chunk.labels = batch.labels ? batch.labels + start * m.loss_terms_per_sample : nullptr;
        chunk.targets = batch.targets ? batch.targets + start : nullptr;
        begin_micro_batch(chunk);
        forward(chunk.count);
        const EvalTotals part = evaluation_loss(chunk);
        end_micro_batch();
        totals.loss_sum += part.loss_sum;
        totals.correct += part.correct;
    }
    return totals;
}

void PlanExecutor::logits_row(const MicroBatch& batch, int64_t row, float* out) {
    const OpDesc& loss = plan_.model.ops.back();
    if (loss.kind != OpKind::cross_entropy || row < 0 || row >= loss.rows_per_sample)
        throw Error("internal: logits row " + std::to_string(row) + " of a model without that many logit rows");
    MicroBatch one = batch;
    one.count = 1;
    begin_micro_batch(one);
    forward(1);
    const float* logits = read(loss.inputs[0], 1, buffers_.input_staging[0]);
    copy_to_host(logits + row * plan_.model.classes, out, plan_.model.classes);
    end_micro_batch();
}

}  // namespace trainbench
