#include "engine/server/server_security.h"

#include <algorithm>
#include <cctype>

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

namespace {

// A dotted-quad IPv4 address whose first number is 127 (not a DNS name that starts "127.").
bool is_ipv4_loopback(std::string_view host) {
  int parts = 0;
  size_t i = 0;
  while (i <= host.size()) {
    const size_t dot = std::min(host.find('.', i), host.size());
    const std::string_view p = host.substr(i, dot - i);
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string_view::npos)
      return false;
    const int v = std::stoi(std::string(p));
    if (v > 255 || (parts == 0 && v != 127)) return false;
    ++parts;
    i = dot + 1;
  }
  return parts == 4;
}

// The name in a Host header value: "localhost:8000" -> "localhost", "[::1]:8000" -> "[::1]",
// lower-cased, without a trailing dot.
std::string host_name_of(std::string_view value) {
  std::string_view v = trim(value);
  if (!v.empty() && v.front() == '[') {
    const size_t close = v.find(']');
    v = close == std::string_view::npos ? v : v.substr(0, close + 1);
  } else if (const size_t colon = v.rfind(':');
             colon != std::string_view::npos && v.find(':') == colon) {
    v = v.substr(0, colon);
  }
  std::string name(v);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!name.empty() && name.back() == '.') name.pop_back();
  return name;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || is_ipv4_loopback(host);
}

bool host_allowed(const ServerConfig& config, std::string_view host_header) {
  if (trim(host_header).empty()) return true;  // HTTP/1.0 clients send none
  const std::string name = host_name_of(host_header);
  for (const std::string& a : config.allowed_hosts)
    if (a == "*" || iequals(a, name)) return true;
  if (!is_loopback_host(config.host)) return config.allowed_hosts.empty();
  return is_loopback_host(name);
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
