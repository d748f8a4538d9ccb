// The server's security defaults, in one place (docs/RELIABILITY.md lists them with their tests):
//   - loopback bind unless --host says otherwise; exposure_warning() when every interface (or any
//     non-loopback address) is bound without an API key;
//   - the API key compared in constant time;
//   - browsers kept out unless --allowed-origins: a request that carries an Origin header (every
//     cross-origin request a browser page makes) from an origin not listed gets 403 and no CORS
//     headers, so a web page open in the user's browser can neither drive nor read a local server.
//     Clients that are not browsers (curl, the OpenAI SDKs) send no Origin and are unaffected.
//   - DNS rebinding kept out: a server bound to loopback answers only requests whose Host header
//     names a loopback host (localhost, 127.x.x.x, [::1]) or one of --allowed-hosts; others get
//     403, so a page whose own name was re-pointed at 127.0.0.1 cannot read even GET routes.
// Request caps (body bytes, prompt tokens, max_tokens, stop strings, n) are checked where the
// request is read: http_server (413), openai_request and generation_handler (400).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

struct ServerConfig;

// a == b, looking at every byte of the longer one whatever matches, so the time taken does not
// tell a client how much of a key was right.
bool equal_constant_time(std::string_view a, std::string_view b);

// 127.0.0.0/8 as a dotted quad, ::1 and "localhost" (a name like "127.example.com" is not).
bool is_loopback_host(std::string_view host);

// Whether a request with this Host header value may be served (see above): any name listed in
// config.allowed_hosts ("*": any); else, on a loopback bind, loopback names only; on other binds,
// any name unless allowed_hosts is set. An empty Host (HTTP/1.0) passes.
bool host_allowed(const ServerConfig& config, std::string_view host_header);

// A warning for a server any other machine may reach without a key (empty when none applies).
std::string exposure_warning(const ServerConfig& config);

// Whether a browser page from `origin` may call the server: `allowed` lists exact origins
// ("http://localhost:3000") or "*" for any.
bool origin_allowed(const std::vector<std::string>& allowed, std::string_view origin);

}  // namespace lathe
