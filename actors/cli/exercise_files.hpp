#pragma once

// What `lumen exercises` works on: the exercises as installed (or in the
// source tree), and the learner's own folder, where their copies of the
// learner files live with what the tool remembers of them.

#include <filesystem>
#include <string>
#include <vector>

namespace lumen::cli {

namespace fs = std::filesystem;

/// One part of an exercise, what the learner completes and checks at a
/// time, as its topic's exercise.json describes it (a topic without
/// parts is one part of its own id).
struct exercise {
  std::string id; // the part's: "ml_scratch01a"
  std::string title;
  std::string topic; // "ml_scratch01"
  std::string topic_title;
  int order = 0;              // the topic's
  std::string learner_file;   // e.g. "01a_starter.cpp"
  std::string reference_file; // "01a_solution.cpp", or none
  std::vector<std::string> hints;
  /// Whether its program's --step=json runs can be compared with the
  /// reference's, line by line (its exercise.json names step_fields).
  bool steps = false;
  fs::path home; // its topic's folder among the installed exercises
};

/// Where the exercises and the libraries to build them against are:
/// beside an installed `lumen` (PREFIX/share/lumen/exercises), or this
/// build's source tree.
struct installation {
  fs::path root; // the source tree, or the prefix: all of the rest is in it
  fs::path exercises;
  std::vector<fs::path> includes;  // Lumen's headers
  std::vector<fs::path> libraries; // lumen_actors, lumen_runtime
  fs::path references;             // the references' programs, built with Lumen
  bool installed = false;
};

installation find_installation();

/// The parts of the exercises under `root`, topic by topic in their
/// order. Throws `usage_error` for a folder without any or a malformed
/// exercise.json, naming the file.
std::vector<exercise> load_exercises(const fs::path& root);

/// The exercise `id`; throws `usage_error` naming the ids there are.
const exercise& find_exercise(const std::vector<exercise>& all,
                              const std::string& id);

enum class status { not_started, failing, passing };

const char* to_string(status s);

/// The learner's folder (default ~/.lumen/exercises): a copy of each
/// exercise's learner file, made on first use and never overwritten, and
/// a state file with each exercise's last verdict and hints shown.
class workspace {
public:
  workspace(fs::path dir, const std::vector<exercise>& all);

  const fs::path& dir() const noexcept {
    return dir_;
  }

  /// The learner's copy of `e`'s file.
  fs::path file_of(const exercise& e) const;

  /// Where builds of `e` go.
  fs::path build_dir_of(const exercise& e) const;

  status status_of(const exercise& e) const;
  void set_status(const exercise& e, status s);

  /// How many of `e`'s hints were shown.
  int hints_shown(const exercise& e) const;
  void set_hints_shown(const exercise& e, int n);

  /// Puts the starter back in place of the learner's copy.
  void reset(const exercise& e);

private:
  void save() const;

  fs::path dir_;
  fs::path state_file_;
  struct entry {
    status verdict = status::not_started;
    int hints = 0;
  };
  std::vector<std::pair<std::string, entry>> state_;
  entry& at(const std::string& id);
  const entry* find(const std::string& id) const;
};

/// The non-empty items of `s` between `by`s.
std::vector<std::string> split(const std::string& s, char by);

/// The whole of file `p` (empty if it cannot be read).
std::string read_file(const fs::path& p);

/// What `show` prints of a topic's README for part `part_id`: all but the
/// sections of its other parts (headings "## Part <id> ...").
std::string part_of_readme(const std::string& readme,
                           const std::string& part_id);

/// `text` (Markdown) for a terminal: headings set off, code blocks
/// indented, links as "text (url)"; with `color`, headings in bold.
std::string render_markdown(const std::string& text, bool color);

} // namespace lumen::cli
