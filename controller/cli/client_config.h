// Where fleetctl dials and with what credentials: the client config file (kubeconfig-like
// contexts) and the precedence of flags, environment and context.
//
// The file is $FLEET_CONFIG, else $XDG_CONFIG_HOME/fleet/config.yaml, else
// ~/.config/fleet/config.yaml (--config overrides all three); a missing file has no contexts:
//
//   current-context: demo
//   contexts:
//     - name: demo
//       server: 127.0.0.1:50051
//       ca: pki/ca.pem            # relative paths are relative to the file's folder
//       cert: pki/operator.pem
//       key: pki/operator.key
//     - name: lab
//       server: fleet-lab:50051
//       insecure: true            # plaintext, for a fleetd started with --insecure
//
// Each setting is taken from the first of: the flag, the environment (FLEET_SERVER, FLEET_CA,
// FLEET_CERT, FLEET_KEY, FLEET_INSECURE, FLEET_CONTEXT), the context (--context, else
// FLEET_CONTEXT, else current-context), the default (localhost:50051, TLS required). Whether
// to dial with TLS or plaintext is decided by the first of those that says anything about it
// (--insecure, or any of the files), so --ca/--cert/--key override an insecure context and
// --insecure ignores a context's files. The Python client (clients/python) reads the same file
// the same way.
#ifndef FLEET_CONTROLLER_CLI_CLIENT_CONFIG_H_
#define FLEET_CONTROLLER_CLI_CLIENT_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/grpc_tls.h"

namespace fleet::cli {

// One context of the file, its values as written (paths not yet resolved).
struct ConfigContext {
  std::string name;
  std::string server;
  std::string ca;
  std::string cert;
  std::string key;
  bool insecure = false;
};

struct ClientConfig {
  std::string path;  // The file this was read from, or is to be written to.
  bool exists = false;
  std::string current_context;
  std::vector<ConfigContext> contexts;

  // nullptr when no context has that name.
  const ConfigContext* Find(absl::string_view name) const;
  // "demo, lab", or "(none)".
  std::string ContextNames() const;
  // `file` as the context means it: relative to the config file's folder.
  std::string Resolve(const std::string& file) const;
};

// The FLEET_* variables (and where the default config lives), as main() found them; "" when
// unset or empty.
struct ClientEnvironment {
  std::string server;    // FLEET_SERVER
  std::string ca;        // FLEET_CA
  std::string cert;      // FLEET_CERT
  std::string key;       // FLEET_KEY
  std::string context;   // FLEET_CONTEXT
  std::string config;    // FLEET_CONFIG
  std::string insecure;  // FLEET_INSECURE: 1/true plaintext, 0/false TLS.
  std::string xdg_config_home;
  std::string home;
};

// What this command line's flags said; unset is empty (nullopt for --insecure).
struct ConnectionFlags {
  std::string server;
  std::string ca;
  std::string cert;
  std::string key;
  std::optional<bool> insecure;
  std::string context;
  std::string config;
};

// The config file's path: --config, FLEET_CONFIG, XDG_CONFIG_HOME, then HOME; "" when none of
// them is set (then there is no config file).
std::string ClientConfigPath(const ConnectionFlags& flags, const ClientEnvironment& env);

// Every problem is listed, one per line, "FILE:LINE: ..." naming the key, the value and the
// rule: unknown keys, a context without a name or named twice, insecure with TLS files, some
// but not all of ca/cert/key, a current-context that is not a context. INVALID_ARGUMENT.
absl::StatusOr<ClientConfig> ParseClientConfig(absl::string_view text, const std::string& path);
// A missing file is an empty config (exists false); an unreadable one NOT_FOUND.
absl::StatusOr<ClientConfig> ReadClientConfig(const std::string& path);

// The config as the file holds it (block YAML), and as JSON for `config view -o json`.
std::string ClientConfigYaml(const ClientConfig& config);
std::string ClientConfigJson(const ClientConfig& config);

// Writes `config` to config.path atomically (a temporary file renamed over it), mode 0600,
// creating its folder (0700) when missing. INTERNAL naming the path and the reason.
absl::Status WriteClientConfig(const ClientConfig& config);

// How to dial fleetd.
struct Connection {
  std::string server;
  ClientTlsFiles tls;
  std::string context;  // The context used, "" for none.
};

// Applies the precedence above. INVALID_ARGUMENT, a line for the user, when a named context is
// not in the file, FLEET_INSECURE is not a boolean, --insecure comes with files from the same
// source, some of ca/cert/key are missing, or (FAILED_PRECONDITION) there are no credentials
// at all and plaintext was not asked for.
absl::StatusOr<Connection> ResolveConnection(const ConnectionFlags& flags,
                                             const ClientEnvironment& env,
                                             const ClientConfig& config,
                                             const std::string& default_server);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_CLIENT_CONFIG_H_
