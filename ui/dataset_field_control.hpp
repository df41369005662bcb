#pragma once
#include "field_control.hpp"

class QComboBox;

namespace trainbench::ui {

// The data set: the model family's own sets by name, files chosen earlier, and entries that
// open a file dialog (a CSV file or IDX folder for an MLP, a text file for a GPT).
class DatasetFieldControl : public FieldControl {
    Q_OBJECT
public:
    explicit DatasetFieldControl(const ConfigField& field);
    QWidget* widget() const override;
    void load(const RunConfig& config) override;
    QString store(RunConfig& config) const override;

private:
    void listFamily(ModelFamily family);
    void select(const QString& spec);
    void onActivated(int index);

    QComboBox* combo_;
    std::optional<ModelFamily> listed_;
    QString selected_;  // the spec in use (the file entries are only ways to choose one)
};

}  // namespace trainbench::ui
