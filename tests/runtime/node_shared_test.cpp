#define BOOST_TEST_MODULE node_shared
#include <boost/test/unit_test.hpp>

// Node-shared blocks across real processes: one maker among many openers,
// a maker killed half way, the last user removing the block, the blocks of
// killed processes reclaimed.

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <lumen/errors.hpp>
#include <lumen/node_shared.hpp>

#include "fixture.hpp"

namespace {

/// A name no other run of this test uses.
std::string fresh_name(const std::string& what) {
  return "test." + what + "." + std::to_string(::getpid());
}

std::string shm_path(const std::string& name) {
  return "/dev/shm/lumen." + std::to_string(::getuid()) + "." + name;
}

bool in_dev_shm(const std::string& name) {
  struct stat st {};
  return ::stat(shm_path(name).c_str(), &st) == 0;
}

/// Whether process `pid` has the block `name` open: one that found
/// another process making it keeps it open while it waits.
bool holds_open(pid_t pid, const std::string& name) {
  auto fds = "/proc/" + std::to_string(pid) + "/fd/";
  DIR* dir = ::opendir(fds.c_str());
  if (dir == nullptr)
    return false;
  bool found = false;
  while (auto* e = ::readdir(dir)) {
    char target[4096];
    auto n = ::readlink((fds + e->d_name).c_str(), target, sizeof(target));
    found = found || (n > 0 && std::string(target, static_cast<size_t>(n)) ==
                                 shm_path(name));
  }
  ::closedir(dir);
  return found;
}

std::vector<char> pattern(size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(i * 7 + 3);
  return v;
}

/// Runs `child` in a forked process; its return value is the exit code.
template <class F>
pid_t fork_child(F child) {
  pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(child());
  return pid;
}

int exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

} // namespace

BOOST_AUTO_TEST_SUITE(node_shared_suite)

BOOST_AUTO_TEST_CASE(processes_map_the_one_copy_the_first_made) {
  auto name = fresh_name("one-copy");
  constexpr size_t size = 3 << 20;
  int makes = 0;
  auto mine = lumen::node_shared(name, [&] {
    ++makes;
    return pattern(size);
  });
  BOOST_TEST(mine->made_here());
  BOOST_TEST(mine->size() == size);
  // Children that find it map it, and never run their maker: exit codes
  // say what each saw (0 all good, 1 made it, 2 wrong bytes).
  std::vector<pid_t> kids;
  for (int i = 0; i < 4; ++i)
    kids.push_back(fork_child([&] {
      auto b = lumen::node_shared(name, [] { return std::vector<char>(1); });
      if (b->made_here())
        return 1;
      return b->size() == size &&
                 std::equal(b->data(), b->data() + size, pattern(size).begin())
               ? 0
               : 2;
    }));
  for (auto pid : kids)
    BOOST_TEST(exit_code(pid) == 0);
  BOOST_TEST(makes == 1);
  BOOST_TEST(in_dev_shm(name));
  mine.reset(); // the last user
  BOOST_TEST(!in_dev_shm(name));
}

BOOST_AUTO_TEST_CASE(a_maker_killed_half_way_leaves_nothing_to_read) {
  auto name = fresh_name("killed-maker");
  int ready[2];
  BOOST_REQUIRE(::pipe(ready) == 0);
  pid_t maker = fork_child([&] {
    lumen::node_shared(name, [&]() -> std::vector<char> {
      char c = 1;
      static_cast<void>(::write(ready[1], &c, 1));
      for (;;)
        ::pause(); // killed here, mid-make
    });
    return 0;
  });
  char c = 0;
  BOOST_REQUIRE(::read(ready[0], &c, 1) == 1);
  // Someone waiting for the block when the maker dies makes it anew.
  pid_t waiter = fork_child([&] {
    auto b = lumen::node_shared(name, [] { return pattern(1000); });
    return b->made_here() && b->size() == 1000 ? 0 : 1;
  });
  BOOST_TEST(eventually([&] { return holds_open(waiter, name); }),
             "the second process never opened the block to wait for its "
             "maker");
  ::kill(maker, SIGKILL);
  BOOST_TEST(exit_code(maker) == 100 + SIGKILL);
  BOOST_TEST(exit_code(waiter) == 0);
  BOOST_TEST(!in_dev_shm(name));
  ::close(ready[0]);
  ::close(ready[1]);
}

BOOST_AUTO_TEST_CASE(blocks_whose_processes_were_all_killed_are_reclaimed) {
  auto dead = fresh_name("all-killed");
  auto kept = fresh_name("still-mapped");
  auto mine = lumen::node_shared(kept, [] { return pattern(100); });
  // Two processes map the block, and both are killed: no one lets go.
  int ready[2];
  BOOST_REQUIRE(::pipe(ready) == 0);
  std::vector<pid_t> users;
  for (int i = 0; i < 2; ++i)
    users.push_back(fork_child([&] {
      auto b = lumen::node_shared(dead, [] { return pattern(4096); });
      char c = 1;
      static_cast<void>(::write(ready[1], &c, 1));
      for (;;)
        ::pause();
      return 0;
    }));
  for (size_t i = 0; i < users.size(); ++i) {
    char c = 0;
    BOOST_REQUIRE(::read(ready[0], &c, 1) == 1);
  }
  for (auto pid : users) {
    ::kill(pid, SIGKILL);
    BOOST_TEST(exit_code(pid) == 100 + SIGKILL);
  }
  BOOST_TEST(in_dev_shm(dead));
  // What the next Lumen process's start does: the dead block goes, the
  // one this process still maps stays, its bytes intact.
  lumen::detail::reclaim_unmapped_blocks();
  BOOST_TEST(!in_dev_shm(dead));
  BOOST_TEST(in_dev_shm(kept));
  BOOST_TEST(
    std::equal(mine->data(), mine->data() + 100, pattern(100).begin()));
  ::close(ready[0]);
  ::close(ready[1]);
}

BOOST_AUTO_TEST_CASE(
  a_failing_maker_and_a_bad_name_are_errors_leaving_nothing) {
  auto name = fresh_name("failing");
  BOOST_CHECK_THROW(
    lumen::node_shared(
      name, []() -> std::vector<char> { throw std::runtime_error("no data"); }),
    std::runtime_error);
  BOOST_TEST(!in_dev_shm(name));
  auto again = lumen::node_shared(name, [] { return pattern(10); });
  BOOST_TEST(again->made_here());
  std::vector<std::string> bad_names{"",    "../etc", ".hidden",
                                     "a/b", "sp ace", std::string(201, 'a')};
  for (auto& bad : bad_names)
    BOOST_CHECK_EXCEPTION(lumen::node_shared(bad, [] { return pattern(1); }),
                          lumen::usage_error, [](const lumen::usage_error& e) {
                            return std::string{e.what()}.find(
                                     "letters, digits") != std::string::npos;
                          });
}

BOOST_AUTO_TEST_SUITE_END()
