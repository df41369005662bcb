#include "train/pipeline_runner.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include "model/param_layout.hpp"
#include "precision/nf4.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

// Message tags: activations go to the next stage, gradients to the one before; the whole
// model's weights to process 0 at the end.
constexpr int kActivationTag = 1;
constexpr int kGradientTag = 2;
constexpr int kWeightsTag = 3;
constexpr int kCheckpointTag = 4;
constexpr int kLogitsTag = 5;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

}  // namespace

PipelineRunner::PipelineRunner(ComputeEngine& engine, ProcessGroup& world, ProcessGroup& group, const ModelDesc& whole,
                               PipelineSchedule schedule, int64_t step_size, int zero_stage)
    : engine_(engine),
      group_(group),
      whole_(whole),
      split_(split_into_stages(whole, group.size())),
      stage_(group.rank()),
      first_copy_(world.rank() < group.size()),  // copy 0: processes 0 .. P-1 (Trainer splits by rank / P)
      state_sharded_(zero_stage >= 1 && world.size() > group.size()),
      model_(stage_model(whole, split_, group.rank())),
      schedule_(schedule) {
    together_ = last() && pipeline_in_flight(schedule, stages(), stage_, step_size) == 1;
    if (!last()) output_per_sample_ = model_.tensors[static_cast<size_t>(model_.ops.back().inputs[0])].per_sample;
    actions_.reserve(static_cast<size_t>(2 * step_size));
    times_.passes.reserve(static_cast<size_t>(2 * step_size));
    counts_.assign(static_cast<size_t>(step_size), 0);
    // Parameters two stages hold (the tied embedding: on the first and the last stage).
    std::map<std::string, int> holders;
    for (int s = 0; s < stages(); ++s)
        for (const ParamDesc& p : stage_model(whole, split_, s).params) ++holders[p.name];
    for (size_t p = 0; p < model_.params.size(); ++p)
        if (holders[model_.params[p].name] > 1 && model_.params[p].trainable) shared_params_.push_back(static_cast<int>(p));
    shared_group_ = (zero_stage >= 2 ? world : group).split(shared_params_.empty() ? -1 : 0);
}

PipelineRunner::~PipelineRunner() = default;

double PipelineRunner::run_update(int64_t micro_batches, const MicroBatch& first, MicroBatchSource& source,
                                  double normaliser, double loss_scale) {
    if (micro_batches > static_cast<int64_t>(counts_.size()))
        throw Error("internal: an update of " + std::to_string(micro_batches) + " micro-batches for a pipeline planned for " +
                    std::to_string(counts_.size()));
    pipeline_actions(schedule_, stages(), stage_, micro_batches, actions_);
    times_.passes.clear();
    times_.forward_ms = times_.backward_ms = times_.wait_ms = times_.span_ms = 0.0;
    const Clock::time_point start = Clock::now();
    auto record = [&](bool forward, int64_t micro_batch, Clock::time_point from, Clock::time_point to) {
        const double start_ms = std::chrono::duration<double, std::milli>(from - start).count();
        const double end_ms = std::chrono::duration<double, std::milli>(to - start).count();
        times_.passes.push_back({forward, micro_batch, start_ms, end_ms});
        (forward ? times_.forward_ms : times_.backward_ms) += end_ms - start_ms;
    };
    const int64_t input_per_sample = model_.input_per_sample;
    auto timed_wait = [&](auto&& action) {
        const Clock::time_point t = Clock::now();
        action();
        times_.wait_ms += ms_since(t);
    };
    double loss = 0.0;
    for (const PipelineAction& a : actions_) {
        const auto j = static_cast<size_t>(a.micro_batch);
        if (a.forward) {
            MicroBatch batch = a.micro_batch == 0 ? first : source.next();
            counts_[j] = batch.count;
            // Data parallelism: this copy's share of a small last batch may be empty; every
            // stage of the copy skips it alike, joining its backward's collectives (ZeRO-2's
            // reduce-scatters) with zeros where its backward would have run.
            if (batch.count == 0) {
                if (together_) engine_.skip_micro_batch();
                continue;
            }
            if (stage_ > 0) {
                timed_wait([&] { group_.receive(engine_.stage_input(), batch.count * input_per_sample, stage_ - 1, kActivationTag); });
                batch.x = engine_.stage_input();
            }
            if (together_) {
                if (stage_ > 0) timed_wait([&] { group_.wait_send(engine_.stage_input_gradient()); });
                const Clock::time_point t = Clock::now();
                loss += engine_.forward_backward(batch, normaliser, loss_scale);
                const Clock::time_point done = Clock::now();
                const auto forward_end = t + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double, std::milli>(engine_.last_forward_ms()));
                record(true, a.micro_batch, t, forward_end);
                record(false, a.micro_batch, forward_end, done);
                if (stage_ > 0)
                    group_.send(engine_.stage_input_gradient(), batch.count * input_per_sample, stage_ - 1, kGradientTag);
                continue;
            }
            if (!last()) timed_wait([&] { group_.wait_send(engine_.stage_output()); });
            const Clock::time_point t = Clock::now();
            loss += engine_.stage_forward(batch, a.slot, normaliser, loss_scale);
            record(true, a.micro_batch, t, Clock::now());
            if (!last()) group_.send(engine_.stage_output(), batch.count * output_per_sample_, stage_ + 1, kActivationTag);
        } else if (!together_ && counts_[j] == 0) {
            engine_.skip_micro_batch();
        } else if (!together_) {
            const int64_t n = counts_[j];
            if (!last())
                timed_wait([&] { group_.receive(engine_.stage_output_gradient(), n * output_per_sample_, stage_ + 1, kGradientTag); });
            if (stage_ > 0) timed_wait([&] { group_.wait_send(engine_.stage_input_gradient()); });
            const Clock::time_point t = Clock::now();
            engine_.stage_backward(a.slot);
            record(false, a.micro_batch, t, Clock::now());
            if (stage_ > 0) group_.send(engine_.stage_input_gradient(), n * input_per_sample, stage_ - 1, kGradientTag);
        }
    }
    timed_wait([&] {
        if (!last()) group_.wait_send(engine_.stage_output());
        if (stage_ > 0) group_.wait_send(engine_.stage_input_gradient());
    });
    times_.span_ms = ms_since(start);
    return loss;
}

void PipelineRunner::sum_shared_gradients() {
    if (!shared_group_) return;
    for (int p : shared_params_) engine_.sum_gradient_of(model_.params[static_cast<size_t>(p)].name, *shared_group_);
}

double PipelineRunner::grad_norm_squared_part() {
    double norm = engine_.grad_norm_squared();
    if (stage_ > 0)
        for (int p : shared_params_) norm -= engine_.gradient_norm_squared_of(model_.params[static_cast<size_t>(p)].name);
    return norm;
}

EvalTotals PipelineRunner::evaluate(const MicroBatch& chunk) {
    MicroBatch batch = chunk;
    if (stage_ > 0) {
        group_.receive(engine_.stage_input(), batch.count * model_.input_per_sample, stage_ - 1, kActivationTag);
        batch.x = engine_.stage_input();
    }
    if (last()) return engine_.evaluate(batch);
    group_.wait_send(engine_.stage_output());
    engine_.stage_forward(batch, -1);
    group_.send(engine_.stage_output(), batch.count * output_per_sample_, stage_ + 1, kActivationTag);
    group_.wait_send(engine_.stage_output());
    return {};
}

bool PipelineRunner::logits_row(const MicroBatch& window, int64_t row, float* out) {
    MicroBatch batch = window;
    if (stage_ > 0) {
        group_.receive(engine_.stage_input(), batch.count * model_.input_per_sample, stage_ - 1, kActivationTag);
        batch.x = engine_.stage_input();
    }
    if (last()) {
        engine_.logits_row(batch, row, out);
        group_.send(out, whole_.classes, 0, kLogitsTag);
        group_.wait_send(out);
        return false;
    }
    group_.wait_send(engine_.stage_output());
    engine_.stage_forward(batch, -1);
    group_.send(engine_.stage_output(), batch.count * output_per_sample_, stage_ + 1, kActivationTag);
    group_.wait_send(engine_.stage_output());
    if (stage_ > 0) return false;
    group_.receive(out, whole_.classes, stages() - 1, kLogitsTag);
    return true;
}

ModelWeights PipelineRunner::gather_weights() {
    if (!first_copy_) return {};
    const ModelWeights mine = engine_.weights();
    // What each later stage holds that the first does not, in its parameters' order.
    const ModelDesc first = stage_model(whole_, split_, 0);
    auto on_first = [&](const std::string& name) { return first.find_param(name) >= 0; };
    if (stage_ > 0) {
        for (const ParamDesc& p : model_.params) {
            if (on_first(p.name)) continue;
            const NamedTensor* t = mine.find(p.name);
            group_.send(t->data.data(), static_cast<int64_t>(t->data.size()), 0, kWeightsTag);
            group_.wait_send(t->data.data());
        }
        return {};
    }
    std::map<std::string, std::vector<float>> values;
    for (const NamedTensor& t : mine.tensors) values[t.name] = t.data;
    for (int s = 1; s < stages(); ++s)
        for (const ParamDesc& p : stage_model(whole_, split_, s).params) {
            if (on_first(p.name)) continue;
            std::vector<float>& data = values[p.name];
            data.resize(static_cast<size_t>(p.numel()));
            group_.receive(data.data(), p.numel(), s, kWeightsTag);
        }
    // The whole model's state_dict order, a tied tensor under its alias last (gather_weights).
    ModelWeights whole;
    whole.metadata = mine.metadata;
    for (const ParamDesc& p : whole_.params) whole.tensors.push_back({p.name, p.shape, values.at(p.name)});
    for (const ParamDesc& p : whole_.params)
        if (!p.alias.empty()) whole.tensors.push_back({p.alias, p.shape, values.at(p.name)});
    return whole;
}

std::vector<NamedTensor> PipelineRunner::gather_checkpoint_tensors() {
    if (!first_copy_) {  // sends nothing; under ZeRO it joins its stage's gather of the state
        if (state_sharded_) engine_.optimizer_state();
        return {};
    }
    ModelWeights weights = gather_weights();
    std::vector<NamedTensor> state = engine_.optimizer_state();
    std::vector<NamedTensor> nf4 = engine_.quantized_weights();
    // A tensor two stages hold is taken from the first (their updates are the same).
    const ModelDesc first = stage_model(whole_, split_, 0);
    auto on_first = [&](const std::string& name) { return first.find_param(name) >= 0; };
    if (stage_ > 0) {
        for (const NamedTensor& t : state) {
            group_.send(t.data.data(), static_cast<int64_t>(t.data.size()), 0, kCheckpointTag);
            group_.wait_send(t.data.data());
        }
        for (const NamedTensor& t : nf4)
            if (!on_first(t.name.substr(kNf4StoragePrefix.size()))) {
                group_.send(t.data.data(), static_cast<int64_t>(t.data.size()), 0, kCheckpointTag);
                group_.wait_send(t.data.data());
            }
        return {};
    }
    const int64_t whole_n = make_param_layout(whole_).trainable_end;
    std::vector<NamedTensor> tensors = std::move(weights.tensors);
    const size_t first_state = tensors.size();
    for (const NamedTensor& t : state) {
        tensors.push_back({t.name, {whole_n}, std::vector<float>(static_cast<size_t>(whole_n))});
        stage_to_whole_store(model_, t.data.data(), whole_, tensors.back().data.data());
    }
    for (NamedTensor& t : nf4) tensors.push_back(std::move(t));
    std::vector<float> part;
    for (int s = 1; s < stages(); ++s) {
        const ModelDesc stage = stage_model(whole_, split_, s);
        part.resize(static_cast<size_t>(make_param_layout(stage).trainable_end));
        for (size_t slot = 0; slot < state.size(); ++slot) {
            group_.receive(part.data(), static_cast<int64_t>(part.size()), s, kCheckpointTag);
            stage_to_whole_store(stage, part.data(), whole_, tensors[first_state + slot].data.data());
        }
        for (const ParamDesc& p : stage.params)
            if (p.nf4 && !on_first(p.name)) {
                const int64_t bytes = nf4_sizes(p.numel()).total_bytes();
                tensors.push_back({kNf4StoragePrefix + p.name, {bytes}, std::vector<float>(static_cast<size_t>(bytes))});
                group_.receive(tensors.back().data.data(), bytes, s, kCheckpointTag);
            }
    }
    return tensors;
}

}  // namespace trainbench
