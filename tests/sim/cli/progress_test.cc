// The progress bar of `kvtwin run`, `sweep`, `capacity` and `cache-replay` (issue 4: "a progress
// bar on stderr for runs longer than a second, only on a TTY"): the binary runs with stderr on a
// pseudo-terminal, stdout in a file, and KVTWIN_PROGRESS_AFTER_S=0 so that a short run draws it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace {

struct TtyRun {
  int exit_code = -1;
  std::string tty;  // what the binary wrote to stderr, a terminal
  std::string out;  // stdout, a file
};

// Runs `<build>/kvtwin <args>` through the shell with stderr on a new pseudo-terminal and stdout
// in a file, with `env` ("NAME=value ..." or "") before it.
TtyRun run_on_tty(const std::string& args, const std::string& env = "KVTWIN_PROGRESS_AFTER_S=0") {
  const std::string out = kvtwin::testing::scratch_dir() + "/stdout.txt";
  const std::string cmd =
      "exec env " + env + " " + std::string(KVTWIN_BINARY_DIR) + "/kvtwin " + args + " > " + out;
  int master = -1, slave = -1;
  TtyRun r;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    ADD_FAILURE() << "openpty: " << errno;
    return r;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(master);
    ::dup2(slave, STDERR_FILENO);
    ::close(slave);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(slave);
  char buf[4096];
  for (;;) {  // until the child's side closes (EIO on Linux)
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) {
      r.tty.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = kvtwin::testing::slurp(out);
  return r;
}

// A bar is drawn in place ("\r<label> [###...] NN% <detail>", then "erase to the end of the
// line") and erased at the end, so that the terminal is left clean.
void expect_bar(const TtyRun& r, const std::string& label, const std::string& detail) {
  EXPECT_EQ(r.exit_code, 0) << r.tty;
  EXPECT_TRUE(r.tty.starts_with("\r" + label + " [")) << r.tty;
  EXPECT_NE(r.tty.find("%"), std::string::npos) << r.tty;
  EXPECT_NE(r.tty.find(detail), std::string::npos) << r.tty;
  EXPECT_TRUE(r.tty.ends_with("\033[K\r\033[K")) << r.tty;  // the last draw, then the erase
  EXPECT_EQ(r.tty.find('\n'), std::string::npos) << r.tty;  // never a new line
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;  // stdout is not touched
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << r.out;
}

TEST(Progress, ARunDrawsItsBarOnATerminalAndErasesIt) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const TtyRun r = run_on_tty(
      "run --set workload.max_requests=600 --set output.plots=false --out " + dir + "/run");
  expect_bar(r, "kvtwin run", " requests done, t = ");
  EXPECT_TRUE(r.out.starts_with("kvtwin run: default")) << r.out;
}

TEST(Progress, SweepsAndCacheReplaysDrawOneBarOverTheirPoints) {
  const TtyRun sweep = run_on_tty(
      "sweep --vary lmcache.max_local_cpu_size_gb=1,4 --set workload.max_requests=300 -j 2");
  expect_bar(sweep, "kvtwin sweep", " of 2 points");
  EXPECT_NE(sweep.out.find("lmcache.max_local_cpu_size_gb"), std::string::npos) << sweep.out;
  const TtyRun replay =
      run_on_tty("cache-replay --tier cpu --capacity-gb 1,4 --set workload.max_requests=300 -j 2");
  expect_bar(replay, "kvtwin cache-replay", " of 2 points");
  EXPECT_TRUE(replay.out.starts_with("tier ")) << replay.out;
  // A capacity search draws a bar over each round's probes (here with no delay: its rounds are
  // short).
  const TtyRun search = run_on_tty("capacity --set workload.max_requests=100 --precision 0.5 -j 2",
                                   "KVTWIN_PROGRESS_AFTER_S=0");
  expect_bar(search, "kvtwin capacity", " of 3 points");
  EXPECT_TRUE(search.out.starts_with("kvtwin capacity: default (")) << search.out;
  // With --vary, one bar over the grid's points (each a whole search).
  const TtyRun grid = run_on_tty(
      "capacity --vary cluster.instances=3,4 --set workload.max_requests=100 --precision 0.5 -j 2",
      "KVTWIN_PROGRESS_AFTER_S=0");
  expect_bar(grid, "kvtwin capacity", " of 2 points");
  EXPECT_NE(grid.out.find("point  cluster.instances"), std::string::npos) << grid.out;
}

// A grid's bar follows each point's search probe by probe: before its one point ends, it has
// drawn a share above 0 (each probe done adds to it), where a bar of whole points sat at 0 % until
// the search returned.
TEST(Progress, AGridBarMovesWithEachProbeOfAPointsSearch) {
  const TtyRun grid = run_on_tty(
      "capacity --vary cluster.instances=4 --set workload.max_requests=300 --precision 0.2 -j 1");
  expect_bar(grid, "kvtwin capacity", " of 1 points");
  bool moved = false;  // a frame of the unfinished point ("0 of 1") at a share other than "  0%"
  for (size_t at = grid.tty.find("% 0 of 1 points"); at != std::string::npos && !moved;
       at = grid.tty.find("% 0 of 1 points", at + 1))
    moved = at >= 3 && grid.tty.compare(at - 3, 3, "  0") != 0;
  EXPECT_TRUE(moved) << grid.tty;
}

TEST(Progress, QuietOrNotATerminalMeansNoBar) {
  const TtyRun quiet = run_on_tty(
      "run -q --set workload.max_requests=600 --set output.plots=false "
      "--out " +
      kvtwin::testing::scratch_dir() + "/run");
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.tty, "");
  ::setenv("KVTWIN_PROGRESS_AFTER_S", "0", 1);
  const kvtwin::testing::CommandRun file = kvtwin::testing::run_kvtwin(
      "cache-replay --tier cpu --capacity-gb 1 --set workload.max_requests=300");
  ::unsetenv("KVTWIN_PROGRESS_AFTER_S");
  EXPECT_EQ(file.exit_code, 0);
  EXPECT_EQ(file.err, "");  // stderr is a file: no bar, even with no delay
}

TEST(Progress, AMalformedDelayIsAOneLineError) {
  const TtyRun r = run_on_tty("run -q", "KVTWIN_PROGRESS_AFTER_S=soon");
  EXPECT_EQ(r.exit_code, 2);
  // The terminal turns the line's "\n" into "\r\n".
  EXPECT_EQ(r.tty, "kvtwin: KVTWIN_PROGRESS_AFTER_S: soon: expected seconds >= 0\r\n");
}

}  // namespace
