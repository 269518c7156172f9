#include "gateway/core/descriptor_limit.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "store/store.h"

namespace tollgate::gateway {

std::shared_ptr<const rules::RuleConfig> WithDescriptorLimit(const rules::RuleConfig& rule,
                                                             const rules::DescriptorLimit& limit) {
  algorithms::LimitParams params;
  params.algorithm = algorithms::Algorithm::kFixedWindow;
  params.limit = limit.limit;
  params.window_ms = limit.window_ms;
  auto copy = std::make_shared<rules::RuleConfig>(rule);
  copy->limit = std::make_shared<const store::LimitSpec>(
      store::LimitSpec::Make(std::vector<algorithms::LimitParams>{params}));
  copy->windows = {{std::string(limit.window), std::max<std::int64_t>(1, limit.window_ms / 1000)}};
  return copy;
}

void DescriptorLimitKey(const rules::DescriptorLimit& limit, std::string_view key,
                        std::string& out) {
  out.clear();
  fmt::format_to(std::back_inserter(out), "{}{}/{}\x1f{}", kDescriptorLimitKeyMark, limit.limit,
                 limit.window_ms, key);
}

}  // namespace tollgate::gateway
