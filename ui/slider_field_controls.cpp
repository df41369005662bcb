#include "slider_field_controls.hpp"

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QSlider>
#include <QSpinBox>
#include <algorithm>
#include <cmath>
#include <utility>

namespace trainbench::ui {
namespace {

constexpr int kLrStepsPerDecade = 100;
constexpr double kLrMinExponent = -6;  // the slider spans 1e-6 .. 1
constexpr double kLrMaxExponent = 0;

QWidget* slider_beside(QSlider* slider, QWidget* spin) {
    auto* row = new QWidget;
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(slider, 1);
    layout->addWidget(spin);
    spin->setMinimumWidth(92);
    return row;
}

int lr_to_slider(double lr) {
    const double exponent = std::clamp(std::log10(std::max(lr, 1e-12)), kLrMinExponent, kLrMaxExponent);
    return static_cast<int>(std::lround((exponent - kLrMinExponent) * kLrStepsPerDecade));
}

double slider_to_lr(int position) {
    const double lr = std::pow(10.0, kLrMinExponent + static_cast<double>(position) / kLrStepsPerDecade);
    const double unit = std::pow(10.0, std::floor(std::log10(lr)) - 2);  // 3 significant digits
    return std::round(lr / unit) * unit;
}

}  // namespace

IntegerSliderControl::IntegerSliderControl(const ConfigField& field, bool power_of_two, int max_slider)
    : FieldControl(field), slider_(new QSlider(Qt::Horizontal)), spin_(new QSpinBox), power_of_two_(power_of_two) {
    const QString key = QString::fromStdString(field.key);
    slider_->setObjectName(key + QStringLiteral("_slider"));
    spin_->setObjectName(key);
    slider_->setRange(power_of_two ? 0 : 1, max_slider);
    slider_->setPageStep(1);
    if (power_of_two) slider_->setTickPosition(QSlider::TicksBelow);
    const double min = field.range && field.range->min ? *field.range->min : 1.0;
    spin_->setRange(static_cast<int>(min), 1 << 24);
    spin_->setAccelerated(true);
    spin_->setGroupSeparatorShown(true);
    row_ = slider_beside(slider_, spin_);
    connect(slider_, &QSlider::valueChanged, this, [this](int position) {
        if (syncing_) return;
        spin_->setValue(power_of_two_ ? 1 << position : position);  // emits edited() below
    });
    connect(spin_, &QSpinBox::valueChanged, this, [this](int value) {
        if (syncing_) return;
        const bool was_syncing = std::exchange(syncing_, true);
        slider_->setValue(sliderPosition(value));
        syncing_ = was_syncing;
        emit edited();
    });
}

int IntegerSliderControl::sliderPosition(int value) const {
    if (!power_of_two_) return std::min(value, slider_->maximum());
    return std::clamp(static_cast<int>(std::lround(std::log2(std::max(value, 1)))), 0, slider_->maximum());
}

void IntegerSliderControl::load(const RunConfig& config) {
    const bool was_syncing = std::exchange(syncing_, true);
    const int64_t value = std::get<MemberAccess<int64_t>>(field_.access).read(config);
    spin_->setValue(static_cast<int>(std::clamp<int64_t>(value, spin_->minimum(), spin_->maximum())));
    slider_->setValue(sliderPosition(spin_->value()));
    syncing_ = was_syncing;
}

QString IntegerSliderControl::store(RunConfig& config) const {
    std::get<MemberAccess<int64_t>>(field_.access).write(config) = spin_->value();
    return {};
}

LearningRateControl::LearningRateControl(const ConfigField& field)
    : FieldControl(field), slider_(new QSlider(Qt::Horizontal)), spin_(new QDoubleSpinBox) {
    const QString key = QString::fromStdString(field.key);
    slider_->setObjectName(key + QStringLiteral("_slider"));
    spin_->setObjectName(key);
    slider_->setRange(0, static_cast<int>((kLrMaxExponent - kLrMinExponent) * kLrStepsPerDecade));
    spin_->setDecimals(6);
    spin_->setRange(1e-6, 10.0);
    spin_->setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
    row_ = slider_beside(slider_, spin_);
    connect(slider_, &QSlider::valueChanged, this, [this](int position) {
        if (syncing_) return;
        spin_->setValue(slider_to_lr(position));
    });
    connect(spin_, &QDoubleSpinBox::valueChanged, this, [this](double lr) {
        if (syncing_) return;
        const bool was_syncing = std::exchange(syncing_, true);
        slider_->setValue(lr_to_slider(lr));
        syncing_ = was_syncing;
        emit edited();
    });
}

void LearningRateControl::load(const RunConfig& config) {
    const bool was_syncing = std::exchange(syncing_, true);
    const auto& access = std::get<OptionalRealAccess>(field_.access);
    loaded_ = access.member.read(config);
    spin_->setValue(access.resolved(config));
    loaded_shown_ = spin_->value();
    slider_->setValue(lr_to_slider(access.resolved(config)));
    syncing_ = was_syncing;
}

QString LearningRateControl::store(RunConfig& config) const {
    auto& lr = std::get<OptionalRealAccess>(field_.access).member.write(config);
    // The spin box rounds to 6 decimals: an untouched value is written back as it was loaded.
    if (spin_->value() == loaded_shown_)
        lr = loaded_;
    else
        lr = spin_->value();
    return {};
}

}  // namespace trainbench::ui
