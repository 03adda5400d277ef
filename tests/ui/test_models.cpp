// The results model under QAbstractItemModelTester, its CSV, and sorting through the proxy.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>

#include "ui/results_model.h"

namespace rl::ui {
namespace {

StrategyResult row(const QString& spec, uint64_t peak, double total, bool run) {
    StrategyResult r;
    r.name = spec.section(':', 0, 0);
    r.spec = spec;
    r.status = QStringLiteral("heuristic");
    r.planned = true;
    r.predicted_peak = peak;
    r.predicted_total_ms = total;
    r.recomputes = 3;
    if (run) {
        r.executed = true;
        r.measured_peak = peak;
        r.total_ms = total;
        r.grads_equal = true;
    }
    return r;
}

TEST(UiResultsModel, PassesTheItemModelTester) {
    ResultsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setResults({row("none", 4000, 10, true), row("sqrt-n", 2000, 13, true)}, 10.0);
    EXPECT_EQ(model.rowCount(), 2);
    EXPECT_EQ(model.columnCount(), ResultsModel::ColumnCount);
    model.setResult(2, row("periodic:k=2", 3000, 11, false));  // appends
    EXPECT_EQ(model.rowCount(), 3);
    model.setResult(1, row("sqrt-n", 2100, 12, true));  // updates
    model.setBaseline(std::nullopt);
    model.clear();
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(UiResultsModel, ShowsFiguresAndOverhead) {
    ResultsModel model;
    model.setResults({row("none", 4u << 20, 10, true), row("sqrt-n", 2u << 20, 15, true),
                      row("periodic", 3u << 20, 11, false)},
                     10.0);
    auto text = [&](int r, int c) { return model.data(model.index(r, c)).toString(); };
    EXPECT_EQ(text(0, ResultsModel::PredictedPeak), QStringLiteral("4.00 MiB"));
    EXPECT_EQ(text(1, ResultsModel::Overhead), QStringLiteral("+50.0 %"));
    EXPECT_EQ(text(1, ResultsModel::GradsEqual), QStringLiteral("✓"));
    EXPECT_EQ(text(2, ResultsModel::MeasuredPeak), QStringLiteral("—"));  // not run
    EXPECT_EQ(model.data(model.index(1, ResultsModel::MeasuredPeak), ResultsModel::SortRole)
                  .toULongLong(),
              2u << 20);
}

TEST(UiResultsModel, CsvHasAHeaderAndRawFigures) {
    ResultsModel model;
    auto failed = row("sqrt-n:budget=1KiB", 0, 0, false);
    failed.planned = false;
    failed.status = QStringLiteral("infeasible");
    failed.message = QStringLiteral("cannot meet 1 KiB, smallest feasible is 2 MiB, sorry");
    model.setResults({row("none", 4096, 10, true), failed}, 10.0);
    const QStringList lines = model.toCsv().trimmed().split('\n');
    ASSERT_EQ(lines.size(), 3);
    EXPECT_TRUE(lines[0].startsWith(QStringLiteral("Strategy,Status,Pred. peak,Meas. peak")));
    EXPECT_TRUE(lines[1].startsWith(QStringLiteral("none,heuristic,4096,4096,")));
    EXPECT_TRUE(lines[2].endsWith(
        QStringLiteral("\"cannot meet 1 KiB, smallest feasible is 2 MiB, sorry\"")));
}

TEST(UiResultsModel, SortsByRawValuesThroughTheProxy) {
    ResultsModel model;
    model.setResults(
        {row("a", 9u << 20, 1, true), row("b", 900u << 10, 2, true), row("c", 50u << 20, 3, true)});
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(ResultsModel::SortRole);
    proxy.sort(ResultsModel::PredictedPeak, Qt::AscendingOrder);
    // By bytes, not by the text "900 KiB" < "9.00 MiB" < "50.0 MiB" alphabetically.
    EXPECT_EQ(proxy.index(0, 0).data().toString(), QStringLiteral("b"));
    EXPECT_EQ(proxy.index(1, 0).data().toString(), QStringLiteral("a"));
    EXPECT_EQ(proxy.index(2, 0).data().toString(), QStringLiteral("c"));
}

}  // namespace
}  // namespace rl::ui
