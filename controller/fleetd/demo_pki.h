// The demo's throwaway site PKI, so `fleetd --demo` runs with mutual TLS and no extra step: a
// CA made in the state directory (and kept there: a restart on the same directory signs with
// it again, so certificates issued from it go on working), fleetd's server certificate, one client
// certificate per identity (an operator, a viewer, the job tenant team-a of deploy/examples, each
// agent), the policy that grants them their roles, and a fleetctl config file whose contexts use
// them. Everything is under STATE/pki/ except the fleetctl config, STATE/fleetctl.yaml.
#ifndef FLEET_CONTROLLER_FLEETD_DEMO_PKI_H_
#define FLEET_CONTROLLER_FLEETD_DEMO_PKI_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/pki.h"
#include "controller/fleetd/config.h"

namespace fleet::fleetd {

// The demo's trust domain: identities are spiffe://demo.fleet/ROLE/NAME.
inline constexpr char kDemoSite[] = "demo.fleet";

class DemoPki {
 public:
  // Makes the CA (or takes the one STATE/pki holds, when it can still sign for a year; one
  // that cannot is replaced, with a warning naming why), fleetd's certificate (localhost,
  // 127.0.0.1, ::1 and config.listen_address), the operator's, viewer's and job's certificates and
  // the policy under STATE/pki/, and points `config`'s TLS files and policy at them.
  static absl::StatusOr<DemoPki> Make(FleetdConfig& config);

  // An agent's certificate for `place` (a host or chassis): PREFIX.pem and PREFIX.key under
  // pki/, returned as the PREFIX path.
  absl::StatusOr<std::string> IssueAgent(const std::string& place) const;
  // The certificates of a replicated demo's etcd members (fleet-demo-site, docs/ha.md): their
  // server certificate (localhost, 127.0.0.1) as pki/etcd-server.{pem,key} and the client
  // certificate fleetd presents to them (spiffe://demo.fleet/fleetd/etcd) as
  // pki/etcd-client.{pem,key}. Both chain to the demo CA, which the members trust.
  absl::Status IssueEtcd() const;
  // Writes STATE/fleetctl.yaml with contexts demo (operator, current), demo-job (tenant
  // team-a) and demo-viewer, all on `grpc_address` (one fleetd, or replicas A,B,C); returns
  // its path.
  absl::StatusOr<std::string> WriteFleetctlConfig(const std::string& grpc_address) const;

  const std::string& ca_file() const { return ca_file_; }
  const std::string& pki_dir() const { return pki_dir_; }

 private:
  // Issues a client certificate for spiffe://demo.fleet/IDENTITY into pki/NAME.{pem,key}.
  absl::Status IssueClient(const std::string& identity, const std::string& name) const;

  std::string state_dir_;
  std::string pki_dir_;
  std::string ca_file_;
  pki::KeyAndCertificate ca_;
};

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_DEMO_PKI_H_
