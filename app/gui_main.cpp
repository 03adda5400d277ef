// rematlab: the desktop app. Everything lives in rematlab_ui (ui/app.h), so this stays a thin
// main, like rematlab-cli's.
#include "ui/app.h"

int main(int argc, char** argv) {
    return rl::ui::run_app(argc, argv);
}
