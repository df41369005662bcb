#include "field_control.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QSpinBox>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "trainbench/error.hpp"

namespace trainbench::ui {
namespace {

QString q(const std::string& text) { return QString::fromStdString(text); }

// Reals are shown with up to 10 significant digits; a value the user did not edit is written
// back exactly as it was loaded, so a round trip through the form never rounds it.
QString real_text(double value) { return QString::number(value, 'g', 10); }

std::optional<double> parse_real(const QString& text) {
    bool ok = false;
    const double value = text.trimmed().toDouble(&ok);
    if (!ok) return std::nullopt;
    return value;
}

class IntegerControl : public FieldControl {
public:
    explicit IntegerControl(const ConfigField& field) : FieldControl(field), spin_(new QSpinBox) {
        spin_->setObjectName(q(field.key));
        const double min = field.range && field.range->min ? *field.range->min : 0.0;
        spin_->setRange(static_cast<int>(min), std::numeric_limits<int>::max());
        spin_->setAccelerated(true);
        spin_->setGroupSeparatorShown(true);
        if (!field.zero_label.empty() && min == 0.0) spin_->setSpecialValueText(q(field.zero_label));
        connect(spin_, &QSpinBox::valueChanged, this, [this] {
            if (!loading_) emit edited();
        });
    }
    QWidget* widget() const override { return spin_; }
    void load(const RunConfig& config) override {
        loading_ = true;
        std::visit(
            [&](const auto& access) {
                using Access = std::decay_t<decltype(access)>;
                if constexpr (std::is_same_v<Access, MemberAccess<int64_t>> || std::is_same_v<Access, MemberAccess<int>> ||
                              std::is_same_v<Access, MemberAccess<uint64_t>>) {
                    loaded_ = static_cast<double>(access.read(config));
                    spin_->setValue(static_cast<int>(std::clamp<double>(loaded_, spin_->minimum(), spin_->maximum())));
                }
            },
            field_.access);
        loading_ = false;
    }
    QString store(RunConfig& config) const override {
        // A value beyond the spin box's range (a seed from a file) stays as loaded until edited.
        const bool untouched = static_cast<double>(spin_->value()) ==
                               std::clamp<double>(loaded_, spin_->minimum(), spin_->maximum());
        std::visit(
            [&](const auto& access) {
                using Access = std::decay_t<decltype(access)>;
                if constexpr (std::is_same_v<Access, MemberAccess<int64_t>> || std::is_same_v<Access, MemberAccess<int>> ||
                              std::is_same_v<Access, MemberAccess<uint64_t>>) {
                    using T = std::decay_t<decltype(access.read(config))>;
                    access.write(config) = untouched ? static_cast<T>(loaded_) : static_cast<T>(spin_->value());
                }
            },
            field_.access);
        return {};
    }

private:
    QSpinBox* spin_;
    double loaded_ = 0.0;
    bool loading_ = false;
};

class RealControl : public FieldControl {
public:
    explicit RealControl(const ConfigField& field) : FieldControl(field), edit_(new QLineEdit) {
        edit_->setObjectName(q(field.key));
        if (!field.zero_label.empty()) edit_->setPlaceholderText(q(field.zero_label));
        connect(edit_, &QLineEdit::textEdited, this, &FieldControl::edited);
    }
    QWidget* widget() const override { return edit_; }
    void load(const RunConfig& config) override {
        loaded_ = std::get<MemberAccess<double>>(field_.access).read(config);
        loaded_text_ = loaded_ == 0.0 && !field_.zero_label.empty() ? QString() : real_text(loaded_);
        edit_->setText(loaded_text_);
    }
    QString store(RunConfig& config) const override {
        double& value = std::get<MemberAccess<double>>(field_.access).write(config);
        if (edit_->text() == loaded_text_) {
            value = loaded_;
            return {};
        }
        if (edit_->text().trimmed().isEmpty() && !field_.zero_label.empty()) {
            value = 0.0;
            return {};
        }
        const auto parsed = parse_real(edit_->text());
        if (!parsed) return QObject::tr("%1 must be a number, e.g. 0.5 or 1e-3.").arg(q(field_.label));
        value = *parsed;
        return {};
    }

private:
    QLineEdit* edit_;
    double loaded_ = 0.0;
    QString loaded_text_;
};

// Empty means "the optimizer's PyTorch default", shown as the placeholder.
class OptionalRealControl : public FieldControl {
public:
    explicit OptionalRealControl(const ConfigField& field) : FieldControl(field), edit_(new QLineEdit) {
        edit_->setObjectName(q(field.key));
        edit_->setClearButtonEnabled(true);
        connect(edit_, &QLineEdit::textEdited, this, &FieldControl::edited);
    }
    QWidget* widget() const override { return edit_; }
    void load(const RunConfig& config) override {
        const auto& access = std::get<OptionalRealAccess>(field_.access);
        loaded_ = access.member.read(config);
        loaded_text_ = loaded_ ? real_text(*loaded_) : QString();
        edit_->setText(loaded_text_);
        edit_->setPlaceholderText(QObject::tr("default: %1").arg(real_text(access.resolved(config))));
    }
    QString store(RunConfig& config) const override {
        auto& value = std::get<OptionalRealAccess>(field_.access).member.write(config);
        if (edit_->text() == loaded_text_) {
            value = loaded_;
            return {};
        }
        if (edit_->text().trimmed().isEmpty()) {
            value.reset();
            return {};
        }
        const auto parsed = parse_real(edit_->text());
        if (!parsed)
            return QObject::tr("%1 must be a number, e.g. 1e-3, or empty for the optimizer's default.")
                .arg(q(field_.label));
        value = *parsed;
        return {};
    }

private:
    QLineEdit* edit_;
    std::optional<double> loaded_;
    QString loaded_text_;
};

class BooleanControl : public FieldControl {
public:
    explicit BooleanControl(const ConfigField& field)
        : FieldControl(field), check_(new QCheckBox) {  // the row's label names it; the tooltip explains
        check_->setObjectName(q(field.key));
        connect(check_, &QCheckBox::toggled, this, [this] {
            if (!loading_) emit edited();
        });
    }
    QWidget* widget() const override { return check_; }
    void load(const RunConfig& config) override {
        loading_ = true;
        check_->setChecked(std::get<MemberAccess<bool>>(field_.access).read(config));
        loading_ = false;
    }
    QString store(RunConfig& config) const override {
        std::get<MemberAccess<bool>>(field_.access).write(config) = check_->isChecked();
        return {};
    }

private:
    QCheckBox* check_;
    bool loading_ = false;
};

class TextControl : public FieldControl {
public:
    explicit TextControl(const ConfigField& field) : FieldControl(field), edit_(new QLineEdit) {
        edit_->setObjectName(q(field.key));
        edit_->setClearButtonEnabled(true);
        connect(edit_, &QLineEdit::textEdited, this, &FieldControl::edited);
    }
    QWidget* widget() const override { return edit_; }
    void load(const RunConfig& config) override {
        edit_->setText(q(std::get<MemberAccess<std::string>>(field_.access).read(config)));
    }
    QString store(RunConfig& config) const override {
        std::get<MemberAccess<std::string>>(field_.access).write(config) = edit_->text().trimmed().toStdString();
        return {};
    }

private:
    QLineEdit* edit_;
};

class ChoiceControl : public FieldControl {
public:
    explicit ChoiceControl(const ConfigField& field) : FieldControl(field), combo_(new QComboBox) {
        combo_->setObjectName(q(field.key));
        for (const auto& name : field.choices()) combo_->addItem(q(name), q(name));
        connect(combo_, &QComboBox::currentIndexChanged, this, [this] {
            if (!loading_) emit edited();
        });
    }
    QWidget* widget() const override { return combo_; }
    void load(const RunConfig& config) override {
        loading_ = true;
        combo_->setCurrentIndex(combo_->findData(q(std::get<ChoiceAccess>(field_.access).read(config))));
        loading_ = false;
    }
    QString store(RunConfig& config) const override {
        std::get<ChoiceAccess>(field_.access).write(config, combo_->currentData().toString().toStdString());
        return {};
    }

private:
    QComboBox* combo_;
    bool loading_ = false;
};

class ByteSizeControl : public FieldControl {
public:
    explicit ByteSizeControl(const ConfigField& field) : FieldControl(field), edit_(new QLineEdit) {
        edit_->setObjectName(q(field.key));
        edit_->setClearButtonEnabled(true);
        edit_->setPlaceholderText(QObject::tr("%1 (e.g. 512MiB)").arg(q(field.zero_label)));
        connect(edit_, &QLineEdit::textEdited, this, &FieldControl::edited);
    }
    QWidget* widget() const override { return edit_; }
    void load(const RunConfig& config) override {
        const int64_t bytes = std::get<MemberAccess<int64_t>>(field_.access).read(config);
        edit_->setText(bytes > 0 ? q(format_bytes(bytes)) : QString());
        loaded_ = bytes;
        loaded_text_ = edit_->text();
    }
    QString store(RunConfig& config) const override {
        int64_t& bytes = std::get<MemberAccess<int64_t>>(field_.access).write(config);
        const QString text = edit_->text().trimmed();
        if (edit_->text() == loaded_text_) {
            bytes = loaded_;  // format_bytes rounds; the loaded value is exact
            return {};
        }
        if (text.isEmpty()) {
            bytes = 0;
            return {};
        }
        try {
            bytes = parse_byte_size(text.toStdString());
        } catch (const Error&) {
            return QObject::tr("%1 must be a size such as 512MiB, 2GiB or 1.5GB (or empty for %2).")
                .arg(q(field_.label), q(field_.zero_label));
        }
        return {};
    }

private:
    QLineEdit* edit_;
    int64_t loaded_ = 0;
    QString loaded_text_;
};

class LayerWidthsControl : public FieldControl {
public:
    explicit LayerWidthsControl(const ConfigField& field) : FieldControl(field), edit_(new QLineEdit) {
        edit_->setObjectName(q(field.key));
        edit_->setPlaceholderText(QStringLiteral("128,128"));
        connect(edit_, &QLineEdit::textEdited, this, &FieldControl::edited);
    }
    QWidget* widget() const override { return edit_; }
    void load(const RunConfig& config) override { edit_->setText(q(field_value_text(field_, config))); }
    QString store(RunConfig& config) const override {
        std::vector<int64_t> widths;
        const QString trimmed = edit_->text().trimmed();
        if (!trimmed.isEmpty()) {  // no hidden layer: a linear model
            for (const QString& part : trimmed.split(',')) {
                bool ok = false;
                const qlonglong width = part.trimmed().toLongLong(&ok);
                if (!ok || width <= 0)
                    return QObject::tr("%1 must be positive widths separated by commas, e.g. 128,128.")
                        .arg(q(field_.label));
                widths.push_back(width);
            }
        }
        std::get<MemberAccess<std::vector<int64_t>>>(field_.access).write(config) = widths;
        return {};
    }

private:
    QLineEdit* edit_;
};

}  // namespace

std::unique_ptr<FieldControl> make_field_control(const ConfigField& field) {
    switch (field.kind) {
        case FieldKind::integer:
        case FieldKind::unsigned_integer: return std::make_unique<IntegerControl>(field);
        case FieldKind::real: return std::make_unique<RealControl>(field);
        case FieldKind::optional_real: return std::make_unique<OptionalRealControl>(field);
        case FieldKind::boolean: return std::make_unique<BooleanControl>(field);
        case FieldKind::text: return std::make_unique<TextControl>(field);
        case FieldKind::choice: return std::make_unique<ChoiceControl>(field);
        case FieldKind::byte_size: return std::make_unique<ByteSizeControl>(field);
        case FieldKind::layer_widths: return std::make_unique<LayerWidthsControl>(field);
    }
    return std::make_unique<TextControl>(field);
}

}  // namespace trainbench::ui
