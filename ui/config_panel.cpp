#include "config_panel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "dataset_cache.hpp"
#include "run_record.hpp"
#include "trainbench/error.hpp"
#include "trainbench/run_plan.hpp"

namespace trainbench::ui {
namespace {

constexpr int kMaxBatchExponent = 16;       // slider stops at 65,536
constexpr int kLrSliderStepsPerDecade = 100;
constexpr double kLrSliderMinExponent = -6; // 1e-6 .. 1
constexpr double kLrSliderMaxExponent = 0;
const char* const kErrorStyle = "color: #b3261e;";

bool is_synthetic(const QString& spec) {
    return spec == "spirals" || spec == "moons" || spec == "blobs" || spec == "sine";
}

std::optional<std::vector<int64_t>> parse_hidden(const QString& text) {
    std::vector<int64_t> widths;
    const QString trimmed = text.trimmed();
    if (trimmed.isEmpty()) return widths;  // no hidden layer: a linear model
    for (const QString& part : trimmed.split(',')) {
        bool ok = false;
        const qlonglong width = part.trimmed().toLongLong(&ok);
        if (!ok || width <= 0) return std::nullopt;
        widths.push_back(width);
    }
    return widths;
}

std::optional<int64_t> parse_budget(const QString& text) {
    if (text.trimmed().isEmpty()) return 0;
    try {
        return parse_byte_size(text.trimmed().toStdString());
    } catch (const Error&) {
        return std::nullopt;
    }
}

int lr_to_slider(double lr) {
    const double exponent = std::clamp(std::log10(std::max(lr, 1e-12)), kLrSliderMinExponent, kLrSliderMaxExponent);
    return static_cast<int>(std::lround((exponent - kLrSliderMinExponent) * kLrSliderStepsPerDecade));
}

double slider_to_lr(int position) {
    return std::pow(10.0, kLrSliderMinExponent + static_cast<double>(position) / kLrSliderStepsPerDecade);
}

int batch_to_slider(int64_t batch) {
    return std::clamp(static_cast<int>(std::lround(std::log2(static_cast<double>(std::max<int64_t>(batch, 1))))), 0,
                      kMaxBatchExponent);
}

QSpinBox* make_spin(const char* name, int minimum, int maximum) {
    auto* spin = new QSpinBox;
    spin->setObjectName(QString::fromLatin1(name));
    spin->setRange(minimum, maximum);
    spin->setAccelerated(true);
    spin->setGroupSeparatorShown(true);
    return spin;
}

QWidget* slider_with_spin(QSlider* slider, QWidget* spin) {
    auto* row = new QWidget;
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(slider, 1);
    layout->addWidget(spin);
    spin->setMinimumWidth(92);
    return row;
}

void add_combo_item(QComboBox* combo, const QString& text, const QString& data) {
    combo->addItem(text, data);
}

void select_data(QComboBox* combo, const QString& data) {
    const int index = combo->findData(data);
    if (index >= 0) combo->setCurrentIndex(index);
}

}  // namespace

ConfigPanel::ConfigPanel(DatasetCache& datasets, QWidget* parent)
    : QScrollArea(parent), datasets_(datasets) {
    setObjectName(QStringLiteral("configPanel"));
    setWidgetResizable(true);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setFrameShape(QFrame::NoFrame);

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

    layout->addWidget(buildDataGroup());
    layout->addWidget(buildModelGroup());
    layout->addWidget(buildBatchingGroup());
    layout->addWidget(buildOptimizerGroup());
    layout->addWidget(buildDeviceGroup());
    layout->addWidget(buildTechniquesGroup());
    layout->addStretch(1);
    setWidget(content);
    setMinimumWidth(360);

    setDevices(available_devices(), QString::fromStdString(cuda_unavailable_reason()));
    connect(&datasets_, &DatasetCache::finished, this, [this] {
        updateDerivedText();
        revalidate();
    });
    setConfig(RunConfig{});
}

void ConfigPanel::addRow(QFormLayout* form, const QString& label, QWidget* field,
                         const QString& tooltip, const QString& errorKey) {
    auto* name = new QLabel(label);
    name->setToolTip(tooltip);
    field->setToolTip(tooltip);
    for (auto* child : field->findChildren<QWidget*>()) child->setToolTip(tooltip);
    name->setBuddy(field);
    form->addRow(name, field);
    auto* error = new QLabel;
    error->setObjectName(QStringLiteral("error_") + errorKey);
    error->setWordWrap(true);
    error->setStyleSheet(kErrorStyle);
    error->hide();
    form->addRow(error);
    error_labels_[errorKey] = error;
}

static QFormLayout* make_form(QGroupBox* group) {
    auto* form = new QFormLayout(group);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    form->setHorizontalSpacing(10);
    form->setVerticalSpacing(4);
    return form;
}

QWidget* ConfigPanel::buildDataGroup() {
    auto* group = new QGroupBox(tr("Data"));
    auto* form = make_form(group);

    dataset_ = new QComboBox;
    dataset_->setObjectName(QStringLiteral("datasetCombo"));
    add_combo_item(dataset_, tr("Spirals (2-D, 3 classes)"), "spirals");
    add_combo_item(dataset_, tr("Moons (2-D, 2 classes)"), "moons");
    add_combo_item(dataset_, tr("Blobs (2-D, 4 classes)"), "blobs");
    add_combo_item(dataset_, tr("Sine (regression)"), "sine");
    add_combo_item(dataset_, tr("Fashion-MNIST (28×28, 10 classes)"), "fashion-mnist");
    add_combo_item(dataset_, tr("CSV file…"), "csv:");
    add_combo_item(dataset_, tr("IDX folder…"), "idx:");
    connect(dataset_, &QComboBox::activated, this, &ConfigPanel::onDatasetChosen);
    connect(dataset_, &QComboBox::currentIndexChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Dataset"), dataset_,
           tr("Which data to train on. The synthetic sets are tiny and fast; Fashion-MNIST (60,000 images, "
              "decoded per batch) makes loading cost and memory realistic."),
           "dataset");

    synthetic_samples_ = make_spin("syntheticSamplesSpin", 100, 10'000'000);
    synthetic_samples_->setSingleStep(1000);
    connect(synthetic_samples_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Samples"), synthetic_samples_,
           tr("Rows generated for a synthetic set. More rows mean more updates per epoch (longer epochs); "
              "memory per update stays the same."),
           "synthetic_samples");

    val_fraction_ = new QDoubleSpinBox;
    val_fraction_->setObjectName(QStringLiteral("valFractionSpin"));
    val_fraction_->setRange(0.0, 0.9);
    val_fraction_->setSingleStep(0.05);
    val_fraction_->setDecimals(2);
    connect(val_fraction_, &QDoubleSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Validation share"), val_fraction_,
           tr("Share of rows held out for validation after each epoch (Fashion-MNIST uses its test set). "
              "Validation adds a little time at each epoch end and no training memory."),
           "val_fraction");

    seed_ = make_spin("seedSpin", 0, 2'000'000'000);
    connect(seed_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Seed"), seed_,
           tr("Seeds the data order and the weight initialisation: the same seed repeats a run exactly. "
              "No effect on speed or memory."),
           "seed");
    return group;
}

QWidget* ConfigPanel::buildModelGroup() {
    auto* group = new QGroupBox(tr("Model"));
    auto* form = make_form(group);

    hidden_ = new QLineEdit;
    hidden_->setObjectName(QStringLiteral("hiddenEdit"));
    hidden_->setPlaceholderText(QStringLiteral("128,128"));
    connect(hidden_, &QLineEdit::textChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Hidden layers"), hidden_,
           tr("Widths of the hidden layers, comma separated. Parameters, gradients and optimizer state grow "
              "with the product of neighbouring widths; activations with width × micro-batch."),
           "hidden");

    activation_ = new QComboBox;
    activation_->setObjectName(QStringLiteral("activationCombo"));
    for (auto kind : {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid})
        add_combo_item(activation_, QString::fromStdString(to_string(kind)), QString::fromStdString(to_string(kind)));
    connect(activation_, &QComboBox::currentIndexChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Activation"), activation_,
           tr("Non-linearity between layers. ReLU is the cheapest; GELU, tanh and sigmoid cost a little more "
              "compute. Memory is the same."),
           "activation");
    return group;
}

QWidget* ConfigPanel::buildBatchingGroup() {
    auto* group = new QGroupBox(tr("Batching"));
    auto* form = make_form(group);

    batch_slider_ = new QSlider(Qt::Horizontal);
    batch_slider_->setObjectName(QStringLiteral("batchSizeSlider"));
    batch_slider_->setRange(0, kMaxBatchExponent);
    batch_slider_->setPageStep(1);
    batch_slider_->setTickPosition(QSlider::TicksBelow);
    batch_ = make_spin("batchSizeSpin", 1, 1 << 20);
    connect(batch_slider_, &QSlider::valueChanged, this, [this](int exponent) {
        if (updating_) return;
        batch_->setValue(1 << exponent);
    });
    connect(batch_, &QSpinBox::valueChanged, this, [this](int batch) {
        const bool was_updating = std::exchange(updating_, true);
        batch_slider_->setValue(batch_to_slider(batch));
        updating_ = was_updating;
        onControlsChanged();
    });
    addRow(form, tr("Batch size"), slider_with_spin(batch_slider_, batch_),
           tr("Samples per optimizer update (the global batch); the slider moves in powers of two. Larger "
              "batches keep the cores busier (more samples/s) and make fewer updates; activation memory "
              "grows with the micro-batch."),
           "batch_size");

    step_slider_ = new QSlider(Qt::Horizontal);
    step_slider_->setObjectName(QStringLiteral("stepSizeSlider"));
    step_slider_->setRange(1, 64);
    step_ = make_spin("stepSizeSpin", 1, 1 << 20);
    connect(step_slider_, &QSlider::valueChanged, this, [this](int steps) {
        if (updating_) return;
        step_->setValue(steps);
    });
    connect(step_, &QSpinBox::valueChanged, this, [this](int steps) {
        const bool was_updating = std::exchange(updating_, true);
        step_slider_->setValue(std::min(steps, 64));
        updating_ = was_updating;
        onControlsChanged();
    });
    addRow(form, tr("step_size"), slider_with_spin(step_slider_, step_),
           tr("Gradient accumulation: the global batch is split into this many micro-batches whose gradients "
              "add up before one update. Activation memory shrinks with the micro-batch; each update takes "
              "somewhat longer, and the update itself is the same."),
           "step_size");

    derived_ = new QLabel;
    derived_->setObjectName(QStringLiteral("derivedBatchLabel"));
    derived_->setWordWrap(true);
    derived_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    derived_->setStyleSheet(QStringLiteral("color: palette(text); background: palette(alternate-base); "
                                           "border-radius: 4px; padding: 4px 6px;"));
    form->addRow(derived_);
    run_estimate_ = new QLabel;
    run_estimate_->setObjectName(QStringLiteral("runEstimateLabel"));
    run_estimate_->setWordWrap(true);
    run_estimate_->hide();
    form->addRow(run_estimate_);

    epochs_ = make_spin("epochsSpin", 1, 100000);
    connect(epochs_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Epochs"), epochs_,
           tr("Passes over the training set. Time grows in proportion; memory does not."), "epochs");

    max_steps_ = make_spin("maxStepsSpin", 0, 100'000'000);
    max_steps_->setSpecialValueText(tr("no limit"));
    connect(max_steps_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Max updates"), max_steps_,
           tr("Stop after this many updates even before the last epoch ends. Handy for quick timing runs; "
              "no effect on memory."),
           "max_steps");
    return group;
}

QWidget* ConfigPanel::buildOptimizerGroup() {
    auto* group = new QGroupBox(tr("Optimizer"));
    auto* form = make_form(group);

    optimizer_ = new QComboBox;
    optimizer_->setObjectName(QStringLiteral("optimizerCombo"));
    for (auto kind : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::rmsprop,
                      OptimizerKind::adagrad})
        add_combo_item(optimizer_, QString::fromStdString(to_string(kind)), QString::fromStdString(to_string(kind)));
    connect(optimizer_, &QComboBox::currentIndexChanged, this, [this] {
        if (!updating_) {
            // A new optimizer starts from its own PyTorch default learning rate.
            OptimizerConfig defaults;
            defaults.kind = parse_optimizer(optimizer_->currentData().toString().toStdString());
            lr_->setValue(defaults.resolved_lr());
        }
        onControlsChanged();
    });
    addRow(form, tr("Optimizer"), optimizer_,
           tr("Update rule, as torch.optim defines it. Optimizer state: SGD none (1× parameters with momentum), "
              "RMSprop and Adagrad 1×, Adam and AdamW 2× the parameters. Choosing one sets its default "
              "learning rate."),
           "optimizer");

    lr_slider_ = new QSlider(Qt::Horizontal);
    lr_slider_->setObjectName(QStringLiteral("learningRateSlider"));
    lr_slider_->setRange(0, static_cast<int>((kLrSliderMaxExponent - kLrSliderMinExponent) * kLrSliderStepsPerDecade));
    lr_ = new QDoubleSpinBox;
    lr_->setObjectName(QStringLiteral("learningRateSpin"));
    lr_->setDecimals(6);
    lr_->setRange(1e-6, 10.0);
    lr_->setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
    connect(lr_slider_, &QSlider::valueChanged, this, [this](int position) {
        if (updating_) return;
        const double lr = slider_to_lr(position);
        const double rounded = std::pow(10.0, std::floor(std::log10(lr)) - 2);  // 3 significant digits
        lr_->setValue(std::round(lr / rounded) * rounded);
    });
    connect(lr_, &QDoubleSpinBox::valueChanged, this, [this](double lr) {
        const bool was_updating = std::exchange(updating_, true);
        lr_slider_->setValue(lr_to_slider(lr));
        updating_ = was_updating;
        onControlsChanged();
    });
    addRow(form, tr("Learning rate"), slider_with_spin(lr_slider_, lr_),
           tr("Step size of each update; the slider is logarithmic (1e-6 to 1). No effect on speed or memory, "
              "but too high a rate diverges and the run stops with a message."),
           "lr");

    schedule_ = new QComboBox;
    schedule_->setObjectName(QStringLiteral("scheduleCombo"));
    for (auto kind : {ScheduleKind::constant, ScheduleKind::linear, ScheduleKind::cosine, ScheduleKind::step})
        add_combo_item(schedule_, QString::fromStdString(to_string(kind)), QString::fromStdString(to_string(kind)));
    connect(schedule_, &QComboBox::currentIndexChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Schedule"), schedule_,
           tr("How the learning rate changes over the run after warmup; applied once per update. Free in "
              "speed and memory."),
           "schedule");

    warmup_ = make_spin("warmupSpin", 0, 10'000'000);
    warmup_->setSpecialValueText(tr("none"));
    connect(warmup_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Warmup updates"), warmup_,
           tr("Updates over which the learning rate ramps up linearly. Helps large batches start stably; "
              "free in speed and memory."),
           "warmup");

    clip_ = new QDoubleSpinBox;
    clip_->setObjectName(QStringLiteral("clipSpin"));
    clip_->setRange(0.0, 1e6);
    clip_->setDecimals(2);
    clip_->setSingleStep(0.5);
    clip_->setSpecialValueText(tr("off"));
    connect(clip_, &QDoubleSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Clip grad norm"), clip_,
           tr("Scales the gradients down when their global L2 norm exceeds this value. Costs one extra pass "
              "over the gradients per update; no extra memory."),
           "clip");
    return group;
}

QWidget* ConfigPanel::buildDeviceGroup() {
    auto* group = new QGroupBox(tr("Precision && device"));
    auto* form = make_form(group);

    precision_ = new QComboBox;
    precision_->setObjectName(QStringLiteral("precisionCombo"));
    add_combo_item(precision_, tr("fp32"), "fp32");
    add_combo_item(precision_, tr("fp16 mixed"), "fp16");
    add_combo_item(precision_, tr("bf16 mixed"), "bf16");
    connect(precision_, &QComboBox::currentIndexChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Precision"), precision_,
           tr("Mixed precision keeps fp32 master weights but feeds 16-bit copies to the matrix products and "
              "stores saved activations in 16 bits (about half the activation memory); fp16 adds a dynamic "
              "loss scale. On the CPU 16-bit math is emulated (rounded to 16 bits, multiplied in fp32), so "
              "expect no speed-up there."),
           "precision");

    device_ = new QComboBox;
    device_->setObjectName(QStringLiteral("deviceCombo"));
    connect(device_, &QComboBox::currentIndexChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Device"), device_,
           tr("Where the run computes. CUDA trains on the GPU and reports the driver's memory figures next to "
              "the engine's own counters."),
           "device");

    threads_ = make_spin("threadsSpin", 0, std::max(1, QThread::idealThreadCount()) * 2);
    threads_->setSpecialValueText(tr("all cores"));
    connect(threads_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("CPU threads"), threads_,
           tr("Threads for the CPU matrix products. More threads speed up wide layers; tiny layers gain little "
              "and can even slow down. No effect on memory."),
           "threads");
    return group;
}

QWidget* ConfigPanel::buildTechniquesGroup() {
    auto* group = new QGroupBox(tr("Efficiency techniques"));
    auto* form = make_form(group);

    memory_budget_ = new QLineEdit;
    memory_budget_->setObjectName(QStringLiteral("memoryBudgetEdit"));
    memory_budget_->setPlaceholderText(tr("no limit (e.g. 512MiB)"));
    memory_budget_->setClearButtonEnabled(true);
    connect(memory_budget_, &QLineEdit::textChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Memory budget"), memory_budget_,
           tr("Makes the engine behave like a device with this much memory. A run whose plan exceeds it fails "
              "before training and says how much it needs and which knob would make it fit."),
           "memory_limit");

    auto_fit_ = new QCheckBox(tr("raise step_size until it fits"));
    auto_fit_->setObjectName(QStringLiteral("autoFitCheck"));
    connect(auto_fit_, &QCheckBox::toggled, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Auto-fit"), auto_fit_,
           tr("Keeps the global batch but doubles step_size (halving the micro-batch) until the run fits the "
              "memory budget: same training dynamics, a little slower per update. Needs a budget."),
           "auto_fit");

    checkpointing_ = new QCheckBox(tr("recompute activations in backward"));
    checkpointing_->setObjectName(QStringLiteral("checkpointingCheck"));
    connect(checkpointing_, &QCheckBox::toggled, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Grad checkpointing"), checkpointing_,
           tr("Keeps only some layers' inputs and recomputes the rest during backward. Activation memory "
              "drops; each update takes longer for the extra forward work."),
           "gradient_checkpointing");

    empty_cache_ = make_spin("emptyCacheSpin", 0, 1'000'000);
    empty_cache_->setSpecialValueText(tr("never"));
    empty_cache_->setPrefix(tr("every "));
    empty_cache_->setSuffix(tr(" updates"));
    connect(empty_cache_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Empty cache"), empty_cache_,
           tr("Releases the allocator's cached free blocks every N updates. Lowers peak reserved memory; "
              "re-allocating afterwards makes updates slower (often ~10%)."),
           "empty_cache");

    prefetch_ = make_spin("prefetchSpin", 0, 64);
    prefetch_->setSpecialValueText(tr("off (load inline)"));
    prefetch_->setSuffix(tr(" micro-batches"));
    connect(prefetch_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Prefetch"), prefetch_,
           tr("A loader thread prepares this many micro-batches ahead, hiding data loading behind compute. "
              "Costs memory for the prepared batches."),
           "prefetch");

    preload_device_ = new QCheckBox(tr("keep training set on the GPU"));
    preload_device_->setObjectName(QStringLiteral("preloadDeviceCheck"));
    connect(preload_device_, &QCheckBox::toggled, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Preload to device"), preload_device_,
           tr("CUDA only: copies the whole training set to the GPU once instead of once per micro-batch. "
              "Faster when it fits; uses device memory for the data."),
           "preload_device");

    checkpoint_every_ = make_spin("checkpointEverySpin", 0, 100'000'000);
    checkpoint_every_->setSpecialValueText(tr("never"));
    checkpoint_every_->setPrefix(tr("every "));
    checkpoint_every_->setSuffix(tr(" updates"));
    connect(checkpoint_every_, &QSpinBox::valueChanged, this, &ConfigPanel::onControlsChanged);
    addRow(form, tr("Checkpoints"), checkpoint_every_,
           tr("Saves model, optimizer, loss scale and data position so a stopped run can be resumed. Each save "
              "takes time; no extra training memory."),
           "checkpoint");
    return group;
}

void ConfigPanel::setDevices(const std::vector<DeviceInfo>& devices, const QString& cudaUnavailableReason) {
    const QString current = device_->currentData().toString();
    const bool was_updating = std::exchange(updating_, true);
    device_->clear();
    bool has_cpu = false, has_cuda = false;
    for (const auto& device : devices) {
        QString label = QString::fromStdString(device.name.empty() ? device.id : device.name);
        if (device.id != "cpu" && device.memory_bytes > 0)
            label += QStringLiteral(" · %1").arg(QString::fromStdString(format_bytes(device.memory_bytes)));
        device_->addItem(label, QString::fromStdString(device.id));
        has_cpu = has_cpu || device.id == "cpu";
        has_cuda = has_cuda || device.id.rfind("cuda", 0) == 0;
    }
    if (!has_cpu) device_->insertItem(0, tr("CPU"), QStringLiteral("cpu"));
    if (!has_cuda) {
        device_->addItem(tr("CUDA (unavailable)"), QStringLiteral("cuda"));
        const int index = device_->count() - 1;
        if (auto* model = qobject_cast<QStandardItemModel*>(device_->model())) model->item(index)->setEnabled(false);
        device_->setItemData(index, cudaUnavailableReason.isEmpty() ? tr("No CUDA device found.") : cudaUnavailableReason,
                             Qt::ToolTipRole);
    }
    const int index = device_->findData(current);
    device_->setCurrentIndex(index >= 0 ? index : 0);
    updating_ = was_updating;
}

void ConfigPanel::selectDataset(const std::string& spec) {
    const QString data = QString::fromStdString(spec);
    int index = dataset_->findData(data);
    if (index < 0) {
        // A file chosen earlier: list it just above the "CSV file…" / "IDX folder…" entries.
        const bool csv = data.startsWith(QStringLiteral("csv:"));
        const QString path = data.mid(4);
        index = dataset_->findData(QStringLiteral("csv:"));
        dataset_->insertItem(index, (csv ? tr("CSV: %1") : tr("IDX: %1")).arg(QFileInfo(path).fileName()), data);
        dataset_->setItemData(index, path, Qt::ToolTipRole);
    }
    dataset_->setCurrentIndex(index);
}

void ConfigPanel::onDatasetChosen(int index) {
    const QString data = dataset_->itemData(index).toString();
    if (data != QStringLiteral("csv:") && data != QStringLiteral("idx:")) return;
    const QString path = data == QStringLiteral("csv:")
                             ? QFileDialog::getOpenFileName(this, tr("Open CSV data"), QString(),
                                                            tr("CSV files (*.csv);;All files (*)"))
                             : QFileDialog::getExistingDirectory(this, tr("Folder with IDX files"));
    if (path.isEmpty()) {
        selectDataset(base_.dataset);
        return;
    }
    selectDataset((data + path).toStdString());
}

RunConfig ConfigPanel::config() const {
    RunConfig c = base_;
    const QString spec = dataset_->currentData().toString();
    if (spec != QStringLiteral("csv:") && spec != QStringLiteral("idx:")) c.dataset = spec.toStdString();
    c.synthetic_samples = synthetic_samples_->value();
    c.val_fraction = val_fraction_->value();
    c.seed = static_cast<uint64_t>(seed_->value());
    if (auto hidden = parse_hidden(hidden_->text())) c.hidden = *hidden;
    c.activation = parse_activation(activation_->currentData().toString().toStdString());
    c.batch_size = batch_->value();
    c.step_size = step_->value();
    c.epochs = epochs_->value();
    c.max_steps = max_steps_->value();
    c.optimizer.kind = parse_optimizer(optimizer_->currentData().toString().toStdString());
    c.optimizer.lr = lr_->value();
    c.schedule.kind = parse_schedule(schedule_->currentData().toString().toStdString());
    c.schedule.warmup_steps = warmup_->value();
    c.clip_grad_norm = clip_->value();
    c.precision = parse_precision(precision_->currentData().toString().toStdString());
    c.device = device_->currentData().toString().toStdString();
    c.threads = threads_->value();
    if (auto budget = parse_budget(memory_budget_->text())) c.memory_limit_bytes = *budget;
    c.auto_fit = auto_fit_->isChecked();
    c.gradient_checkpointing = checkpointing_->isChecked();
    c.empty_cache_steps = empty_cache_->value();
    c.prefetch = prefetch_->value();
    c.preload_device = preload_device_->isChecked();
    c.checkpoint_every = checkpoint_every_->value();
    return c;
}

void ConfigPanel::setConfig(const RunConfig& c) {
    const bool was_updating = std::exchange(updating_, true);
    base_ = c;
    selectDataset(c.dataset);
    synthetic_samples_->setValue(static_cast<int>(std::min<int64_t>(c.synthetic_samples, synthetic_samples_->maximum())));
    val_fraction_->setValue(c.val_fraction);
    seed_->setValue(static_cast<int>(std::min<uint64_t>(c.seed, static_cast<uint64_t>(seed_->maximum()))));
    hidden_->setText(hidden_layers_text(c.hidden));
    select_data(activation_, QString::fromStdString(to_string(c.activation)));
    batch_->setValue(static_cast<int>(std::min<int64_t>(c.batch_size, batch_->maximum())));
    batch_slider_->setValue(batch_to_slider(c.batch_size));
    step_->setValue(static_cast<int>(std::min<int64_t>(c.step_size, step_->maximum())));
    step_slider_->setValue(static_cast<int>(std::min<int64_t>(c.step_size, 64)));
    epochs_->setValue(static_cast<int>(c.epochs));
    max_steps_->setValue(static_cast<int>(c.max_steps));
    select_data(optimizer_, QString::fromStdString(to_string(c.optimizer.kind)));
    lr_->setValue(c.optimizer.resolved_lr());
    lr_slider_->setValue(lr_to_slider(c.optimizer.resolved_lr()));
    select_data(schedule_, QString::fromStdString(to_string(c.schedule.kind)));
    warmup_->setValue(static_cast<int>(c.schedule.warmup_steps));
    clip_->setValue(c.clip_grad_norm);
    select_data(precision_, QString::fromStdString(to_string(c.precision)));
    const int device_index = device_->findData(QString::fromStdString(c.device));
    device_->setCurrentIndex(device_index >= 0 ? device_index : 0);
    threads_->setValue(c.threads);
    memory_budget_->setText(c.memory_limit_bytes > 0 ? QString::fromStdString(format_bytes(c.memory_limit_bytes))
                                                     : QString());
    auto_fit_->setChecked(c.auto_fit);
    checkpointing_->setChecked(c.gradient_checkpointing);
    empty_cache_->setValue(static_cast<int>(c.empty_cache_steps));
    prefetch_->setValue(static_cast<int>(c.prefetch));
    preload_device_->setChecked(c.preload_device);
    checkpoint_every_->setValue(static_cast<int>(c.checkpoint_every));
    updating_ = was_updating;
    onControlsChanged();
}

void ConfigPanel::onControlsChanged() {
    if (updating_) return;
    const QString spec = dataset_->currentData().toString();
    if (spec != QStringLiteral("csv:") && spec != QStringLiteral("idx:")) base_.dataset = spec.toStdString();
    synthetic_samples_->setEnabled(is_synthetic(spec));
    val_fraction_->setEnabled(spec != QStringLiteral("fashion-mnist"));
    const bool on_cuda = device_->currentData().toString().startsWith(QStringLiteral("cuda"));
    preload_device_->setEnabled(on_cuda);
    if (!on_cuda) preload_device_->setChecked(false);
    auto_fit_->setEnabled(!memory_budget_->text().trimmed().isEmpty());
    updateDerivedText();
    revalidate();
    emit configChanged();
}

QString ConfigPanel::errorKeyFor(const QString& message) const {
    static const std::pair<const char*, const char*> kNeedles[] = {
        {"step_size", "step_size"},   {"batch", "batch_size"},        {"hidden", "hidden"},
        {"learning rate", "lr"},      {"lr", "lr"},                   {"warmup", "warmup"},
        {"max_steps", "max_steps"},   {"epoch", "epochs"},            {"clip", "clip"},
        {"thread", "threads"},        {"preload", "preload_device"},  {"device", "device"},
        {"precision", "precision"},   {"auto_fit", "auto_fit"},       {"auto-fit", "auto_fit"},
        {"memory", "memory_limit"},   {"checkpointing", "gradient_checkpointing"},
        {"empty_cache", "empty_cache"}, {"prefetch", "prefetch"},     {"checkpoint", "checkpoint"},
        {"synthetic", "synthetic_samples"}, {"val_fraction", "val_fraction"}, {"dataset", "dataset"},
        {"optimizer", "optimizer"},   {"schedule", "schedule"},       {"activation", "activation"},
    };
    const QString lower = message.toLower();
    for (const auto& [needle, key] : kNeedles)
        if (lower.contains(QLatin1String(needle))) return QString::fromLatin1(key);
    return QStringLiteral("general");
}

void ConfigPanel::showError(const QString& key, const QString& message) {
    error_ = message;
    QLabel* label = general_error_;
    if (auto it = error_labels_.find(key); it != error_labels_.end()) label = it->second;
    label->setText(message);
    label->show();
}

void ConfigPanel::revalidate() {
    const bool was_valid = isValid();
    error_.clear();
    general_error_->hide();
    for (auto& [key, label] : error_labels_) label->hide();

    const RunConfig c = config();
    if (!parse_hidden(hidden_->text())) {
        showError("hidden", tr("Hidden layers must be positive widths separated by commas, e.g. 128,128."));
    } else if (!parse_budget(memory_budget_->text())) {
        showError("memory_limit", tr("Memory budget must be a size such as 512MiB, 2GiB or 1.5GB (or empty for "
                                     "no limit)."));
    } else if (c.step_size > c.batch_size) {
        showError("step_size", tr("step_size %1 is larger than the batch size %2: every micro-batch needs at least "
                                  "one sample. Lower step_size or raise the batch size.")
                                   .arg(c.step_size)
                                   .arg(c.batch_size));
    } else {
        try {
            validate(c);
        } catch (const std::exception& error) {
            const QString message = QString::fromUtf8(error.what());
            showError(errorKeyFor(message), message);
        }
    }
    if (isValid()) {
        const QString data_error = datasets_.errorFor(c);
        if (!data_error.isEmpty()) showError("dataset", data_error);
    }
    if (was_valid != isValid()) emit validityChanged(isValid());
}

void ConfigPanel::updateDerivedText() {
    const RunConfig c = config();
    if (c.step_size < 1 || c.batch_size < 1 || c.step_size > c.batch_size) {
        derived_->setText(tr("global batch %1 cannot be split into %2 micro-batches").arg(c.batch_size).arg(c.step_size));
        return;
    }
    const auto micro = split_micro_batches(c.batch_size, c.step_size);
    QString text = tr("global batch %1 = micro-batch %2 × step_size %3").arg(c.batch_size).arg(micro.front()).arg(c.step_size);
    if (micro.front() != micro.back())
        text += tr(" (micro-batches of %1 and %2)").arg(micro.front()).arg(micro.back());

    datasets_.request(c);
    if (auto data = datasets_.find(c)) {
        const int64_t per_epoch = updates_per_epoch(data->train.count, c.batch_size);
        int64_t total = per_epoch * c.epochs;
        if (c.max_steps > 0) total = std::min(total, c.max_steps);
        text += tr("\n%L1 updates/epoch · %L2 total updates · %L3 training samples")
                    .arg(per_epoch)
                    .arg(total)
                    .arg(data->train.count);
    } else if (datasets_.isLoading(c)) {
        text += tr("\nloading the data set to count its samples…");
    }
    derived_->setText(text);
}

void ConfigPanel::showRunEstimate(const QString& text) {
    run_estimate_->setText(text);
    run_estimate_->setVisible(!text.isEmpty());
}

}  // namespace trainbench::ui
