#pragma once
// An inline message above the charts (KMessageWidget's idea): errors, warnings and notes a user
// should read without a modal dialog, with an optional action ("Use 14.2 MiB").
#include <QFrame>
#include <functional>

QT_BEGIN_NAMESPACE
class QLabel;
class QPushButton;
QT_END_NAMESPACE

namespace rl::ui {

class MessageWidget : public QFrame {
    Q_OBJECT
  public:
    enum class Kind { Info, Warning, Error };
    explicit MessageWidget(QWidget* parent = nullptr);
    void showMessage(Kind kind, const QString& text, const QString& action_text = {},
                     std::function<void()> action = {});
    void dismiss();
    QString text() const;
    Kind kind() const { return kind_; }

  private:
    QLabel* icon_ = nullptr;
    QLabel* text_ = nullptr;
    QPushButton* action_ = nullptr;
    QPushButton* close_ = nullptr;
    std::function<void()> on_action_;
    Kind kind_ = Kind::Info;
};

}  // namespace rl::ui
