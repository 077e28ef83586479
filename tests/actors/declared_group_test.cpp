#define BOOST_TEST_MODULE declared_group
#include <boost/test/unit_test.hpp>

// Ray's declarative form of a collective group: a driver makes actors a
// group (create_group), and each joins on its first use of it, on either
// backend. The cross-process case is examples/allreduce run in a cluster.

#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "runtime_fixture.hpp"

namespace coll = lumen::collective;

namespace {

class Member {
public:
  // Sums rank + 1 over the group: n(n+1)/2 for n members.
  float sum_of_ranks(const std::string& group) {
    std::vector<float> x{static_cast<float>(coll::get_rank(group) + 1)};
    coll::allreduce(x, group, coll::reduce_op::sum);
    return x[0];
  }

  // What using `group` does here: "ok", or the error's message.
  std::string try_barrier(const std::string& group) {
    try {
      coll::barrier(group);
      return "ok";
    } catch (const coll::collective_error& e) {
      return e.what();
    }
  }

  void leave(const std::string& group) {
    coll::destroy_group(group);
  }
};

} // namespace

LUMEN_ACTOR(Member, &Member::sum_of_ranks, &Member::try_barrier,
            &Member::leave);

using lumen::test::local_runtime;
BOOST_TEST_GLOBAL_FIXTURE(local_runtime);

namespace {

std::vector<lumen::ActorHandle<Member>> members(int n) {
  std::vector<lumen::ActorHandle<Member>> out;
  for (int i = 0; i < n; ++i)
    out.push_back(lumen::actor<Member>().remote());
  return out;
}

std::vector<float> sums(const std::vector<lumen::ActorHandle<Member>>& ms,
                        const std::string& group) {
  std::vector<lumen::ObjectRef<float>> refs;
  for (auto& m : ms)
    refs.push_back(m.call(&Member::sum_of_ranks, group));
  return lumen::get(refs);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const coll::collective_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

BOOST_AUTO_TEST_SUITE(declared_group)

BOOST_AUTO_TEST_CASE(declared_actors_join_on_first_use_on_both_backends) {
  for (auto where : {coll::backend::threads, coll::backend::processes}) {
    auto ms = members(3);
    auto group = where == coll::backend::threads ? "decl-t" : "decl-p";
    coll::create_group(ms, group, where);
    BOOST_TEST(sums(ms, group) == std::vector<float>(3, 6.0f), "on " << group);
    BOOST_TEST(sums(ms, group) == std::vector<float>(3, 6.0f),
               "again on " << group);
    for (auto& m : ms)
      lumen::get(m.call(&Member::leave, std::string{group}));
  }
}

BOOST_AUTO_TEST_CASE(an_actor_outside_the_declaration_is_told_so) {
  auto ms = members(3);
  coll::create_group(std::vector{ms[0], ms[1]}, "pair");
  auto said = lumen::get(ms[2].call(&Member::try_barrier, "pair"));
  BOOST_TEST(
    said.find("declared (create_group) for 2 actors, and this actor") !=
      std::string::npos,
    said);
  auto never = lumen::get(ms[2].call(&Member::try_barrier, "never-made"));
  BOOST_TEST(never.find("create_group(actors, \"never-made\")") !=
               std::string::npos,
             never);
  lumen::get(ms[0].call(&Member::leave, "pair")); // withdraws it unused
}

BOOST_AUTO_TEST_CASE(a_name_is_declared_once_until_a_member_destroys_it) {
  auto ms = members(2);
  coll::create_group(ms, "again");
  auto twice = error_of([&] { coll::create_group(ms, "again"); });
  BOOST_TEST(twice.find("declared already") != std::string::npos, twice);
  BOOST_TEST(sums(ms, "again") == std::vector<float>(2, 3.0f));
  for (auto& m : ms)
    lumen::get(m.call(&Member::leave, "again"));
  // Made again under the same name, with the ranks the other way round.
  coll::create_group(std::vector{ms[1], ms[0]}, "again");
  BOOST_TEST(sums(ms, "again") == std::vector<float>(2, 3.0f));
  for (auto& m : ms)
    lumen::get(m.call(&Member::leave, "again"));
}

BOOST_AUTO_TEST_CASE(a_damaged_declaration_is_named_not_trusted) {
  auto ms = members(1);
  lumen::kv::put("lumen.collective.group/damaged", "not a declaration");
  auto said = lumen::get(ms[0].call(&Member::try_barrier, "damaged"));
  BOOST_TEST(
    said.find("the declaration of group 'damaged'") != std::string::npos, said);
  BOOST_TEST(said.find("is damaged") != std::string::npos, said);
  lumen::kv::erase("lumen.collective.group/damaged");
}

BOOST_AUTO_TEST_CASE(an_actor_listed_twice_or_none_is_refused) {
  auto ms = members(2);
  auto twice = error_of([&] {
    coll::create_group(std::vector{ms[0], ms[1], ms[0]}, "dup");
  });
  BOOST_TEST(twice.find("lists one actor twice (ranks 0 and 2)") !=
               std::string::npos,
             twice);
  auto none = error_of([&] {
    coll::create_group(std::vector<lumen::ActorHandle<Member>>{}, "none");
  });
  BOOST_TEST(none.find("needs at least one actor") != std::string::npos, none);
  // Neither left a declaration behind.
  coll::create_group(ms, "dup");
  BOOST_TEST(sums(ms, "dup") == std::vector<float>(2, 3.0f));
}

BOOST_AUTO_TEST_SUITE_END()
