#pragma once

// The remote functions and actors of the cluster tests (cluster_job.cpp).

#include <string>
#include <vector>

std::string where();
int add(int x, int y);
double sum(const std::vector<float>& xs);
int fails(int x);
int busy(int ms);
std::string busy_on(const std::string& victim);

class Counter {
public:
  explicit Counter(int start);
  int add(int d);
  std::string node() const;
  int nap(int ms);
  int fail();

private:
  int n_;
};
