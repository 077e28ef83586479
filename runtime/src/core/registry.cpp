#include "lumen/detail/registry.hpp"

#include <cstring>
#include <mutex>
#include <typeindex>
#include <unordered_map>

namespace lumen::detail {

namespace {

// Function-local statics: registration runs during static initialization of
// other translation units, in an order we do not control.
struct registry {
  std::mutex mtx;
  std::unordered_map<std::string, function_entry> functions_by_name;
  std::unordered_map<erased_fn, std::string> function_names;
  std::unordered_map<std::string, actor_class_entry> classes_by_name;
  std::unordered_map<std::type_index, std::string> class_names;
  std::unordered_map<std::string, constructor_entry> constructors;
  std::vector<std::string> errors;
};

registry& reg() {
  // Never destroyed: a runtime shut down at exit still reads entry names.
  static auto* instance = new registry;
  return *instance;
}

} // namespace

const method_entry*
actor_class_entry::find(const method_key& key,
                        const std::type_info& signature) const noexcept {
  for (auto& m : methods)
    if (m.key == key && *m.signature == signature)
      return &m;
  return nullptr;
}

const method_entry*
actor_class_entry::find(const std::string& method_name) const noexcept {
  for (auto& m : methods)
    if (m.name == method_name)
      return &m;
  return nullptr;
}

bool add_function(function_entry entry) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  if (r.functions_by_name.count(entry.name) > 0) {
    r.errors.push_back("remote function '" + entry.name +
                       "' is registered twice; keep one LUMEN_REMOTE(" +
                       entry.name + ") (put it in a .cpp file, not a header)");
    return false;
  }
  r.function_names.emplace(entry.fn, entry.name);
  auto name = entry.name;
  r.functions_by_name.emplace(std::move(name), std::move(entry));
  return true;
}

bool add_actor_class(actor_class_entry entry) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  if (r.classes_by_name.count(entry.name) > 0) {
    r.errors.push_back("actor class '" + entry.name +
                       "' is registered twice; keep one LUMEN_ACTOR(" +
                       entry.name +
                       ", ...) (put it in a .cpp file, not a "
                       "header)");
    return false;
  }
  r.class_names.emplace(std::type_index{*entry.type}, entry.name);
  auto name = entry.name;
  r.classes_by_name.emplace(std::move(name), std::move(entry));
  return true;
}

bool add_constructor(constructor_entry entry) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  // The same instantiation in two translation units registers twice: the
  // code is identical, so the first one stays.
  auto key = entry.key;
  r.constructors.emplace(std::move(key), std::move(entry));
  return true;
}

const constructor_entry* find_constructor(const std::string& key) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.constructors.find(key);
  return i == r.constructors.end() ? nullptr : &i->second;
}

const function_entry* find_function(const std::string& name) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.functions_by_name.find(name);
  return i == r.functions_by_name.end() ? nullptr : &i->second;
}

const actor_class_entry* find_actor_class(const std::string& name) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.classes_by_name.find(name);
  return i == r.classes_by_name.end() ? nullptr : &i->second;
}

const function_entry* find_function(erased_fn fn) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.function_names.find(fn);
  return i == r.function_names.end() ? nullptr
                                     : &r.functions_by_name.at(i->second);
}

const actor_class_entry* find_actor_class(const std::type_info& type) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.class_names.find(std::type_index{type});
  return i == r.class_names.end() ? nullptr : &r.classes_by_name.at(i->second);
}

// Once in each copy of the runtime: `lumen start` looks for it in a
// --code-path library, to refuse one that links a runtime of its own.
extern "C" const char lumen_registry_marker = 0;

size_t registered_count() {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  return r.functions_by_name.size() + r.classes_by_name.size() +
         r.constructors.size();
}

std::vector<std::string> registration_errors() {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  return r.errors;
}

std::vector<std::string> split_method_names(const char* spelled) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    auto b = cur.find_first_not_of(" \t\n&");
    auto e = cur.find_last_not_of(" \t\n");
    out.push_back(b == std::string::npos ? std::string{}
                                         : cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (auto p = spelled; *p != '\0'; ++p) {
    if (*p == ',')
      flush();
    else
      cur += *p;
  }
  flush();
  return out;
}

} // namespace lumen::detail
