#include "message_banner.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QToolButton>

namespace trainbench::ui {

MessageBanner::MessageBanner(QWidget* parent) : QFrame(parent) {
    setObjectName(QStringLiteral("messageBanner"));
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(10, 6, 6, 6);
    label_ = new QLabel;
    label_->setWordWrap(true);
    label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* close = new QToolButton;
    close->setText(QStringLiteral("✕"));
    close->setAutoRaise(true);
    close->setToolTip(tr("Dismiss"));
    connect(close, &QToolButton::clicked, this, &QWidget::hide);
    layout->addWidget(label_, 1);
    layout->addWidget(close);
    hide();
}

void MessageBanner::showMessage(const QString& text, Kind kind) {
    const bool error = kind == Kind::error;
    setStyleSheet(error ? QStringLiteral("#messageBanner { background: #fdecea; border: 1px solid #f5c2c0; border-radius: 4px; }"
                                         " QLabel { color: #8c1d18; }")
                        : QStringLiteral("#messageBanner { background: #e8f1fb; border: 1px solid #b9d3ef; border-radius: 4px; }"
                                         " QLabel { color: #174a7c; }"));
    label_->setText(text);
    show();
}

QString MessageBanner::text() const { return isVisible() ? label_->text() : QString(); }

}  // namespace trainbench::ui
