#pragma once
#include <QFrame>

class QLabel;

namespace trainbench::ui {

// A dismissible line above the plots for what went wrong (failed run, export error), visible
// without a modal dialog so the window stays usable.
class MessageBanner : public QFrame {
    Q_OBJECT
public:
    enum class Kind { error, info };
    explicit MessageBanner(QWidget* parent = nullptr);
    void showMessage(const QString& text, Kind kind = Kind::error);
    QString text() const;

private:
    QLabel* label_ = nullptr;
};

}  // namespace trainbench::ui
