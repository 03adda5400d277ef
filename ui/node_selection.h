#pragma once
// The node selected in the schedule views: one object the graph view, the schedule matrix, the
// saved-residuals table and teach mode share, so selecting a node in one selects it in all.
#include <QObject>

namespace rl::ui {

class NodeSelection : public QObject {
    Q_OBJECT
  public:
    using QObject::QObject;
    int node() const { return node_; }  // -1: none
    // Emits changed() only when the node differs (views that react by selecting do not loop).
    void select(int node) {
        if (node == node_) return;
        node_ = node;
        emit changed(node);
    }

  signals:
    void changed(int node);

  private:
    int node_ = -1;
};

}  // namespace rl::ui
