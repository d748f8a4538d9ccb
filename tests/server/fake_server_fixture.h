// The fixture of the tests that drive the HTTP layer against a fake engine: a FakeEngine and an
// ApiServer in front of it on 127.0.0.1 and a free port. A Qt Test class inherits it after QObject,
// starts it in initTestCase() and stops it in cleanupTestCase(); its slots use engine_, server_ and
// url_.
#pragma once

#include <memory>

#include "engine/server/api_server.h"
#include "fake_engine.h"
#include "server_test_util.h"

namespace lathe::test {

class FakeServerFixture {
 protected:
  void start_fake_server() {
    engine_ = std::make_unique<FakeEngine>();
    server_ = start_server(*engine_);
    url_ = local_url(server_->port());
  }
  // The server first: it serves the engine until it stops.
  void stop_fake_server() {
    server_.reset();
    engine_.reset();
  }

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<ApiServer> server_;
  Url url_;
};

}  // namespace lathe::test
