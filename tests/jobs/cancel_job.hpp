#pragma once

// The remote functions and actors of the cluster's cancel_test
// (cluster_job.cpp). Each says what happened to it through the cluster's
// key-value store, which the test reads.

#include <string>

// Writes `key` = "started", then works until lumen::cancelled() and writes
// `key` = "cancelled".
int work_until_cancelled(const std::string& key);

// Writes `key` = "ran".
int mark_ran(const std::string& key);

// Writes `key` = "started", then works forever without looking at
// lumen::cancelled(): only a forced cancel ends it.
int work_forever(const std::string& key);

// An actor whose calls say in the store that they ran.
class Marker {
public:
  int until_cancelled(const std::string& key);
  int mark(const std::string& key);
  int calls() const;

private:
  int calls_ = 0;
};
