#pragma once
#include <QGroupBox>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "field_control.hpp"

class QGridLayout;
class QLabel;

namespace trainbench::ui {

// One group of the settings form (Data, Model, Batching, ...): a labelled row per field, its
// tooltip from the field table, and a hidden error line beneath it that the panel fills when
// the engine rejects that field. Rows of fields that do not apply to the configuration (a
// GPT's heads for an MLP, momentum for Adam) are hidden rather than disabled.
class SettingsGroup : public QGroupBox {
    Q_OBJECT
public:
    explicit SettingsGroup(const QString& title, QWidget* parent = nullptr);

    // Adds a row for the control, which the group then owns.
    FieldControl* addField(std::unique_ptr<FieldControl> control);
    // A full-width line of derived text (the plan under the batching sliders).
    void addNote(QWidget* note);
    const std::vector<FieldControl*>& controls() const { return controls_; }

    void showRowsFor(const RunConfig& config);
    // Shows `message` under the field's row; false when the field is not in this group.
    bool showError(const std::string& key, const QString& message);
    void clearErrors();

private:
    QGridLayout* grid_;
    std::vector<FieldControl*> controls_;
    std::map<FieldControl*, QLabel*> labels_;
    std::map<std::string, QLabel*> errors_;
};

}  // namespace trainbench::ui
