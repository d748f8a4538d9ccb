#include "engine/server/server_security.h"

#include <algorithm>

#include "engine/core/strings.h"
#include "engine/server/api_server.h"

namespace lathe {

bool equal_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  // volatile: the compiler must not turn the loop into an early-exit memcmp.
  volatile unsigned char acc = diff;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    acc = static_cast<unsigned char>(acc | (x ^ y));
  }
  return acc == 0;
}

bool is_loopback_host(std::string_view host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]" ||
         starts_with(host, "127.");
}

std::string exposure_warning(const ServerConfig& config) {
  if (!config.api_key.empty() || is_loopback_host(config.host)) return {};
  const bool everywhere = config.host == "0.0.0.0" || config.host == "::" || config.host.empty();
  return "listening on " + (everywhere ? config.host + " (every interface)" : config.host) +
         " without an API key: anyone who can reach this port can use it (pass --api-key or set "
         "LATHE_API_KEY, or bind 127.0.0.1)";
}

bool origin_allowed(const std::vector<std::string>& allowed, std::string_view origin) {
  return std::any_of(allowed.begin(), allowed.end(),
                     [&](const std::string& a) { return a == "*" || a == origin; });
}

}  // namespace lathe
