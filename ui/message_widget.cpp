#include "ui/message_widget.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QStyle>

namespace rl::ui {

MessageWidget::MessageWidget(QWidget* parent) : QFrame(parent) {
    setObjectName(QStringLiteral("messageWidget"));
    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(10, 6, 6, 6);
    row->setSpacing(10);
    icon_ = new QLabel;
    text_ = new QLabel;
    text_->setWordWrap(true);
    // Callers pass HTML (escaped user text): without RichText, a message with an entity but no
    // tag would be taken for plain text and show "&quot;".
    text_->setTextFormat(Qt::RichText);
    text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    text_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    action_ = new QPushButton;
    action_->setToolTip(QStringLiteral("Apply the suggested fix"));
    close_ = new QPushButton(QStringLiteral("Dismiss"));
    close_->setToolTip(QStringLiteral("Hide this message"));
    close_->setFlat(true);
    row->addWidget(icon_, 0, Qt::AlignTop);
    row->addWidget(text_, 1);
    row->addWidget(action_, 0, Qt::AlignVCenter);
    row->addWidget(close_, 0, Qt::AlignVCenter);
    connect(close_, &QPushButton::clicked, this, &MessageWidget::dismiss);
    connect(action_, &QPushButton::clicked, this, [this] {
        auto f = on_action_;
        dismiss();
        if (f) f();
    });
    hide();
}

void MessageWidget::showMessage(Kind kind, const QString& text, const QString& action_text,
                                std::function<void()> action) {
    kind_ = kind;
    const char* bg = "#e8f1fb";
    const char* border = "#7aa7d6";
    QStyle::StandardPixmap icon = QStyle::SP_MessageBoxInformation;
    if (kind == Kind::Warning) {
        bg = "#fdf3dc";
        border = "#d9a93a";
        icon = QStyle::SP_MessageBoxWarning;
    } else if (kind == Kind::Error) {
        bg = "#fbe7e6";
        border = "#d26a63";
        icon = QStyle::SP_MessageBoxCritical;
    }
    setStyleSheet(QStringLiteral("QFrame#messageWidget { background: %1; border: 1px solid %2; "
                                 "border-radius: 4px; } QLabel { background: transparent; }")
                      .arg(QLatin1String(bg), QLatin1String(border)));
    icon_->setPixmap(style()->standardIcon(icon).pixmap(20, 20));
    text_->setText(text);
    on_action_ = std::move(action);
    action_->setText(action_text);
    action_->setVisible(!action_text.isEmpty() && on_action_);
    show();
}

void MessageWidget::dismiss() {
    on_action_ = {};
    hide();
}

QString MessageWidget::text() const {
    return isHidden() ? QString() : text_->text();
}

}  // namespace rl::ui
