// Built against an installed Lumen by tests/install/check_install.cmake.
#include <iostream>

#include <lumen/lumen.hpp>

int triple(int x) {
  return 3 * x;
}
LUMEN_REMOTE(triple);

class Total {
public:
  int add(int x) {
    return sum_ += x;
  }

private:
  int sum_ = 0;
};
LUMEN_ACTOR(Total, &Total::add);

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  auto t = lumen::actor<Total>().remote();
  t.call(&Total::add, lumen::task(triple).remote(2));
  int sum = lumen::get(t.call(&Total::add, 1));
  lumen::shutdown();
  std::cout << "consumer: " << sum << "\n";
  return sum == 7 ? 0 : 1;
}
