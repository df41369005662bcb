// The training loop. It knows nothing of threads or windows: it takes an observer and a
// stop flag, and drives a ComputeEngine (CPU or CUDA) update by update.
#include "trainbench/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>

#include "data/text_corpus.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "model/pipeline_stages.hpp"
#include "model/param_layout.hpp"
#include "optim/lr_schedule.hpp"
#include "parallel/collective_timer.hpp"
#include "parallel/process_group.hpp"
#include "precision/loss_scaler.hpp"
#include "train/run_checkpoint.hpp"
#include "train/engine_factory.hpp"
#include "train/micro_batch_stream.hpp"
#include "train/pipeline_runner.hpp"
#include "train/peak_flops.hpp"
#include "train/text_sampler.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/lora_weights.hpp"
#include "trainbench/processes.hpp"

namespace trainbench {

std::string to_string(StopReason reason) {
    switch (reason) {
        case StopReason::completed: return "completed";
        case StopReason::max_steps: return "max_steps";
        case StopReason::stopped: return "stopped";
        case StopReason::diverged: return "diverged";
        case StopReason::failed: return "failed";
    }
    return "unknown";
}

DataOptions data_options_for(const RunConfig& config) {
    DataOptions options;
    options.seed = config.seed;
    options.val_fraction = config.val_fraction;
    options.shuffle = config.shuffle;
    options.synthetic_samples = config.synthetic_samples;
    options.block_size = config.block_size;
    // A text read by a model that starts from saved weights gets that model's token ids. (A
    // missing file is reported where the weights are loaded.)
    if (data::is_text_corpus_spec(config.dataset) && !config.init_weights.empty() &&
        std::filesystem::exists(config.init_weights))
        options.vocabulary = read_weights_vocabulary(config.init_weights);
    return options;
}

namespace {

// fp16 updates that overflow are skipped; this many in a row means the run cannot recover.
constexpr int64_t kMaxConsecutiveSkips = 40;

// A pipeline's update takes its micro-batches from the stream as its schedule reaches them.
class StreamSource final : public MicroBatchSource {
public:
    StreamSource(MicroBatchStream& stream, LoadedMicroBatch& micro) : stream_(stream), micro_(micro) {}
    const MicroBatch& next() override {
        if (!stream_.next(micro_)) throw Error("internal: the data stream ended inside a batch");
        return micro_.batch;
    }

private:
    MicroBatchStream& stream_;
    LoadedMicroBatch& micro_;
};

class TrainingLoop {
public:
    TrainingLoop(const RunConfig& config, const Observer& observer, const std::atomic<bool>* stop,
                 std::shared_ptr<const Dataset> data)
        : requested_(config), observer_(observer), stop_(stop), data_(std::move(data)) {
        // Several processes: rank 0 reports and writes; the others train silently beside it.
        if (group_.rank() != 0) observer_ = Observer{};
    }

    RunResult run() {
        prepare();
        if (observer_.on_start) observer_.on_start(result_.plan);
        if (!data_->note.empty()) note(data_->note);
        if (!result_.plan.auto_fit_note.empty()) note(result_.plan.auto_fit_note);
        if (!config_.resume_dir.empty())
            note("resumed from the checkpoint of update " + std::to_string(state_.update) + " (" +
                 checkpoint_path(config_.resume_dir) + ")");
        try {
            loop();
        } catch (const Error& e) {
            if (group_.size() > 1) throw ProcessFailure(e.what(), e.key());
            finish(StopReason::failed, e.what());
        }
        result_.seconds = elapsed_seconds();
        result_.weights = pipeline_ ? pipeline_->gather_weights() : engine_->weights();
        // Files of a language model carry its vocabulary, for a later run on another text.
        if (data_->task == Task::language_model)
            result_.weights.metadata[kVocabularyKey] = vocabulary_metadata(data_->vocabulary);
        return result_;
    }

private:
    void prepare() {
        validate(requested_);
        // A folder checkpoints cannot go to fails now, not at the first checkpoint.
        if (requested_.checkpoint_every > 0 && group_.rank() == 0) check_checkpoint_folder(requested_.checkpoint_dir);
        if (requested_.processes != group_.size())
            throw Error(group_.size() == 1
                            ? "--processes " + std::to_string(requested_.processes) +
                                  " needs that many processes: run it through trainbench-cli, which starts them with "
                                  "mpirun, or as mpirun -np " + std::to_string(requested_.processes) +
                                  " trainbench-cli train ..."
                            : "this run was started as " + std::to_string(group_.size()) +
                                  " processes but asks for --processes " + std::to_string(requested_.processes) +
                                  "; make them agree",
                        "processes");
        if (!data_) data_ = std::make_shared<const Dataset>(load_dataset(requested_.dataset, data_options_for(requested_)));
        result_.plan = plan_run(requested_, *data_);
        config_ = requested_;
        config_.step_size = result_.plan.step_size;  // --auto-fit may have raised it
        spec_ = make_engine_spec(config_, *data_, result_.plan.micro_batch);
        if (config_.pipeline_stages > 1) {
            // Process r runs stage r mod P of pipeline copy r / P: one group per copy (its stages
            // in order) and one per stage (its copies, which share the batch and ZeRO's shards).
            const auto stages = static_cast<int>(config_.pipeline_stages);
            pipeline_group_ = group_.split(group_.rank() / stages);
            data_group_ = group_.split(group_.rank() % stages);
            spec_.zero_group = data_group_.get();
        }
        engine_ = make_engine(config_, spec_);
        // A pipeline's process holds its stage; weights are made for the whole model and cut.
        const ModelDesc whole = config_.pipeline_stages > 1 ? build_model(config_, *data_) : spec_.model;
        if (config_.pipeline_stages > 1) {
            pipeline_ = std::make_unique<PipelineRunner>(*engine_, group_, *pipeline_group_, whole, config_.pipeline_schedule,
                                                         config_.step_size, config_.zero);
            stage_report_.assign(static_cast<size_t>(4 * pipeline_->stages()), 0.0);
            stage_memory_.assign(static_cast<size_t>(2 * pipeline_->stages()), 0);
            stage_passes_.assign(static_cast<size_t>(pipeline_->stages() * kPassNumbers * 2 * config_.step_size), 0.0);
            result_.last.pipeline_stages.resize(static_cast<size_t>(pipeline_->stages()));
            for (PipelineStageMetrics& stage : result_.last.pipeline_stages)
                stage.passes.reserve(static_cast<size_t>(2 * config_.step_size));
        }
        const MeasuredPeak peak = device_peak_flops(config_);
        // Each process computes on threads of its own and MFU counts the whole global batch's
        // FLOPs, so the run's peak is the processes' together.
        result_.plan.peak_flops = peak.flops_per_second * static_cast<double>(config_.processes);
        result_.plan.peak_source = peak.source;
        if (config_.processes > 1 && peak.flops_per_second > 0.0)
            result_.plan.peak_source += ", times " + std::to_string(config_.processes) + " processes";

        if (!config_.resume_dir.empty()) {
            state_ = read_checkpoint(config_.resume_dir, *engine_, whole, pipeline_ ? &spec_.model : nullptr);
            if (state_.seed != config_.seed)
                throw Error("checkpoint in '" + config_.resume_dir + "' was made with --seed " + std::to_string(state_.seed) +
                            ", not " + std::to_string(config_.seed) + ": resume with the same seed");
            // The stream starts at the checkpoint's global batch: it must be one of this run's
            // epochs (a damaged file, or other data or batch size, would read past the data).
            if (state_.epoch < 1 || state_.batch_in_epoch < 0 || state_.batch_in_epoch >= result_.plan.updates_per_epoch)
                throw Error("checkpoint in '" + config_.resume_dir + "' resumes at global batch " +
                            std::to_string(state_.batch_in_epoch) + " of epoch " + std::to_string(state_.epoch) +
                            ", but an epoch of this run has " + std::to_string(result_.plan.updates_per_epoch) +
                            " global batches: resume with the data and --batch-size it was written with");
        } else {
            ModelWeights weights;
            if (!config_.init_weights.empty()) {
                weights = load_weights(config_.init_weights);
                if (weights.tensors.front().name.starts_with(kPeftPrefix))
                    throw Error("'" + config_.init_weights + "' holds LoRA adapters alone (--save-adapters), not a "
                                "model; give --init-weights the weights of the model they were trained on");
                weights = with_initial_adapters(std::move(weights), whole, config_.seed, config_.precision);
                check_weights_shape(weights, whole);
            } else {
                weights = init_weights(whole, config_.seed, config_.precision);
            }
            engine_->set_weights(pipeline_ ? stage_weights(weights, spec_.model) : weights);
            state_.seed = config_.seed;
            state_.loss_scale = config_.precision == Precision::fp16 ? DynamicLossScaler().scale() : 1.0;
        }
        scaler_.restore(state_.loss_scale, state_.clean_streak);
        base_lr_ = config_.optimizer.resolved_lr();
        if (config_.checkpoint_every > 0) config_json_ = config_to_json(config_);
        // Validation batches: the train-loop's micro-batch size, identity order.
        const auto micro = static_cast<size_t>(result_.plan.micro_batch);
        if (data_->task == Task::language_model) {
            val_tokens_.resize(micro * static_cast<size_t>(data_->features));
            val_labels_.resize(micro * static_cast<size_t>(data_->features));
        } else {
            val_x_.resize(micro * static_cast<size_t>(data_->features));
            val_labels_.resize(micro);
        }
        val_targets_.resize(static_cast<size_t>(result_.plan.micro_batch));
        val_indices_.resize(static_cast<size_t>(result_.plan.micro_batch));
        if (config_.sample_chars > 0 && data_->task == Task::language_model)
            sampler_.emplace(*data_, config_.sample_chars, config_.sample_temperature);
        start_time_ = std::chrono::steady_clock::now();
    }

    double elapsed_seconds() const {
        return resumed_seconds() + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
    }
    double resumed_seconds() const { return resume_offset_; }

    // A stop reaches every process at the same micro-batch (the flag is set by a signal, which
    // may reach the processes at different moments), so none waits in a collective alone.
    bool stop_requested() {
        const bool here = stop_ && stop_->load(std::memory_order_relaxed);
        if (group_.size() == 1) return here;
        const CollectiveTimer timer(loop_comm_ms_);
        return group_.any(here);
    }

    void note(const std::string& text) {
        if (observer_.on_note) observer_.on_note(text);
    }

    void finish(StopReason reason, const std::string& message) {
        result_.reason = reason;
        result_.message = message;
    }

    void loop() {
        resume_offset_ = state_.wall_seconds;
        StreamSettings settings;
        settings.global_batch = config_.batch_size;
        settings.step_size = config_.step_size;
        settings.micro_capacity = result_.plan.micro_batch;
        settings.epochs = config_.epochs;
        settings.shuffle = config_.shuffle;
        settings.seed = config_.seed;
        settings.prefetch = config_.prefetch;
        settings.indices_only = spec_.preload != nullptr;
        if (data_->task == Task::language_model) settings.tokens_per_sample = data_->features;
        // The processes that share the batch: a pipeline's stages all read every micro-batch.
        const int stages = static_cast<int>(config_.pipeline_stages);
        settings.rank = group_.rank() / stages;
        settings.ranks = group_.size() / stages;
        const auto targets_per_sample = static_cast<double>(data_->targets_per_sample());
        MicroBatchStream stream(data_->train, settings, StreamPosition{state_.epoch, state_.batch_in_epoch});

        const bool fp16 = config_.precision == Precision::fp16;
        int64_t consecutive_skips = 0;
        LoadedMicroBatch micro;
        if (state_.update >= result_.plan.total_updates && result_.plan.total_updates > 0) {
            finish(StopReason::completed, "nothing left to train: the checkpoint is at the end of the run");
            return;
        }
        while (true) {
            if (stop_requested()) return finish(StopReason::stopped, "stopped by the user");
            engine_->begin_update_timing();
            loop_comm_ms_ = 0.0;
            engine_->zero_grad();
            const double scale = fp16 ? scaler_.scale() : 1.0;
            double loss_sum = 0.0;
            bool have_batch = false;
            // One global batch: step_size micro-batches, all normalised by its count of loss
            // terms (samples, or tokens for a language model).
            if (pipeline_) {
                if (!stream.next(micro)) {
                    final_validation();
                    return finish(StopReason::completed, "completed " + std::to_string(config_.epochs) + " epochs");
                }
                StreamSource source(stream, micro);
                const MicroBatch first = micro.batch;
                loss_sum = pipeline_->run_update(micro.micro_count, first, source,
                                                 static_cast<double>(micro.global_count) * targets_per_sample, scale);
            } else do {
                if (have_batch && stop_requested()) return finish(StopReason::stopped, "stopped by the user");
                if (!stream.next(micro)) {
                    if (have_batch) throw Error("internal: the data stream ended inside a batch");
                    final_validation();
                    return finish(StopReason::completed, "completed " + std::to_string(config_.epochs) + " epochs");
                }
                have_batch = true;
                // A process whose share of a small last batch ran out has an empty micro-batch.
                if (micro.batch.count > 0)
                    loss_sum += engine_->forward_backward(
                        micro.batch, static_cast<double>(micro.global_count) * targets_per_sample, scale);
                else
                    engine_->skip_micro_batch();
            } while (micro.micro_index + 1 < micro.micro_count);
            double norm_squared = 0.0;
            if (pipeline_) {
                // A stage's copies sum their gradients (each over its share of the batch); the
                // stages' gradients are then the parts of the whole model's (the tied
                // embedding's two summed), its norm their parts added up; the loss is the last
                // stages' (each copy's share).
                if (data_group_->size() > 1) engine_->sum_gradients(*data_group_);  // timed by the engine
                {
                    const CollectiveTimer timer(loop_comm_ms_);
                    pipeline_->sum_shared_gradients();
                }
                norm_squared = pipeline_->grad_norm_squared_part();
                const CollectiveTimer timer(loop_comm_ms_);
                pipeline_group_->sum(&norm_squared, 1);
                group_.sum(&loss_sum, 1);
            } else {
                if (group_.size() > 1) {
                    // Every process's gradients and losses are sums over its share of the batch,
                    // each normalised by the whole batch: their sum is the one-process update.
                    engine_->sum_gradients(group_);
                    const CollectiveTimer timer(loop_comm_ms_);
                    group_.sum(&loss_sum, 1);
                }
                norm_squared = engine_->grad_norm_squared();
            }

            const int64_t samples = micro.global_count;
            const bool finite = std::isfinite(norm_squared) && std::isfinite(loss_sum);
            bool skipped = false;
            if (fp16) {
                skipped = scaler_.update(!finite);
            } else if (!finite) {
                result_.last.update = state_.update;
                return finish(StopReason::diverged,
                              "training diverged at update " + std::to_string(state_.update + 1) +
                                  ": the loss or gradients became NaN/inf; lower --lr or set --clip-grad-norm");
            }
            const double grad_norm = finite ? std::sqrt(norm_squared) / scale : std::numeric_limits<double>::infinity();
            const int64_t update = state_.update + 1;
            const double lr = learning_rate_at(config_.schedule, base_lr_, update, result_.plan.total_updates);
            if (!skipped) {
                double multiplier = 1.0 / scale;
                if (config_.clip_grad_norm > 0.0) {
                    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above.
                    const double coefficient = config_.clip_grad_norm / (grad_norm + 1e-6);
                    if (coefficient < 1.0) multiplier *= coefficient;
                }
                engine_->optimizer_step(lr, multiplier, ++state_.optimizer_step);
                consecutive_skips = 0;
            } else {
                ++state_.skipped_updates;
                if (++consecutive_skips >= kMaxConsecutiveSkips)
                    return finish(StopReason::diverged, "training diverged: " + std::to_string(consecutive_skips) +
                                                            " fp16 updates in a row overflowed; lower --lr or use --precision bf16");
            }
            const double update_ms = engine_->end_update_timing_ms();

            state_.update = update;
            state_.samples_seen += samples;
            state_.epoch = micro.last_in_epoch ? micro.epoch + 1 : micro.epoch;
            state_.batch_in_epoch = micro.last_in_epoch ? 0 : micro.batch_in_epoch + 1;
            state_.loss_scale = scaler_.scale();
            state_.clean_streak = scaler_.clean_streak();
            if (finite) {
                state_.epoch_loss_sum += loss_sum;
                state_.epoch_samples += samples;
            }

            StepMetrics& m = result_.last;
            m.update = update;
            m.epoch = micro.epoch;
            m.samples_seen = state_.samples_seen;
            m.wall_seconds = elapsed_seconds();
            m.loss = loss_sum / (static_cast<double>(samples) * targets_per_sample);
            m.learning_rate = lr;
            m.grad_norm = grad_norm;
            m.update_ms = update_ms;
            m.comm_ms = loop_comm_ms_ + engine_->collective_ms();
            m.samples_per_second = update_ms > 0.0 ? samples / (update_ms / 1000.0) : 0.0;
            m.batch_samples = samples;
            if (data_->task == Task::language_model)
                m.tokens_per_second = m.samples_per_second * static_cast<double>(data_->features);
            if (result_.plan.peak_flops > 0.0)
                m.mfu = result_.plan.flops_per_sample * m.samples_per_second / result_.plan.peak_flops;
            m.loss_scale = scale;
            m.skipped = skipped;
            m.skipped_updates = state_.skipped_updates;
            m.memory = engine_->memory();
            m.rss_bytes = process_rss_bytes();
            const auto device = engine_->device_memory();
            m.device_used_bytes = device.first;
            m.device_total_bytes = device.second;
            if (pipeline_) report_stages(m);
            if (observer_.on_update) observer_.on_update(m);

            if (micro.last_in_epoch) {
                epoch_end(micro.epoch);
            } else if (config_.eval_every > 0 && update % config_.eval_every == 0) {
                evaluation(micro.epoch, false);
            }
            if (config_.checkpoint_every > 0 && update % config_.checkpoint_every == 0) {
                // Process 0 writes; with ZeRO the others hand it their optimizer-state slices, and
                // a pipeline's stages their parts of the model.
                std::vector<NamedTensor> tensors;
                if (pipeline_) tensors = pipeline_->gather_checkpoint_tensors();
                else if (group_.rank() == 0) tensors = checkpoint_tensors(*engine_);
                else if (config_.zero > 0) engine_->optimizer_state();
                if (group_.rank() == 0) {
                    state_.wall_seconds = m.wall_seconds;
                    write_checkpoint(config_.checkpoint_dir, std::move(tensors), state_, config_json_);
                    note("checkpoint written at update " + std::to_string(update) + " to " +
                         checkpoint_path(config_.checkpoint_dir));
                }
            }
            if (config_.empty_cache_steps > 0 && update % config_.empty_cache_steps == 0) engine_->release_cache();
            if (config_.max_steps > 0 && update >= config_.max_steps) {
                if (!micro.last_in_epoch) final_validation();
                return finish(StopReason::max_steps, "reached --max-steps " + std::to_string(config_.max_steps));
            }
        }
    }

    EpochMetrics validate_now(int64_t epoch) {
        EpochMetrics e;
        e.epoch = epoch;
        e.update = state_.update;
        const auto targets_per_sample = static_cast<double>(data_->targets_per_sample());
        e.train_loss = state_.epoch_samples > 0
                           ? state_.epoch_loss_sum / (static_cast<double>(state_.epoch_samples) * targets_per_sample)
                           : std::numeric_limits<double>::quiet_NaN();
        const DataSplit& val = data_->validation;
        // --eval-samples caps an evaluation at that many samples, evenly spaced over the split.
        const int64_t used = config_.eval_samples > 0 ? std::min(config_.eval_samples, val.count) : val.count;
        if (used > 0) {
            EvalTotals totals;
            const int64_t chunk = result_.plan.micro_batch;
            const bool tokens = data_->task == Task::language_model;
            // Several processes share the evaluation: chunk c on process c mod processes.
            // A pipeline's stages all take part in their copy's chunks.
            int64_t chunk_index = 0;
            const int sharing = pipeline_ ? data_group_->size() : group_.size();
            const int share = pipeline_ ? data_group_->rank() : group_.rank();
            for (int64_t start = 0; start < used; start += chunk) {
                if (chunk_index++ % sharing != share) continue;
                const int64_t n = std::min(chunk, used - start);
                for (int64_t k = 0; k < n; ++k) val_indices_[static_cast<size_t>(k)] = (start + k) * val.count / used;
                MicroBatch batch{val_x_.data(), val_labels_.data(), val_targets_.data(), val_indices_.data(), n};
                if (tokens) {
                    gather_token_windows(val, data_->features, val_indices_.data(), n, val_tokens_.data(),
                                         val_labels_.data());
                    batch.tokens = val_tokens_.data();
                } else {
                    gather_samples(val, val_indices_.data(), n, val_x_.data(),
                                   val.labels.empty() ? nullptr : val_labels_.data(),
                                   val.targets.empty() ? nullptr : val_targets_.data());
                }
                const EvalTotals part = pipeline_ ? pipeline_->evaluate(batch) : engine_->evaluate(batch);
                totals.loss_sum += part.loss_sum;
                totals.correct += part.correct;
            }
            if (group_.size() > 1) {
                double sums[2] = {totals.loss_sum, static_cast<double>(totals.correct)};
                group_.sum(sums, 2);
                totals.loss_sum = sums[0];
                totals.correct = static_cast<int64_t>(sums[1]);
            }
            const double terms = static_cast<double>(used) * targets_per_sample;
            e.val_samples = used;
            e.val_loss = totals.loss_sum / terms;
            if (data_->task != Task::regression) e.val_accuracy = static_cast<double>(totals.correct) / terms;
        }
        e.wall_seconds = elapsed_seconds();
        return e;
    }

    void epoch_end(int64_t epoch) { evaluation(epoch, true); }

    // Every stage's times and memory of the update (process 0's pipeline copy), gathered for
    // process 0 to report.
    void report_stages(StepMetrics& m) {
        std::fill(stage_report_.begin(), stage_report_.end(), 0.0);
        std::fill(stage_memory_.begin(), stage_memory_.end(), 0.0);
        const auto s = static_cast<size_t>(pipeline_->stage());
        const PipelineStageMetrics& mine = pipeline_->times();
        stage_report_[4 * s] = mine.forward_ms;
        stage_report_[4 * s + 1] = mine.backward_ms;
        stage_report_[4 * s + 2] = mine.wait_ms;
        stage_report_[4 * s + 3] = mine.span_ms;
        stage_memory_[2 * s] = static_cast<double>(m.memory.live_peak);
        stage_memory_[2 * s + 1] = static_cast<double>(sum_bytes(result_.plan.planned_bytes));
        // Passes: (forward, micro-batch, start, end) each, a stage's block of 2 x step_size of
        // them; a forward flag of -1 ends a block that holds fewer.
        std::fill(stage_passes_.begin(), stage_passes_.end(), 0.0);
        const size_t block = stage_passes_.size() / m.pipeline_stages.size();
        double* mine_passes = stage_passes_.data() + s * block;
        size_t k = 0;
        for (const PipelinePass& pass : mine.passes) {
            mine_passes[k++] = pass.forward ? 1.0 : 0.0;
            mine_passes[k++] = static_cast<double>(pass.micro_batch);
            mine_passes[k++] = pass.start_ms;
            mine_passes[k++] = pass.end_ms;
        }
        if (k < block) mine_passes[k] = -1.0;
        const CollectiveTimer timer(loop_comm_ms_);
        pipeline_group_->sum(stage_report_.data(), static_cast<int64_t>(stage_report_.size()));
        pipeline_group_->sum(stage_memory_.data(), static_cast<int64_t>(stage_memory_.size()));
        // Each block holds one stage's numbers and zeros from the others: the sum is a gather.
        pipeline_group_->sum(stage_passes_.data(), static_cast<int64_t>(stage_passes_.size()));
        for (size_t k = 0; k < m.pipeline_stages.size(); ++k) {
            PipelineStageMetrics& stage = m.pipeline_stages[k];
            stage.forward_ms = stage_report_[4 * k];
            stage.backward_ms = stage_report_[4 * k + 1];
            stage.wait_ms = stage_report_[4 * k + 2];
            stage.span_ms = stage_report_[4 * k + 3];
            stage.peak_bytes = static_cast<int64_t>(stage_memory_[2 * k]);
            stage.planned_bytes = static_cast<int64_t>(stage_memory_[2 * k + 1]);
            stage.passes.clear();
            const double* numbers = stage_passes_.data() + k * block;
            for (size_t at = 0; at + kPassNumbers <= block && numbers[at] >= 0.0; at += kPassNumbers)
                stage.passes.push_back({numbers[at] > 0.5, static_cast<int64_t>(numbers[at + 1]), numbers[at + 2], numbers[at + 3]});
        }
    }

    // Validation at the end of an epoch (which also closes the epoch's training loss) or
    // every --eval-every updates within one.
    void evaluation(int64_t epoch, bool epoch_ended) {
        result_.last_epoch = validate_now(epoch);
        result_.last_epoch.epoch_ended = epoch_ended;
        if (observer_.on_epoch_end) observer_.on_epoch_end(result_.last_epoch);
        // Process 0 draws the text; in a pipeline its copy's stages compute the logits with it.
        if (sampler_ && pipeline_ && group_.rank() < pipeline_->stages()) {
            const std::string& text = sampler_->generate(*pipeline_, config_.sample_seed);
            if (group_.rank() == 0 && observer_.on_sample) observer_.on_sample(state_.update, text);
        } else if (sampler_ && group_.rank() == 0) {
            const std::string& text = sampler_->generate(*engine_, config_.sample_seed);
            if (observer_.on_sample) observer_.on_sample(state_.update, text);
        }
        if (!epoch_ended) return;
        state_.epoch_loss_sum = 0.0;
        state_.epoch_samples = 0;
    }

    // A run that ends mid-epoch still reports where it got to on the validation set.
    void final_validation() {
        if (state_.update == 0 || result_.last_epoch.update == state_.update) return;
        epoch_end(result_.last.epoch);
    }

    ProcessGroup& group_ = process_group();
    RunConfig requested_;
    RunConfig config_;
    Observer observer_;
    const std::atomic<bool>* stop_;
    std::shared_ptr<const Dataset> data_;
    EngineSpec spec_;
    std::unique_ptr<ComputeEngine> engine_;
    LoopState state_;
    DynamicLossScaler scaler_;
    double base_lr_ = 0.0;
    std::string config_json_;
    RunResult result_;
    std::vector<float> val_x_, val_targets_;
    std::vector<int32_t> val_labels_, val_tokens_;
    std::vector<int64_t> val_indices_;
    std::optional<TextSampler> sampler_;
    // --pipeline-stages > 1: this process's pipeline (its stages), its stage's data-parallel
    // copies, and its stage.
    std::unique_ptr<ProcessGroup> pipeline_group_, data_group_;
    std::unique_ptr<PipelineRunner> pipeline_;
    std::vector<double> stage_report_, stage_memory_, stage_passes_;  // every stage's, summed over the pipeline
    static constexpr size_t kPassNumbers = 4;  // a pass in stage_passes_
    std::chrono::steady_clock::time_point start_time_;
    double resume_offset_ = 0.0;
    double loop_comm_ms_ = 0.0;  // this update's collectives in the loop (stop agreement, loss sum)
};

}  // namespace

RunResult train(const RunConfig& config, const Observer& observer, const std::atomic<bool>* stop,
                std::shared_ptr<const Dataset> data) {
    TrainingLoop loop(config, observer, stop, std::move(data));
    return loop.run();
}

}  // namespace trainbench
