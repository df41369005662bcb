// The desktop app. Without a display it cannot show a window, so rather than abort inside Qt's
// platform plugin it says so and runs the default example through the headless CLI instead.
#include <QApplication>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "main_window.hpp"
#include "trainbench/config_fields.hpp"

namespace {

// Platforms that draw without a display server.
bool platform_needs_no_display(int argc, char** argv) {
    std::string platform;
    if (const char* env = std::getenv("QT_QPA_PLATFORM")) platform = env;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "-platform") == 0) platform = argv[i + 1];
    for (const char* headless : {"offscreen", "minimal", "vnc", "linuxfb", "eglfs", "vkkhrdisplay"})
        if (platform.rfind(headless, 0) == 0) return true;
    return false;
}

bool display_available() {
    const char* x11 = std::getenv("DISPLAY");
    const char* wayland = std::getenv("WAYLAND_DISPLAY");
    return (x11 && *x11) || (wayland && *wayland);
}

std::filesystem::path cli_next_to_this_program(const char* argv0) {
    std::error_code error;
    auto self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) self = std::filesystem::absolute(argv0, error);
    return self.parent_path() / "trainbench-cli";
}

int run_default_example_headless(const char* argv0) {
    std::vector<std::string> arguments{cli_next_to_this_program(argv0).string(), "train"};
    for (auto& argument : trainbench::cli_arguments_for(trainbench::default_example_config()))
        arguments.push_back(std::move(argument));
    std::string shown = "trainbench-cli";
    for (std::size_t i = 1; i < arguments.size(); ++i) shown += " " + arguments[i];
    std::fprintf(stderr, "trainbench: no display found; running the default example headless: %s\n", shown.c_str());
    std::fflush(stderr);
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "trainbench: could not start %s: %s\n", argv[0], std::strerror(errno));
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (!display_available() && !platform_needs_no_display(argc, argv))
        return run_default_example_headless(argv[0]);

    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("TrainBench"));
    QApplication::setApplicationName(QStringLiteral("TrainBench"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
    QApplication::setDesktopFileName(QStringLiteral("trainbench"));

    trainbench::ui::MainWindow window;
    window.show();
    // --run: start the loaded settings (the default example on a first launch) at once, as
    // the set-up command does, instead of waiting for the user to press Run.
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--run") == 0) QTimer::singleShot(0, &window, &trainbench::ui::MainWindow::startRun);
    return app.exec();
}
