// Must NOT compile: an actor method taking a non-const reference, which a
// caller in another process could never see updated.
#include <lumen/lumen.hpp>

class Sink {
public:
  void fill(int& out) {
    out = 1;
  }
};
LUMEN_ACTOR(Sink, &Sink::fill);

int main() {
  lumen::init();
  auto s = lumen::actor<Sink>().remote();
  int x = 0;
  s.call(&Sink::fill, x);
}
