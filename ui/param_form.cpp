#include "ui/param_form.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QSpinBox>
#include <climits>

#include "engine/units.h"
#include "ui/qt_text.h"

namespace rl::ui {

ParamForm::ParamForm(ParamSchema schema, std::set<std::string> skip, QWidget* parent)
    : QWidget(parent) {
    auto* form = new QFormLayout(this);
    form->setContentsMargins(0, 0, 0, 0);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    for (ParamSpec& spec : schema) {
        if (skip.count(spec.key)) continue;
        Field f{spec, nullptr};
        const QString tip =
            QStringLiteral("%1 (%2%3)")
                .arg(to_qstring(spec.help), to_qstring(spec.key),
                     spec.default_value.empty()
                         ? QStringLiteral(", optional")
                         : QStringLiteral(", default ") + to_qstring(spec.default_value));
        if (spec.type == ParamType::Int && !spec.default_value.empty()) {
            auto* box = new QSpinBox;
            box->setRange(static_cast<int>(std::max<int64_t>(spec.min, INT_MIN)),
                          static_cast<int>(std::min<int64_t>(spec.max, INT_MAX)));
            box->setValue(to_qstring(spec.default_value).toInt());
            box->setAccelerated(true);
            connect(box, &QSpinBox::valueChanged, this, &ParamForm::changed);
            f.editor = box;
        } else if (spec.type == ParamType::Choice) {
            auto* combo = new QComboBox;
            // A choice with no default stays unset (empty) until picked: otherwise the first
            // choice would be written into every spec (policy1=… on every policy).
            if (spec.default_value.empty()) combo->addItem(QString());
            for (const auto& c : spec.choices) combo->addItem(to_qstring(c));
            // Long choices (dots_with_no_batch_dims_saveable) elide rather than widen the panel.
            combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
            combo->setMinimumContentsLength(16);
            combo->setCurrentText(to_qstring(spec.default_value));
            connect(combo, &QComboBox::currentTextChanged, this, &ParamForm::changed);
            f.editor = combo;
        } else {
            auto* edit = new QLineEdit(to_qstring(spec.default_value));
            if (spec.default_value.empty())
                edit->setPlaceholderText(spec.type == ParamType::Bytes
                                             ? QStringLiteral("none (e.g. 64MiB)")
                                             : QStringLiteral("none"));
            connect(edit, &QLineEdit::textChanged, this, [this, edit] {
                // Mark a value the schema would refuse, without blocking the typing.
                edit->setStyleSheet(problem().isEmpty() ? QString()
                                                        : QStringLiteral("color: #c0392b;"));
                emit changed();
            });
            f.editor = edit;
        }
        f.editor->setToolTip(tip);
        f.editor->setObjectName(to_qstring(spec.key));
        form->addRow(to_qstring(spec.key), f.editor);
        fields_.push_back(std::move(f));
    }
}

QString ParamForm::text(const Field& f) const {
    if (auto* box = qobject_cast<QSpinBox*>(f.editor)) return QString::number(box->value());
    if (auto* combo = qobject_cast<QComboBox*>(f.editor)) return combo->currentText();
    if (auto* edit = qobject_cast<QLineEdit*>(f.editor)) return edit->text().trimmed();
    return {};
}

void ParamForm::setText(Field& f, const QString& value) {
    if (auto* box = qobject_cast<QSpinBox*>(f.editor)) box->setValue(value.toInt());
    if (auto* combo = qobject_cast<QComboBox*>(f.editor)) combo->setCurrentText(value);
    if (auto* edit = qobject_cast<QLineEdit*>(f.editor)) edit->setText(value);
}

std::vector<std::pair<std::string, std::string>> ParamForm::args() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const Field& f : fields_) {
        const QString t = text(f);
        if (t.isEmpty() || t == to_qstring(f.spec.default_value)) continue;
        try {
            Spec one{"x", {{f.spec.key, t.toStdString()}}};
            (void)ParamValues::resolve({f.spec}, one);
        } catch (const std::exception&) {
            continue;
        }
        out.emplace_back(f.spec.key, t.toStdString());
    }
    return out;
}

void ParamForm::setArgs(const std::vector<std::pair<std::string, std::string>>& args) {
    for (Field& f : fields_) {
        QString v = to_qstring(f.spec.default_value);
        for (const auto& [k, val] : args)
            if (k == f.spec.key) v = to_qstring(val);
        setText(f, v);
    }
}

QString ParamForm::problem() const {
    for (const Field& f : fields_) {
        const QString t = text(f);
        if (t.isEmpty()) continue;
        try {
            Spec one{"x", {{f.spec.key, t.toStdString()}}};
            (void)ParamValues::resolve({f.spec}, one);
        } catch (const std::exception& e) {
            return QString::fromStdString(e.what());
        }
    }
    return {};
}

}  // namespace rl::ui
