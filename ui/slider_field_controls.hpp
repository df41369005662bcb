#pragma once
#include <optional>

#include "field_control.hpp"

class QDoubleSpinBox;
class QSlider;
class QSpinBox;

namespace trainbench::ui {

// Integer fields a user sweeps rather than types: a slider beside a spin box. The slider's
// object name is the key followed by "_slider".
class IntegerSliderControl : public FieldControl {
    Q_OBJECT
public:
    // power_of_two: the slider moves in powers of two up to 2^max_slider (the batch size);
    // otherwise it runs 1..max_slider (step_size). The spin box takes any value in range.
    IntegerSliderControl(const ConfigField& field, bool power_of_two, int max_slider);
    QWidget* widget() const override { return row_; }
    void load(const RunConfig& config) override;
    QString store(RunConfig& config) const override;

private:
    int sliderPosition(int value) const;
    QWidget* row_;
    QSlider* slider_;
    QSpinBox* spin_;
    bool power_of_two_;
    bool syncing_ = false;
};

// The learning rate: a logarithmic slider (1e-6 .. 1) beside a spin box. It always shows the
// rate the run uses; a rate the user did not touch stays "the optimizer's default".
class LearningRateControl : public FieldControl {
    Q_OBJECT
public:
    explicit LearningRateControl(const ConfigField& field);
    QWidget* widget() const override { return row_; }
    void load(const RunConfig& config) override;
    QString store(RunConfig& config) const override;

private:
    QWidget* row_;
    QSlider* slider_;
    QDoubleSpinBox* spin_;
    std::optional<double> loaded_;
    double loaded_shown_ = 0.0;
    bool syncing_ = false;
};

}  // namespace trainbench::ui
