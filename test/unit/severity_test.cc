#include "core/severity.h"

#include <gtest/gtest.h>

namespace gpuheal {
namespace {

TEST(Severity, RoundTripsEveryName) {
  for (int i = 0; i <= 4; ++i) {
    auto s = static_cast<Severity>(i);
    EXPECT_EQ(ParseSeverity(ToString(s)), s);
  }
  EXPECT_FALSE(ParseSeverity("Fatal").has_value());  // names are lowercase contracts
  EXPECT_FALSE(ParseSeverity("").has_value());
}

TEST(Severity, DefaultActionsFollowTheArchitectureTable) {
  EXPECT_EQ(DefaultAction(Severity::kInfo), Action::kLog);
  EXPECT_EQ(DefaultAction(Severity::kWarn), Action::kEvent);
  EXPECT_EQ(DefaultAction(Severity::kCritical), Action::kResetGpu);
  EXPECT_EQ(DefaultAction(Severity::kFatal), Action::kQuarantine);
  EXPECT_EQ(DefaultAction(Severity::kCatastrophic), Action::kIsolate);
}

TEST(Severity, OnlyFatalAndWorseFlipConditions) {
  EXPECT_FALSE(FlipsCondition(Severity::kCritical));
  EXPECT_TRUE(FlipsCondition(Severity::kFatal));
  EXPECT_TRUE(FlipsCondition(Severity::kCatastrophic));
}

TEST(Severity, ActionsAndConditionsRoundTrip) {
  for (auto a :
       {Action::kLog, Action::kEvent, Action::kResetGpu, Action::kQuarantine, Action::kIsolate}) {
    EXPECT_EQ(ParseAction(ToString(a)), a);
  }
  for (Condition c : kAllConditions) EXPECT_EQ(ParseCondition(ToString(c)), c);
}

}  // namespace
}  // namespace gpuheal
