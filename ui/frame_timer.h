#pragma once
// Redraws coalesced to at most one per frame: every change calls request(), which starts a 16 ms
// single-shot timer unless one is already pending; flush() runs the redraw now (for tests and
// export) in place of the pending one.
#include <QObject>
#include <QTimer>
#include <functional>
#include <utility>

namespace rl::ui {

class FrameTimer {
  public:
    explicit FrameTimer(std::function<void()> run) : run_(std::move(run)) {
        timer_.setSingleShot(true);
        timer_.setInterval(16);  // at most one run per frame
        QObject::connect(&timer_, &QTimer::timeout, &timer_, [this] { run_(); });
    }

    void request() {
        if (!timer_.isActive()) timer_.start();
    }
    void flush() {
        timer_.stop();
        run_();
    }

  private:
    std::function<void()> run_;
    QTimer timer_;
};

}  // namespace rl::ui
