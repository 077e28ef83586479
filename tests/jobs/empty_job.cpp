// A --code-path library built without LUMEN_REMOTE or LUMEN_ACTOR: it
// registers nothing, which `lumen start` warns about.

extern "C" int lumen_test_unrelated_symbol() {
  return 42;
}
