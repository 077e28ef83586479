#include "exercise_build.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "exercise_toolchain.hpp"

namespace lumen::cli {

namespace {

using clock_type = std::chrono::steady_clock;

/// In a forked child: runs `cmd` (searched on PATH), or says why not and
/// exits 127.
[[noreturn]] void exec(const std::vector<std::string>& cmd) {
  std::vector<char*> argv;
  for (auto& c : cmd)
    argv.push_back(const_cast<char*>(c.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

/// How a learner's file becomes a program: compiled, then linked. The
/// compile runs in the program's folder and names every file of Lumen
/// through a link there to where Lumen is, and the learner's file by its
/// path from there, so that its command is the same in every folder and
/// for every checkout: a compiler cache (the build's, if it had one and it
/// is still installed) finds the same file built before (a reset
/// exercise, a copy of the reference, another checkout's tests).
struct build_commands {
  fs::path folder;    // where the compile runs
  std::string source; // the learner's file as the compiler names it
  std::vector<std::string> compile, link;

  std::string joined() const;
};

std::string join(const std::vector<std::string>& cmd) {
  std::string out;
  for (auto& c : cmd)
    out += (out.empty() ? "" : " ") + c;
  return out;
}

std::string build_commands::joined() const {
  return "cd " + folder.string() + " && " + join(compile) + "\n" + join(link);
}

constexpr const char* lumen_link = "lumen";

/// `p` as the compile in `folder` names it: through the link to Lumen's
/// root if it is in it, else from the folder.
std::string named(const installation& where, const fs::path& folder,
                  const fs::path& p) {
  auto in_root = p.lexically_relative(where.root);
  if (!in_root.empty() && *in_root.begin() != "..")
    return (fs::path(lumen_link) / in_root).string();
  return p.lexically_relative(folder).string();
}

build_commands commands_for(const installation& where, const exercise& e,
                            const fs::path& source, const fs::path& program) {
  build_commands b;
  b.folder = program.parent_path();
  b.source = named(where, b.folder, source);
  auto object = program.filename();
  object += ".o";
  std::error_code ec;
  if (*toolchain::launcher != '\0' && fs::exists(toolchain::launcher, ec))
    b.compile.push_back(toolchain::launcher);
  b.compile.push_back(toolchain::compiler);
  b.link.push_back(toolchain::compiler);
  for (auto& f : split(toolchain::flags, ' ')) {
    b.compile.push_back(f);
    b.link.push_back(f);
  }
  b.compile.push_back("-fdiagnostics-color=never");
  b.compile.push_back("-iquote");
  b.compile.push_back(named(where, b.folder, e.home)); // the harness
  for (auto& inc : where.includes)
    b.compile.push_back("-I" + named(where, b.folder, inc));
  for (auto& inc : split(toolchain::system_includes, ';'))
    if (inc != "/usr/include") // the compiler's own; -isystem would reorder it
      b.compile.push_back("-isystem" + inc);
  b.compile.insert(b.compile.end(), {"-c", b.source, "-o", object.string()});
  b.link.push_back((b.folder / object).string());
  for (auto& f : split(toolchain::extra_source_flags, ' '))
    b.link.push_back(f);
  for (auto& extra : split(toolchain::extra_sources, ';'))
    b.link.push_back(extra);
  b.link.push_back("-o");
  b.link.push_back(program.string());
  for (auto& lib : where.libraries) {
    b.link.push_back(lib.string());
    if (lib.extension() == ".so") // a sanitized build's: found where it is
      b.link.push_back("-Wl,-rpath," + lib.parent_path().string());
  }
  for (auto& lib : split(toolchain::system_libraries, ';'))
    b.link.push_back(lib);
  return b;
}

/// Runs `cmd` in `folder` with its output added to `log`; its exit code
/// (-1 if it could not start).
int run_to_log(const std::vector<std::string>& cmd, const fs::path& folder,
               const fs::path& log) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("LC_ALL", "C", 1); // plain quotes in messages, on any locale
    if (::chdir(folder.c_str()) != 0) {
      std::fprintf(stderr, "cannot enter %s: %s\n", folder.c_str(),
                   std::strerror(errno));
      ::_exit(127);
    }
    exec(cmd);
  }
  ::close(fd);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) < 0)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The compiler's first error, on the learner's line where it is in their
/// file (a template's backtrace leads elsewhere, the learner's line is
/// what they can change). `given`: the learner's file as the compiler
/// names it.
std::string first_error(const std::string& log, const fs::path& source,
                        const std::string& given, const fs::path& log_file) {
  static const std::regex error_line{
    R"(^(.+?):(\d+):(\d+): (?:fatal )?error: (.*)$)"};
  std::istringstream in{log};
  std::string first_any, first_mine;
  int errors = 0;
  size_t mine_line = 0, mine_col = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, error_line))
      continue;
    ++errors;
    if (first_any.empty())
      first_any = m[1].str() + ", line " + m[2].str() + ": " + m[4].str();
    if (first_mine.empty() && m[1].str() == given) {
      first_mine = m[4].str();
      mine_line = std::stoul(m[2].str());
      mine_col = std::stoul(m[3].str());
    }
  }
  std::ostringstream out;
  if (!first_mine.empty()) {
    out << source.filename().string() << ", line " << mine_line << ": "
        << first_mine << "\n";
    std::istringstream src{read_file(source)};
    std::string text;
    for (size_t i = 0; i < mine_line && std::getline(src, text); ++i) {
    }
    auto number = std::to_string(mine_line);
    out << "  " << number << " | " << text << "\n"
        << "  " << std::string(number.size(), ' ') << " | "
        << std::string(mine_col > 0 ? mine_col - 1 : 0, ' ') << "^\n";
  } else if (!first_any.empty()) {
    out << first_any << "\n";
  } else {
    out << "the compiler failed without an error line\n";
  }
  if (errors > 1)
    out << "(" << errors << " errors in all; ";
  else
    out << "(";
  out << "the compiler's whole output: " << log_file.string() << ")";
  return out.str();
}

/// Whether `program` exists and is newer than all it is made of: its
/// source, the harness beside it and the libraries (a rebuilt or upgraded
/// Lumen).
bool newer_than_its_inputs(const installation& where, const exercise& e,
                           const fs::path& source, const fs::path& program) {
  std::error_code ec;
  if (!fs::exists(program, ec))
    return false;
  auto built_at = fs::last_write_time(program, ec);
  auto older = [&](const fs::path& p) {
    return fs::last_write_time(p, ec) <= built_at;
  };
  bool fresh = older(source);
  for (auto& lib : where.libraries)
    fresh = fresh && older(lib);
  for (auto& dir : {e.home, e.home.parent_path()})
    for (auto& f : fs::directory_iterator(dir, ec))
      fresh = fresh && (!f.is_regular_file() || older(f.path()));
  return fresh;
}

/// Builds `source` of `e` as `program` (alone in its folder, with its
/// command and compiler log) unless it is newer than the source and was
/// built the same way.
build_result build_program(const installation& where, const exercise& e,
                           const fs::path& source, const fs::path& program) {
  build_result r;
  auto dir = program.parent_path();
  fs::create_directories(dir);
  r.program = program;
  auto cmds = commands_for(where, e, source, r.program);
  auto stamp = dir / "command.txt";
  bool fresh = read_file(stamp) == cmds.joined() &&
               newer_than_its_inputs(where, e, source, r.program);
  if (fresh) {
    r.ok = true;
    return r;
  }
  r.rebuilt = true;
  std::error_code ec;
  fs::remove(r.program, ec); // a failed build leaves no stale program
  auto start = clock_type::now();
  auto log = dir / "compile.log";
  fs::remove(log, ec);
  auto link = cmds.folder / lumen_link; // what the compile names Lumen by
  if (fs::read_symlink(link, ec) != where.root) {
    fs::remove(link, ec);
    fs::create_directory_symlink(where.root, link);
  }
  int rc = run_to_log(cmds.compile, cmds.folder, log);
  if (rc == 0)
    rc = run_to_log(cmds.link, cmds.folder, log);
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  r.ok = rc == 0;
  if (r.ok) {
    std::ofstream{stamp} << cmds.joined();
  } else {
    r.summary = rc == 127 || rc == -1
                  ? "cannot run the compiler " + cmds.compile[0] +
                      "; install it with `apt-get install -y g++`"
                  : first_error(read_file(log), source, cmds.source, log);
  }
  return r;
}

} // namespace

build_result build(const installation& where, const exercise& e,
                   const workspace& ws) {
  return build_program(where, e, ws.file_of(e), ws.build_dir_of(e) / e.id);
}

build_result build_reference(const installation& where, const exercise& e,
                             const workspace& ws) {
  auto source = e.home / e.reference_file;
  // Built with Lumen (the build tree's, or installed beside it), unless
  // something it is made of changed since.
  auto prebuilt = where.references / (e.id + "_solution");
  if (newer_than_its_inputs(where, e, source, prebuilt)) {
    build_result r;
    r.ok = true;
    r.program = prebuilt;
    return r;
  }
  return build_program(where, e, source,
                       ws.build_dir_of(e) / "reference" / e.id);
}

run_result run_program(const fs::path& program,
                       const std::vector<std::string>& args,
                       std::chrono::seconds deadline, const output_fn& sink) {
  run_result r;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string{"pipe: "} + std::strerror(errno));
  bool bounded = deadline.count() > 0;
  pid_t pid = ::fork();
  if (pid == 0) {
    if (bounded) {
      ::setpgid(0, 0); // so that the deadline ends what it started too
      int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
    }
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    std::vector<std::string> all{program.string()};
    all.insert(all.end(), args.begin(), args.end());
    exec(all);
  }
  if (bounded)
    ::setpgid(pid, pid); // here too: the deadline may not wait for the child
  ::close(out[1]);
  auto until = clock_type::now() + deadline;
  std::string current;
  char buf[4096];
  for (;;) {
    int wait_ms = -1;
    if (bounded) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - clock_type::now());
      wait_ms = static_cast<int>(std::max<long>(0, left.count()));
    }
    pollfd p{out[0], POLLIN, 0};
    int ready = ::poll(&p, 1, wait_ms);
    if (ready == 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    if (ready < 0 && errno == EINTR)
      continue;
    auto n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0)
      break;
    if (sink) {
      sink(buf, static_cast<size_t>(n));
    } else {
      std::cout.write(buf, n);
      std::cout.flush();
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        bool report =
          current.find("ERROR: AddressSanitizer") != std::string::npos ||
          current.find(": runtime error: ") != std::string::npos;
        if (report && r.sanitizer_report.empty())
          r.sanitizer_report = current;
        if (!current.empty())
          r.last_line = current;
        current.clear();
      } else {
        current += buf[i];
      }
    }
  }
  if (!current.empty())
    r.last_line = current;
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (r.timed_out)
    return r;
  if (WIFSIGNALED(status))
    r.signal = WTERMSIG(status);
  else
    r.exit_code = WEXITSTATUS(status);
  return r;
}

std::string describe_failure(const run_result& r,
                             std::chrono::seconds deadline) {
  std::string reached =
    r.last_line.empty() ? "it printed nothing"
                        : "the last thing it printed: \"" + r.last_line + "\"";
  if (r.timed_out)
    return "your program did not finish within " +
           std::to_string(deadline.count()) +
           " s and was stopped: a loop that never ends, or a wait for "
           "something that never comes? " +
           reached;
  if (!r.sanitizer_report.empty())
    return "your program crashed (" + r.sanitizer_report +
           "); the lines above say where";
  if (r.signal != 0)
    return std::string{"your program crashed ("} + ::strsignal(r.signal) +
           ", signal " + std::to_string(r.signal) +
           "): an index out of range, or a null or dangling pointer? " +
           reached;
  return {};
}

} // namespace lumen::cli
