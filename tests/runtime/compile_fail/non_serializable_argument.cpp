// Must NOT compile: a remote function whose parameter cannot cross a process
// boundary. The build stops with lumen's message instead of a template dump.
#include <lumen/lumen.hpp>

struct opaque {
  int* raw;
};

int use(opaque o) {
  return *o.raw;
}
LUMEN_REMOTE(use);

int main() {
  int x = 1;
  lumen::init();
  lumen::task(use).remote(opaque{&x});
}
