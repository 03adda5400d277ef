#pragma once
// Guided tours for first-time users: a few steps each over a small network, with the real engine
// behind them. A step says which network and strategies to load, which view to show and where
// teach mode should stand; its text is written once the window has planned the step, from the
// rows the window shows for it (TourShown: the results model's rows and the network summary), so
// every figure a step quotes (peaks, recompute times, recomputations, saved residuals) is one the
// table and the charts show. Only closed forms (Revolve's repetition number) are computed apart.
#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <memory>
#include <vector>

#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QLabel;
class QPushButton;
QT_END_NAMESPACE

namespace rl::ui {

enum class TourView { Memory, Pareto, Graph, Matrix, Residuals };

// What the window shows for a tour step once it is planned: the network and the results model's
// rows. A step's text reads its figures from here and from nowhere else.
struct TourShown {
    NetworkSummary network;
    std::vector<StrategyResult> results;
    // The figures the previous step of the same tour showed, when the user came from it (a step
    // may compare with what was on screen a moment ago); null otherwise.
    std::shared_ptr<const TourShown> previous;

    // The row planned for `spec` (a spec of the step's strategies): the same strategy with the
    // same parameter values, defaults filled in, the budget aside; null when there is none.
    const StrategyResult* row(const QString& spec) const;
};

// The index into `results` of the row planned for `spec` (see TourShown::row), or -1.
int tour_row(const std::vector<StrategyResult>& results, const QString& spec);

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
    // HTML, from the figures the window shows for this step; throws when a row it quotes is
    // missing (the panel then says the step could not compute its figures).
    std::function<QString(const TourShown&)> text;
    // > 0: the step sets Setup's host link (GB/s) for offload; 0 leaves it as it is.
    double link_gbps = 0;
};

struct Tour {
    QString name;   // stable id: "activations", "sqrt-n", "revolve", "policy", "whole-function"
    QString title;  // "Why activations dominate memory"
    std::vector<TourStep> steps;
};

const std::vector<Tour>& tours();

// The tour's text and its Back / Next buttons; `apply` loads a step into the window, which
// calls showFigures() with what it shows once the step is planned: the text is written then.
class TourPanel : public QWidget {
    Q_OBJECT
  public:
    explicit TourPanel(QWidget* parent = nullptr);
    void start(int tour);
    void showStep(int step);
    // The window has planned the current step: write its text from what the window shows.
    void showFigures(const TourShown& shown);
    int tour() const { return tour_; }
    int step() const { return step_; }
    QString text() const;
    // What the current step's text was written from (null until the step is planned).
    std::shared_ptr<const TourShown> shown() const { return shown_; }
    std::function<void(const TourStep&)> apply;

  signals:
    void finished();

  private:
    int tour_ = -1, step_ = 0;
    std::shared_ptr<const TourShown> shown_;     // the current step's figures
    std::shared_ptr<const TourShown> previous_;  // the step before, when the user came from it
    QLabel* title_ = nullptr;
    QLabel* body_ = nullptr;
    QPushButton* back_ = nullptr;
    QPushButton* next_ = nullptr;
};

}  // namespace rl::ui
