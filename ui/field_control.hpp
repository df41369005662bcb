#pragma once
#include <QObject>
#include <QString>
#include <memory>

#include "trainbench/config_fields.hpp"

class QWidget;

namespace trainbench::ui {

// The control of one configuration field in the settings form. The field table says what the
// field holds; a control shows it, reads it back into a RunConfig and names a value it cannot
// read (text that is not a number) as an error on its own field.
class FieldControl : public QObject {
    Q_OBJECT
public:
    explicit FieldControl(const ConfigField& field) : field_(field) {}

    const ConfigField& field() const { return field_; }
    // The widget placed in the form; its object name is the field's key.
    virtual QWidget* widget() const = 0;
    virtual void load(const RunConfig& config) = 0;
    // Writes the shown value into `config`; returns what is wrong with it, or an empty string.
    virtual QString store(RunConfig& config) const = 0;

signals:
    // The user changed the value (not emitted by load()).
    void edited();

protected:
    const ConfigField& field_;
};

// The standard control for the field's kind: spin boxes for integers, a line edit for reals
// (they span decades: 3e-4, 0.9, 1e-8), a check box for switches, a combo box for choices.
std::unique_ptr<FieldControl> make_field_control(const ConfigField& field);

}  // namespace trainbench::ui
