#pragma once
// The Checkmate-style schedule matrix (Jain et al., "Checkmate: breaking the memory wall with
// optimal tensor rematerialization", MLSys 2020, whose R and S matrices it draws): one row per
// stage — the forward, then each backward step — and one column per node. A cell is blue where the
// node is first computed, orange where it is recomputed, green where its output is kept (live as
// the stage begins), purple where the stage runs the node's backward; a red corner marks a Free.
// Click a column to select its node (shared with the other schedule views); hover for the cell.
// Teach mode outlines the current stage and the cell of the current instruction.
// The wheel zooms around the cell under the pointer, a drag pans, a double-click shows it all.
#include <QImage>
#include <QPointer>
#include <QWidget>
#include <memory>

#include "analysis/explain.h"

namespace rl::ui {

struct ScheduleTrace;
class NodeSelection;

class ScheduleMatrixView : public QWidget {
    Q_OBJECT
  public:
    explicit ScheduleMatrixView(QWidget* parent = nullptr);

    void setSelection(NodeSelection* selection);
    void setTrace(std::shared_ptr<const ScheduleTrace> trace);
    const ScheduleTrace* trace() const { return trace_.get(); }
    const ScheduleMatrix& matrix() const { return matrix_; }
    // Teach mode: the instruction to mark (-1: none).
    void setCurrentInstruction(long index);
    int selectedNode() const { return selected_; }

    // Cell geometry, for tests and the mouse: the cell under a point, or (-1, -1).
    QPoint cellAt(QPoint pos) const;
    QRect cellRect(int stage, int node) const;
    QString cellText(int stage, int node) const;

    QSize sizeHint() const override { return {900, 600}; }

    // Zoom and pan: the cells shown, x = first node, y = first stage, width × height in cells
    // (the whole matrix when not zoomed).
    QRect visibleCells() const { return {n0_, s0_, nv_, sv_}; }
    // Zooms by `factor` (> 1: closer) keeping the cell under `pos` under it; at least 2 × 2 cells.
    void zoomAt(QPoint pos, double factor);
    // Moves the view by whole cells, clamped to the matrix.
    void panBy(int nodes, int stages);
    void resetZoom();

  protected:
    void paintEvent(QPaintEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;

  private:
    void layoutGrid();
    void rebuildImage();

    std::shared_ptr<const ScheduleTrace> trace_;
    ScheduleMatrix matrix_;
    QImage cells_;  // one pixel per cell, scaled when drawn
    QPointer<NodeSelection> selection_;
    int selected_ = -1;
    long current_ = -1;
    QRect grid_;          // the cell area
    int label_left_ = 0;  // width of the stage labels
    int label_top_ = 0;   // height of the node labels
    bool show_columns_ = true, show_rows_ = true;
    int n0_ = 0, s0_ = 0, nv_ = 0, sv_ = 0;  // the visible cells (zoom and pan)
    QPoint press_pos_, drag_from_;
    bool dragging_ = false;
    void setView(int n0, int s0, int nv, int sv);
};

// Writes the matrix of `trace` to `path` by suffix: .png .svg .pdf (drawn at `size`), .json
// (schedule_matrix_json) or .csv (stage, node, flags). Returns "" on success.
QString export_schedule_matrix(const std::shared_ptr<const ScheduleTrace>& trace,
                               const QString& path, QSize size, const QString& title = {});

}  // namespace rl::ui
