// civetweb (the HTTP server under prometheus-cpp's Exposer and under polatis-emu) notices a
// stop only between polls of its listening socket, which time out after one to two
// seconds. A connection attempt ends the poll at once: StopWhileKnocking runs `stop` while
// connecting to HOST:PORT every 5 ms, so stopping takes milliseconds, not seconds.
#ifndef FLEET_COMMON_KNOCK_WHILE_STOPPING_H_
#define FLEET_COMMON_KNOCK_WHILE_STOPPING_H_

#include <functional>
#include <string>

namespace fleet {

// `host` is an IPv4 address; "0.0.0.0" knocks on 127.0.0.1.
void StopWhileKnocking(const std::string& host, int port, const std::function<void()>& stop);

}  // namespace fleet

#endif  // FLEET_COMMON_KNOCK_WHILE_STOPPING_H_
