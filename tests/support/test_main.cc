// gtest main for every kvtwin test binary: KVTWIN_CHECK throws instead of aborting, so a test can
// assert that a check fires and rapidcheck can shrink a failing case.
#include <gtest/gtest.h>

#include "model/check.h"

int main(int argc, char** argv) {
  kvtwin::model::set_check_failure_mode(kvtwin::model::CheckFailureMode::kThrow);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
