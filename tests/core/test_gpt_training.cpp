// A GPT through the training loop on a text data set, as `trainbench-cli train --model gpt`
// runs it: the loss is per token (it starts at ln(vocabulary) and falls below the text's
// unigram entropy), accumulation over step_size 1, 2, 3 with a partial last batch gives the
// same updates, identical runs give identical bits, a resumed run continues bit for bit, and
// --eval-every / --eval-samples evaluate what they say.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>

#include "backend/compute_engine.hpp"
#include "data/text_corpus.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "error_expectations.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"
#include "core/same_bits.hpp"

using namespace trainbench;

namespace {

// A text with structure a small model can learn quickly (words, spaces, sentence ends).
std::string training_text(int sentences) {
    const char* subjects[] = {"the cat", "a dog", "my friend", "the old king", "his son"};
    const char* verbs[] = {"sees", "likes", "finds", "keeps", "calls"};
    const char* objects[] = {"the bird.", "a red hat.", "the river.", "her book.", "the bread."};
    std::string text;
    uint32_t state = 12345;
    auto pick = [&](int n) {
        state = state * 1664525u + 1013904223u;
        return static_cast<int>((state >> 16) % static_cast<uint32_t>(n));
    };
    for (int i = 0; i < sentences; ++i) {
        text += subjects[pick(5)];
        text += ' ';
        text += verbs[pick(5)];
        text += ' ';
        text += objects[pick(5)];
        text += i % 4 == 3 ? '\n' : ' ';
    }
    return text;
}

// Entropy (nats) of the byte frequencies: what a model that ignores context achieves.
double unigram_entropy(const std::string& text) {
    std::map<char, double> counts;
    for (char c : text) counts[c] += 1.0;
    double entropy = 0.0;
    for (const auto& [c, n] : counts) {
        const double p = n / static_cast<double>(text.size());
        entropy -= p * std::log(p);
    }
    return entropy;
}

struct Trace {
    std::vector<double> losses;
    std::vector<EpochMetrics> evaluations;
    RunResult result;
};

Trace run(const RunConfig& config, std::shared_ptr<const Dataset> data = nullptr) {
    Trace trace;
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) { trace.losses.push_back(m.loss); };
    observer.on_epoch_end = [&](const EpochMetrics& e) { trace.evaluations.push_back(e); };
    trace.result = train(config, observer, nullptr, std::move(data));
    return trace;
}

double relative_difference(const ModelWeights& a, const ModelWeights& b) {
    double diff = 0.0, norm = 0.0;
    for (size_t t = 0; t < a.tensors.size(); ++t)
        for (size_t i = 0; i < a.tensors[t].data.size(); ++i) {
            diff += std::pow(double(a.tensors[t].data[i]) - b.tensors[t].data[i], 2);
            norm += std::pow(double(a.tensors[t].data[i]), 2);
        }
    return std::sqrt(diff / norm);
}

}  // namespace

class GptTrainingTest : public QObject {
    Q_OBJECT

    QTemporaryDir scratch_;
    std::string text_path_;
    std::string text_;

    RunConfig small_gpt() const {
        RunConfig c = default_config(ModelFamily::gpt);
        c.dataset = "text:" + text_path_;
        c.n_layer = 1;
        c.n_head = 2;
        c.n_embd = 16;
        c.block_size = 16;
        c.batch_size = 6;
        c.step_size = 1;
        c.threads = 1;
        c.schedule.warmup_steps = 0;
        c.eval_every = 0;
        c.eval_samples = 0;
        return c;
    }

private slots:
    void initTestCase() {
        QVERIFY(scratch_.isValid());
        text_ = training_text(400);
        text_path_ = scratch_.filePath("sentences.txt").toStdString();
        std::ofstream(text_path_, std::ios::binary) << text_;
    }

    void loss_is_per_token_and_learns_beyond_unigrams() {
        RunConfig c = small_gpt();
        c.batch_size = 16;
        c.optimizer.lr = 1e-2;
        c.epochs = 2;
        const Trace t = run(c);
        QVERIFY2(t.result.reason == StopReason::completed, t.result.message.c_str());
        const auto vocabulary = static_cast<double>(data::corpus_from_text(text_, "x").vocab_size());
        // At initialisation (normal 0.02 weights) the logits are nearly flat: ln(V) per token.
        QVERIFY2(std::abs(t.losses.front() - std::log(vocabulary)) < 0.05,
                 qPrintable(QString("first loss %1, ln(V) %2").arg(t.losses.front()).arg(std::log(vocabulary))));
        const double unigram = unigram_entropy(text_);
        const double val = t.result.last_epoch.val_loss;
        QVERIFY2(val < unigram - 0.3,
                 qPrintable(QString("validation loss %1 not below the unigram entropy %2").arg(val).arg(unigram)));
        QVERIFY(t.result.last_epoch.val_accuracy > 0.3);
        QVERIFY(t.result.last.tokens_per_second > 0.0);
        QCOMPARE(t.result.plan.tokens_per_sample, int64_t{16});
        // MFU: llm.c's model FLOPs, 6N + 6 L C T per token, against the measured CPU peak.
        const double N = static_cast<double>(t.result.plan.parameter_count);
        QCOMPARE(t.result.plan.flops_per_sample, 16.0 * (6.0 * N + 6.0 * 1 * 16 * 16));
        QVERIFY(t.result.plan.peak_flops > 0.0);
        QVERIFY(!t.result.plan.peak_source.empty());
        QVERIFY(std::isfinite(t.result.last.mfu) && t.result.last.mfu > 0.0);
        QCOMPARE(t.result.last.mfu, t.result.plan.flops_per_sample * t.result.last.samples_per_second /
                                        t.result.plan.peak_flops);
    }

    void accumulation_matches_one_batch_with_a_partial_last_batch() {
        RunConfig c = small_gpt();
        const auto data = std::make_shared<const Dataset>(load_dataset(c.dataset, data_options_for(c)));
        // The windows do not fill whole batches of 6, so the epoch ends with a partial batch.
        QVERIFY(data->train.count % 6 != 0);
        const Trace one = run(c, data);
        QVERIFY2(one.result.reason == StopReason::completed, one.result.message.c_str());
        for (int64_t step : {2, 3}) {
            c.step_size = step;
            const Trace accumulated = run(c, data);
            QCOMPARE(accumulated.losses.size(), one.losses.size());
            for (size_t u = 0; u < one.losses.size(); ++u)
                QVERIFY2(std::abs(accumulated.losses[u] - one.losses[u]) <= 1e-5 * std::abs(one.losses[u]),
                         qPrintable(QString("step_size %1, update %2: loss %3 vs %4")
                                        .arg(step)
                                        .arg(u + 1)
                                        .arg(accumulated.losses[u])
                                        .arg(one.losses[u])));
            const double difference = relative_difference(accumulated.result.weights, one.result.weights);
            QVERIFY2(difference < 1e-5, qPrintable(QString("step_size %1: weights differ by %2").arg(step).arg(difference)));
        }
    }

    void identical_runs_give_identical_bits() {
        RunConfig c = small_gpt();
        c.max_steps = 8;
        c.step_size = 2;
        c.threads = 2;
        const Trace a = run(c), b = run(c);
        QVERIFY(a.losses == b.losses);
        QVERIFY(same_bits(a.result.weights, b.result.weights));
    }

    void resumed_run_continues_bit_for_bit() {
        RunConfig c = small_gpt();
        c.max_steps = 10;
        c.step_size = 2;
        const Trace straight = run(c);
        // The same run interrupted after update 5 (as Ctrl-C would), with a checkpoint there.
        RunConfig first = c;
        first.checkpoint_every = 5;
        first.checkpoint_dir = scratch_.filePath("checkpoints").toStdString();
        std::atomic<bool> stop{false};
        Observer observer;
        observer.on_update = [&](const StepMetrics& m) { stop = m.update == 5; };
        QCOMPARE(train(first, observer, &stop).reason, StopReason::stopped);
        RunConfig resumed = c;
        resumed.resume_dir = first.checkpoint_dir;
        const Trace rest = run(resumed);
        QVERIFY2(rest.result.reason == StopReason::max_steps, rest.result.message.c_str());
        QCOMPARE(rest.losses.size(), size_t{5});
        QVERIFY(std::equal(rest.losses.begin(), rest.losses.end(), straight.losses.begin() + 5));
        QVERIFY(same_bits(rest.result.weights, straight.result.weights));
    }

    void evaluates_every_n_updates_on_the_requested_samples() {
        RunConfig c = small_gpt();
        c.max_steps = 9;
        c.eval_every = 4;
        c.eval_samples = 3;
        const Trace t = run(c);
        // Updates 4 and 8 within the epoch, then the final evaluation at update 9.
        QCOMPARE(t.evaluations.size(), size_t{3});
        QCOMPARE(t.evaluations[0].update, int64_t{4});
        QVERIFY(!t.evaluations[0].epoch_ended);
        QCOMPARE(t.evaluations[1].update, int64_t{8});
        QCOMPARE(t.evaluations[2].update, int64_t{9});
        for (const auto& e : t.evaluations) {
            QCOMPARE(e.val_samples, int64_t{3});
            QVERIFY(std::isfinite(e.val_loss));
        }
    }

    void weights_of_another_shape_are_refused() {
        RunConfig c = small_gpt();
        c.max_steps = 1;
        const Trace t = run(c);
        const std::string path = scratch_.filePath("narrow.safetensors").toStdString();
        save_weights(path, t.result.weights);
        RunConfig wider = c;
        wider.n_embd = 32;
        wider.init_weights = path;
        EXPECT_ERROR_CONTAINS(run(wider), "--n-embd");
    }

    // What the techniques are for: on a GPT (L6 C256 T256) checkpointing at least halves the
    // planned activations, and step_size 4 quarters them at the same global batch.
    void techniques_cut_the_planned_activations() {
        RunConfig c = small_gpt();
        c.n_layer = 6;
        c.n_head = 4;
        c.n_embd = 256;
        c.block_size = 256;
        c.batch_size = 16;
        c.step_size = 1;
        const auto data = std::make_shared<const Dataset>(load_dataset(c.dataset, data_options_for(c)));
        auto activations = [&](const RunConfig& config) {
            return plan_run(config, *data).planned_bytes[static_cast<size_t>(MemoryCategory::activations)];
        };
        const double base = static_cast<double>(activations(c));
        RunConfig checkpointed = c;
        checkpointed.gradient_checkpointing = true;
        RunConfig accumulated = c;
        accumulated.step_size = 4;
        const double ckpt_ratio = static_cast<double>(activations(checkpointed)) / base;
        const double step_ratio = static_cast<double>(activations(accumulated)) / base;
        qInfo("activations planned: %.1f MiB; checkpointing x%.3f, step_size 4 x%.3f", base / 1048576.0, ckpt_ratio,
              step_ratio);
        QVERIFY2(ckpt_ratio <= 0.5, qPrintable(QString("checkpointing keeps %1 of the activations").arg(ckpt_ratio)));
        QVERIFY2(step_ratio <= 0.25 + 1e-9, qPrintable(QString("step_size 4 keeps %1 of the activations").arg(step_ratio)));
    }

    // Samples read the logits at the last filled position of a padded window: that is only
    // right if a position's logits ignore every token after it (causal attention).
    void logits_at_a_position_ignore_later_tokens() {
        GptShape shape;
        shape.n_layer = 2;
        shape.n_head = 2;
        shape.n_embd = 16;
        shape.block_size = 12;
        shape.vocab = 20;
        EngineSpec spec;
        spec.model = build_gpt(shape);
        spec.optimizer.kind = OptimizerKind::adamw;
        spec.threads = 1;
        spec.max_micro_batch = spec.max_eval_batch = 2;
        auto engine = make_cpu_engine(spec);
        engine->set_weights(init_weights(spec.model, 3));
        std::vector<int32_t> window(12), targets(12, 0);
        for (int t = 0; t < 12; ++t) window[static_cast<size_t>(t)] = (t * 7) % 20;
        MicroBatch batch;
        batch.tokens = window.data();
        batch.labels = targets.data();
        batch.count = 1;
        for (int64_t row : {0, 4, 11}) {
            std::vector<float> before(20), after(20);
            engine->logits_row(batch, row, before.data());
            std::vector<int32_t> changed = window;
            for (int64_t t = row + 1; t < 12; ++t) changed[static_cast<size_t>(t)] = 19 - changed[static_cast<size_t>(t)];
            MicroBatch other = batch;
            other.tokens = changed.data();
            engine->logits_row(other, row, after.data());
            QVERIFY2(before == after, qPrintable(QString("row %1 depends on later tokens").arg(row)));
        }
        std::vector<float> first(20), last(20);
        engine->logits_row(batch, 0, first.data());
        engine->logits_row(batch, 11, last.data());
        QVERIFY(first != last);
    }

    void samples_at_each_evaluation_are_reproducible() {
        RunConfig c = small_gpt();
        c.max_steps = 6;
        c.eval_every = 3;
        c.eval_samples = 4;
        c.sample_chars = 40;
        auto samples_of = [&](const RunConfig& config) {
            std::vector<std::pair<int64_t, std::string>> samples;
            Observer observer;
            observer.on_sample = [&](int64_t update, const std::string& text) { samples.emplace_back(update, text); };
            train(config, observer);
            return samples;
        };
        const auto a = samples_of(c), b = samples_of(c);
        QCOMPARE(a.size(), size_t{2});
        QCOMPARE(a[0].first, int64_t{3});
        QCOMPARE(a[1].first, int64_t{6});
        const auto vocabulary = data::corpus_from_text(text_, "x").vocabulary;
        for (const auto& [update, text] : a) {
            QCOMPARE(text.size(), size_t{41});
            QCOMPARE(text.front(), '\n');  // the prompt
            for (char ch : text)
                QVERIFY(std::find(vocabulary.begin(), vocabulary.end(), static_cast<uint8_t>(ch)) != vocabulary.end());
        }
        QVERIFY(a == b);
        QVERIFY(a[0].second != a[1].second);  // the model changed in between
        c.sample_seed = 1;
        QVERIFY(samples_of(c) != a);
    }

    void model_and_data_must_match() {
        RunConfig c = small_gpt();
        c.dataset = "spirals";
        EXPECT_ERROR_CONTAINS(validate(c), "--dataset kjv or --dataset text:PATH");
        RunConfig mlp;
        mlp.dataset = "text:" + text_path_;
        EXPECT_ERROR_CONTAINS(validate(mlp), "use --model gpt");
    }
};

QTEST_APPLESS_MAIN(GptTrainingTest)
#include "test_gpt_training.moc"
