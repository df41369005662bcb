// The event stream (trainbench/run_events.hpp) carries every member of a run's records from a
// child `trainbench-cli train --events-out` to the app unchanged: each record below has every
// member away from its default, NaN and infinities included, so a member the writer or the reader
// forgets shows up. Lines that are not events are refused with the line named.
#include <QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "trainbench/error.hpp"
#include "trainbench/run_events.hpp"

using namespace trainbench;

namespace {

// Everything an observer was told, in order.
struct Recording {
    std::vector<RunPlan> plans;
    std::vector<StepMetrics> updates;
    std::vector<EpochMetrics> evaluations;
    std::vector<std::string> notes;
    std::vector<std::pair<int64_t, std::string>> samples;
    Observer observer() {
        Observer o;
        o.on_start = [this](const RunPlan& p) { plans.push_back(p); };
        o.on_update = [this](const StepMetrics& m) { updates.push_back(m); };
        o.on_epoch_end = [this](const EpochMetrics& e) { evaluations.push_back(e); };
        o.on_note = [this](const std::string& text) { notes.push_back(text); };
        o.on_sample = [this](int64_t update, const std::string& text) { samples.emplace_back(update, text); };
        return o;
    }
};

BytesByCategory bytes_from(int64_t first) {
    BytesByCategory bytes{};
    for (int c = 0; c < kMemoryCategoryCount; ++c) bytes[static_cast<size_t>(c)] = first + 1000 * c + 7;
    return bytes;
}

StepMetrics unusual_update() {
    StepMetrics m;
    m.update = 41;
    m.epoch = 3;
    m.samples_seen = 123456789012;
    m.wall_seconds = 12.345678901234567;
    m.loss = std::numeric_limits<double>::infinity();
    m.learning_rate = 3.0000000000000001e-4;
    m.grad_norm = 0.1 + 0.2;
    m.update_ms = 1.0 / 3.0;
    m.comm_ms = 0.0625;
    m.samples_per_second = 98765.4321;
    m.batch_samples = 17;
    m.tokens_per_second = 2.5e6;
    m.mfu = std::numeric_limits<double>::quiet_NaN();
    m.loss_scale = 65536.0;
    m.skipped = true;
    m.skipped_updates = 2;
    m.memory.current = bytes_from(1);
    m.memory.update_peak = bytes_from(2);
    m.memory.peak = bytes_from(3);
    m.memory.update_live_peak = 4;
    m.memory.live_peak = 5;
    m.memory.reserved = 6;
    m.memory.reserved_peak = 7;
    m.rss_bytes = 8;
    m.device_used_bytes = 9;
    m.device_total_bytes = 10;
    return m;
}

// Equal, NaN equal to NaN.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// The lines an event-writing observer writes for what `report` tells it.
std::vector<std::string> lines_of(const std::function<void(const Observer&)>& report) {
    std::vector<std::string> lines;
    report(event_writing_observer([&](const std::string& line) { lines.push_back(line); }));
    return lines;
}

void replay(const std::vector<std::string>& lines, Recording& into) {
    RunEventReader reader(into.observer());
    for (const auto& line : lines) reader.read_line(line);
}

std::string error_reading(const std::string& line) {
    try {
        RunEventReader reader(Observer{});
        reader.read_line(line);
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

}  // namespace

class RunEventsTest : public QObject {
    Q_OBJECT
private slots:
    void updates_keep_every_member() {
        const StepMetrics sent = unusual_update();
        Recording got;
        replay(lines_of([&](const Observer& o) { o.on_update(sent); }), got);
        QCOMPARE(got.updates.size(), size_t{1});
        const StepMetrics& m = got.updates[0];
        QCOMPARE(m.update, sent.update);
        QCOMPARE(m.epoch, sent.epoch);
        QCOMPARE(m.samples_seen, sent.samples_seen);
        // Doubles come back to the bit (the JSON writer prints the shortest form that reads back
        // exactly); QCOMPARE would forgive the last bits.
        QVERIFY(m.wall_seconds == sent.wall_seconds && m.update_ms == sent.update_ms);
        QVERIFY(std::isinf(m.loss) && m.loss > 0);
        QCOMPARE(m.learning_rate, sent.learning_rate);
        QCOMPARE(m.grad_norm, sent.grad_norm);
        QCOMPARE(m.update_ms, sent.update_ms);
        QCOMPARE(m.comm_ms, sent.comm_ms);
        QCOMPARE(m.samples_per_second, sent.samples_per_second);
        QCOMPARE(m.batch_samples, sent.batch_samples);
        QCOMPARE(m.tokens_per_second, sent.tokens_per_second);
        QVERIFY(std::isnan(m.mfu));
        QCOMPARE(m.loss_scale, sent.loss_scale);
        QCOMPARE(m.skipped, sent.skipped);
        QCOMPARE(m.skipped_updates, sent.skipped_updates);
        QVERIFY(m.memory.current == sent.memory.current);
        QVERIFY(m.memory.update_peak == sent.memory.update_peak);
        QVERIFY(m.memory.peak == sent.memory.peak);
        QCOMPARE(m.memory.update_live_peak, sent.memory.update_live_peak);
        QCOMPARE(m.memory.live_peak, sent.memory.live_peak);
        QCOMPARE(m.memory.reserved, sent.memory.reserved);
        QCOMPARE(m.memory.reserved_peak, sent.memory.reserved_peak);
        QCOMPARE(m.rss_bytes, sent.rss_bytes);
        QCOMPARE(m.device_used_bytes, sent.device_used_bytes);
        QCOMPARE(m.device_total_bytes, sent.device_total_bytes);
    }

    void plans_keep_every_member() {
        RunPlan sent;
        sent.global_batch = 96;
        sent.step_size = 4;
        sent.processes = 3;
        sent.zero = 2;
        sent.threads = 1;
        sent.micro_batch = 8;
        sent.train_samples = 1000;
        sent.tokens_per_sample = 64;
        sent.updates_per_epoch = 11;
        sent.total_updates = 33;
        sent.model_summary = "GPT L2 H2 C32 T64 V65";
        sent.parameter_count = 29121;
        sent.planned_bytes = bytes_from(100);
        sent.auto_fit_note = "step_size 4 fits";
        sent.activations_without_checkpointing = 12345;
        sent.rebuilt_segments = 3;
        sent.recomputed_attention_bytes = 16384;
        sent.flops_per_sample = 1.25e7;
        sent.peak_flops = 6.98301e10;
        sent.peak_source = "measured \"here\"";
        Recording got;
        replay(lines_of([&](const Observer& o) { o.on_start(sent); }), got);
        QCOMPARE(got.plans.size(), size_t{1});
        const RunPlan& p = got.plans[0];
        QCOMPARE(p.global_batch, sent.global_batch);
        QCOMPARE(p.step_size, sent.step_size);
        QCOMPARE(p.processes, sent.processes);
        QCOMPARE(p.zero, sent.zero);
        QCOMPARE(p.threads, sent.threads);
        QCOMPARE(p.micro_batch, sent.micro_batch);
        QCOMPARE(p.train_samples, sent.train_samples);
        QCOMPARE(p.tokens_per_sample, sent.tokens_per_sample);
        QCOMPARE(p.updates_per_epoch, sent.updates_per_epoch);
        QCOMPARE(p.total_updates, sent.total_updates);
        QCOMPARE(p.model_summary, sent.model_summary);
        QCOMPARE(p.parameter_count, sent.parameter_count);
        QVERIFY(p.planned_bytes == sent.planned_bytes);
        QCOMPARE(p.auto_fit_note, sent.auto_fit_note);
        QCOMPARE(p.activations_without_checkpointing, sent.activations_without_checkpointing);
        QCOMPARE(p.rebuilt_segments, sent.rebuilt_segments);
        QCOMPARE(p.recomputed_attention_bytes, sent.recomputed_attention_bytes);
        QCOMPARE(p.flops_per_sample, sent.flops_per_sample);
        QCOMPARE(p.peak_flops, sent.peak_flops);
        QCOMPARE(p.peak_source, sent.peak_source);
    }

    void evaluations_notes_samples_and_the_end() {
        EpochMetrics sent;
        sent.epoch = 2;
        sent.epoch_ended = false;
        sent.update = 40;
        sent.train_loss = 1.5;
        sent.val_loss = 1.75;
        sent.val_accuracy = std::numeric_limits<double>::quiet_NaN();
        sent.val_samples = 321;
        sent.wall_seconds = 9.5;
        RunResult result;
        result.reason = StopReason::stopped;
        result.message = "stopped by the user";
        result.seconds = 12.25;
        result.last.update = 40;

        Recording got;
        std::vector<std::string> lines = lines_of([&](const Observer& o) {
            o.on_epoch_end(sent);
            o.on_note("checkpoint written: a \"quoted\" path\twith a tab");
            o.on_sample(40, "And God said,\nLet there be light");
        });
        lines.push_back(end_event_line(result));
        lines.push_back("");  // blank lines are allowed
        RunEventReader reader(got.observer());
        QVERIFY(!reader.end());
        for (const auto& line : lines) reader.read_line(line);

        QCOMPARE(got.evaluations.size(), size_t{1});
        const EpochMetrics& e = got.evaluations[0];
        QCOMPARE(e.epoch, sent.epoch);
        QCOMPARE(e.epoch_ended, false);
        QCOMPARE(e.update, sent.update);
        QCOMPARE(e.train_loss, sent.train_loss);
        QCOMPARE(e.val_loss, sent.val_loss);
        QVERIFY(same(e.val_accuracy, sent.val_accuracy));
        QCOMPARE(e.val_samples, sent.val_samples);
        QCOMPARE(e.wall_seconds, sent.wall_seconds);
        QCOMPARE(got.notes, std::vector<std::string>{"checkpoint written: a \"quoted\" path\twith a tab"});
        QCOMPARE(got.samples.size(), size_t{1});
        QCOMPARE(got.samples[0].first, int64_t{40});
        QCOMPARE(got.samples[0].second, std::string("And God said,\nLet there be light"));
        QVERIFY(reader.end());
        QCOMPARE(reader.end()->reason, StopReason::stopped);
        QCOMPARE(reader.end()->message, result.message);
        QCOMPARE(reader.end()->seconds, 12.25);
        QCOMPARE(reader.end()->updates, int64_t{40});
        // One event per line: no raw newline inside one.
        for (const auto& line : lines) QVERIFY(line.find('\n') == std::string::npos);
    }

    // A byte-level model can sample half of a UTF-8 character; the line stays JSON.
    void sample_bytes_that_are_not_utf8_become_replacement_characters() {
        Recording got;
        replay(lines_of([&](const Observer& o) { o.on_sample(3, std::string("ab\xE2\x80", 4)); }), got);
        QCOMPARE(got.samples.size(), size_t{1});
        QCOMPARE(got.samples[0].second, std::string("ab\xEF\xBF\xBD"));
    }

    void lines_that_are_not_events_are_refused() {
        QVERIFY(error_reading("update 3 loss 1.2").find("not a run event") != std::string::npos);
        QVERIFY(error_reading("{\"loss\": 1}").find("not a run event") != std::string::npos);
        QVERIFY(error_reading("{\"event\":\"bogus\"}").find("unknown event \"bogus\"") != std::string::npos);
        QVERIFY(error_reading("{\"event\":\"update\",\"loss\":\"high\"}").find("expected a number") != std::string::npos);
        QVERIFY(error_reading("{\"event\":\"end\",\"reason\":\"exploded\"}").find("unknown end reason") !=
                std::string::npos);
        // A line cut short by a killed process.
        QVERIFY(error_reading("{\"event\":\"update\",\"update\":4,\"lo").find("not a run event") != std::string::npos);
        QCOMPARE(error_reading("   "), std::string("<no error>"));
    }

    // A child's stream ends at its first line that is not an event: kept as the reason, nothing
    // after it read (it could be anything), no exception.
    void a_childs_stream_stops_at_its_first_unreadable_line() {
        Recording got;
        RunEventReader reader(got.observer());
        std::vector<std::string> lines = lines_of([&](const Observer& o) { o.on_update(unusual_update()); });
        lines.push_back("{\"event\":\"update\",\"update\":4,\"lo");
        lines.push_back(lines.front());
        for (const auto& line : lines) reader.read_line_of_child(line);
        QCOMPARE(got.updates.size(), size_t{1});
        QVERIFY2(reader.unreadable().find("not a run event") != std::string::npos, reader.unreadable().c_str());
        QVERIFY(!reader.end());
    }
};

QTEST_APPLESS_MAIN(RunEventsTest)
#include "test_run_events.moc"
