#include "playground.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lumen/cli.hpp"

#include "exercise_toolchain.hpp"

namespace lumen::cli {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> pages{"ml_scratch01", "ml_scratch02",
                                     "ml_scratch03", "ml_scratch04"};

/// The pages beside an installed lumen, else this build tree's.
fs::path pages_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  auto installed = exe.parent_path().parent_path() / toolchain::playgrounddir;
  if (!ec && fs::is_directory(installed))
    return installed;
  return fs::path{toolchain::build_dir} / "playground";
}

std::string names() {
  std::string out;
  for (auto& p : pages)
    out += (out.empty() ? "" : ", ") + p;
  return out;
}

int playground_main(int argc, char** argv) {
  CLI::App app{"The browser playground: prints where an exercise's page is "
               "(or the index's, with no ID); it opens from disk, no server "
               "needed.",
               "lumen playground"};
  std::string id;
  bool open = false;
  app.add_option("ID", id, "e.g. ml_scratch03 (default: the index)");
  app.add_flag("--open", open, "open it in the desktop's browser (xdg-open)");
  if (auto code = parse_verb(
        "playground", [&] { app.parse(argc, argv); },
        [&] { return app.help(); },
        "Run `lumen playground --help` for the flags."))
    return *code;
  if (!id.empty() && std::find(pages.begin(), pages.end(), id) == pages.end()) {
    std::cerr << "lumen playground: no page for '" << id << "'; the pages are "
              << names() << "\n";
    return 2;
  }
  auto page = pages_dir() / ((id.empty() ? "index" : id) + ".html");
  if (!fs::is_regular_file(page)) {
    std::cerr << "lumen playground: " << page.string()
              << " was not built. The pages need emscripten: apt-get install "
                 "-y emscripten, then configure with -DLUMEN_PLAYGROUND=ON "
                 "and build the `playground` target (the README's "
                 "playground command)\n";
    return 1;
  }
  auto url = "file://" + fs::absolute(page).lexically_normal().string();
  std::cout << url << "\n";
  if (!open)
    return 0;
  auto command = "xdg-open '" + url + "' >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::cerr << "lumen playground: xdg-open could not open it (no desktop "
                 "here?); open the address above in a browser\n";
    return 1;
  }
  return 0;
}

} // namespace

cli_verb playground_verb() {
  return {"playground",
          "where the browser playground's page of an exercise is (--open "
          "opens it)",
          playground_main};
}

} // namespace lumen::cli
