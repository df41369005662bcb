#include "trainbench/run_events.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "trainbench/error.hpp"

namespace trainbench {

using Json = nlohmann::ordered_json;

namespace {

// Each record's members are listed once, in a function that hands every (name, member) pair to
// `visit`; the writer reads the members through it and the reader writes them, so the two
// cannot disagree on a name.
template <class Plan, class Visit>
void each_plan_member(Plan& p, Visit&& visit) {
    visit("global_batch", p.global_batch);
    visit("step_size", p.step_size);
    visit("processes", p.processes);
    visit("zero", p.zero);
    visit("threads", p.threads);
    visit("micro_batch", p.micro_batch);
    visit("train_samples", p.train_samples);
    visit("tokens_per_sample", p.tokens_per_sample);
    visit("updates_per_epoch", p.updates_per_epoch);
    visit("total_updates", p.total_updates);
    visit("model_summary", p.model_summary);
    visit("parameter_count", p.parameter_count);
    visit("trainable_parameter_count", p.trainable_parameter_count);
    visit("nf4_parameter_count", p.nf4_parameter_count);
    visit("nf4_bytes", p.nf4_bytes);
    visit("planned_bytes", p.planned_bytes);
    visit("auto_fit_note", p.auto_fit_note);
    visit("activations_without_checkpointing", p.activations_without_checkpointing);
    visit("rebuilt_segments", p.rebuilt_segments);
    visit("recomputed_attention_bytes", p.recomputed_attention_bytes);
    visit("fused_traffic_bytes", p.fused_traffic_bytes);
    visit("eager_traffic_bytes", p.eager_traffic_bytes);
    visit("flops_per_sample", p.flops_per_sample);
    visit("peak_flops", p.peak_flops);
    visit("peak_source", p.peak_source);
    visit("pipeline_stages", p.pipeline_stages);
    visit("pipeline_schedule", p.pipeline_schedule);
    visit("pipeline_bubble", p.pipeline_bubble);
}

template <class Pass, class Visit>
void each_pass_member(Pass& p, Visit&& visit) {
    visit("forward", p.forward);
    visit("micro_batch", p.micro_batch);
    visit("start_ms", p.start_ms);
    visit("end_ms", p.end_ms);
}

template <class Stage, class Visit>
void each_stage_member(Stage& s, Visit&& visit) {
    visit("passes", s.passes);
    visit("forward_ms", s.forward_ms);
    visit("backward_ms", s.backward_ms);
    visit("wait_ms", s.wait_ms);
    visit("span_ms", s.span_ms);
    visit("peak_bytes", s.peak_bytes);
    visit("planned_bytes", s.planned_bytes);
}

template <class Memory, class Visit>
void each_memory_member(Memory& m, Visit&& visit) {
    visit("current", m.current);
    visit("update_peak", m.update_peak);
    visit("update_peak_held", m.update_peak_held);
    visit("peak", m.peak);
    visit("update_live_peak", m.update_live_peak);
    visit("live_peak", m.live_peak);
    visit("reserved", m.reserved);
    visit("reserved_peak", m.reserved_peak);
}

template <class Step, class Visit>
void each_update_member(Step& m, Visit&& visit) {
    visit("update", m.update);
    visit("epoch", m.epoch);
    visit("samples_seen", m.samples_seen);
    visit("wall_seconds", m.wall_seconds);
    visit("loss", m.loss);
    visit("learning_rate", m.learning_rate);
    visit("grad_norm", m.grad_norm);
    visit("update_ms", m.update_ms);
    visit("comm_ms", m.comm_ms);
    visit("samples_per_second", m.samples_per_second);
    visit("batch_samples", m.batch_samples);
    visit("tokens_per_second", m.tokens_per_second);
    visit("mfu", m.mfu);
    visit("loss_scale", m.loss_scale);
    visit("skipped", m.skipped);
    visit("skipped_updates", m.skipped_updates);
    visit("memory", m.memory);
    visit("rss_bytes", m.rss_bytes);
    visit("device_used_bytes", m.device_used_bytes);
    visit("device_total_bytes", m.device_total_bytes);
    visit("pipeline_stages", m.pipeline_stages);
}

template <class Epoch, class Visit>
void each_evaluation_member(Epoch& e, Visit&& visit) {
    visit("epoch", e.epoch);
    visit("epoch_ended", e.epoch_ended);
    visit("update", e.update);
    visit("train_loss", e.train_loss);
    visit("val_loss", e.val_loss);
    visit("val_accuracy", e.val_accuracy);
    visit("val_samples", e.val_samples);
    visit("wall_seconds", e.wall_seconds);
}

// JSON has no NaN or infinity; they are written as the strings "nan", "inf" and "-inf" so that a
// diverged loss or an MFU without a peak survive the trip.
Json real_to_json(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    return value;
}

double real_from_json(const Json& value) {
    if (value.is_number()) return value.get<double>();
    if (value.is_string()) {
        const std::string text = value.get<std::string>();
        if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
        if (text == "inf") return std::numeric_limits<double>::infinity();
        if (text == "-inf") return -std::numeric_limits<double>::infinity();
    }
    throw Error("expected a number, found " + value.dump());
}

Json to_json(double value) { return real_to_json(value); }
Json to_json(int64_t value) { return value; }
Json to_json(int value) { return value; }
Json to_json(bool value) { return value; }
// Sample text is the model's bytes; a byte sequence that is not UTF-8 (a character cut by
// sampling) becomes U+FFFD, as the app shows it anyway.
Json to_json(const std::string& value) { return value; }
Json to_json(const BytesByCategory& bytes) {
    Json object = Json::object();
    for (int c = 0; c < kMemoryCategoryCount; ++c)
        object[std::string(to_string(static_cast<MemoryCategory>(c)))] = bytes[static_cast<size_t>(c)];
    return object;
}
Json to_json(const MemoryReport& memory) {
    Json object = Json::object();
    each_memory_member(memory, [&](const char* name, const auto& member) { object[name] = to_json(member); });
    return object;
}
// A list of records (a pipeline's stages, a stage's passes) as an array of objects.
Json to_json(const std::vector<PipelinePass>& passes);
template <class Record, class Each>
Json records_to_json(const std::vector<Record>& records, Each each) {
    Json array = Json::array();
    for (const Record& record : records) {
        Json object = Json::object();
        each(record, [&](const char* name, const auto& member) { object[name] = to_json(member); });
        array.push_back(object);
    }
    return array;
}
Json to_json(const std::vector<PipelinePass>& passes) {
    return records_to_json(passes, [](auto& r, auto&& v) { each_pass_member(r, v); });
}
Json to_json(const std::vector<PipelineStageMetrics>& stages) {
    return records_to_json(stages, [](auto& r, auto&& v) { each_stage_member(r, v); });
}

void from_json_value(const Json& json, double& value) { value = real_from_json(json); }
void from_json_value(const Json& json, int64_t& value) { value = json.get<int64_t>(); }
void from_json_value(const Json& json, int& value) { value = json.get<int>(); }
void from_json_value(const Json& json, bool& value) { value = json.get<bool>(); }
void from_json_value(const Json& json, std::string& value) { value = json.get<std::string>(); }
void from_json_value(const Json& json, BytesByCategory& bytes) {
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
        const auto it = json.find(std::string(to_string(static_cast<MemoryCategory>(c))));
        bytes[static_cast<size_t>(c)] = it == json.end() ? 0 : it->get<int64_t>();
    }
}
void from_json_value(const Json& json, MemoryReport& memory) {
    each_memory_member(memory, [&](const char* name, auto& member) {
        if (const auto it = json.find(name); it != json.end()) from_json_value(*it, member);
    });
}
template <class Record, class Each>
void records_from_json(const Json& json, std::vector<Record>& records, Each each);
void from_json_value(const Json& json, std::vector<PipelinePass>& passes);
void from_json_value(const Json& json, std::vector<PipelinePass>& passes) {
    records_from_json(json, passes, [](auto& r, auto&& v) { each_pass_member(r, v); });
}
void from_json_value(const Json& json, std::vector<PipelineStageMetrics>& stages) {
    records_from_json(json, stages, [](auto& r, auto&& v) { each_stage_member(r, v); });
}
template <class Record, class Each>
void records_from_json(const Json& json, std::vector<Record>& records, Each each) {
    records.clear();
    for (const Json& object : json) {
        Record& record = records.emplace_back();
        each(record, [&](const char* name, auto& member) {
            if (const auto it = object.find(name); it != object.end()) from_json_value(*it, member);
        });
    }
}

// A record as an event object, and back; members a newer writer added are ignored, members an
// older one lacked keep their defaults.
template <class Record, class Each>
std::string record_line(const char* event, const Record& record, Each each) {
    Json line = Json::object();
    line["event"] = event;
    each(record, [&](const char* name, const auto& member) { line[name] = to_json(member); });
    return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <class Record, class Each>
Record record_from(const Json& line, Each each) {
    Record record;
    each(record, [&](const char* name, auto& member) {
        if (const auto it = line.find(name); it != line.end()) from_json_value(*it, member);
    });
    return record;
}

std::string text_line(const char* event, const std::string& text, std::optional<int64_t> update = {}) {
    Json line = Json::object();
    line["event"] = event;
    if (update) line["update"] = *update;
    line["text"] = text;
    return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StopReason stop_reason_named(const std::string& name) {
    for (StopReason reason : {StopReason::completed, StopReason::max_steps, StopReason::stopped, StopReason::diverged,
                              StopReason::failed})
        if (to_string(reason) == name) return reason;
    throw Error("unknown end reason \"" + name + "\"");
}

}  // namespace

Observer event_writing_observer(std::function<void(const std::string& line)> write_line) {
    Observer observer;
    observer.on_start = [write_line](const RunPlan& plan) {
        write_line(record_line("plan", plan, [](auto& p, auto&& v) { each_plan_member(p, v); }));
    };
    observer.on_update = [write_line](const StepMetrics& m) {
        write_line(record_line("update", m, [](auto& r, auto&& v) { each_update_member(r, v); }));
    };
    observer.on_epoch_end = [write_line](const EpochMetrics& e) {
        write_line(record_line("evaluation", e, [](auto& r, auto&& v) { each_evaluation_member(r, v); }));
    };
    observer.on_note = [write_line](const std::string& text) { write_line(text_line("note", text)); };
    observer.on_sample = [write_line](int64_t update, const std::string& text) {
        write_line(text_line("sample", text, update));
    };
    return observer;
}

std::string end_event_line(const RunResult& result) {
    Json line = Json::object();
    line["event"] = "end";
    line["reason"] = to_string(result.reason);
    line["message"] = result.message;
    line["seconds"] = real_to_json(result.seconds);
    line["updates"] = result.last.update;
    return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void RunEventReader::read_line(std::string_view text) {
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    try {
        const Json line = Json::parse(text);
        const std::string event = line.at("event").get<std::string>();
        if (event == "plan") {
            plan_ = record_from<RunPlan>(line, [](auto& p, auto&& v) { each_plan_member(p, v); });
            if (observer_.on_start) observer_.on_start(plan_);
        } else if (event == "update") {
            last_ = record_from<StepMetrics>(line, [](auto& r, auto&& v) { each_update_member(r, v); });
            if (observer_.on_update) observer_.on_update(last_);
        } else if (event == "evaluation") {
            last_epoch_ = record_from<EpochMetrics>(line, [](auto& r, auto&& v) { each_evaluation_member(r, v); });
            if (observer_.on_epoch_end) observer_.on_epoch_end(last_epoch_);
        } else if (event == "note") {
            if (observer_.on_note) observer_.on_note(line.at("text").get<std::string>());
        } else if (event == "sample") {
            if (observer_.on_sample)
                observer_.on_sample(line.at("update").get<int64_t>(), line.at("text").get<std::string>());
        } else if (event == "end") {
            RunEnd end;
            end.reason = stop_reason_named(line.at("reason").get<std::string>());
            end.message = line.value("message", std::string());
            if (const auto it = line.find("seconds"); it != line.end()) end.seconds = real_from_json(*it);
            end.updates = line.value("updates", int64_t{0});
            end_ = std::move(end);
        } else {
            throw Error("unknown event \"" + event + "\"");
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error("not a run event (" + std::string(e.what()) + "): " + std::string(text.substr(0, 200)));
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + " in the run event: " + std::string(text.substr(0, 200)));
    }
}

void RunEventReader::read_line_of_child(std::string_view line) {
    if (!unreadable_.empty()) return;
    try {
        read_line(line);
    } catch (const Error& e) {
        unreadable_ = e.what();
    }
}

RunResult RunEventReader::result() const {
    RunResult result;
    result.plan = plan_;
    result.last = last_;
    result.last_epoch = last_epoch_;
    if (end_) {
        result.reason = end_->reason;
        result.message = end_->message;
        result.seconds = end_->seconds;
    }
    return result;
}

}  // namespace trainbench
