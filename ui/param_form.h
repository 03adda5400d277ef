#pragma once
// A form built from a ParamSchema (a preset's or a strategy's): a spin box per Int, a size field
// per Bytes ("64MiB"), a combo box per Choice, a line edit otherwise; each with the schema's help
// as its tooltip. It yields the spec's key=value pairs that differ from the defaults.
#include <QString>
#include <QWidget>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/params.h"

namespace rl::ui {

class ParamForm : public QWidget {
    Q_OBJECT
  public:
    // Keys in `skip` get no field (the budget slider drives `budget`).
    ParamForm(ParamSchema schema, std::set<std::string> skip = {}, QWidget* parent = nullptr);

    // key=value for every field whose value is not its default; invalid fields are left out.
    std::vector<std::pair<std::string, std::string>> args() const;
    // Sets fields from a spec's args (unknown keys ignored); others go back to their defaults.
    void setArgs(const std::vector<std::pair<std::string, std::string>>& args);
    // "" when every field is valid, else what is wrong with the first bad one.
    QString problem() const;
    bool empty() const { return fields_.empty(); }

  signals:
    void changed();

  private:
    struct Field {
        ParamSpec spec;
        QWidget* editor = nullptr;
    };
    QString text(const Field& f) const;
    void setText(Field& f, const QString& value);
    std::vector<Field> fields_;
};

}  // namespace rl::ui
