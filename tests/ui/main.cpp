// The GUI tests need a QApplication; gtest's own main is not used (this one wins at link time).
// With no platform chosen, run offscreen (ctest also sets QT_QPA_PLATFORM=offscreen), so that
// even test discovery works without a display.
#include <gtest/gtest.h>

#include <QApplication>
#include <QStandardPaths>

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    ::testing::InitGoogleTest(&argc, argv);
    QStandardPaths::setTestModeEnabled(true);  // settings go to a test location
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("RematLabTests"));
    QApplication::setApplicationName(QStringLiteral("RematLabTests"));
    return RUN_ALL_TESTS();
}
