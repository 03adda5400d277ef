#pragma once
// Guided tours for first-time users: a few steps each over a small network, with the real engine
// behind them. A step says which network and strategies to load, which view to show and where
// teach mode should stand; its text is written when the step is shown, from figures the engine
// computes then (peaks, recompute times, Revolve's repetition number, the saved residuals), so
// the words always match what the window draws.
#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <vector>

QT_BEGIN_NAMESPACE
class QLabel;
class QPushButton;
QT_END_NAMESPACE

namespace rl::ui {

enum class TourView { Memory, Pareto, Graph, Matrix, Residuals };

struct TourStep {
    QString title;
    QString network;         // a preset spec
    QStringList strategies;  // ticked, in order
    int teach_left = 0;      // index into strategies
    int teach_right = -1;
    // Where teach mode stands: "start", "peak" (the left strategy's peak instruction),
    // "recompute" (its first recompute), "backward" (its first backward), "end".
    QString teach_at = QStringLiteral("start");
    TourView view = TourView::Memory;
    std::function<QString()> text;  // HTML; runs the engine (small networks: milliseconds)
};

struct Tour {
    QString name;   // stable id: "activations", "sqrt-n", "revolve", "policy", "whole-function"
    QString title;  // "Why activations dominate memory"
    std::vector<TourStep> steps;
};

const std::vector<Tour>& tours();

// The tour's text and its Back / Next buttons; `apply` loads a step into the window.
class TourPanel : public QWidget {
    Q_OBJECT
  public:
    explicit TourPanel(QWidget* parent = nullptr);
    void start(int tour);
    void showStep(int step);
    int tour() const { return tour_; }
    int step() const { return step_; }
    QString text() const;
    std::function<void(const TourStep&)> apply;

  signals:
    void finished();

  private:
    int tour_ = -1, step_ = 0;
    QLabel* title_ = nullptr;
    QLabel* body_ = nullptr;
    QPushButton* back_ = nullptr;
    QPushButton* next_ = nullptr;
};

}  // namespace rl::ui
