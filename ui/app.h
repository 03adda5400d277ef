#pragma once
// The `rematlab` executable's behaviour, kept in the library so app/gui_main.cpp stays a thin
// main. Modes:
//   rematlab [--network SPEC] [--strategies LIST]          the window
//   rematlab --screenshot FILE.png [--network …] [--strategies …] [--size WxH]
//                                                          the window after a run, as an image
//   rematlab --export --chart memory|pareto|schedule|graph --out FILE.(png|svg|pdf|csv|json)
//            [--network SPEC] [--strategies LIST] [--size WxH] [--threads N] [--no-run]
//                                                          a chart without any window
// The headless modes set QT_QPA_PLATFORM=offscreen when no platform is chosen.
namespace rl::ui {

int run_app(int argc, char** argv);

}  // namespace rl::ui
