#include "config_panel.hpp"

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>

#include "dataset_cache.hpp"
#include "dataset_field_control.hpp"
#include "device_field_control.hpp"
#include "fit_check.hpp"
#include "settings_group.hpp"
#include "slider_field_controls.hpp"
#include "trainbench/config_fields.hpp"
#include "trainbench/error.hpp"
#include "trainbench/processes.hpp"

namespace trainbench::ui {
namespace {

const char* const kErrorStyle = "color: #b3261e;";
constexpr int kMaxBatchExponent = 16;  // the batch slider stops at 65,536
constexpr int kMaxStepSlider = 64;

// The settings a family switch keeps: where and how the run computes, not what it trains.
bool kept_across_families(const ConfigField& field) {
    return field.group == "Device and efficiency techniques" || field.key == "seed";
}

// Controls that are more than their kind's standard one.
std::unique_ptr<FieldControl> make_control(const ConfigField& field) {
    if (field.key == "dataset") return std::make_unique<DatasetFieldControl>(field);
    if (field.key == "device") return std::make_unique<DeviceFieldControl>(field);
    if (field.key == "batch_size") return std::make_unique<IntegerSliderControl>(field, true, kMaxBatchExponent);
    if (field.key == "step_size") return std::make_unique<IntegerSliderControl>(field, false, kMaxStepSlider);
    if (field.key == "optimizer.lr") return std::make_unique<LearningRateControl>(field);
    return make_field_control(field);
}

QLabel* make_note(const char* name) {
    auto* label = new QLabel;
    label->setObjectName(QString::fromLatin1(name));
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setStyleSheet(QStringLiteral("color: palette(dark);"));
    return label;
}

QString q(const std::string& text) { return QString::fromStdString(text); }

QString flops_text(double flops) {
    if (flops >= 1e9) return QObject::tr("%1 GFLOP").arg(flops / 1e9, 0, 'f', 2);
    if (flops >= 1e6) return QObject::tr("%1 MFLOP").arg(flops / 1e6, 0, 'f', 2);
    if (flops >= 1e3) return QObject::tr("%1 kFLOP").arg(flops / 1e3, 0, 'f', 1);
    return QObject::tr("%1 FLOP").arg(flops, 0, 'f', 0);
}

// "parameters 423 KiB · gradients 423 KiB · ..." for the categories the plan allocates.
QString categories_text(const BytesByCategory& bytes) {
    QStringList parts;
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
        if (bytes[c] == 0) continue;
        QString name = QString::fromLatin1(to_string(static_cast<MemoryCategory>(c)).data());
        name.replace(QLatin1Char('_'), QLatin1Char(' '));
        parts << QStringLiteral("%1 %2").arg(name, q(format_bytes(bytes[c])));
    }
    return parts.join(QStringLiteral(" · "));
}

}  // namespace

ConfigPanel::ConfigPanel(DatasetCache& datasets, QWidget* parent) : QScrollArea(parent), datasets_(datasets) {
    setObjectName(QStringLiteral("configPanel"));
    setWidgetResizable(true);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setFrameShape(QFrame::NoFrame);
    buildGroups();
    setMinimumWidth(380);

    setDevices(available_devices(), q(cuda_unavailable_reason()));
    connect(&datasets_, &DatasetCache::finished, this, &ConfigPanel::refresh);
    setConfig(RunConfig{});
}

ConfigPanel::~ConfigPanel() = default;

void ConfigPanel::buildGroups() {
    auto* content = new QWidget;
    auto* layout = new QVBoxLayout(content);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(10);

    general_error_ = new QLabel;
    general_error_->setObjectName(QStringLiteral("error_general"));
    general_error_->setWordWrap(true);
    general_error_->setStyleSheet(kErrorStyle);
    general_error_->hide();
    layout->addWidget(general_error_);

    // One group per group of the table, in the table's order.
    std::map<std::string, SettingsGroup*> by_name;
    for (const ConfigField& field : config_fields()) {
        if (!field.in_app) continue;
        SettingsGroup*& group = by_name[field.group];
        if (!group) {
            group = new SettingsGroup(q(field.group));
            group->setObjectName(QStringLiteral("group_") + q(field.group));
            groups_.push_back(group);
            layout->addWidget(group);
        }
        FieldControl* control = group->addField(make_control(field));
        controls_.push_back(control);
        if (field.key == "device") device_ = static_cast<DeviceFieldControl*>(control);
        connect(control, &FieldControl::edited, this, [this, &field] { onFieldEdited(field); });
        // What the settings resolve to, under the fields it derives from.
        if (field.key == "step_size") {
            derived_ = make_note("derivedBatchLabel");
            memory_plan_ = make_note("memoryPlanLabel");
            run_estimate_ = make_note("runEstimateLabel");
            run_estimate_->hide();
            group->addNote(derived_);
            group->addNote(memory_plan_);
            fit_check_ = new FitCheck;
            fit_check_->setObjectName(QStringLiteral("fitCheck"));
            group->addNote(fit_check_);
            group->addNote(run_estimate_);
        }
    }
    // The model's size closes the group of the model's fields, whichever is last.
    model_size_ = make_note("modelSizeLabel");
    by_name.at(find_config_field("model")->group)->addNote(model_size_);
    layout->addStretch(1);
    setWidget(content);
}

void ConfigPanel::setDevices(const std::vector<DeviceInfo>& devices, const QString& cudaUnavailableReason) {
    device_->setDevices(devices, cudaUnavailableReason);
}

RunConfig ConfigPanel::config() const {
    RunConfig c = base_;
    for (const FieldControl* control : controls_) control->store(c);
    // A field whose condition fails (preload on the CPU, momentum for Adam) takes its default.
    const RunConfig defaults = default_config(c.model);
    for (const FieldControl* control : controls_)
        if (!control->field().condition_holds(c)) copy_field_value(control->field(), defaults, c);
    return c;
}

void ConfigPanel::setConfig(const RunConfig& c) {
    base_ = c;
    for (FieldControl* control : controls_) control->load(c);
    refresh();
}

void ConfigPanel::onFieldEdited(const ConfigField& field) {
    RunConfig c = config();
    if (field.key == "model") {
        // A family brings its own defaults (a GPT trains on text with AdamW and warmup); the
        // device and the techniques are the user's choice of machine and stay.
        RunConfig fresh = default_config(c.model);
        for (const ConfigField& kept : config_fields())
            if (kept_across_families(kept)) copy_field_value(kept, c, fresh);
        setConfig(fresh);
        return;
    }
    if (field.key == "optimizer.kind") {
        // A new optimizer starts from its own PyTorch defaults (learning rate, epsilon, ...).
        for (const ConfigField& each : config_fields())
            if (const auto* optional = std::get_if<OptionalRealAccess>(&each.access); optional && each.group == field.group)
                optional->member.write(c).reset();
        setConfig(c);
        return;
    }
    refresh();
}

void ConfigPanel::refresh() {
    const RunConfig c = config();
    for (SettingsGroup* group : groups_) group->showRowsFor(c);
    revalidate(c);
    updateDerivedText(c);
    emit configChanged();
}

void ConfigPanel::showError(const std::string& key, const QString& message) {
    if (error_.isEmpty()) error_ = message;
    for (SettingsGroup* group : groups_)
        if (group->showError(key, message)) return;
    general_error_->setText(message);
    general_error_->show();
}

void ConfigPanel::revalidate(const RunConfig& c) {
    const bool was_valid = isValid();
    error_.clear();
    plan_.reset();
    fit_check_->setRun(c, nullptr);
    general_error_->hide();
    for (SettingsGroup* group : groups_) group->clearErrors();

    // Text a control cannot read, then the engine's own checks, then the data, then the plan
    // (which is where a memory budget is found too small).
    RunConfig scratch = c;
    for (const FieldControl* control : controls_) {
        const QString problem = control->store(scratch);
        if (!problem.isEmpty()) showError(control->field().key, problem);
    }
    if (!isValid()) {
        if (was_valid) emit validityChanged(false);
        return;
    }
    try {
        validate(c);
        if (c.processes > 1)
            if (const std::string why = several_processes_unavailable(c.processes); !why.empty())
                throw Error(why, "processes");
        datasets_.request(c);
        if (const auto data = datasets_.find(c)) {
            plan_ = plan_run(c, *data);
            fit_check_->setRun(c, data);
        } else {
            const QString data_error = datasets_.errorFor(c);
            if (!data_error.isEmpty()) showError("dataset", data_error);
        }
    } catch (const Error& error) {
        showError(error.key(), QString::fromUtf8(error.what()));
    } catch (const std::exception& error) {
        showError("", QString::fromUtf8(error.what()));
    }
    if (was_valid != isValid()) emit validityChanged(isValid());
}

void ConfigPanel::updateDerivedText(const RunConfig& c) {
    if (c.step_size < 1 || c.batch_size < 1 || c.step_size > c.batch_size) {
        derived_->setText(tr("global batch %1 cannot be split into %2 micro-batches").arg(c.batch_size).arg(c.step_size));
        memory_plan_->clear();
        model_size_->clear();
        return;
    }
    // Each data-parallel process (each copy of a pipeline's stages) takes a share of the global
    // batch and cuts it into step_size micro-batches.
    const int64_t processes = std::max<int64_t>(1, data_parallel_processes(c));
    const bool pipeline = c.pipeline_stages > 1;
    const auto shares = split_micro_batches(c.batch_size, std::min(processes, c.batch_size));
    const auto micro = split_micro_batches(shares.front(), std::min(c.step_size, shares.front()));
    const int64_t smallest = split_micro_batches(shares.back(), std::min(c.step_size, shares.back())).back();
    QString text = tr("global batch %1 = micro-batch %2 × step_size %3").arg(c.batch_size).arg(micro.front()).arg(c.step_size);
    if (processes > 1) text += pipeline ? tr(" × %1 copies").arg(processes) : tr(" × processes %1").arg(processes);
    if (pipeline) text += tr(", over %1 pipeline stages (%2 processes)").arg(c.pipeline_stages).arg(c.processes);
    // How the cores are shared: threads x processes stay within the cores unless asked.
    if (c.processes > 1 && plan_ && plan_->threads > 0)
        text += plan_->threads == 1 ? tr(" (1 thread each)") : tr(" (%1 threads each)").arg(plan_->threads);
    if (micro.front() != smallest) text += tr(" (micro-batches of %1 and %2)").arg(micro.front()).arg(smallest);
    if (c.model == ModelFamily::gpt)
        text += tr("\n%L1 tokens per update = global batch × context %2")
                    .arg(c.batch_size * c.block_size)
                    .arg(c.block_size);

    if (plan_) {
        const QString samples = plan_->tokens_per_sample > 0 ? tr("training windows") : tr("training samples");
        text += tr("\n%L1 updates/epoch · %L2 total updates · %L3 %4")
                    .arg(plan_->updates_per_epoch)
                    .arg(plan_->total_updates)
                    .arg(plan_->train_samples)
                    .arg(samples);
        QString memory = (pipeline        ? tr("Memory plan of process 0 (stage 1): %1 (%2)")
                          : processes > 1 ? tr("Memory plan per process: %1 (%2)")
                                          : tr("Memory plan: %1 (%2)"))
                             .arg(q(format_bytes(plan_->planned_total())),
                                                        categories_text(plan_->planned_bytes));
        if (c.memory_limit_bytes > 0)
            memory += tr("; fits the %1 budget").arg(q(format_bytes(c.memory_limit_bytes)));
        if (!plan_->auto_fit_note.empty()) memory += QStringLiteral("\n") + q(plan_->auto_fit_note);
        if (const std::string note = checkpointing_note(*plan_); !note.empty()) memory += QStringLiteral("\n") + q(note);
        if (const std::string note = recomputed_attention_note(*plan_); !note.empty()) memory += QStringLiteral("\n") + q(note);
        if (plan_->fused_traffic_bytes > 0)  // what the Fused kernels setting changes (CPU)
            memory += tr("\nMemory traffic per update: %1 fused, %2 one op at a time")
                          .arg(q(format_bytes(plan_->fused_traffic_bytes)), q(format_bytes(plan_->eager_traffic_bytes)));
        if (!plan_->products.empty())  // what the CPU products setting chose on this CPU
            memory += tr("\nMatrix products: %1").arg(q(plan_->products));
        memory_plan_->setText(memory);
        const double per_unit = plan_->tokens_per_sample > 0
                                    ? plan_->flops_per_sample / static_cast<double>(plan_->tokens_per_sample)
                                    : plan_->flops_per_sample;
        const QString trainable = plan_->trainable_parameter_count < plan_->parameter_count
                                      ? tr(" (%L1 trainable)").arg(plan_->trainable_parameter_count)
                                      : QString();
        model_size_->setText(tr("%1 · %L2 parameters%3 · %4 per %5 (forward + backward)")
                                 .arg(q(plan_->model_summary))
                                 .arg(plan_->parameter_count)
                                 .arg(trainable)
                                 .arg(flops_text(per_unit))
                                 .arg(plan_->tokens_per_sample > 0 ? tr("token") : tr("sample")));
    } else {
        memory_plan_->setText(datasets_.isLoading(c) ? tr("loading the data set to plan the run…")
                              : isValid()            ? QString()
                                                     : tr("Memory plan: fix the setting marked in red first."));
        model_size_->setText(datasets_.isLoading(c) ? tr("loading the data set to size the model…") : QString());
    }
    derived_->setText(text);
}

void ConfigPanel::showRunEstimate(const QString& text) {
    run_estimate_->setText(text);
    run_estimate_->setVisible(!text.isEmpty());
}

}  // namespace trainbench::ui
