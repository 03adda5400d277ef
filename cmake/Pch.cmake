# Precompiled headers: the standard, GoogleTest and Qt headers that most of a target's files
# include, parsed once per target instead of once per file. Each target gets its own (they are
# built with that target's flags). A file of such a target sees these headers even where it does
# not include them, so a missing include shows up only in a build without them:
# -DREMATLAB_PCH=OFF.
option(REMATLAB_PCH "Precompile the common standard, GoogleTest and Qt headers" ON)

set(REMATLAB_PCH_STD <algorithm> <cmath> <cstdint> <cstring> <filesystem> <fstream> <functional>
  <map> <memory> <set> <sstream> <string> <vector>)
set(REMATLAB_PCH_QT <QObject> <QString> <QStringList> <QWidget> <QLabel> <QComboBox>
  <QPushButton> <QVBoxLayout> <QHBoxLayout> <QTimer> <QFile> <QFileInfo> <QChartView>
  <QLineSeries> <QValueAxis>)

# rematlab_pch(target [TEST] [QT]): TEST adds GoogleTest and nlohmann/json, QT the Qt headers.
function(rematlab_pch target)
  if(NOT REMATLAB_PCH)
    return()
  endif()
  cmake_parse_arguments(arg "TEST;QT" "" "" ${ARGN})
  set(headers ${REMATLAB_PCH_STD})
  if(arg_TEST)
    list(APPEND headers <gtest/gtest.h> <nlohmann/json.hpp>)
  endif()
  if(arg_QT)
    list(APPEND headers ${REMATLAB_PCH_QT})
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
